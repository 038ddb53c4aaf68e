"""The README block ``npt-at-budget`` (issue 51: is NPT's place in results/breadth an artifact of its budget?): NPT at
the paper's base configuration (``npt``, which trains few steps in a CPU budget) beside NPT sized for the budget
(``npt-budget``: the largest rung of its size ladder that trains enough steps in the job's budget, docs/npt.md), in
numbers the leaderboard already computes for the folder. It computes no statistic of its own:

- per method: its Elo and 95% interval and the mean rank over all datasets (the context's aggregates,
  tabbench.report.arena, and pooled ranks, tabbench.report.family), its place by each among all methods, the methods
  Nemenyi's critical difference separates from it over all datasets and within each metric family (the
  `significance` block's tests, tabbench.report.significance), the median of its runs' ``info.steps_run`` and, where
  its records name one, how often each size rung was chosen (``info.size_rung``);
- head to head: per split, which of the two has the better primary metric (tabbench.report.winrate.fold_results:
  seeds averaged, no result where a run failed, a result beating none), and per family the Wilcoxon signed-rank
  test over the datasets where both have a complete result (significance.wilcoxon_holm, the pairwise test of the
  leaderboard's Wilcoxon-Holm diagrams; for one pair Holm changes nothing), run where that many datasets could
  reject at all (significance.wilcoxon_smallest_p);
- Elo against budget, where the records carry budget points (tabbench.report.elo_budget): each one's Elo at each
  point, the point from which it stays at its final Elo and whether it is still rising, by that module's definitions.

Until npt-budget has a record on every split npt has, the block gives only the counts: a README holding it never
states a comparison resting on part of the splits.
"""

from __future__ import annotations

import statistics
from collections import Counter

import pandas as pd

from tabbench.report.format import count
from tabbench.report.significance import ALPHA

BASE, BUDGET = "npt", "npt-budget"
METHODS = (BASE, BUDGET)


def _splits(selected: pd.DataFrame, method: str) -> set:
    runs = selected[selected["method"] == method]
    return set(zip(runs["dataset"], runs["repeat"], runs["fold"]))


def coverage(ctx) -> tuple[int, int]:
    """(the splits of npt that npt-budget has a record on, the splits npt has)."""
    base = _splits(ctx.selected, BASE)
    return len(base & _splits(ctx.selected, BUDGET)), len(base)


def _infos(ctx, method: str) -> pd.Series:
    runs = ctx.selected[ctx.selected["method"] == method]
    if "info" not in runs:
        return pd.Series([], dtype=object)
    return runs["info"].map(lambda i: i if isinstance(i, dict) else {})


def steps_trained(ctx, method: str) -> list:
    """The ``info.steps_run`` of each of the method's runs that records it."""
    return [i["steps_run"] for i in _infos(ctx, method) if isinstance(i.get("steps_run"), (int, float))]


def rungs_chosen(ctx, method: str) -> Counter:
    """How many of the method's runs chose each size rung (``info.size_rung``); empty for a fixed size."""
    return Counter(i["size_rung"] for i in _infos(ctx, method) if i.get("size_rung"))


def _place(values: pd.Series, method: str, lower_is_better: bool) -> str:
    from tabbench.report.family import place

    return f"{place(values, method, lower_is_better)} of {len(values)}"


def _names(ctx, methods) -> str:
    return ", ".join(ctx.show.get(m, m) for m in methods) or "none"


def _against(pairs, method: str) -> tuple[list, list]:
    """(the methods significantly ahead of ``method``, those it is significantly ahead of)."""
    return [a for a, b in pairs if b == method], [b for a, b in pairs if a == method]


def _tests(ctx) -> list:
    """(title, Significance, separated pairs or None) per family and over all datasets, as the block above runs them."""
    from tabbench.report.significance import separated_pairs, significance, significance_families

    out = []
    for family, title, ranks, scores in significance_families(ctx):
        result = significance(family, ranks, scores)
        out.append((title, result, separated_pairs(result)))
    return out


