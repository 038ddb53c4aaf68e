"""The built-in sections of a leaderboard, in the order ``LEADERBOARD`` lists them, registered in that order by the
core's ``register_sections`` hook (tabbench/report/plugin.py; tabbench.report.section says what a section
is). Each figure-drawing section writes the files it links (figures, CSV) beside leaderboard.md.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from tabbench.measure import machines
from tabbench.report import cost, plots, significance as sig, winrate
from tabbench.report.format import markdown_table, markdown_text, mean_se
from tabbench.report.section import Context, Section

COST_AXES = {"fit_seconds": ("time", "fit seconds per result (geometric mean over datasets)"),
             "rss_mib": ("memory", "peak resident memory of one job, MiB"),
             "gpu_mib": ("GPU memory", "peak GPU memory allocated, MiB")}


def _image(stem: str, alt: str) -> list:
    return [f"![{alt}]({stem}.svg)", "", f"Files: [`{stem}.svg`]({stem}.svg), [`{stem}.png`]({stem}.png).", ""]


def _diagram(out_dir: Path, stem: str, result: sig.Significance, pvalues: pd.DataFrame, test: str) -> list:
    title = f"{test}: mean rank over {result.n_datasets} datasets ({result.family})"
    plots.save(plots.cd_diagram(result.mean_ranks, pvalues, title, result.cd if test == "Nemenyi" else None),
               out_dir / stem, crop=True)
    return _image(stem, f"{test} critical-difference diagram, {result.family}")


def significance_section(out_dir: Path, family: str, ranks: pd.DataFrame, scores: pd.DataFrame | None) -> list:
    """Friedman, then the Nemenyi and Wilcoxon-Holm diagrams the datasets allow; the notes say which not."""
    result = sig.significance(family, ranks, scores)
    md = [f"### Significance ({family})", "", *[f"- {note}" for note in result.notes], ""]
    if result.nemenyi is not None:
        md += _diagram(out_dir, f"cd-nemenyi-{family}", result, result.nemenyi, "Nemenyi")
    if result.wilcoxon is not None:
        md += _diagram(out_dir, f"cd-wilcoxon-{family}", result, result.wilcoxon, "Wilcoxon-Holm")
    return md


def win_rate_section(out_dir: Path, selected: pd.DataFrame) -> list:
    folds = winrate.fold_results(selected)
    if folds.empty:
        return []
    if folds.shape[1] < 2:  # one method beats no one: an empty matrix is no figure
        return ["## Pairwise win rates", "", f"One method ({folds.columns[0]}): no pair to compare.", ""]
    share, _ = winrate.win_rates(folds)
    n_folds = len(folds)
    share.round(4).to_csv(out_dir / "win-rate.csv", index_label="method")
    plots.save(plots.win_rate_heatmap(share, n_folds), out_dir / "win-rate")
    return ["## Pairwise win rates", "",
            f"Share of the {n_folds} (dataset, fold) pairs on which the row's method beats the column's by the "
            "dataset's test metric (seeds averaged; a tie counts half; a result beats a failed or missing one; "
            "a pair where both failed is left out). `win-rate.csv` has the numbers.", "",
            *_image("win-rate", "win-rate matrix")]


def cost_section(out_dir: Path, runs: pd.DataFrame, mean_rank: pd.Series, show=None, sources=()) -> list:
    """``show``: method -> its name in the tables, marks included (leaderboard.display_names); ``sources``: the
    result folders of the records (hardware_note)."""
    show = show or {}
    table = cost.cost_table(runs, mean_rank)
    columns = [c for c in COST_AXES if c != "gpu_mib" or table[c].notna().any()]
    fronts = {c: (COST_AXES[c][1], cost.pareto_front(table["mean_rank"], table[c])) for c in columns}
    drawn = [c for c in columns if table[c].notna().sum() >= 2]  # one point per axis compares nothing
    if drawn:
        plots.save(plots.cost_scatter(table, {c: fronts[c] for c in drawn}), out_dir / "cost")
    figure = _image("cost", "mean rank against fit time and peak memory") if drawn else [
        "No figure: one method has a cost to set against its rank.", ""]
    rows = [[show.get(m, m), f"{r['mean_rank']:.2f}", f"{r['fit_seconds']:.3g}", f"{r['rss_mib']:.0f}",
             "–" if pd.isna(r["gpu_mib"]) else f"{r['gpu_mib']:.0f}",
             ", ".join(COST_AXES[c][0] for c in columns if fronts[c][1][m]) or "–"] for m, r in table.iterrows()]
    return ["## Cost against quality", "",
            "Mean rank over every dataset against the fit time one result costs (all tuning trials of a fold summed, "
            "averaged per dataset, geometric mean over datasets) and the largest peak memory of one job. The "
            "Pareto front (circled) holds the methods no other method beats on both.", "",
            *figure,
            markdown_table(["method", "mean rank", "fit s per result", "peak RSS MiB", "peak GPU MiB",
                            "on the front of"], rows), "", *budget_note(runs, table.index, show), *hardware_note(runs, show, sources)]


def budget_note(runs: pd.DataFrame, order, show) -> list:
    """Under a time budget: per method, the jobs the training clock stopped and those killed (cost.budget_table)."""
    table = cost.budget_table(runs)
    if table.empty:
        return []
    budgets = runs.dropna(subset=["time_budget_s"]).groupby("time_budget_s")["method"].unique()
    if len(budgets) == 1:
        budget = f"Time budget: {budgets.index[0]:g} s a job, the same for every method."
    else:  # suites of one folder with budgets of their own (e.g. a longer one for NPT)
        budget = "Time budgets: " + "; ".join(
            f"{b:g} s a job for {', '.join(show.get(m, m) for m in sorted(methods))}" for b, methods in budgets.items()) + "."
    rows = [[show.get(m, m), *(f"{int(r[c]):,}" for c in ("jobs", "stopped", "killed")),
             "–" if pd.isna(r["steps_median"]) else
             f"{r['steps_median']:.0f} ({r['steps_min']:.0f}-{r['steps_max']:.0f})"]
            for m, r in table.loc[[m for m in order if m in table.index]].iterrows()]
    return [f"{budget} 'stopped': "
            "results whose training the clock ended at 80% of it (the best epoch or iteration reached is kept); "
            "'killed': jobs still running at the budget, failed (timeout) and ranked last; 'steps run': NPT's "
            "training steps, median (range), sized to the budget by `steps: auto`.", "",
            markdown_table(["method", "jobs", "stopped", "killed", "steps run"], rows), ""]


def hardware_note(runs: pd.DataFrame, show=None, sources=()) -> list:
    """When the records were made on more than one machine (by their hardware fingerprints) or clock, which
    methods that touches (tabbench.report.provenance.comparison_note) and the machines: their times are then not
    comparable across machines. Nothing when all share one machine and clock, or none recorded it."""
    from tabbench.report.provenance import comparison_note

    if "environment" not in runs:
        return []
    mixed = comparison_note(runs, show or {}, sources, "in these costs")
    found = machines(runs["environment"], list(runs["source"]) if "source" in runs else None,
                     list(runs["method"]) if "method" in runs else None)
    if len(found) < 2:
        return mixed
    rows = [[markdown_text(m["label"]), f"{m['records']:,}", ", ".join(f"{k} {n:,}" for k, n in m["methods"].items()) or "–",
             ", ".join(f"`{s}`" for s in m["sources"]) or "–"] for m in found]
    return mixed + [f"These records were made on {len(found)} different machines (hardware fingerprints; records from "
            "before the fingerprint was recorded count as one, unknown): fit times and memory compare only "
            "between methods run on the same machine, and under a time budget a method's results depend on the "
            "machine that ran it.", "",
            markdown_table(["machine", "records", "methods (records)", "folders"], rows), ""]


def _cost_rows(frame: pd.DataFrame, show: dict) -> list:
    rows = []
    mib = 1024**2
    for method, part in frame.groupby("method"):
        ok = part[part["status"] == "ok"]
        gpu = ok["peak_gpu_allocated_bytes"].dropna() if "peak_gpu_allocated_bytes" in ok else pd.Series(dtype=float)
        failures = part.loc[part["status"] != "ok", "status"].value_counts()
        rows.append([show.get(method, method), len(part), ", ".join(f"{markdown_text(k)} {v}" for k, v in failures.items()) or "0",
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


def _generated_line(ctx: Context) -> str:
    from tabbench.report.labels import library_versions

    computed = (f"Computed with {library_versions()}: other versions can move the last digits (the bootstrap "
                "Elo intervals).")
    if ctx.sources == [ctx.out_dir]:
        return f"Generated by `tabbench leaderboard` from the records in `records/` (do not edit by hand). {computed}"
    counts = ctx.records["source"].value_counts()
    named = ", ".join(f"`{s}` ({counts.get(str(s), 0):,} records)" for s in ctx.sources)
    return (f"Generated by `tabbench leaderboard` from the records of {named}, the newest record per job key "
            f"(do not edit by hand). {computed}")


class Header(Section):
    """The title, where the numbers come from, and (with the report) links to the figures and LaTeX."""

    def markdown(self, ctx):
        md = [f"# Leaderboard: {ctx.out_dir.name}", "", _generated_line(ctx), ""]
        md += [ctx.restricted, ""] if ctx.restricted else []
        if ctx.report:
            md += ["Figures and tests: a significance section per metric family, [all datasets together]"
                   "(#all-datasets-together), [pairwise win rates](#pairwise-win-rates), [cost against quality]"
                   "(#cost-against-quality); LaTeX tables: [`leaderboard.tex`](leaderboard.tex).", ""]
        return md

    def html(self, ctx, markdown):
        return ""  # the page has a headline of its own (tabbench.report.html)


class Table1(Section):
    """The paper's Table 1: mean rank +- SE per metric family, the published rank beside ours; its CSV rows are
    the mean rank over all datasets (``rank_all``)."""

    csv_late = True

    def markdown(self, ctx):
        from tabbench.report.labels import mark_notes

        tables, published, show = ctx.tables, ctx.published, ctx.show
        families = list(tables.values())
        pooled = ctx.pooled.mean(axis=1).sort_values()
        header, rows = ["method"], []
        for t in families:
            n = len(t.datasets)
            header.append(f"{t.metric} ({n} dataset{'s' if n != 1 else ''})" + (" / published" if published else ""))
        for m in pooled.index:
            cells = [show[m]]
            for t in families:
                ranks = t.ranks
                ours = mean_se(*ranks.loc[m, ["mean_rank", "se"]], 2) if m in ranks.index else "–"
                theirs = published.ranks.get(t.metric, {}).get(m) if published else None
                cells.append(ours + (f" / {mean_se(*theirs, 2) if theirs else '–'}" if published else ""))
            rows.append(cells)
        notes = ["Mean rank ± standard error over the datasets of each metric family (lower is better), methods in "
                 "order of their mean rank over all datasets."]
        if published:
            notes.append(f"Published: {markdown_text(published.name)}, ranked over the publication's own datasets of each family.")
            if published.note_for(published.metrics):
                notes.append(markdown_text(published.note_for(published.metrics)))
        notes += mark_notes(show, published)
        md = ["## Table 1: mean rank per metric family", "", markdown_table(header, rows), "", " ".join(notes), ""]
        return md + ([" ".join(ctx.combined_notes), ""] if ctx.combined_notes else [])

    def csv_rows(self, ctx):
        pooled = ctx.pooled
        return [{"table": "rank_all", "method": m, "dataset": "", "value": rank,
                 "se": pooled.loc[m].std(ddof=1) / math.sqrt(pooled.shape[1]) if pooled.shape[1] > 1 else np.nan}
                for m, rank in pooled.mean(axis=1).items()]

    def latex(self, ctx):
        from tabbench.report.latex import table1

        return table1(ctx)


class Arena(Section):
    """TabArena's Elo, improvability and win rate (tabbench.report.arena)."""

    csv_late = True

    def markdown(self, ctx):
        from tabbench.report import arena

        return arena.markdown(ctx.aggregates, ctx.show)

    def csv_rows(self, ctx):
        from tabbench.report import arena

        return arena.csv_rows(ctx.aggregates)

    def latex(self, ctx):
        from tabbench.report.latex import arena

        return arena(ctx)

    def html(self, ctx, markdown):
        """Its notes only: the page's headline shows its table, with the Elo intervals drawn."""
        from tabbench.report.html import from_markdown

        return from_markdown([line for line in markdown if not line.startswith("|")], ctx.out_dir)


