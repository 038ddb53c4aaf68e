"""The report site over every results folder: each folder's README names the one command that regenerates its
tables and page (``Regenerate: `tabbench leaderboard ...```); ``tabbench report`` runs them all from the records and
writes the index page and the generated answer at the top of results/README.md."""

from __future__ import annotations

import re
import shlex
from contextlib import contextmanager
from pathlib import Path

from tabbench.errors import TabbenchError
from tabbench.report.format import count, markdown_text

class SiteError(TabbenchError, ValueError):
    """A results folder cannot be made into a page; the message names the file and the fix."""


#: The one form a results folder's README gives its regenerate command in (tests/test_regeneration.py finds it).
REGENERATE = re.compile(r"^Regenerate: `(tabbench leaderboard [^`]+)`", re.M)


def regenerate_command(folder: Path) -> list[str] | None:
    """The arguments of ``tabbench`` (``leaderboard ...``) that regenerate ``folder``'s tables, as its README
    gives them; None where the README gives none (a folder of records that another folder's tables pool)."""
    readme = Path(folder) / "README.md"
    if not readme.exists():
        return None
    found = REGENERATE.findall(readme.read_text())
    if len(found) > 1:
        raise SiteError(f"{readme}: {len(found)} 'Regenerate:' lines; a folder's tables have one command, keep one")
    return shlex.split(found[0])[1:] if found else None


def leaderboard_arguments(parser) -> None:
    """``tabbench leaderboard``'s arguments: the command line's, and those a README's Regenerate command is read by."""
    parser.add_argument("targets", nargs="+", metavar="TARGET",
                        help="a results folder (e.g. results/quickstart), or a suite YAML file: its folder under "
                             "--results, and its published: file for the side-by-side comparison")
    parser.add_argument("--name", help="write to RESULTS/NAME/ (required with several targets; default: the one "
                                       "target's own folder)")
    parser.add_argument("--published", metavar="FILE", help="published numbers to set beside ours, e.g. "
                                                           "suites/published/npt-paper.yaml (default: the "
                                                           "published: file of the suites named)")
    parser.add_argument("--first-complete", metavar="NAME=M1,M2,...,FALLBACK", action="append", default=[],
                        help="one row NAME holding, per dataset, the first listed method with a complete result "
                             "there (every fold, none failed), else FALLBACK; the listed methods but FALLBACK lose "
                             "their own rows, e.g. 'npt (most faithful)=npt-tuned,npt-paper,npt-e32,npt'")
    parser.add_argument("--across-devices", action="store_true",
                        help="pool one method made on different devices (e.g. NPT's paper config on a GPU in one "
                             "folder, on the CPU in another): per method and dataset the device covering the most "
                             "folds, every GPU cell labelled")
    parser.add_argument("--results", metavar="DIR",
                        help="results root: where a suite target's folder is (default: results/, the published "
                             "runs) and where --name writes (default: runs/, beside the runs; --results results "
                             "writes a published pooled leaderboard)")
    parser.add_argument("--common-splits", action="store_true",
                        help="rank only the datasets and splits every method ran (e.g. NPT's quickstart, fold 0, "
                             "against the quickstart's five folds); the leaderboard says what was left out")
    tables_only_argument(parser)


def tables_only_argument(parser) -> None:
    """``--tables-only``, shared by ``tabbench leaderboard`` and ``tabbench run``."""
    parser.add_argument("--tables-only", action="store_true",
                        help="only leaderboard.md and .csv: no tests, figures or LaTeX (no `report` extra needed)")


def parse_leaderboard(args: list):
    """A README's ``leaderboard ...`` arguments, read as ``tabbench leaderboard`` reads them."""
    import argparse

    parser = argparse.ArgumentParser(prog="tabbench leaderboard")
    leaderboard_arguments(parser)
    return parser.parse_args(args[1:])


def published_folders(results: Path) -> list[Path]:
    """The results folders whose README gives a regenerate command, by name."""
    return [d for d in sorted(Path(results).iterdir()) if d.is_dir() and regenerate_command(d) is not None]


