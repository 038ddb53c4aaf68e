"""The NPT study's answer atop the report site (results/README.md and results/index.html, the harness's
``register_answers`` hook): where NPT stands against the paper's field and the models that came after it.

It opens with the verdict in a few generated sentences, each linking to its evidence: where NPT sized for its budget
stands in breadth and against whom that is settled (verdict.py), where the paper's configuration stands, whether
NPT's place holds under splits that match the data (matching-splits), and whether the paper's exact numbers
reproduce on a GPU. Then, per benchmark of ANSWER that has a page, its short table, its
budget and what Friedman and Nemenyi separate.
"""

from __future__ import annotations

from tabbench.report import family
from tabbench.report.format import count
from tabbench.report.leaders import leaders_sentence
from tabbench.report.site import budget_text
from tabbench_plugins.npt_study.blocks import paper_comparisons, paper_table
from tabbench_plugins.npt_study.verdict import npt_methods, pairs, regimes_verdict, standing

#: The benchmarks the answer summarises, in its order: (folder, what it asks).
ANSWER = [
    ("uci-small-npt-paper-gpu", "The paper's protocol and exact small-data NPT configuration, on a GPU"),
    ("uci-small", "The paper's four small UCI sets and protocol, every method at a reduced CPU budget"),
    ("uci-cpu", "Every UCI dataset we have run, in one table"),
    ("breadth", "Breadth: many real datasets, every model at its defaults under one CPU budget"),
]
#: The folder whose leaderboard gives the verdict on NPT's place, and the folder of the paper's exact configuration.
VERDICT, REPRODUCTION = "breadth", "uci-small-npt-paper-gpu"
#: The folder of paired split regimes (tables under a split that matches the data and under a random one).
REGIMES = "matching-splits"
#: NPT sized for its budget and at the paper's base configuration, as breadth names them.
SIZED, PAPER = "npt-budget", "npt"


def _elo_place(ctx, method: str) -> str | None:
    """"third of 14 by Elo (1254, 95% interval 1193 to 1326)", or None where the method has no Elo."""
    elo = ctx.aggregates.table if ctx.aggregates is not None else None
    if elo is None or method not in elo.index:
        return None
    place = family.place(elo["elo"], method, lower_is_better=False)
    low, high = elo.loc[method, ["elo_low", "elo_high"]]
    interval = "" if low != low or high != high else f", 95% interval {low:.0f} to {high:.0f}"
    return f"{_ordinal(place)} of {len(elo)} by Elo ({elo.loc[method, 'elo']:.0f}{interval})"


def _ordinal(n: int) -> str:
    words = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh", 8: "eighth",
             9: "ninth", 10: "tenth", 11: "eleventh", 12: "twelfth", 13: "thirteenth", 14: "fourteenth"}
    return words.get(n, f"{n}th")


def verdict(contexts: dict) -> list:
    """The few sentences that open the answer, each linking to its evidence; none whose folder is absent."""
    out = []
    ctx = contexts.get(VERDICT)
    if ctx is not None:
        found = pairs(ctx)
        n = ctx.pooled.shape[1]
        link = f"[{VERDICT}]({VERDICT}/report.html)"
        for method, what in ((SIZED, "NPT sized for its budget"), (PAPER, "NPT at the paper's base configuration")):
            place = _elo_place(ctx, method) if method in npt_methods(ctx) else None
            if place is None:
                continue
            out.append(f"- **{what}** (`{method}`) is {place} over {n} datasets in {link}, {budget_text(ctx)}. "
                       f"By Wilcoxon-Holm over the datasets it is {standing(ctx.show, method, found)}."
                       + imputed_text(ctx, method))
        if out:
            among = leaders_sentence(ctx)
            if among:
                out.append(f"- **Which pairs among the leaders are settled** ({link}): {among}")
            out.append(how_settled(ctx))
    regimes = regimes_verdict(contexts[REGIMES]) if REGIMES in contexts else []
    if regimes:
        scale = resplit_scale(contexts[REGIMES], ctx) if ctx is not None else ""
        out.append(f"- **Under splits that match the data** ([{REGIMES}]({REGIMES}/report.html)): {regimes[0]}"
                   + scale)
    gpu = contexts.get(REPRODUCTION)
    if gpu is not None:
        judged = [agree for *_, agree in paper_comparisons(gpu) if agree is not None]
        if judged:
            out.append(f"- **The paper's exact configuration on a GPU** reproduces its published numbers within 2 "
                       f"combined standard errors on {sum(judged)} of {count(len(judged), 'dataset')} "
                       f"([{REPRODUCTION}]({REPRODUCTION}/report.html)).")
    return out