class Variants(Section):
    """For a model run under several method names (an MLP at 50 epochs and at 500): the
    parameters they differ in, per method, so a table's row names can be read without the suites."""

    def markdown(self, ctx):
        from tabbench.store import key_params

        frame, show = ctx.selected, ctx.show
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
                    if not groups:  # not among this method's key params: the model's default
                        cells.append(f"{name} at its default")
                    elif len(groups) == 1:
                        cells.append(f"{name} {next(iter(groups))}")
                    else:
                        cells.append(f"{name} " + ", ".join(f"{v} ({', '.join(ds)})" for v, ds in groups.items()))
                rows.append([show.get(method, method), markdown_text(model), markdown_text("; ".join(cells)) or "–"])
        if not rows:
            return []
        return ["## Methods of one model", "", "Models run under more than one method name, and the parameters "
                "their methods differ in (per dataset where they vary).", "",
                markdown_table(["method", "model", "differs in"], rows), ""]


def published_table(ctx: Context, t) -> list:
    """Our test metric and mean rank next to the published ones, for the datasets both have."""
    published, labels, show = ctx.published, ctx.labels, ctx.show
    metric, ranks = t.metric, t.ranks
    datasets = [d for d in t.datasets if d in published.metrics]
    if not datasets:
        return []
    ours_n, theirs = len(t.datasets), published.ranks.get(metric, {})
    header = ["method", f"mean rank (ours over {ours_n} / published)"] + [markdown_text(labels[d]) for d in datasets]
    rows = []
    for m, r in ranks.iterrows():
        rank = theirs.get(m)
        cells = [f"{mean_se(r['mean_rank'], r['se'], 2)} / {mean_se(*rank, 2) if rank else '–'}"]
        for d in datasets:
            value = published.metrics[d].get(m) or published.metrics[d].get(ctx.model_of(m))  # its own digits
            shown = "–" if not value else f"{value[0]:g}" + (f" ± {value[1]:g}" if value[1] is not None else "")
            cells.append(f"{t.cell(m, d).markdown()} / {shown}")
        rows.append([show[m]] + cells)
    notes = [f"Each cell: ours / published. Published ranks are over the publication's datasets of this task, "
             f"ours over this run's {ours_n}."]
    if any(labels[d] != d for d in datasets):  # a subset's label names it
        notes.append("Subset or stand-in data (labelled above) is not the published dataset: compare with care.")
    if published.note_for(datasets):
        notes.append(markdown_text(published.note_for(datasets)))
    return [f"### Against {markdown_text(published.name)} (test {metric})", "", markdown_table(header, rows), "", *notes, ""]


