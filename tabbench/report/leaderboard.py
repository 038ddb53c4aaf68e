"""Leaderboards from stored records, regenerated without re-running anything.

The records become one Context (the selected trials, the typed per-family tables of tabbench.report.family,
the names shown); the leaderboard is the registered sections (the built-in ``LEADERBOARD`` of
tabbench.report.sections and the plugins', tabbench.report.section.load_sections) read over it, in steps:
``render`` gives their Markdown and writes nothing; leaderboard.md is that Markdown in order, leaderboard.csv
their rows; ``write_files`` writes the figures and CSV files the Markdown links; then, with the report,
leaderboard.tex is their LaTeX and the folder's report.html their HTML, the figures inlined (tabbench.report.html).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tabbench.metrics import PRIMARY, SELECTION
from tabbench.pooling import common_splits as only_common_splits, pooled_records
from tabbench.report.family import (RUN_KEYS, TASK_TITLES, FamilyResults, dataset_splits,  # noqa: F401
                                    declared_splits, incomplete, pooled_ranks, rank_table, summarise)
from tabbench.report.format import NOT_PUBLISHED_MARK, TRANSDUCTIVE_MARK  # noqa: F401
from tabbench.report.labels import (DEVICE_NOTE, FOLDS_NOTE, TRANSDUCTIVE_NOTE, display_names,  # noqa: F401
                                    library_versions, mark_notes, not_published_note, part_searched)
from tabbench.report.section import Context



def select_trials(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (method, dataset, fold, repeat, seed): the tuning trial with the best validation score.

    Validation log-loss for classification and MSE for regression, as in the paper. Untuned methods
    have one trial, kept as it is. A run whose trials all failed keeps one failed record. Equal scores go to the
    lower trial number, so the choice never depends on the order in which the trials finished.
    """
    if frame.empty:
        return frame
    frame = frame.copy()
    frame["_selection"] = np.inf
    for task, metric in SELECTION.items():
        column = f"val_{metric}"
        if column in frame:
            mask = (frame["task"] == task) & (frame["status"] == "ok")
            frame.loc[mask, "_selection"] = frame.loc[mask, column].fillna(np.inf)
    frame["_failed"] = frame["status"] != "ok"
    frame = frame.sort_values(["_failed", "_selection", "trial"], na_position="first")
    return frame.groupby(RUN_KEYS, sort=False, dropna=False).head(1).drop(columns=["_selection", "_failed"])


def _dataset_label(frame: pd.DataFrame, dataset: str) -> str:
    subset = frame.loc[frame["dataset"] == dataset, "subset"].dropna() if "subset" in frame else []
    return f"{dataset} [subset: {subset.iloc[0]}]" if len(subset) else dataset