def _method_rows(ctx, tests) -> list:
    from tabbench.report.elo_budget import _elo

    elo = ctx.aggregates.table if ctx.aggregates is not None else None
    mean = ctx.pooled.mean(axis=1)
    _, _, pairs = tests[-1]  # over all datasets
    rows = []
    for m in METHODS:
        ahead, behind = _against(pairs, m) if pairs is not None else ([], [])
        steps = steps_trained(ctx, m)
        rungs = rungs_chosen(ctx, m)
        rows.append([
            ctx.show.get(m, m),
            "–" if elo is None else _elo(*elo.loc[m, ["elo", "elo_low", "elo_high"]]),
            "–" if elo is None else _place(elo["elo"], m, lower_is_better=False),
            f"{mean[m]:.2f}", _place(mean, m, lower_is_better=True),
            "not tested" if pairs is None else _names(ctx, ahead),
            "not tested" if pairs is None else _names(ctx, behind),
            f"{statistics.median(steps):,g}" if steps else "–",
            ", ".join(f"{name} ×{n}" for name, n in sorted(rungs.items(), key=lambda r: (-r[1], r[0]))) or "–"])
    return rows


def _family_lines(ctx, tests) -> list:
    """Per family, the methods its critical difference separates from each NPT method."""
    out = []
    for title, result, pairs in tests[:-1]:
        if pairs is None:
            out.append(f"- {title} ({count(result.n_datasets, 'dataset')}): no pair separated. "
                       + " ".join(result.notes))
            continue
        parts = []
        for m in METHODS:
            ahead, behind = _against(pairs, m)
            parts.append(f"{ctx.show.get(m, m)} significantly behind {_names(ctx, ahead)}, ahead of "
                         f"{_names(ctx, behind)}")
        out.append(f"- {title} ({result.n_datasets} datasets, critical difference {result.cd:.2f} ranks): "
                   + "; ".join(parts) + ".")
    return out


def head_to_head(ctx) -> pd.DataFrame:
    """Per family (its metric) and over all: the splits where npt-budget's primary metric is better than npt's,
    worse, equal, and of those the splits where one of the two has no result (a result beats none, as the win
    rates count it); a split where neither has one is left out."""
    from tabbench.report.winrate import fold_results

    folds = fold_results(ctx.selected)
    metric_of = {d: t.metric for t in ctx.tables.values() for d in t.datasets}
    budget, base = folds[BUDGET], folds[BASE]
    has_budget, has_base = budget.notna(), base.notna()
    frame = pd.DataFrame({
        "metric": folds.index.get_level_values("dataset").map(metric_of),
        "budget_better": (has_budget & has_base & (budget > base)) | (has_budget & ~has_base),
        "base_better": (has_budget & has_base & (base > budget)) | (has_base & ~has_budget),
        "equal": has_budget & has_base & (budget == base),
        "one_failed": has_budget ^ has_base}, index=folds.index)
    frame = frame[has_budget | has_base]
    per = frame.groupby("metric", sort=False)[["budget_better", "base_better", "equal", "one_failed"]].sum()
    per = per.reindex([t.metric for t in ctx.tables.values()])
    per.loc["all"] = per.sum()
    per.insert(0, "splits", per[["budget_better", "base_better", "equal"]].sum(axis=1))
    return per.astype(int)


def paired_test(t) -> tuple[int, float | None, int | None]:
    """One family's Wilcoxon signed-rank test of npt against npt-budget over the datasets where both have a complete
    result: (those datasets, the p-value or None where they are too few to reject, the number that would do)."""
    from tabbench.report.significance import wilcoxon_holm, wilcoxon_smallest_p

    scores = t.mean.reindex(list(METHODS)).dropna(axis=1)
    n = scores.shape[1]
    if not n or wilcoxon_smallest_p(n) >= ALPHA:
        return n, None, next(k for k in range(max(n, 1), 64) if wilcoxon_smallest_p(k) < ALPHA)
    return n, float(wilcoxon_holm(scores).loc[BASE, BUDGET]), None


def _head_to_head_lines(ctx, tests) -> list:
    from tabbench.report.format import markdown_table
    per = head_to_head(ctx)
    families = {t.metric: t for t in ctx.tables.values()}
    titles = {result.family: title for title, result, _ in tests} | {"all": "All families"}
    rows = []
    for metric, r in per.iterrows():
        if metric == "all":
            test = "–"
        else:
            n, p, needed = paired_test(families[metric])
            test = (f"p = {p:.3g} over {count(n, 'dataset')}" if p is not None else
                    f"not run: {count(n, 'dataset')}, at least {needed} needed to reject at α = {ALPHA}")
        rows.append([titles[metric], f"{r['splits']}", f"{r['budget_better']}", f"{r['base_better']}", f"{r['equal']}",
                     f"{r['one_failed']}", test])
    b, a = ctx.show.get(BUDGET, BUDGET), ctx.show.get(BASE, BASE)
    return [markdown_table(["family", "splits", f"{b} better", f"{a} better", "equal", "of them, one failed",
                            "Wilcoxon signed-rank test (datasets)"], rows), "",
            f"Per split the primary metric of each (seeds averaged); a run that failed has no result and loses to "
            f"one that has (the win rates' rule). The test pairs the two methods' means per dataset where both have "
            "a complete result, per family (the leaderboard's Wilcoxon-Holm test, for this one pair); it is run "
            f"where the family has enough such datasets for its smallest possible p-value to lie below {ALPHA}."]