class Families(Section):
    """Per metric family: the rank table, the test metric per dataset (format.Cell), the published numbers
    beside ours and, with the report, the family's significance tests."""

    def markdown(self, ctx):
        from tabbench.report.labels import DEVICE_NOTE, FOLDS_NOTE, part_searched, part_searched_note

        show, labels, mark_note, md = ctx.show, ctx.labels, ctx.mark_note, []
        for task, t in ctx.tables.items():
            metric, ranks = t.metric, t.ranks
            md += [f"## {t.title}: average rank", "",
                   f"Rank by test {metric} ({'higher' if t.higher else 'lower'} is better) within each dataset, "
                   "averaged over datasets ± standard error.", ""]
            header = ["method", "mean rank"] + [markdown_text(labels[d]) for d in t.datasets]
            rows = [[show[m], mean_se(r["mean_rank"], r["se"], 2)] + [f"{r[d]:g}" for d in t.datasets]
                    for m, r in ranks.iterrows()]
            md += [markdown_table(header, rows), "", *mark_note]
            md.append(f"Ties share the better rank. A method without a complete result on a dataset (missing, any "
                      f"fold failed, or fewer folds than the dataset has) takes the worst rank, {len(ranks)}.")
            if t.incomplete:
                md.append("Worst rank imputed for: " + "; ".join(
                    f"{m} on {d} ({why})" for m, d, why in t.incomplete) + ".")
            md += ["", f"### Test {metric} per dataset (mean ± standard error over folds and seeds)", ""]
            rows = [[show[m]] + [t.cell(m, d).markdown() for d in t.datasets] for m in ranks.index]
            md += [markdown_table(["method"] + [markdown_text(labels[d]) for d in t.datasets], rows), "", *mark_note]
            md += [FOLDS_NOTE, ""] if t.partial else []
            md += [DEVICE_NOTE, ""] if t.devices else []
            md += part_searched_note(part_searched(ctx.all_runs[ctx.all_runs["task"] == task]), show)
            if ctx.published is not None:
                md += published_table(ctx, t) + mark_note
            if ctx.report:
                columns = t.datasets
                md += significance_section(ctx.out_dir, metric, ranks[columns], t.mean.loc[ranks.index, columns])
        return md

    def csv_rows(self, ctx):
        published, rows = ctx.published, []
        for t in ctx.tables.values():
            metric = t.metric
            for m, r in t.ranks.iterrows():
                row = {"table": f"rank_{metric}", "method": m, "dataset": "", "value": r["mean_rank"], "se": r["se"]}
                if published is not None and m in published.ranks.get(metric, {}):
                    row["published"], row["published_se"] = published.ranks[metric][m]
                rows.append(row)
                for d in t.datasets:
                    row = {"table": f"test_{metric}", "method": m, "dataset": d,
                           "value": t.mean.loc[m, d], "se": t.se.loc[m, d], "rank": r[d]}
                    if published is not None and m in published.metrics.get(d, {}):
                        row["published"], row["published_se"] = published.metrics[d][m]
                    rows.append(row)
        return rows

    def latex(self, ctx):
        from tabbench.report.latex import families

        return families(ctx)