@dataclass(frozen=True)
class FirstComplete:
    """One row ``name`` holding, per dataset, the first of ``methods`` with a complete result there (every
    split the dataset has, none failed, each scored), else the records of ``fallback``, which keeps its own
    row too; the other listed methods lose theirs. E.g. the most faithful MLP that has complete folds, the
    reduced budget beside it: ``FirstComplete("mlp (most faithful)", ("mlp-tuned", "mlp-paper"),
    "mlp")``. Which method fills each dataset is read from the records, never listed by hand."""

    name: str
    methods: tuple
    fallback: str

    @classmethod
    def parse(cls, text: str) -> "FirstComplete":
        """From ``NAME=M1,M2,...,FALLBACK`` (the command line's form)."""
        name, _, listed = text.partition("=")
        methods = tuple(m.strip() for m in listed.split(",") if m.strip())
        if not name.strip() or len(methods) < 2:
            raise ValueError(f"expected NAME=M1,...,FALLBACK with at least two methods, got {text!r}")
        return cls(name.strip(), methods[:-1], methods[-1])

    def choose(self, selected: pd.DataFrame, declared=None) -> dict:
        """dataset -> the method whose records fill the row there (selected: one trial per run)."""
        splits = dataset_splits(selected, declared)
        chosen = {}
        for dataset, part in selected.groupby("dataset"):
            metric = PRIMARY[part["task"].iloc[0]][0]
            for method in (*self.methods, self.fallback):
                runs = part[part["method"] == method]
                values = runs[f"test_{metric}"] if f"test_{metric}" in runs else pd.Series(np.nan, index=runs.index)
                if len(runs) and (method == self.fallback or not incomplete(runs, values, splits[dataset], metric)):
                    chosen[dataset] = method
                    break
        return chosen

    def apply(self, frame: pd.DataFrame, chosen: dict) -> pd.DataFrame:
        """``frame`` (records or selected trials) with the chosen records as ``name`` (the fallback's copied,
        as it keeps its own row) and the other listed methods' records left out."""
        pick = pd.Series([chosen.get(d) == m for d, m in zip(frame["dataset"], frame["method"])], index=frame.index)
        row = frame[pick].assign(method=self.name)
        return pd.concat([frame[~frame["method"].isin(self.methods)], row], ignore_index=True)

    def note(self, chosen: dict) -> str:
        by = "; ".join(f"{d}: {m}" for d, m in sorted(chosen.items()))
        return (f"{self.name}: per dataset the first of {', '.join(self.methods)} with a complete result there "
                f"(every fold the dataset has, none failed), else {self.fallback} (also its own row). Here: {by}.")


def make_context(suite_dir: Path, sources: list, records: pd.DataFrame, published=None, report: bool = False,
                 first_complete=(), splits=None, restricted: str = "", compared=()) -> Context:
    """The one Context a leaderboard's sections read: trials selected, FirstComplete rows applied, the
    per-family tables, labels, shown names and TabArena's aggregates."""
    all_runs = records
    selected = select_trials(records)
    combined_notes = []
    for rule in first_complete:
        chosen = rule.choose(selected, splits)
        all_runs, selected = rule.apply(all_runs, chosen), rule.apply(selected, chosen)
        combined_notes.append(rule.note(chosen))
    tables = summarise(selected, splits)
    from tabbench.report import arena  # TabArena's Elo, improvability and win rate (bencheval)

    return Context(out_dir=suite_dir, sources=sources, records=records, all_runs=all_runs, selected=selected,
                   tables=tables, labels={d: _dataset_label(selected, d) for d in sorted(selected["dataset"].unique())},
                   show=display_names(all_runs, published), published=published,
                   aggregates=arena.aggregates(tables, selected, pooled_ranks(tables).mean(axis=1)),
                   splits=splits or {}, combined_notes=combined_notes, report=report, restricted=restricted,
                   compared=tuple(compared))


def sections(ctx: Context) -> list:
    """The sections this leaderboard writes, in their place on the page: every registered one (the built-in
    ``sections.LEADERBOARD`` and the plugins', ``section.load_sections``), the report-only ones only with the
    report extra."""
    from tabbench.report.section import load_sections

    return [s for s in load_sections() if ctx.report or not s.report_only]


def render(ctx: Context) -> list:
    """(section, its Markdown lines) for each section this leaderboard writes, in order: text only, no file
    written (the files the lines link are ``write_files``'s)."""
    return [(section, ctx.markdown_of(section)) for section in sections(ctx)]


def write_files(ctx: Context, parts: list) -> None:
    """The files the sections' Markdown links (figures as SVG and PNG, CSV), written into ``ctx.out_dir``;
    ``parts``: render's."""
    for section, _ in parts:
        section.write_files(ctx)


