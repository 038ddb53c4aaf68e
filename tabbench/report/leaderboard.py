"""Leaderboards from stored records, regenerated without re-running anything.

Ranking follows the NPT paper: within a dataset, methods are ranked by their test metric averaged
over folds and seeds (ties share the better rank); a method with no complete result on a dataset
takes the worst rank (the number of methods in the table); the table reports the mean rank over
datasets +- its standard error (sample std / sqrt(#datasets)).
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tabbench.metrics import PRIMARY, SELECTION
from tabbench.pooling import common_splits as only_common_splits, pooled_records
from tabbench.report.format import NOT_PUBLISHED_MARK, TRANSDUCTIVE_MARK, markdown_table, mean_se, with_folds
from tabbench.store import key_params

TASK_TITLES = {"binary": "AUROC (binary)", "multiclass": "Accuracy (multi-class)", "regression": "RMSE (regression)"}
RUN_KEYS = ["method", "dataset", "fold", "repeat", "seed"]


def rank_table(scores: pd.DataFrame, higher_is_better: bool) -> pd.DataFrame:
    """Ranks per dataset and mean rank +- standard error per method.

    ``scores``: rows = methods, columns = datasets, NaN = missing or failed. Returns the rank per
    dataset plus ``mean_rank`` and ``se`` columns, sorted by mean rank.
    """
    worst = len(scores.index)
    ranks = scores.rank(axis=0, method="min", ascending=not higher_is_better).fillna(worst)
    out = ranks.copy()
    out["mean_rank"] = ranks.mean(axis=1)
    n = ranks.shape[1]
    out["se"] = ranks.std(axis=1, ddof=1) / math.sqrt(n) if n > 1 else np.nan
    return out.sort_values(["mean_rank", "se"])


def select_trials(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (method, dataset, fold, repeat, seed): the tuning trial with the best validation score.

    Validation log-loss for classification and MSE for regression, as in the paper. Untuned methods
    have one trial, kept as it is. A run whose trials all failed keeps one failed record.
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


def part_searched(records: pd.DataFrame) -> list[tuple[str, str, str, int, int]]:
    """Tuned runs whose search is incomplete: (method, dataset, folds, trials run, trials declared), one per
    method, dataset and trial count, for splits where a record says how many trials its method has there
    (``n_trials``). Records written before ``n_trials`` existed say nothing, so a split none of whose records
    says is not checked, but they count among the trials run of a split that a later record declares (a run
    resumed after the field came). A run's trials count whether they succeeded or failed; its selected trial
    is the best of those run."""
    if records.empty or "n_trials" not in records or records["trial"].isna().all():
        return []
    tuned = records[records["trial"].notna()]
    runs = tuned.groupby(RUN_KEYS, dropna=False).agg(ran=("trial", "nunique"), of=("n_trials", "max")).reset_index()
    short = runs[runs["of"].notna() & (runs["ran"] < runs["of"])]
    out = []
    for (method, dataset, ran, of), group in short.groupby(["method", "dataset", "ran", "of"], sort=True):
        folds = ", ".join(str(f) for f in sorted(group["fold"].unique()))
        out.append((method, dataset, folds, int(ran), int(of)))
    return out


def part_searched_note(searches, show) -> list[str]:
    """The Markdown line under a task's tables that names its incomplete searches (``part_searched``)."""
    if not searches:
        return []
    return ["Search incomplete (the run stopped before every trial of these splits ran; each rests on the best of "
            "the trials that did, so the cell is provisional): " + "; ".join(
                f"{show.get(m, m)} on {d}, fold{'s' if ',' in folds else ''} {folds} ({ran} of {of} trials)"
                for m, d, folds, ran, of in searches) + ".", ""]


def _dataset_label(frame: pd.DataFrame, dataset: str) -> str:
    subset = frame.loc[frame["dataset"] == dataset, "subset"].dropna() if "subset" in frame else []
    return f"{dataset} [subset: {subset.iloc[0]}]" if len(subset) else dataset


TRANSDUCTIVE_NOTE = (f"{TRANSDUCTIVE_MARK} transductive: the method's fit saw the validation and test rows' features "
                     "(never their targets), as the NPT authors' code does; an inductive method never sees test rows, "
                     "so the two are not the same comparison.")


#: Under a table where some mean is of fewer folds than its dataset has (leaderboard.metric_cell).
FOLDS_NOTE = ("A mean marked \"(k of n folds)\" is over the k of the dataset's n folds the method ran (n: what the "
              "suite declares, and never fewer than the most any method in this table ran there); it is not a complete "
              "result and takes the worst rank.")


