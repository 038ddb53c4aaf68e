"""The NPT study's README blocks: NPT's rows against the paper's published numbers (``npt-against-paper``), NPT fold
by fold (``npt-folds``), NPT beside NPT sized for its budget (``npt-at-budget``, at_budget.py) and the harness's
significance block with NPT's time and memory on the cost line (``npt-significance``), whether NPT's place
holds under splits that match the data (``npt-regimes``, verdict.py), and how far its place follows the steps its
budget bought it (``npt-steps``, steps.py)."""

from __future__ import annotations

from tabbench.report.format import markdown_text
from tabbench.report.site import SiteError, significance_block
from tabbench_plugins.npt_study.verdict import npt_methods, regimes_verdict


def paper_comparisons(ctx) -> list[tuple]:
    """(dataset, metric, method, our cell, the paper's (value, se), ours − paper, that in combined standard errors
    or None, within 2 of them: True, False or None where not judged) per NPT row and dataset the paper reports."""
    import math

    import pandas as pd

    from tabbench.report.agreement import within

    out = []
    for t in ctx.tables.values():
        for d in t.datasets:
            for m in npt_methods(ctx):
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
                out.append((d, t.metric, m, cell, paper, gap, gap / combined if combined else None,
                            within(gap, cell.se, paper[1])))
    return out


def paper_table(ctx) -> list:
    """NPT's test metric against the paper's on each dataset: the difference, the difference in combined standard
    errors (√(SE ours² + SE paper²)), and whether it lies within 2 of them."""
    from tabbench.report.format import markdown_table

    rows = [[markdown_text(ctx.labels[d]), f"{metric}", ctx.show.get(m, m), cell.markdown(),
             f"{paper[0]:g}" + (f" ± {paper[1]:g}" if paper[1] is not None else ""), f"{gap:+.3g}",
             f"{in_se:+.2f}" if in_se is not None else "–",
             {None: "not judged (no SE)", True: "within 2 SE", False: "**outside 2 SE**"}[agree]]
            for d, metric, m, cell, paper, gap, in_se, agree in paper_comparisons(ctx)]
    return [markdown_table(["dataset", "metric", "method", "ours (mean ± SE)", "paper", "ours − paper",
                            "in combined SE", "ours against it"], rows)]


def _paper_block(ctx) -> list:
    """A README's table of NPT's rows against the paper's numbers (_paper_table), and how it judges them."""
    return paper_table(ctx) + ["", "In combined SE: (ours − paper) / √(SE ours² + SE paper²); within 2 SE: at most "
                                "2 of them (results/README.md). For RMSE a negative difference is better than the "
                                "paper, for AUROC worse. A mean of fewer folds than the dataset has shows its fold "
                                "count. The paper's small-data NPT numbers are the best of eight variants per "
                                "dataset (its Table 16)."]



def _folds_block(ctx) -> list:
    """Per NPT row and dataset, one line per fold: its test metric, the step of its best validation loss, the test
    metric its budget curve recorded at shorter step budgets, its fit minutes and peak memory; then the mean ± SE."""
    import math

    import pandas as pd

    from tabbench.metrics import PRIMARY
    from tabbench.report.format import markdown_table

    out = []
    runs = ctx.selected[(ctx.selected["status"] == "ok") & ctx.selected["method"].isin(npt_methods(ctx))]
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
    """npt beside npt-budget in the leaderboard's own numbers (at_budget.block)."""
    from tabbench_plugins.npt_study.at_budget import BASE, BUDGET, block

    if BASE not in set(ctx.selected["method"]):
        raise SiteError(f"{ctx.out_dir / 'README.md'}: the npt-at-budget block compares {BASE} with {BUDGET}, and "
                        f"this folder's records have no {BASE}; remove the block or run {BASE}")
    return block(ctx)


def _significance_block(ctx) -> list:
    """The harness's significance block, NPT's rows named on its cost line."""
    return significance_block(ctx, tuple(npt_methods(ctx)), "NPT's rows")


def _steps_block(ctx) -> list:
    """How far each NPT row's place follows the steps its budget bought it (steps.block)."""
    from tabbench_plugins.npt_study.steps import block

    return block(ctx)


BLOCKS = {"npt-against-paper": _paper_block, "npt-folds": _folds_block, "npt-at-budget": _npt_at_budget_block,
          "npt-significance": _significance_block, "npt-regimes": regimes_verdict, "npt-steps": _steps_block}