#: The benchmarks the answer atop results/README.md summarises, in its order: (folder, what it asks).
ANSWER = [
    ("uci-small-npt-paper-gpu", "The paper's protocol and exact small-data NPT configuration, on a GPU"),
    ("uci-small", "The paper's four small UCI sets and protocol, every method at a reduced CPU budget"),
    ("uci-cpu", "Every UCI dataset we have run, in one table"),
    ("breadth", "Breadth: many real datasets, every model at its defaults under one CPU budget"),
]
BEGIN = "<!-- The answer: generated by `tabbench report` from the records (do not edit by hand). -->"
END = "<!-- End of the generated answer; hand-written text follows. -->"


def _npt_methods(ctx) -> list:
    """The rows of NPT (its registry model npt) in the leaderboard, best first."""
    order = ctx.pooled.mean(axis=1).sort_values().index
    return [m for m in order if ctx.model_of(m) == "npt"]


def _budget(ctx) -> str:
    from tabbench.pooling import record_devices

    runs = ctx.all_runs
    budgets = sorted(runs["time_budget_s"].dropna().unique()) if "time_budget_s" in runs else []
    devices = record_devices(runs)
    where = " and ".join(f"{d.upper()} ({(devices == d).sum():,} jobs)" for d in sorted(devices.unique()))
    return (", ".join(f"{b:g} s" for b in budgets) + " a job" if budgets else "no time budget") + f", on {where}"


def _separates(ctx) -> str:
    """What Friedman and Nemenyi over every dataset can and cannot separate, NPT's pairs named."""
    from tabbench.report.significance import significance

    pooled = ctx.pooled
    result = significance("all", pooled, None)
    if result.friedman is None or result.cd is None:
        return " ".join(result.notes)
    stat, p = result.friedman
    ranks, cd = result.mean_ranks, result.cd
    gaps = [(a, b) for a in ranks.index for b in ranks.index if ranks[b] - ranks[a] > cd]
    pairs = len(ranks) * (len(ranks) - 1) // 2
    text = (f"Friedman over {result.n_datasets} datasets: χ² {stat:.2f}, p = {p:.3g}; Nemenyi's critical difference "
            f"{cd:.2f} ranks separates {len(gaps)} of the {pairs} pairs.")
    for m in _npt_methods(ctx):
        ahead = [a for a, b in gaps if b == m]
        behind = [b for a, b in gaps if a == m]
        same = [o for o in ranks.index if o != m and o not in ahead and o not in behind]
        text += (f" {m}: significantly behind {', '.join(ahead) or 'no method'}"
                 + (f", ahead of {', '.join(behind)}" if behind else "")
                 + f"; not separated from {len(same)} method{'s' if len(same) != 1 else ''}.")
    return text


def _place_table(ctx) -> list:
    from tabbench.report.format import markdown_table

    pooled = ctx.pooled
    order = pooled.mean(axis=1).sort_values()
    se = pooled.std(axis=1, ddof=1) / (pooled.shape[1] ** 0.5) if pooled.shape[1] > 1 else order * float("nan")
    elo = ctx.aggregates.table if ctx.aggregates is not None else None
    npt = _npt_methods(ctx)
    shown = [m for i, m in enumerate(order.index) if i < 3 or m in npt]
    rows = []
    for m in shown:
        place = int((order < order[m]).sum()) + 1
        interval = ("–" if elo is None or m not in elo.index else
                    f"{elo.loc[m, 'elo']:.0f}" + ("" if elo.loc[m, ["elo_low", "elo_high"]].isna().any() else
                                                 f" ({elo.loc[m, 'elo_low']:.0f} to {elo.loc[m, 'elo_high']:.0f})"))
        rows.append([f"{place} of {len(order)}", ctx.show.get(m, m), f"{order[m]:.2f} ± {se[m]:.2f}", interval])
    out = [markdown_table(["place", "method", "mean rank over all datasets", "Elo (95% interval)"], rows)]
    if elo is not None and elo[["elo_low", "elo_high"]].isna().all().all():
        from tabbench.report.arena import MIN_INTERVAL_DATASETS

        out += ["", f"No Elo interval on {count(ctx.aggregates.n_datasets, 'dataset')}: the bootstrap needs "
                f"{MIN_INTERVAL_DATASETS} to bound it (the page's notes say why); the Elo orders these methods here "
                "and separates none."]
    return out