def write_leaderboard(suite_dir: str | Path, published_path: str | Path | None = None, sources=None,
                      report: bool = False, first_complete=(), splits=None, across_devices: bool = False,
                      common_splits: bool = False) -> Path:
    """Regenerate leaderboard.md / leaderboard.csv (and selected_params.csv when tuning) in suite_dir;
    with ``published_path`` (a suite's ``published:`` file) also the published numbers side by side.

    ``sources``: the result folders whose records are ranked together (default: suite_dir's own; see
    tabbench.pooling). ``report``: also the significance tests, win rates, cost figure, leaderboard.tex and
    the folder's HTML page report.html (tabbench.report; needs the ``report`` extra), as ``tabbench leaderboard``
    writes them. ``first_complete``: FirstComplete rows (e.g. the most faithful NPT with complete folds per
    dataset). ``splits``: dataset -> the number of splits its suite declares (declared_splits), where known.
    ``across_devices``: pool a method made on different devices (tabbench.pooling), its GPU cells labelled.
    ``common_splits``: rank only where every method ran (tabbench.pooling.common_splits), said under the title.
    """
    write(suite_dir, published_path, sources, report, first_complete, splits, across_devices, common_splits)
    return Path(suite_dir) / "leaderboard.md"


def write(suite_dir, published_path=None, sources=None, report=False, first_complete=(), splits=None,
          across_devices=False, common_splits=False) -> Context | None:
    """write_leaderboard's work; returns the Context its sections read (None where there are no records), for
    the report site (tabbench.report.site) to summarise. Two processes regenerating one folder (two runs of a
    suite ending together) take turns (folder_locked)."""
    from tabbench.report import folder_locked

    with folder_locked(suite_dir):
        return _write(Path(suite_dir), published_path, sources, report, first_complete, splits, across_devices,
                      common_splits)


def _write(suite_dir, published_path, sources, report, first_complete, splits, across_devices,
           common_splits) -> Context | None:
    sources = [Path(s) for s in sources] if sources else [suite_dir]
    published, compared = load_all(published_path)
    md_path = suite_dir / "leaderboard.md"
    own = sources == [suite_dir] and not (suite_dir / "records").is_dir()
    records = pd.DataFrame() if own else pooled_records(sources, across_devices)
    restricted = ""
    if common_splits and not records.empty:
        records, restricted = only_common_splits(records)
    if records.empty:
        md_path.write_text(f"# Leaderboard: {suite_dir.name}\n\nNo records yet.\n")
        return None
    if not (records["status"] == "ok").any():  # nothing to rank: say what failed and why instead
        _write_every_job_failed(suite_dir, records)
        return None
    ctx = make_context(suite_dir, sources, records, published, report, first_complete, splits, restricted, compared)
    parts = render(ctx)
    md_path.write_text("\n".join(line for _, lines in parts for line in lines))
    ordered = [s for s, _ in parts if not s.csv_late] + [s for s, _ in parts if s.csv_late]
    csv = pd.DataFrame([row for section in ordered for row in section.csv_rows(ctx)])
    if published is not None:  # the mark NOT_PUBLISHED_MARK, as data: False for a model the publication never ran
        csv["in_publication"] = csv["method"].map(lambda m: NOT_PUBLISHED_MARK not in ctx.show.get(m, ""))
    csv.to_csv(suite_dir / "leaderboard.csv", index=False)
    write_files(ctx, parts)
    if report:  # after write_files: the page inlines the figures it wrote
        from tabbench.report.html import write_page
        from tabbench.report.latex import preamble

        tex = preamble(suite_dir.name) + [line for section, _ in parts for line in section.latex(ctx)]
        (suite_dir / "leaderboard.tex").write_text("\n".join(tex))
        write_page(ctx, [section for section, _ in parts])
    return ctx