def not_published_note(published) -> str:
    return (f"{NOT_PUBLISHED_MARK} not in {published.name}: a model the publication did not run, so it has no "
            "published number or rank; its ranks here are among this run's methods only.")


def display_names(frame: pd.DataFrame, published=None) -> dict:
    """method -> the name shown in tables: transductive methods carry TRANSDUCTIVE_MARK; with ``published``,
    methods whose model (the records' ``model``, a registry name) the publication never reports carry
    NOT_PUBLISHED_MARK. A method named apart from its model (npt-paper: model npt) counts as that model."""
    flags = frame["transductive"].fillna(False).astype(bool) if "transductive" in frame else \
        pd.Series(False, index=frame.index)
    transductive = set(frame.loc[flags, "method"])
    models = frame["model"].fillna(frame["method"]) if "model" in frame else frame["method"]
    reported = published.methods() if published is not None else None
    not_published = set() if reported is None else set(frame.loc[~models.isin(reported), "method"])
    show = {}
    for m in frame["method"].unique():
        marks = (TRANSDUCTIVE_MARK if m in transductive else "") + (NOT_PUBLISHED_MARK if m in not_published else "")
        show[m] = f"{m} {marks}" if marks else m
    return show


def mark_notes(show: dict, published=None) -> list[str]:
    """The notes that explain the marks some shown name carries."""
    names = " ".join(show.values())
    notes = [TRANSDUCTIVE_NOTE] if TRANSDUCTIVE_MARK in names else []
    return notes + ([not_published_note(published)] if published is not None and NOT_PUBLISHED_MARK in names else [])


def declared_splits(datasets) -> dict:
    """dataset -> the number of splits a suite's dataset declarations (DatasetConfig) say it has: k (or the
    folds listed) for k-fold protocols, 1 for a holdout or fixed test set; an OpenML task's own splits are
    not known without the task, so it is left to the records."""
    out = {}
    for cfg in datasets:
        split = cfg.split
        if split.protocol in ("kfold", "npt_code"):
            out[cfg.name] = len(split.folds) if split.folds is not None else split.k
        elif split.protocol in ("holdout", "fixed"):
            out[cfg.name] = 1
    return out


def dataset_splits(frame: pd.DataFrame, declared=None) -> dict:
    """dataset -> the number of splits (fold, repeat) it has: what its suite declares where the leaderboard
    is made from a suite (``declared``), and never fewer than any method in the table ran on it.

    The records do not hold a split's fold count, so a leaderboard made from result folders learns it from
    the methods that ran the dataset whole: a method short of the most any method ran is incomplete. (A
    folder whose every method ran a slice cannot see the slice; name its suite, or pool it with a folder that
    ran the dataset whole, as results/uci-small-paper-budget does.)"""
    declared = declared or {}
    return {dataset: max(len(set(zip(runs["fold"], runs["repeat"]))), declared.get(dataset, 0))
            for dataset, runs in frame.groupby("dataset")}


def _incomplete(runs: pd.DataFrame, values: pd.Series, n_splits: int, metric: str) -> str:
    """Why a method's runs on a dataset are not a complete result ('' when they are)."""
    failed = int((runs["status"] != "ok").sum())  # any failure status: error, invalid, timeout, ...
    if failed:
        return f"{failed} of {len(runs)} runs failed"
    unscored = int(values.isna().sum())
    if unscored:
        return f"{unscored} of {len(runs)} runs have no test {metric}"
    ran = len(set(zip(runs["fold"], runs["repeat"])))
    return f"{ran} of the dataset's {n_splits} splits run" if ran < n_splits else ""