def _paper_table(ctx) -> list:
    """NPT's test metric against the paper's on each dataset: the difference, the difference in combined standard
    errors (√(SE ours² + SE paper²)), and whether it lies within 2 of them."""
    import math

    import pandas as pd

    from tabbench.report.agreement import within
    from tabbench.report.format import markdown_table

    rows = []
    for t in ctx.tables.values():
        for d in t.datasets:
            for m in _npt_methods(ctx):
                if m not in t.mean.index:
                    continue
                cell = t.cell(m, d)
                if pd.isna(cell.mean):  # not run there
                    continue
                paper = ctx.published.metrics.get(d, {}).get(ctx.model_of(m)) if ctx.published else None
                if not paper:
                    continue
                gap = cell.mean - paper[0]
                combined = math.hypot(cell.se, paper[1]) if paper[1] and not pd.isna(cell.se) else None
                agree = within(gap, cell.se, paper[1])
                rows.append([markdown_text(ctx.labels[d]), f"{t.metric}", ctx.show.get(m, m), cell.markdown(),
                             f"{paper[0]:g}" + (f" ± {paper[1]:g}" if paper[1] is not None else ""), f"{gap:+.3g}",
                             f"{gap / combined:+.2f}" if combined else "–",
                             {None: "not judged (no SE)", True: "within 2 SE", False: "**outside 2 SE**"}[agree]])
    return [markdown_table(["dataset", "metric", "method", "ours (mean ± SE)", "paper", "ours − paper",
                            "in combined SE", "ours against it"], rows)]


def _paper_block(ctx) -> list:
    """A README's table of NPT's rows against the paper's numbers (_paper_table), and how it judges them."""
    return _paper_table(ctx) + ["", "In combined SE: (ours − paper) / √(SE ours² + SE paper²); within 2 SE: at most "
                                "2 of them (results/README.md). For RMSE a negative difference is better than the "
                                "paper, for AUROC worse. A mean of fewer folds than the dataset has shows its fold "
                                "count. The paper's small-data NPT numbers are the best of eight variants per "
                                "dataset (its Table 16)."]


def answer(contexts: dict) -> list:
    """The generated answer: per benchmark in ANSWER with a page, its short table, budget, statistics and link."""
    out = [BEGIN, "", "## The answer at a glance", "",
           "Where does NPT stand against the paper's field and the models that came after it? Each table below is "
           "made by `tabbench report` from the records of the folder it links; its page has every table, figure and "
           "per-dataset number ([all pages](index.html)).", ""]
    for folder, question in ANSWER:
        ctx = contexts.get(folder)
        if ctx is None:
            continue
        n = sum(len(t.datasets) for t in ctx.tables.values())
        out += [f"### {question}: [{folder}]({folder}/report.html)", "",
                f"{n} dataset{'s' if n != 1 else ''}, {count(ctx.all_runs['method'].nunique(), 'method')}; budget: "
                f"{_budget(ctx)}.", ""]
        if ctx.published is not None and len(ctx.pooled.index) <= 2:  # NPT alone: its numbers against the paper's
            out += _paper_table(ctx) + ["", "Within 2 SE: |ours − paper| ≤ 2 √(SE ours² + SE paper²) (below). The "
                                        "paper's small-data NPT numbers are the best of eight variants per dataset; "
                                        "npt-paper is its base configuration, one of them.", ""]
        else:
            out += _place_table(ctx) + ["", _separates(ctx), ""]
    return out + [END]