def imputed(ctx) -> dict:
    """method -> [(dataset, why)] for every result ranked at the worst rank in ``ctx``'s tables: a failed, unscored
    or partial result or none at all ("not run"), as the family's ``incomplete`` gives them."""
    out = {}
    for table in ctx.tables.values():
        for method, dataset, why in table.incomplete:
            out.setdefault(method, []).append((dataset, why))
    return out


def imputed_text(ctx, method: str, shown: int = 3) -> str:
    """' Worst ranks imputed for a failed or missing result: 1 of its own (caravan: 1 of 1 runs failed); 2 of
    the other methods' (tabr 2).', or '' where the comparison imputes none: what the place and the pairs rest on
    besides results."""
    found = imputed(ctx)
    if not found:
        return ""
    own = found.get(method, [])
    listed = ", ".join(f"{d}: {why}" for d, why in own[:shown]) + (f", and {len(own) - shown} more"
                                                                    if len(own) > shown else "")
    others = {m: len(v) for m, v in found.items() if m != method}
    return (" Worst ranks imputed for a failed or missing result: "
            + (f"{len(own)} of its own ({listed})" if own else "none of its own") + "; "
            + (f"{sum(others.values())} of the other methods' ("
               + ", ".join(f"{ctx.show.get(m, m)} {k}" for m, k in sorted(others.items(), key=lambda x: (-x[1], x[0])))
               + ")" if others else "none of the other methods'") + ".")


def resplit_scale(regimes_ctx, verdict_ctx) -> str:
    """' Per table the two regimes' orders agree by Kendall's tau median 0.26 (14 tables); two random splits of one
    of breadth's tables, by a median 0.36 (21 tables): ...', or '' where either side has no tau: how far the regime
    reorders the methods, against how far re-splitting alone does (tabbench.report.stability.split_taus, on the
    verdict's tables: the regimes' folder has one split a table and regime)."""
    from tabbench.report.regimes import compare
    from tabbench.report.stability import dataset_taus, estimated

    cmp = compare(regimes_ctx)
    regime = [tau for *_, tau in cmp.per_dataset.values() if tau == tau] if cmp is not None else []
    table = estimated(verdict_ctx)[0] if regime else None
    resplit = dataset_taus(table) if table is not None else []  # one value a table: the test's samples independent
    return scale_sentence(regime, resplit) if regime and resplit else ""


def scale_sentence(regime: list, resplit: list) -> str:
    """The sentence of ``resplit_scale`` from its two samples of Kendall's tau, one value a table each, with a
    two-sided Mann-Whitney test of whether they differ (the two come from different tables, so it compares what
    each condition does to a table's order, not the same tables twice)."""
    import statistics

    from scipy.stats import mannwhitneyu

    p = float(mannwhitneyu(regime, resplit, alternative="two-sided").pvalue)
    told = p < 0.05
    if told and statistics.median(regime) < statistics.median(resplit):
        what = "the regime reorders the methods more than re-splitting alone does"
    elif told:
        what = "the regime reorders the methods less than re-splitting alone does"
    else:
        what = "the regime's reordering is not told apart from what re-splitting alone does"
    return (f" Per table the two regimes' orders agree by Kendall's τ with a median of "
            f"{statistics.median(regime):.2f} ({count(len(regime), 'table')}); two random splits of one of "
            f"{VERDICT}'s tables, with a median of {statistics.median(resplit):.2f} (a table's mean over its pairs of "
            f"splits, {count(len(resplit), 'table')}; its README's split-stability block): {what} (Mann-Whitney "
            f"p = {p:.2g}, the two on different tables).")


