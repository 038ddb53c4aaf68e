"""The report's sections of leaderboard.md, each writing the files it links (figures, CSV)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tabbench.run.measure import machines
from tabbench.report import cost, plots, significance as sig, winrate
from tabbench.report.format import markdown_table

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
    share, _ = winrate.win_rates(folds)
    n_folds = len(folds)
    share.round(4).to_csv(out_dir / "win-rate.csv", index_label="method")
    plots.save(plots.win_rate_heatmap(share, n_folds), out_dir / "win-rate")
    return ["## Pairwise win rates", "",
            f"Share of the {n_folds} (dataset, fold) pairs on which the row's method beats the column's by the "
            "dataset's test metric (seeds averaged; a tie counts half; a result beats a failed or missing one; "
            "a pair where both failed is left out). `win-rate.csv` has the numbers.", "",
            *_image("win-rate", "win-rate matrix")]


def cost_section(out_dir: Path, runs: pd.DataFrame, mean_rank: pd.Series, show=None) -> list:
    """``show``: method -> its name in the tables, marks included (leaderboard.display_names)."""
    show = show or {}
    table = cost.cost_table(runs, mean_rank)
    columns = [c for c in COST_AXES if c != "gpu_mib" or table[c].notna().any()]
    fronts = {c: (COST_AXES[c][1], cost.pareto_front(table["mean_rank"], table[c])) for c in columns}
    plots.save(plots.cost_scatter(table, fronts), out_dir / "cost")
    rows = [[show.get(m, m), f"{r['mean_rank']:.2f}", f"{r['fit_seconds']:.3g}", f"{r['rss_mib']:.0f}",
             "–" if pd.isna(r["gpu_mib"]) else f"{r['gpu_mib']:.0f}",
             ", ".join(COST_AXES[c][0] for c in columns if fronts[c][1][m]) or "–"] for m, r in table.iterrows()]
    return ["## Cost against quality", "",
            "Mean rank over every dataset against the fit time one result costs (all tuning trials of a fold summed, "
            "averaged per dataset, geometric mean over datasets) and the largest peak memory of one job. The "
            "Pareto front (circled) holds the methods no other method beats on both.", "",
            *_image("cost", "mean rank against fit time and peak memory"),
            markdown_table(["method", "mean rank", "fit s per result", "peak RSS MiB", "peak GPU MiB",
                            "on the front of"], rows), "", *budget_note(runs, table.index, show), *hardware_note(runs)]


def budget_note(runs: pd.DataFrame, order, show) -> list:
    """Under a time budget: per method, the jobs the training clock stopped and those killed (cost.budget_table)."""
    table = cost.budget_table(runs)
    if table.empty:
        return []
    budgets = sorted(runs["time_budget_s"].dropna().unique())
    rows = [[show.get(m, m), *(f"{int(r[c]):,}" for c in ("jobs", "stopped", "killed")),
             "–" if pd.isna(r["steps_median"]) else
             f"{r['steps_median']:.0f} ({r['steps_min']:.0f}-{r['steps_max']:.0f})"]
            for m, r in table.loc[[m for m in order if m in table.index]].iterrows()]
    return [f"Time budget: {', '.join(f'{b:g}' for b in budgets)} s a job, the same for every method. 'stopped': "
            "results whose training the clock ended at 80% of it (the best epoch or iteration reached is kept); "
            "'killed': jobs still running at the budget, failed (timeout) and ranked last; 'steps run': NPT's "
            "training steps, median (range), sized to the budget by `steps: auto`.", "",
            markdown_table(["method", "jobs", "stopped", "killed", "steps run"], rows), ""]


def hardware_note(runs: pd.DataFrame) -> list:
    """When the records were made on more than one machine (by their hardware fingerprints), which ones:
    their times are then not comparable across machines. Nothing when all share one, or none recorded it."""
    if "environment" not in runs:
        return []
    found = machines(runs["environment"], list(runs["source"]) if "source" in runs else None,
                     list(runs["method"]) if "method" in runs else None)
    if len(found) < 2:
        return []
    rows = [[m["label"], f"{m['records']:,}", ", ".join(f"{k} {n:,}" for k, n in m["methods"].items()) or "–",
             ", ".join(f"`{s}`" for s in m["sources"]) or "–"] for m in found]
    return [f"These records were made on {len(found)} different machines (hardware fingerprints; records from "
            "before the fingerprint was recorded count as one, unknown): fit times and memory compare only "
            "between methods run on the same machine, and under a time budget a method's results depend on the "
            "machine that ran it.", "",
            markdown_table(["machine", "records", "methods (records)", "folders"], rows), ""]