def _significance_block(ctx) -> list:
    """Per metric family and over every dataset: Friedman, Nemenyi's critical difference and the pairs it
    separates (the leaderboard's own tests, tabbench.report.significance), and the cost's Pareto fronts."""
    from tabbench.report import cost
    from tabbench.report.significance import separated_pairs, significance, significance_families

    out = []
    for family, title, ranks, scores in significance_families(ctx):
        result = significance(family, ranks, scores)
        text = f"- **{title}** ({count(result.n_datasets, 'dataset')}, {count(len(ranks), 'method')}): "
        text += " ".join(result.notes)
        pairs = separated_pairs(result)
        if pairs is not None:
            mean = result.mean_ranks
            text += (" Separated pairs (mean ranks): " + "; ".join(
                f"{ctx.show.get(a, a)} ({mean[a]:.2f}) ahead of {ctx.show.get(b, b)} ({mean[b]:.2f})"
                for a, b in pairs) + "." if pairs else " No pair is further apart than the critical difference.")
        out.append(text)
    table = cost.cost_table(ctx.all_runs, ctx.pooled.mean(axis=1))
    for column, what in (("fit_seconds", "fit time per result"), ("rss_mib", "peak memory")):
        front = cost.pareto_front(table["mean_rank"], table[column])
        on = table[front.reindex(table.index, fill_value=False)].sort_values(column)
        out.append(f"- **Cost** ({what}): the Pareto front runs " + " → ".join(ctx.show.get(m, m) for m in on.index)
                   + "; NPT's rows: " + "; ".join(
                       f"{ctx.show.get(m, m)} {table.loc[m, 'fit_seconds']:.3g} s a result, "
                       f"{table.loc[m, 'rss_mib']:.0f} MiB" for m in _npt_methods(ctx)) + "."
                   if column == "fit_seconds" else
                   f"- **Cost** ({what}): the Pareto front runs " + " → ".join(ctx.show.get(m, m) for m in on.index) + ".")
    return out


def _job_times_block(ctx) -> list:
    """Per method: its jobs and their wall seconds (shortest, median, longest), from the records."""
    from tabbench.report.format import markdown_table

    runs = ctx.all_runs
    seconds = runs.groupby("method")["wall_seconds"].agg(["count", "min", "median", "max"]).sort_values("median")
    rows = [[ctx.show.get(m, m), f"{int(r['count']):,}", f"{r['min']:.1f}", f"{r['median']:.1f}", f"{r['max']:.1f}"]
            for m, r in seconds.iterrows()]
    return [markdown_table(["method", "jobs", "shortest s", "median s", "longest s"], rows), "",
            "Wall seconds a job (fit, predict and scoring in its worker), from each record's `wall_seconds`."]


def _folds_block(ctx) -> list:
    """Per NPT row and dataset, one line per fold: its test metric, the step of its best validation loss, the test
    metric its budget curve recorded at shorter step budgets, its fit minutes and peak memory; then the mean ± SE."""
    import math

    import pandas as pd

    from tabbench.metrics import PRIMARY
    from tabbench.report.format import markdown_table

    out = []
    runs = ctx.selected[(ctx.selected["status"] == "ok") & ctx.selected["method"].isin(_npt_methods(ctx))]
    for (method, dataset), part in sorted(runs.groupby(["method", "dataset"]), key=lambda g: (g[0][1], g[0][0])):
        metric = PRIMARY[part["task"].iloc[0]][0]
        digits = 4 if metric in ("auroc", "accuracy") else 3
        part = part.sort_values(["repeat", "fold"])
        info = part["info"].map(lambda i: i if isinstance(i, dict) else {})
        curves = part["budget_curve"].map(lambda c: {p["steps"]: p["test"].get(metric) for p in c}
                                          if isinstance(c, list) else {}) if "budget_curve" in part else \
            pd.Series([{}] * len(part), part.index)
        budgets = sorted({s for c in curves for s in c})
        rows = [[str(r["fold"]), f"{r[f'test_{metric}']:.{digits}f}", f"{info[i].get('best_step', '–'):,}"
                 if isinstance(info[i].get("best_step"), int) else "–",
                 " / ".join(f"{curves[i][s]:.{digits - 1}f}" if s in curves[i] else "–" for s in budgets) or "–",
                 f"{r['fit_seconds'] / 60:.{1 if r['fit_seconds'] < 600 else 0}f}"
                 + (f" (from step {info[i]['resumed_from_step']:,})" if info[i].get("resumed_from_step") else ""),
                 f"{r['peak_rss_bytes'] / 1e9:.1f}" if pd.notna(r.get("peak_rss_bytes")) else "–"]
                for i, r in part.iterrows()]
        values = part[f"test_{metric}"]
        se = values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
        rows.append([f"mean ± SE ({len(values)} folds)", f"**{values.mean():.{digits}f} ± {se:.{digits}f}**", "", "",
                     "", ""])
        steps = f"{int(info.iloc[0]['steps']):,}" if "steps" in info.iloc[0] else "?"
        out += [f"**{dataset}, {ctx.show.get(method, method)}, {steps} steps** (test {metric}):", "",
                markdown_table(["fold", f"test {metric}", "best validation step",
                                "budget curve (" + " / ".join(f"{s:,}" for s in budgets) + " steps)", "fit minutes",
                                "peak RSS GB"], rows), ""]
    return out + ["The budget curve: the test metric of the weights a run stopped at that step would have used "
                  "(the best validation loss so far), from the same run. Fit minutes: the record's fit seconds; a fold "
                  "resumed from a checkpoint (the step named) ran in parts, and an older record counts only the last "
                  "of them. Peak RSS: the job's host memory, in 10⁹ bytes."]