def summarise(frame: pd.DataFrame, declared=None) -> dict:
    """Per task: per (method, dataset) mean and SE of the primary test metric, complete runs only; the
    means of methods that ran fewer of a dataset's splits than it has (none failed) in ``partial``:
    (method, dataset) -> (mean, se, splits run, splits the dataset has). ``declared``: dataset_splits'."""
    out = {}
    for task, (metric, higher) in PRIMARY.items():
        part = frame[frame["task"] == task]
        if part.empty:
            continue
        column = f"test_{metric}"
        methods, datasets = sorted(part["method"].unique()), sorted(part["dataset"].unique())
        mean = pd.DataFrame(np.nan, index=methods, columns=datasets)
        se = mean.copy()
        incomplete, partial = [], {}
        splits = dataset_splits(part, declared)
        for (method, dataset), runs in part.groupby(["method", "dataset"]):
            values = runs[column] if column in runs else pd.Series(np.nan, index=runs.index)
            why = _incomplete(runs, values, splits[dataset], metric)
            value_se = values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1 else np.nan
            if why:
                incomplete.append((method, dataset, why))
                if why.endswith("splits run"):
                    ran = len(set(zip(runs["fold"], runs["repeat"])))
                    partial[(method, dataset)] = (values.mean(), value_se, ran, splits[dataset])
                continue
            mean.loc[method, dataset] = values.mean()
            se.loc[method, dataset] = value_se
        out[task] = {"metric": metric, "higher": higher, "mean": mean, "se": se, "incomplete": incomplete,
                     "partial": partial, "ranks": rank_table(mean, higher)}
    return out


def metric_cell(t: dict, method: str, dataset: str) -> str:
    """A method's mean ± SE on a dataset as every table shows it: with its fold count where it ran fewer
    of the dataset's folds than it has ("5.450 ± 0.370 (2 of 10 folds)"), – where it has no result."""
    if (method, dataset) in t.get("partial", {}):
        value, value_se, ran, of = t["partial"][(method, dataset)]
        return with_folds(mean_se(value, value_se), ran, of)
    return mean_se(t["mean"].loc[method, dataset], t["se"].loc[method, dataset])


@dataclass(frozen=True)
class FirstComplete:
    """One row ``name`` holding, per dataset, the first of ``methods`` with a complete result there (every
    split the dataset has, none failed, each scored), else the records of ``fallback``, which keeps its own
    row too; the other listed methods lose theirs. E.g. the most faithful NPT that has complete folds, the
    reduced budget beside it: ``FirstComplete("npt (most faithful)", ("npt-tuned", "npt-paper", "npt-e32"),
    "npt")``. Which method fills each dataset is read from the records, never listed by hand."""

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
                if len(runs) and (method == self.fallback or not _incomplete(runs, values, splits[dataset], metric)):
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


def _cost_rows(frame: pd.DataFrame, show: dict) -> list:
    rows = []
    mib = 1024**2
    for method, part in frame.groupby("method"):
        ok = part[part["status"] == "ok"]
        gpu = ok["peak_gpu_allocated_bytes"].dropna() if "peak_gpu_allocated_bytes" in ok else pd.Series(dtype=float)
        failures = part.loc[part["status"] != "ok", "status"].value_counts()
        rows.append([show.get(method, method), len(part), ", ".join(f"{k} {v}" for k, v in failures.items()) or "0",
                     mean_se(ok["fit_seconds"].mean(), None, 2) if len(ok) else "–",
                     mean_se(ok["predict_seconds"].mean(), None, 3) if len(ok) else "–",
                     f"{ok['job_rss_bytes'].max() / mib:.0f}" if len(ok) else "–",
                     f"{gpu.max() / mib:.0f}" if len(gpu) else "–"])
    return rows


def _differs(a: dict, b: dict) -> bool:
    """Whether one parameter ({dataset: value}) differs between two methods: on the datasets both ran, or,
    sharing none, in the values they used."""
    common = a.keys() & b.keys()
    if common:
        return any(a[d] != b[d] for d in common)
    return {json.dumps(v, sort_keys=True) for v in a.values()} != {json.dumps(v, sort_keys=True) for v in b.values()}


def _variants_section(frame: pd.DataFrame, show: dict) -> list:
    """For a model run under several method names (npt at 300 steps and at the paper's 10,000): the
    parameters they differ in, per method, so a table's row names can be read without the suites."""
    fixed = frame[frame["trial"].isna()] if "trial" in frame else frame  # a tuned method's trials vary by design
    rows = []
    for model, part in fixed.groupby("model"):
        if part["method"].nunique() < 2:
            continue
        values = {}  # method -> {param: {dataset: value}}
        for (method, dataset), runs in part.groupby(["method", "dataset"]):
            for name, value in key_params(runs.iloc[0]).items():
                values.setdefault(method, {}).setdefault(name, {})[dataset] = value
        names = sorted({n for v in values.values() for n in v})
        differ = [n for n in names if any(_differs(a.get(n, {}), b.get(n, {}))
                                          for a, b in itertools.combinations(values.values(), 2))]
        for method, by_name in values.items():
            cells = []
            for name in differ:
                per_dataset = by_name.get(name, {})
                groups = {}
                for dataset, value in sorted(per_dataset.items()):
                    groups.setdefault(json.dumps(value), []).append(dataset)
                if len(groups) == 1:
                    cells.append(f"{name} {next(iter(groups))}")
                else:
                    cells.append(f"{name} " + ", ".join(f"{v} ({', '.join(ds)})" for v, ds in groups.items()))
            rows.append([show.get(method, method), model, "; ".join(cells) or "–"])
    if not rows:
        return []
    return ["## Methods of one model", "", "Models run under more than one method name, and the parameters "
            "their methods differ in (per dataset where they vary).", "",
            markdown_table(["method", "model", "differs in"], rows), ""]