def _write_every_job_failed(suite_dir: Path, records: pd.DataFrame) -> None:
    """leaderboard.md and .csv of a folder where no job succeeded: no ranking, but each method, dataset and status
    that failed, how many jobs, and the first job's error (tabbench.run.jobs.failure_rows)."""
    from tabbench.report.format import markdown_table
    from tabbench.run.jobs import failure_rows

    rows = failure_rows(records.to_dict("records"))
    header = ["method", "dataset", "status", "jobs", "why (the first job's error)"]
    cells = [[str(c).replace("|", "\\|") for c in row] for row in rows]
    (suite_dir / "leaderboard.md").write_text(
        f"# Leaderboard: {suite_dir.name}\n\nEvery job failed ({len(records)} records): nothing to rank. Each "
        "record's error_message and traceback are in records/.\n\n" + markdown_table(header, cells) + "\n")
    pd.DataFrame(rows, columns=["method", "dataset", "status", "jobs", "why"]).to_csv(
        suite_dir / "leaderboard.csv", index=False)


def load_all(published_path) -> tuple:
    """(the publication's own numbers, Published or None; the TabArena comparisons, tabbench.tabarena.Comparison)
    from ``published_path``: None, a file, a suite's PublishedUse, or a sequence of them (a suite's ``published``)."""
    from tabbench.published import PublishedUse, load_published

    if published_path is None:
        return None, ()
    given = published_path if isinstance(published_path, (list, tuple)) else [published_path]
    published, compared = None, []
    for use in given:
        if not isinstance(use, PublishedUse):  # a file named on the command line: its kind from its fields
            from tabbench.tabarena import names_declaration

            use = PublishedUse(Path(use), names_declaration(use))
        if use.declaration:
            from tabbench.tabarena import Comparison, load_declaration, read_results

            decl = load_declaration(use.path)
            rows, missing = read_results(decl)
            compared.append(Comparison(decl, {ours: theirs for ours, theirs, _ in use.datasets},
                                       {ours: share for ours, _, share in use.datasets}, use.board, rows, missing))
        else:
            published = load_published(use.path)
    return published, tuple(compared)


def inputs(targets, results=None, published=None, name=None, first_complete=(), tables_only=False,
           across_devices=False, common_splits=False):
    """What ``tabbench leaderboard TARGET... [--name] [--published] [--first-complete]`` ranks: a dict of
    write()'s arguments (suite_dir, published_path, sources, report, first_complete, splits). A target is a
    results folder, or a suite file (its folder under ``results``, its declared splits and published file).
    Raises ValueError, saying what to change, where the targets cannot be ranked as given."""
    folders, found, splits = [], {Path(published)} if published else set(), {}
    for target in map(Path, targets):
        if target.is_file():
            from tabbench.suite import load_suite

            suite = load_suite(target)
            folders.append(suite.results_dir(results or "results"))
            splits.update(declared_splits(suite.datasets))
            if suite.published and not published:
                found.add(suite.published)  # a tuple of PublishedUse: the paper's file and any TabArena declarations
        else:
            folders.append(target)
    if len(found) > 1:
        named = sorted(" + ".join(str(u.path) for u in f) if isinstance(f, tuple) else str(f) for f in found)
        raise ValueError(f"the suites name different published: files ({'; '.join(named)}); "
                         "choose one with --published FILE")
    if len(folders) > 1 and not name:
        raise ValueError("several targets are ranked together into RESULTS/NAME/: add --name NAME")
    if not tables_only:
        from tabbench.report import report_installed

        if not report_installed():
            raise ValueError("the tests and figures need the report extra: pip install 'tabbench-harness[report]' "
                             "(or pass --tables-only)")
    for folder in folders:
        if not (folder / "records").is_dir():
            raise ValueError(f"{folder} has no records/ folder; run the suite first or pass its results folder")
    try:
        rules = [FirstComplete.parse(text) for text in first_complete]
    except ValueError as exc:
        raise ValueError(f"--first-complete: {exc}") from None
    # an ad-hoc pooled leaderboard is the user's, like a run's: into runs/, never into the tracked results/ unasked
    return {"suite_dir": Path(results or "runs") / name if name else folders[0],
            "published_path": next(iter(found), None), "sources": folders, "report": not tables_only,
            "first_complete": rules, "splits": splits, "across_devices": across_devices,
            "common_splits": common_splits}
