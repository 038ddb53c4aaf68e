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
    gives them; None where the README gives none (a folder of records that another folder's tables pool). A folder
    of records without a README (a user's own run) is regenerated as itself: ``leaderboard FOLDER``."""
    readme = Path(folder) / "README.md"
    if not readme.exists():
        return ["leaderboard", str(Path(folder).resolve())] if (Path(folder) / "records").is_dir() else None
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
                                                           "suites/published/<paper>.yaml (default: the "
                                                           "published: file of the suites named)")
    parser.add_argument("--first-complete", metavar="NAME=M1,M2,...,FALLBACK", action="append", default=[],
                        help="one row NAME holding, per dataset, the first listed method with a complete result "
                             "there (every fold, none failed), else FALLBACK; the listed methods but FALLBACK lose "
                             "their own rows, e.g. 'mlp (most faithful)=mlp-tuned,mlp-paper,mlp'")
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
    """The results folders whose README gives a regenerate command, and those of records without a README, by
    name."""
    return [d for d in sorted(Path(results).iterdir()) if d.is_dir() and regenerate_command(d) is not None]


BEGIN = "<!-- The answer: generated by `tabbench report` from the records (do not edit by hand). -->"
END = "<!-- End of the generated answer; hand-written text follows. -->"


def budget_text(ctx) -> str:
    """A folder's time budgets and the devices its jobs ran on, in words (the index's budget column)."""
    from tabbench.pooling import record_devices

    runs = ctx.all_runs
    budgets = sorted(runs["time_budget_s"].dropna().unique()) if "time_budget_s" in runs else []
    devices = record_devices(runs)
    where = " and ".join(f"{d.upper()} ({(devices == d).sum():,} jobs)" for d in sorted(devices.unique()))
    return (", ".join(f"{b:g} s" for b in budgets) + " a job" if budgets else "no time budget") + f", on {where}"


def answer(contexts: dict) -> list:
    """The registered answers (``register_answers``: a study's question asked of several folders), each from the
    folders' contexts, between BEGIN and END; none where no answer has lines."""
    from tabbench.report.section import load_answers

    lines = [line for registered in load_answers().values() for line in registered.lines(contexts)]
    return [BEGIN, "", *lines, END] if lines else []


def significance_block(ctx, named: tuple = (), who: str = "") -> list:
    """Per metric family and over every dataset: Friedman, Nemenyi's critical difference and the pairs it
    separates (the leaderboard's own tests, tabbench.report.significance), and the cost's Pareto fronts, with the
    time (``tabbench.report.cost.spent``) and memory of the ``named`` methods, called ``who`` (a study's own)."""
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
    for column, what in (("seconds", "time per result"), ("rss_mib", "peak memory")):
        front = cost.pareto_front(table["mean_rank"], table[column])
        on = table[front.reindex(table.index, fill_value=False)].sort_values(column)
        line = f"- **Cost** ({what}): the Pareto front runs " + " → ".join(ctx.show.get(m, m) for m in on.index)
        if column == "seconds" and named:
            line += f"; {who}: " + "; ".join(
                f"{ctx.show.get(m, m)} {table.loc[m, 'seconds']:.3g} s a result, "
                f"{table.loc[m, 'rss_mib']:.0f} MiB" for m in named)
        out.append(line + ".")
    return out


def _job_times_block(ctx) -> list:
    """Per method: its jobs, how many failed and how many its time budget's clock stopped (``cost.budget_table``),
    their seconds on their budget's clock (shortest, median, longest; the whole job's, ``tabbench.report.cost.spent``)
    and the hours they add to, from the records."""
    import pandas as pd

    from tabbench.report.cost import budget_table, spent, spent_label
    from tabbench.report.format import markdown_table
    from tabbench.report.provenance import comparison_note

    runs = ctx.all_runs
    seconds = spent(runs, "wall_seconds")
    by = seconds.groupby(runs["method"]).agg(["min", "median", "max", "sum"]).sort_values("median")
    by["count"] = runs.groupby("method").size()  # every job, those without seconds on record too
    failed = (runs["status"] != "ok").groupby(runs["method"]).sum()
    stopped = budget_table(runs).get("stopped", pd.Series(dtype=float))
    rows = [[ctx.show.get(m, m), f"{int(r['count']):,}", f"{int(failed.get(m, 0)):,}",
             f"{int(stopped[m]):,}" if m in stopped else "–", f"{r['min']:.1f}", f"{r['median']:.1f}",
             f"{r['max']:.1f}", f"{r['sum'] / 3600:.2f}"] for m, r in by.iterrows()]
    return [markdown_table(["method", "jobs", "failed", "stopped by the clock", "shortest s", "median s", "longest s",
                            "hours"], rows), "",
            f"Seconds a job (fit, predict and scoring in its worker): {spent_label(runs, 'wall_seconds')}; hours: "
            f"their sum, {by['sum'].sum() / 3600:,.2f} over the {int(by['count'].sum()):,} jobs. Stopped by the "
            "clock: finished jobs whose training the time budget ended (a job still running at the budget is "
            "killed and counts as failed).", "", *_resumed_note(runs, ctx.show),
            *comparison_note(runs, ctx.show, ctx.sources, "in these times")]


def _resumed_note(runs, show: dict) -> list:
    """The cpu-clock jobs resumed from a checkpoint before records kept the earlier attempts' CPU seconds
    (``fit_seconds_before_resume`` without ``cpu_seconds_before_resume``): their seconds are the last attempt's."""
    from tabbench.clock import CPU

    if "fit_seconds_before_resume" not in runs or "clock" not in runs:
        return []
    short = runs[(runs["clock"] == CPU) & runs["fit_seconds_before_resume"].notna()]
    if "cpu_seconds_before_resume" in runs:
        short = short[short["cpu_seconds_before_resume"].isna()]
    if short.empty:
        return []
    jobs = ", ".join(f"{show.get(m, m)} on {d}" for m, d in zip(short["method"], short["dataset"]))
    return [f"{len(short)} job{'s' if len(short) > 1 else ''} resumed from a checkpoint before records kept the "
            f"earlier attempts' CPU seconds count the last attempt's alone ({jobs}); the fit's wall seconds before "
            f"the resume were {short['fit_seconds_before_resume'].sum():,.0f} in all.", ""]


def _tabarena_block(ctx) -> list:
    """The cells beyond 2 SE of TabArena's published numbers (tabbench.report.against_tabarena.beyond_block)."""
    from tabbench.report.against_tabarena import beyond_block

    return beyond_block(ctx)


#: The built-in blocks a results folder's README may hold between ``<!-- tabbench report: NAME -->`` and
#: ``<!-- end of tabbench report: NAME -->``: `tabbench report` writes them from the folder's records. The core's
#: ``register_readme_blocks`` hook registers them (tabbench/report/plugin.py), a plugin's hook its own.
README_BLOCKS = {"significance": significance_block, "job-times": _job_times_block, "tabarena": _tabarena_block}


def fill_blocks(readme: Path, ctx) -> None:
    """The README's generated blocks (every registered one, tabbench.report.section.load_readme_blocks) rewritten
    from ``ctx``; an unknown block name is an error."""
    from tabbench.report.section import load_readme_blocks

    blocks = load_readme_blocks()
    text = readme.read_text()
    pattern = re.compile(r"(<!-- tabbench report: ([\w-]+) -->\n).*?(<!-- end of tabbench report: \2 -->)", re.S)

    def fill(match):
        name = match[2]
        if name not in blocks:
            raise SiteError(f"{readme}: unknown generated block {name!r}; known: {', '.join(blocks)}")
        return match[1] + "\n".join(blocks[name].lines(ctx)) + "\n" + match[3]

    filled = pattern.sub(fill, text)
    if filled != text:
        readme.write_text(filled)


def write_answer(readme: Path, contexts: dict) -> None:
    """results/README.md with its generated answer (between BEGIN and END) replaced or put first (none: taken out;
    a README that is not there yet starts with a title)."""
    text = readme.read_text() if readme.exists() else "# Results\n"
    generated = "\n".join(answer(contexts))
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + generated + text[text.index(END) + len(END):]
    elif generated:
        title, _, rest = text.partition("\n")
        text = f"{title}\n\n{generated}\n{rest}"
    readme.write_text(text)


def index_page(results: Path, contexts: dict) -> str:
    """results/index.html: every folder's page, what it holds, and the answer's tables."""
    import html as escape

    from tabbench.report.html import SCRIPT, STYLE, from_markdown

    rows = []
    for folder, ctx in contexts.items():
        readme = results / folder / "README.md"
        title = readme.read_text().partition("\n")[0].lstrip("# ") if readme.exists() else f"{folder}: records only"
        n = sum(len(t.datasets) for t in ctx.tables.values())
        rows.append((folder, title, n, ctx.all_runs["method"].nunique(), budget_text(ctx)))
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

    from tabbench.threads import THREAD_VARIABLES

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
                if (folder / "README.md").exists():
                    fill_blocks(folder / "README.md", ctx)
    finally:
        os.chdir(cwd)
    write_answer(results / "README.md", contexts)
    (results / "index.html").write_text(index_page(results, contexts))
    return results / "index.html"