def how_settled(ctx) -> str:
    """The verdict's sentence on how far breadth's splits settle a dataset's ranking: how many of its datasets rest
    on one split, or, where none does, how many have the splits bencheval's estimate says a stable ranking needs
    (tabbench.report.stability, the README's split-stability block)."""
    from tabbench.report.stability import TARGET, estimated

    selected = ctx.selected
    splits = selected.groupby("dataset").apply(lambda d: len(set(zip(d["repeat"], d["fold"]))))
    single, n = int((splits == 1).sum()), len(splits)
    block = f"the split-stability block of [its README]({VERDICT}/README.md)"
    if single:
        return (f"- **How settled**: {single} of breadth's {n} datasets have one split each, so a dataset's rank "
                f"there rests on one test part; {block} says how many splits a stable ranking needs, and the "
                "intervals above overlap where a pair is not settled.")
    table, _, reason = estimated(ctx)
    if table is None:
        return (f"- **How settled**: each of breadth's {n} datasets has {splits.min()} splits or more; no estimate "
                f"of how many a stable ranking needs. {reason}")
    measured = table[table["splits"] > 1]
    enough = int((measured["splits"] >= measured["needed"]).sum())
    return (f"- **How settled**: each of breadth's {n} datasets has {splits.min()} splits or more; by bencheval's "
            f"estimate (reliability {TARGET:g}) {enough} of the {len(measured)} it could estimate have the splits a "
            f"stable ranking of the methods there needs and {len(measured) - enough} have not ({block}).")


def _separates(ctx) -> str:
    """What Friedman and Nemenyi over every dataset can and cannot separate, NPT's pairs named."""
    from tabbench.report.significance import significance

    result = significance("all", ctx.pooled, None)
    if result.friedman is None or result.cd is None:
        return " ".join(result.notes)
    stat, p = result.friedman
    ranks, cd = result.mean_ranks, result.cd
    gaps = [(a, b) for a in ranks.index for b in ranks.index if ranks[b] - ranks[a] > cd]
    n_pairs = len(ranks) * (len(ranks) - 1) // 2
    text = (f"Friedman over {result.n_datasets} datasets: χ² {stat:.2f}, p = {p:.3g}; Nemenyi's critical difference "
            f"{cd:.2f} ranks separates {len(gaps)} of the {n_pairs} pairs.")
    for m in npt_methods(ctx):
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
    npt = npt_methods(ctx)
    shown = [m for i, m in enumerate(order.index) if i < 3 or m in npt]
    rows = []
    for m in shown:
        place = family.place(order, m)
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


def lines(contexts: dict) -> list:
    """The answer: the verdict, then per benchmark in ANSWER with a page its short table, budget, statistics and
    link; none where no benchmark of ANSWER has a page."""
    if not any(folder in contexts for folder, _ in ANSWER):
        return []
    out = ["## The answer at a glance", "",
           "Where does NPT stand against the paper's field and the models that came after it? Every sentence and "
           "table below is made by `tabbench report` from the records of the folder it links; its page has every "
           "table, figure and per-dataset number ([all pages](index.html)).", ""]
    said = verdict(contexts)
    if said:
        out += said + [""]
    for folder, question in ANSWER:
        ctx = contexts.get(folder)
        if ctx is None:
            continue
        n = sum(len(t.datasets) for t in ctx.tables.values())
        out += [f"### {question}: [{folder}]({folder}/report.html)", "",
                f"{n} dataset{'s' if n != 1 else ''}, {count(ctx.all_runs['method'].nunique(), 'method')}; budget: "
                f"{budget_text(ctx)}.", ""]
        if ctx.published is not None and len(ctx.pooled.index) <= 2:  # NPT alone: its numbers against the paper's
            out += paper_table(ctx) + ["", "Within 2 SE: |ours − paper| ≤ 2 √(SE ours² + SE paper²) (below). The "
                                       "paper's small-data NPT numbers are the best of eight variants per dataset; "
                                       "npt-paper is its base configuration, one of them.", ""]
        else:
            out += _place_table(ctx) + ["", _separates(ctx), ""]
    return out