def _published_section(t: dict, labels: dict, published, show: dict) -> list:
    """Our test metric and mean rank next to the published ones, for the datasets both have."""
    metric, ranks = t["metric"], t["ranks"]
    datasets = [d for d in t["mean"].columns if d in published.metrics]
    if not datasets:
        return []
    ours_n, theirs = len(t["mean"].columns), published.ranks.get(metric, {})
    header = ["method", f"mean rank (ours over {ours_n} / published)"] + [labels[d] for d in datasets]
    rows = []
    for m, r in ranks.iterrows():
        rank = theirs.get(m)
        cells = [f"{mean_se(r['mean_rank'], r['se'], 2)} / {mean_se(*rank, 2) if rank else '–'}"]
        for d in datasets:
            value = published.metrics[d].get(m)  # as printed in the publication: its own digits
            shown = "–" if not value else f"{value[0]:g}" + (f" ± {value[1]:g}" if value[1] is not None else "")
            cells.append(f"{metric_cell(t, m, d)} / {shown}")
        rows.append([show[m]] + cells)
    notes = [f"Each cell: ours / published. Published ranks are over the publication's datasets of this task, "
             f"ours over this run's {ours_n}."]
    if any(labels[d] != d for d in datasets):  # a subset's label names it
        notes.append("Subset or stand-in data (labelled above) is not the published dataset: compare with care.")
    if published.note_for(datasets):
        notes.append(published.note_for(datasets))
    return [f"### Against {published.name} (test {metric})", "", markdown_table(header, rows), "", *notes, ""]


def pooled_ranks(tables: dict) -> pd.DataFrame:
    """Every dataset's ranks in one table (methods x datasets): each family's ranks, a method absent
    from a family at the worst rank over all methods."""
    methods = sorted({m for t in tables.values() for m in t["mean"].index})
    parts = [rank_table(t["mean"].reindex(methods), t["higher"]).drop(columns=["mean_rank", "se"])
             for t in tables.values()]
    return pd.concat(parts, axis=1).loc[methods]


def _table1_section(tables: dict, published, show: dict) -> list:
    """The paper's Table 1: mean rank +- SE per metric family, the published rank beside ours."""
    families = list(tables.values())
    pooled = pooled_ranks(tables).mean(axis=1).sort_values()
    header, rows = ["method"], []
    for t in families:
        n = t["mean"].shape[1]
        header.append(f"{t['metric']} ({n} dataset{'s' if n != 1 else ''})" + (" / published" if published else ""))
    for m in pooled.index:
        cells = [show[m]]
        for t in families:
            ours = mean_se(*t["ranks"].loc[m, ["mean_rank", "se"]], 2) if m in t["ranks"].index else "–"
            theirs = published.ranks.get(t["metric"], {}).get(m) if published else None
            cells.append(ours + (f" / {mean_se(*theirs, 2) if theirs else '–'}" if published else ""))
        rows.append(cells)
    notes = ["Mean rank ± standard error over the datasets of each metric family (lower is better), methods in "
             "order of their mean rank over all datasets."]
    if published:
        notes.append(f"Published: {published.name}, ranked over the publication's own datasets of each family.")
        if published.note_for(published.metrics):
            notes.append(published.note_for(published.metrics))
    notes += mark_notes(show, published)
    return ["## Table 1: mean rank per metric family", "", markdown_table(header, rows), "", " ".join(notes), ""]


#: The libraries whose versions can move a regenerated table's last digits (the bootstrap Elo intervals).
NUMERIC_LIBRARIES = ("numpy", "scipy", "pandas", "scikit-learn", "bencheval")


def library_versions() -> str:
    """"numpy 2.4.6, scipy 1.17.1, ...": the versions of NUMERIC_LIBRARIES here (read from their metadata,
    nothing imported), as a leaderboard names them."""
    from importlib.metadata import PackageNotFoundError, version

    def one(name):
        try:
            return f"{name} {version(name)}"
        except PackageNotFoundError:
            return f"{name} absent"

    return ", ".join(one(name) for name in NUMERIC_LIBRARIES)


