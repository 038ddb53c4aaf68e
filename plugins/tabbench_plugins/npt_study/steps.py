"""The README block ``npt-steps``: how far an NPT row's place under a time budget follows the steps the budget buys it
(a step attends over every row and column of the table, so steps fall as tables grow: this is also a size effect).

Per NPT row whose records carry ``info.steps_run``: per metric family, Spearman's correlation between its rank on a
dataset (the leaderboard's, ``Context.pooled``) and its median steps there, a failed run counting as no step; then
its mean rank on the datasets where it trained ``MANY`` steps or more, on those where it trained fewer than ``FEW``,
and the range between, the datasets where it was first or last named.
"""

from __future__ import annotations

import pandas as pd

from tabbench.report.format import count
from tabbench_plugins.npt_study.verdict import npt_methods

#: The step counts that split the datasets (median steps of its runs there): inputs, chosen when breadth's records
#: were first read (several hundred whole-table steps against tens), not fitted to them.
FEW, MANY = 300, 500
METRIC_NAMES = {"auroc": "AUROC", "rmse": "RMSE"}


def median_steps(ctx, method: str) -> pd.Series:
    """dataset -> the median ``info.steps_run`` of ``method``'s runs there, a failed run counting 0; datasets
    with no step count on record left out."""
    runs = ctx.selected[ctx.selected["method"] == method]
    info = runs["info"] if "info" in runs else pd.Series([None] * len(runs), runs.index)
    steps = [0 if status != "ok" else i.get("steps_run") if isinstance(i, dict) else None
             for status, i in zip(runs["status"], info)]
    found = pd.Series(steps, index=runs.index, dtype=float)
    return found.groupby(runs["dataset"]).median().dropna()


def _named(datasets: list, labels: dict) -> str:
    return ", ".join(labels.get(d, d) for d in datasets)


def method_lines(ctx, method: str) -> list:
    """The block's paragraph for one NPT row; [] where its records carry no steps."""
    from scipy.stats import spearmanr

    steps = median_steps(ctx, method)
    if steps.empty:
        return []
    ranks = ctx.pooled.loc[method, steps.index]
    worst = len(ctx.pooled)
    name = ctx.show.get(method, method)
    by_family = []
    for t in ctx.tables.values():
        part = [d for d in t.datasets if d in steps.index]
        if len(part) < 3:
            continue
        rho, p = spearmanr(ranks[part], steps[part])
        if rho == rho:
            by_family.append(f"{METRIC_NAMES.get(t.metric, t.metric)} {rho:.2f} (p = {p:.2g}, "
                             f"{count(len(part), 'dataset')})")
    out = []
    if by_family:
        out.append(f"- **{name}**: Spearman's ρ between its rank on a dataset and its median steps there (a failed run "
                   f"counting as no step; a negative ρ: more steps, a better rank): " + "; ".join(by_family) + ".")
    many, few = steps[steps >= MANY].index, steps[steps < FEW].index
    between = steps[(steps >= FEW) & (steps < MANY)].index
    parts = []
    if len(many):
        first = [d for d in many if ranks[d] == 1]
        parts.append(f"on the {count(len(many), 'dataset')} where it trained {MANY} steps or more its mean rank is "
                     f"{ranks[many].mean():.1f} of {worst}" + (f" (first on {_named(first, ctx.labels)})" if first
                                                               else ""))
    if len(few):
        last = [d for d in few if ranks[d] == worst]
        parts.append(f"on the {count(len(few), 'dataset')} where it trained fewer than {FEW}, "
                     f"{ranks[few].mean():.1f}" + (f" (last on {_named(last, ctx.labels)})" if last else ""))
    if len(between):
        lo, hi = ranks[between].idxmin(), ranks[between].idxmax()
        parts.append(f"the {count(len(between), 'dataset')} between rank from {ranks[lo]:g} "
                     f"({ctx.labels.get(lo, lo)}) to {ranks[hi]:g} ({ctx.labels.get(hi, hi)})")
    if parts:
        text = "; ".join(parts)
        out.append(("  " if by_family else f"- **{name}**: ") + text[0].upper() + text[1:] + ".")
    return out


def block(ctx) -> list:
    """Every NPT row's paragraph, best first; a line where none records its steps."""
    out = [line for m in npt_methods(ctx) for line in method_lines(ctx, m)]
    return out or ["No NPT row here records the steps it trained (`info.steps_run`)."]