def _budget_lines(ctx) -> list:
    from tabbench.report.elo_budget import _elo, _seconds, elo_against_budget
    from tabbench.report.family import dataset_splits
    from tabbench.report.format import markdown_table

    result = elo_against_budget(ctx.selected, dataset_splits(ctx.selected, ctx.splits))
    if result is None:
        return ["Elo against budget: the records carry no budget points yet."]
    out = []
    if result.reason:
        out.append(f"Elo against budget: {result.reason}")
    present = [m for m in METHODS if m in set(result.table["method"])]
    if present and not result.reason:
        elo, low, high = result.at("elo"), result.at("elo_low"), result.at("elo_high")
        header = ["method", *map(_seconds, result.points)]
        rows = [[ctx.show.get(m, m), *(_elo(elo.loc[m, p], low.loc[m, p], high.loc[m, p]) for p in result.points)]
                for m in present]
        notes = []
        if len(result.points) > 1:  # where it reaches its final Elo: elo_budget's definitions
            reached = result.reached()
            last, before = result.points[-1], result.points[-2]
            header += ["reaches its final Elo at", f"change from {_seconds(before)}",
                       f"still rising at {_seconds(last)}"]
            for row, m in zip(rows, present):
                row += [_seconds(reached.loc[m, "reached_at_s"]), f"{reached.loc[m, 'change']:+.0f}",
                        "yes" if reached.loc[m, "rising"] else "no"]
            notes = ["", "Reaches its final Elo: the first point from which its Elo stays inside its interval at the "
                     "last point; still rising: its Elo at the last point lies above the upper end of its interval at "
                     "the point before (tabbench/report/elo_budget.py)."]
        out += [f"Elo (95% interval) at each budget point, among the {result.table['method'].nunique()} methods "
                "ranked there (leaderboard.md, \"Elo against budget\"):", "", markdown_table(header, rows), *notes]
    for m in METHODS:
        if m in result.left_out:
            unknown, runs = result.left_out[m]
            out.append(f"{ctx.show.get(m, m)} is left out of Elo against budget: {unknown} of its {runs} runs carry no "
                       "budget points and their fits ran past a point, so their state there is unknown.")
    return out


def block(ctx) -> list:
    """The README block's lines (the module docstring); ``ctx``'s records hold npt (tabbench.report.site checks)."""
    from tabbench.report.format import markdown_table

    covered, total = coverage(ctx)
    if covered < total:
        return [f"{BUDGET}: {covered} of {total} splits so far; the comparison waits for the rest."]
    tests = _tests(ctx)
    _, overall, pairs = tests[-1]
    mean = overall.mean_ranks
    gap = abs(mean[BASE] - mean[BUDGET])
    between = (f"Nemenyi over all {overall.n_datasets} datasets: mean ranks {mean[BASE]:.2f} ({BASE}) and "
               f"{mean[BUDGET]:.2f} ({BUDGET}), {gap:.2f} apart; critical difference {overall.cd:.2f}: "
               + ("separated." if gap > overall.cd else "not separated.") if pairs is not None else
               "Over all datasets no pair is separated: " + " ".join(overall.notes))
    out = [f"{BUDGET}: {covered} of {total} splits, every split {BASE} has. Over all {overall.n_datasets} datasets "
           f"and {len(mean)} methods:", "",
           markdown_table(["method", "Elo (95% interval)", "place by Elo", "mean rank", "place by mean rank",
                           "significantly ahead of it", "significantly behind it", "median steps trained",
                           "size rung chosen (runs)"], _method_rows(ctx, tests)), "",
           "Elo: bencheval's, as leaderboard.md's TabArena aggregates; mean rank over all datasets, a failed or "
           "missing result at the worst rank. Significantly ahead or behind: further apart in mean rank over all "
           "datasets than Nemenyi's critical difference after Friedman's test rejects (the `significance` block's "
           "tests). Steps: each run's `info.steps_run`; size rung: `info.size_rung`.", "", between, "",
           "Within each metric family (Nemenyi's critical difference over the family's datasets):", "",
           *_family_lines(ctx, tests), "", "Head to head:", "", *_head_to_head_lines(ctx, tests), ""]
    return out + _budget_lines(ctx)