class Together(Section):
    """Every dataset's ranks pooled over the families, and their significance tests."""

    report_only = True

    def markdown(self, ctx):
        pooled = ctx.pooled
        return ["## All datasets together", "", f"Every dataset's rank from the tables above ({pooled.shape[1]} "
                "datasets), a method absent from a family at the worst rank.", ""] + \
            significance_section(ctx.out_dir, "all", pooled, None)


class WinRates(Section):
    report_only = True

    def markdown(self, ctx):
        return win_rate_section(ctx.out_dir, ctx.selected)


class CostAgainstQuality(Section):
    report_only = True

    def markdown(self, ctx):
        return cost_section(ctx.out_dir, ctx.all_runs, ctx.pooled.mean(axis=1), ctx.show, ctx.sources)

    def html(self, ctx, markdown):
        from tabbench.report.html import from_markdown

        return from_markdown(markdown, ctx.out_dir) + (
            '<p class="note">Time is per result, not per 1,000 rows: the records do not hold the number of rows a '
            "job trained on.</p>")


class BudgetCurves(Section):
    report_only = True

    def markdown(self, ctx):
        from tabbench.metrics import PRIMARY
        from tabbench.report.budget import budget_section
        from tabbench.report.family import dataset_splits

        return budget_section(ctx.out_dir, ctx.selected, PRIMARY, ctx.published, ctx.show,
                              dataset_splits(ctx.selected, ctx.splits))