def _npt_at_budget_block(ctx) -> list:
    """npt beside npt-budget in the leaderboard's own numbers (tabbench.report.npt_at_budget.block)."""
    from tabbench.report.npt_at_budget import BASE, BUDGET, block

    if BASE not in set(ctx.selected["method"]):
        raise SiteError(f"{ctx.out_dir / 'README.md'}: the npt-at-budget block compares {BASE} with {BUDGET}, and "
                        f"this folder's records have no {BASE}; remove the block or run {BASE}")
    return block(ctx)


def _tabarena_block(ctx) -> list:
    """The cells beyond 2 SE of TabArena's published numbers (tabbench.report.tabarena.beyond_block)."""
    from tabbench.report.tabarena import beyond_block

    return beyond_block(ctx)


#: The blocks a results folder's README may hold between ``<!-- tabbench report: NAME -->`` and
#: ``<!-- end of tabbench report: NAME -->``: `tabbench report` writes them from the folder's records.
README_BLOCKS = {"significance": _significance_block, "job-times": _job_times_block, "npt-against-paper": _paper_block,
                 "npt-folds": _folds_block, "tabarena": _tabarena_block, "npt-at-budget": _npt_at_budget_block}


def fill_blocks(readme: Path, ctx) -> None:
    """The README's generated blocks (README_BLOCKS) rewritten from ``ctx``; an unknown block name is an error."""
    text = readme.read_text()
    pattern = re.compile(r"(<!-- tabbench report: ([\w-]+) -->\n).*?(<!-- end of tabbench report: \2 -->)", re.S)

    def fill(match):
        name = match[2]
        if name not in README_BLOCKS:
            raise SiteError(f"{readme}: unknown generated block {name!r}; known: {', '.join(README_BLOCKS)}")
        return match[1] + "\n".join(README_BLOCKS[name](ctx)) + "\n" + match[3]

    filled = pattern.sub(fill, text)
    if filled != text:
        readme.write_text(filled)


def write_answer(readme: Path, contexts: dict) -> None:
    """results/README.md with its generated answer (between BEGIN and END) replaced or put first."""
    text = readme.read_text() if readme.exists() else ""
    generated = "\n".join(answer(contexts))
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + generated + text[text.index(END) + len(END):]
    else:
        title, _, rest = text.partition("\n")
        text = f"{title}\n\n{generated}\n{rest}"
    readme.write_text(text)


def index_page(results: Path, contexts: dict) -> str:
    """results/index.html: every folder's page, what it holds, and the answer's tables."""
    import html as escape

    from tabbench.report.html import SCRIPT, STYLE, from_markdown

    rows = []
    for folder, ctx in contexts.items():
        title = (results / folder / "README.md").read_text().partition("\n")[0].lstrip("# ")
        n = sum(len(t.datasets) for t in ctx.tables.values())
        rows.append((folder, title, n, ctx.all_runs["method"].nunique(), _budget(ctx)))
    listing = "<table class=sortable><thead><tr><th>folder</th><th>what it holds</th><th>datasets</th>" \
              "<th>methods</th><th>budget</th></tr></thead><tbody>" + "".join(
                  f'<tr><td><a href="{escape.escape(f)}/report.html">{escape.escape(f)}</a></td><td>{escape.escape(t)}</td>'
                  f"<td>{n}</td><td>{k}</td><td>{escape.escape(b)}</td></tr>" for f, t, n, k, b in rows) \
              + "</tbody></table>"
    body = from_markdown([line for line in answer(contexts) if not line.startswith("<!--")], results)
    body = body.replace('href="index.html"', 'href="#folders"')
    marks = from_markdown([" ".join(_index_marks(body, contexts))], results)
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content='width=device-width'><title>tabbench: results</title>"
            f"<link rel=icon href='data:,'><style>{STYLE}</style></head><body>\n<h1>tabbench results</h1>\n"
            f"{body}\n{marks}\n<h2 id=folders>Every results folder</h2>\n{listing}\n"
            '<p class="note">Generated by <code>tabbench report</code> from the records (do not edit by hand); each '
            "folder's README gives the command that regenerates its tables and page.</p>\n"
            f"<script>{SCRIPT}</script></body></html>\n")