def _generated_line(out_dir: Path, sources: list, records: pd.DataFrame) -> str:
    computed = (f"Computed with {library_versions()}: other versions can move the last digits (the bootstrap "
                "Elo intervals).")
    if sources == [out_dir]:
        return f"Generated by `tabbench leaderboard` from the records in `records/` (do not edit by hand). {computed}"
    counts = records["source"].value_counts()
    named = ", ".join(f"`{s}` ({counts.get(str(s), 0):,} records)" for s in sources)
    return (f"Generated by `tabbench leaderboard` from the records of {named}, the newest record per job key "
            f"(do not edit by hand). {computed}")


def write_leaderboard(suite_dir: str | Path, published_path: str | Path | None = None, sources=None,
                      report: bool = False, first_complete=(), splits=None, common_splits: bool = False) -> Path:
    """Regenerate leaderboard.md / leaderboard.csv (and selected_params.csv when tuning) in suite_dir;
    with ``published_path`` (a suite's ``published:`` file) also the published numbers side by side.

    ``sources``: the result folders whose records are ranked together (default: suite_dir's own; see
    tabbench.pooling). ``report``: also the significance tests, win rates, cost figure and
    leaderboard.tex (tabbench.report; needs the ``report`` extra), as ``tabbench leaderboard`` writes them.
    ``first_complete``: FirstComplete rows (e.g. the most faithful NPT with complete folds per dataset).
    ``splits``: dataset -> the number of splits its suite declares (declared_splits), where known.
    ``common_splits``: rank only where every method ran (tabbench.pooling.common_splits), said under the title.
    """
    suite_dir = Path(suite_dir)
    sources = [Path(s) for s in sources] if sources else [suite_dir]
    published = None
    if published_path is not None:
        from tabbench.published import load_published

        published = load_published(published_path)
    md_path = suite_dir / "leaderboard.md"
    own = sources == [suite_dir] and not (suite_dir / "records").is_dir()
    records = pd.DataFrame() if own else pooled_records(sources)
    restricted = ""
    if common_splits and not records.empty:
        records, restricted = only_common_splits(records)
    suite_dir.mkdir(parents=True, exist_ok=True)
    if records.empty:
        md_path.write_text(f"# Leaderboard: {suite_dir.name}\n\nNo records yet.\n")
        return md_path
    all_runs = records
    selected = select_trials(records)
    combined_notes = []
    for rule in first_complete:
        chosen = rule.choose(selected, splits)
        all_runs, selected = rule.apply(all_runs, chosen), rule.apply(selected, chosen)
        combined_notes.append(rule.note(chosen))
    tables = summarise(selected, splits)
    labels = {d: _dataset_label(selected, d) for d in sorted(selected["dataset"].unique())}
    show = display_names(all_runs, published)
    notes = mark_notes(show, published)
    mark_note = [" ".join(notes), ""] if notes else []
    md = [f"# Leaderboard: {suite_dir.name}", "", _generated_line(suite_dir, sources, records), ""]
    md += [restricted, ""] if restricted else []
    if report:
        md += ["Figures and tests: a significance section per metric family, [all datasets together]"
               "(#all-datasets-together), [pairwise win rates](#pairwise-win-rates), [cost against quality]"
               "(#cost-against-quality); LaTeX tables: [`leaderboard.tex`](leaderboard.tex).", ""]
    from tabbench.report import arena  # TabArena's Elo, improvability and win rate (bencheval)

    aggregates = arena.aggregates(tables, selected, pooled_ranks(tables).mean(axis=1))
    md += _table1_section(tables, published, show) + ([" ".join(combined_notes), ""] if combined_notes else [])
    md += arena.markdown(aggregates, show)
    md += _variants_section(selected, show)
    csv_rows = []
    for task, t in tables.items():
        metric, ranks = t["metric"], t["ranks"]
        md += [f"## {TASK_TITLES[task]}: average rank", "",
               f"Rank by test {metric} ({'higher' if t['higher'] else 'lower'} is better) within each dataset, "
               "averaged over datasets ± standard error.", ""]
        header = ["method", "mean rank"] + [labels[d] for d in t["mean"].columns]
        rows = [[show[m], mean_se(r["mean_rank"], r["se"], 2)] + [f"{r[d]:g}" for d in t["mean"].columns]
                for m, r in ranks.iterrows()]
        md += [markdown_table(header, rows), "", *mark_note]
        md.append(f"Ties share the better rank. A method without a complete result on a dataset (missing, any "
                  f"fold failed, or fewer folds than the dataset has) takes the worst rank, {len(ranks)}.")
        if t["incomplete"]:
            md.append("Worst rank imputed for: " + "; ".join(
                f"{m} on {d} ({why})" for m, d, why in t["incomplete"]) + ".")
        md += ["", f"### Test {metric} per dataset (mean ± standard error over folds and seeds)", ""]
        rows = [[show[m]] + [metric_cell(t, m, d) for d in t["mean"].columns] for m in ranks.index]
        md += [markdown_table(["method"] + [labels[d] for d in t["mean"].columns], rows), "", *mark_note]
        md += [FOLDS_NOTE, ""] if t["partial"] else []
        md += part_searched_note(part_searched(all_runs[all_runs["task"] == task]), show)
        if published is not None:
            md += _published_section(t, labels, published, show) + mark_note
        if report:
            from tabbench.report.sections import significance_section

            columns = list(t["mean"].columns)
            md += significance_section(suite_dir, metric, ranks[columns], t["mean"].loc[ranks.index, columns])
        for m, r in ranks.iterrows():
            row = {"table": f"rank_{metric}", "method": m, "dataset": "", "value": r["mean_rank"], "se": r["se"]}
            if published is not None and m in published.ranks.get(metric, {}):
                row["published"], row["published_se"] = published.ranks[metric][m]
            csv_rows.append(row)
            for d in t["mean"].columns:
                row = {"table": f"test_{metric}", "method": m, "dataset": d,
                       "value": t["mean"].loc[m, d], "se": t["se"].loc[m, d], "rank": r[d]}
                if published is not None and m in published.metrics.get(d, {}):
                    row["published"], row["published_se"] = published.metrics[d][m]
                csv_rows.append(row)
    pooled = pooled_ranks(tables)
    for m, rank in pooled.mean(axis=1).items():
        csv_rows.append({"table": "rank_all", "method": m, "dataset": "", "value": rank,
                         "se": pooled.loc[m].std(ddof=1) / math.sqrt(pooled.shape[1]) if pooled.shape[1] > 1 else np.nan})
    csv_rows += arena.csv_rows(aggregates)
    if report:
        from tabbench.report.latex import write_latex
        from tabbench.report.sections import cost_section, significance_section, win_rate_section

        md += ["## All datasets together", "", f"Every dataset's rank from the tables above ({pooled.shape[1]} "
               "datasets), a method absent from a family at the worst rank.", ""]
        md += significance_section(suite_dir, "all", pooled, None)
        md += win_rate_section(suite_dir, selected) + cost_section(suite_dir, all_runs, pooled.mean(axis=1), show)
        from tabbench.report.budget import budget_section

        md += budget_section(suite_dir, selected, PRIMARY, published, show, dataset_splits(selected, splits))
        write_latex(suite_dir / "leaderboard.tex", suite_dir.name, tables, labels, published,
                    show=show, arena=aggregates)
    md += ["## Costs per job", "", "Mean fit and predict seconds and the largest peak resident memory of one "
           "job (above its worker's baseline) over successful jobs; peak GPU memory allocated when CUDA was used.",
           "Failures are counted over all jobs, tuning trials included.", ""]
    md += [markdown_table(["method", "jobs", "failures", "fit s", "predict s", "peak RSS MiB", "peak GPU MiB"],
                     _cost_rows(all_runs, show)), "", *mark_note]
    if all_runs["trial"].notna().any():
        params = selected[selected["trial"].notna()][RUN_KEYS + ["trial", "params"]]
        params = params.assign(params=params["params"].map(lambda p: json.dumps(p, sort_keys=True)))
        params.to_csv(suite_dir / "selected_params.csv", index=False)
        md += ["Tuned methods: the configuration chosen per dataset and fold (best validation score) is in "
               "`selected_params.csv`.", ""]
    md_path.write_text("\n".join(md))
    csv = pd.DataFrame(csv_rows)
    if published is not None:  # the mark NOT_PUBLISHED_MARK, as data: False for a model the publication never ran
        csv["in_publication"] = csv["method"].map(lambda m: NOT_PUBLISHED_MARK not in show.get(m, ""))
    csv.to_csv(suite_dir / "leaderboard.csv", index=False)
    return md_path