class EloAgainstBudget(Section):
    """Mean ranks and Elo at each budget point the records carry (tabbench.report.elo_budget)."""

    report_only = True

    def markdown(self, ctx):
        from tabbench.report.elo_budget import section
        from tabbench.report.family import dataset_splits

        return section(ctx.out_dir, ctx.selected, ctx.show, dataset_splits(ctx.selected, ctx.splits), ctx.sources)


class CostsPerJob(Section):
    def markdown(self, ctx):
        return ["## Costs per job", "", "Mean fit and predict seconds and the largest peak resident memory of one "
                "job (above its worker's baseline) over successful jobs; peak GPU memory allocated when CUDA was used.",
                "Failures are counted over all jobs, tuning trials included.", "",
                markdown_table(["method", "jobs", "failures", "fit s", "predict s", "peak RSS MiB", "peak GPU MiB"],
                               _cost_rows(ctx.all_runs, ctx.show)), "", *ctx.mark_note]


class SelectedParams(Section):
    """Tuned methods: the configuration chosen per dataset and fold, written to selected_params.csv."""

    def markdown(self, ctx):
        from tabbench.report.family import RUN_KEYS

        if not ctx.all_runs["trial"].notna().any():
            return []
        selected = ctx.selected
        params = selected[selected["trial"].notna()][RUN_KEYS + ["trial", "params"]]
        params = params.assign(params=params["params"].map(lambda p: json.dumps(p, sort_keys=True)))
        params.to_csv(ctx.out_dir / "selected_params.csv", index=False)
        return ["Tuned methods: the configuration chosen per dataset and fold (best validation score) is in "
                "`selected_params.csv`.", ""]


from tabbench.report.regimes import SplitRegimes  # noqa: E402 - the sections' own module
from tabbench.report.against_tabarena import AgainstTabArena, TabArenaBoard  # noqa: E402 - the sections' own module

#: The built-in sections in the order leaderboard.md shows them; a plugin's are placed among them by their ``after``.
LEADERBOARD = [Header(), Table1(), Arena(), SplitRegimes(), TabArenaBoard(), Variants(), Families(), AgainstTabArena(),
               Together(), WinRates(), CostAgainstQuality(), BudgetCurves(), EloAgainstBudget(), CostsPerJob(),
               SelectedParams()]