def _index_marks(body: str, contexts: dict) -> list:
    """The notes that explain the marks (†, ‡) the index's tables show, each once (tabbench.report.labels)."""
    from tabbench.report.labels import mark_notes

    notes = dict.fromkeys(note for ctx in contexts.values() for note in mark_notes(ctx.show, ctx.published)
                          if note[0] in body)
    return list(notes)


def _regenerate(folder: Path):
    """(the Context its sections read, or None; whether it is a report) of one folder, regenerated by its README's
    command, run from the checkout's root."""
    from tabbench.report.leaderboard import inputs, write

    args = parse_leaderboard(regenerate_command(folder))
    try:
        given = inputs(args.targets, args.results, args.published, args.name, args.first_complete, args.tables_only,
                       args.across_devices)
    except ValueError as exc:
        raise SiteError(f"{folder / 'README.md'}: its Regenerate command fails: {exc}") from None
    return write(**given), given["report"]


@contextmanager
def one_thread_each():
    """Processes started within start their numerical libraries with one thread: a library's threads wait for one
    another by spinning, and with the cores already taken by the other workers they spin against them (measured on
    a 2-core Xeon: `tabbench report` in one process with OpenBLAS's two threads beside a busy core, 183 s; with one
    thread, 43 s)."""
    import os

    from tabbench.run.isolation import THREAD_VARIABLES

    before = {name: os.environ.get(name) for name in THREAD_VARIABLES}
    os.environ.update(dict.fromkeys(THREAD_VARIABLES, "1"))
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def write_site(results: Path, workers: int | None = None) -> Path:
    """Every published folder's tables and page regenerated by its README's command, then results/index.html and
    the answer atop results/README.md. Run from the checkout's root (the commands name paths from there).

    The folders are independent (each writes its own, reading records only), so they are regenerated in
    ``workers`` processes (default: one a core this process may use, at most one a folder); figures and tables
    are the same as one process writes (tests/test_report_site.py)."""
    import os
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    results = Path(results).resolve()
    if not results.is_dir():
        raise SiteError(f"{results}: no such folder; run from the checkout's root, or name the results root with "
                        "--results DIR")
    folders = published_folders(results)
    if not folders:  # an index of nothing says nothing: say so instead
        raise SiteError(f"{results}: no folder here has a README.md with a 'Regenerate: `tabbench leaderboard ...`' "
                        "line, so there is nothing to index and nothing was written; a run's folder has its own "
                        "page (e.g. runs/quickstart/report.html, from `tabbench leaderboard runs/quickstart`)")
    workers = min(workers or len(os.sched_getaffinity(0)), len(folders)) or 1
    contexts, cwd = {}, Path.cwd()
    os.chdir(results.parent)  # the README commands' paths (results/..., suites/...) are the checkout's
    try:
        if workers == 1:
            done = [_regenerate(folder) for folder in folders]
        else:  # spawned, not forked (a fork of a process whose libraries run threads can hang), a thread each
            with one_thread_each(), ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
                done = list(pool.map(_regenerate, folders))
        for folder, (ctx, report) in zip(folders, done):
            if ctx is not None and report:
                contexts[folder.name] = ctx
                fill_blocks(folder / "README.md", ctx)
    finally:
        os.chdir(cwd)
    write_answer(results / "README.md", contexts)
    (results / "index.html").write_text(index_page(results, contexts))
    return results / "index.html"
