"""Which pairs of methods a leaderboard settles: Wilcoxon's signed-rank test over the datasets on the per-dataset
ranks the leaderboard ranks by (``Context.pooled``: one rank per dataset, so AUROC, accuracy and RMSE datasets count
alike), Holm-corrected over every pair asked together. A pair is *settled* where its Holm-adjusted p-value is below
ALPHA. The test compares ranks dataset by dataset: it separates a consistent small lead from none, and says nothing
of how large a lead is; on ties (equal ranks) the dataset is dropped (scipy's default).

The core asks it of the leaders (``leaders``: the method first by mean rank and those Nemenyi's critical difference
does not separate from it), in the section ``Leaders`` beside the Elo table and the README block ``leaders``; a study
asks it of its own pairs (``holm_pairs``), as the NPT study does of NPT's rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from tabbench.report.format import count
from tabbench.report.section import Section
from tabbench.report.significance import ALPHA, wilcoxon_smallest_p


@dataclass(frozen=True)
class Pair:
    method: str
    other: str
    datasets: int  # where both have a rank
    ahead: int  # datasets where ``method`` ranks better
    behind: int
    mean_gap: float  # mean of other's rank minus method's (positive: method ahead)
    p: float  # Holm-adjusted
    settled: bool


def holm_pairs(ranks, asked: list) -> list[Pair]:
    """Each (method, other) of ``asked`` by the signed-rank test over the datasets of ``ranks`` (methods x datasets,
    NaN where a method has no rank), Holm-corrected together; [] where nothing is asked."""
    from scipy.stats import wilcoxon
    from statsmodels.stats.multitest import multipletests

    if not asked:
        return []
    raw, facts = [], []
    for m, o in asked:
        both = ranks.loc[[m, o]].dropna(axis=1)
        gap = both.loc[o] - both.loc[m]
        ahead, behind = int((gap > 0).sum()), int((gap < 0).sum())
        raw.append(1.0 if ahead + behind == 0 else float(wilcoxon(gap.to_numpy()).pvalue))
        facts.append((m, o, both.shape[1], ahead, behind, float(gap.mean()) if both.shape[1] else float("nan")))
    adjusted = multipletests(raw, alpha=ALPHA, method="holm")[1]
    return [Pair(m, o, n, a, b, g, float(p), bool(p < ALPHA)) for (m, o, n, a, b, g), p in zip(facts, adjusted)]


def can_settle(n_datasets: int, n_pairs: int) -> bool:
    """Whether any of ``n_pairs`` could be settled: the smallest p-value the test can give on this many datasets,
    times the pairs (Holm's first step), below ALPHA."""
    return n_datasets > 0 and wilcoxon_smallest_p(n_datasets) * n_pairs < ALPHA


def winner(p: Pair) -> tuple[str, str]:
    """(the pair's method ahead on more datasets, the other)."""
    return (p.method, p.other) if p.ahead > p.behind else (p.other, p.method)


def standing(show: dict, method: str, found: list[Pair]) -> str:
    """Which of ``method``'s pairs are settled, and which are not: "settled ahead of A, B; not settled against C"."""
    mine = [p for p in found if method in (p.method, p.other)]

    def other(p):
        return show.get(p.other if p.method == method else p.method, p.other if p.method == method else p.method)

    won = [other(p) for p in mine if p.settled and winner(p)[0] == method]
    lost = [other(p) for p in mine if p.settled and winner(p)[0] != method]
    open_ = [other(p) for p in mine if not p.settled]
    parts = [f"settled ahead of {', '.join(won) or 'no method'}"]
    if lost:
        parts.append(f"settled behind {', '.join(lost)}")
    if open_:
        parts.append(f"not settled against {', '.join(open_)}")
    return "; ".join(parts)


def pairs_table(show: dict, found: list[Pair], first: str = "method") -> list[str]:
    """The Markdown table of ``found``: both names, datasets ahead–behind, the mean rank gap, Holm's p, settled."""
    from tabbench.report.format import markdown_table

    rows = [[show.get(p.method, p.method), show.get(p.other, p.other), f"{p.ahead}–{p.behind}", f"{p.mean_gap:+.2f}",
             f"{p.p:.3g}", "**settled**" if p.settled else "not settled"] for p in found]
    return [markdown_table([first, "against", "datasets ahead–behind", "mean rank gap", "Holm p", ""], rows), ""]


def test_note(n_datasets: int, n_pairs: int, first: str = "the first") -> str:
    """What 'settled' means, for a table of ``n_pairs`` on ``n_datasets``."""
    return (f"Settled: Wilcoxon's signed-rank test over the {n_datasets} datasets on the per-dataset ranks (a positive "
            f"gap: {first} ahead), Holm-corrected for the {n_pairs} pairs shown, p < {ALPHA}; a tie on a dataset "
            "leaves it out of its pair. It separates consistent leads dataset by dataset, not their size.")


def leaders(ctx) -> tuple[list, str]:
    """(the leaders, best mean rank over all datasets first; how they were chosen, for the sentence): the method
    first by mean rank and those Nemenyi's critical difference over all datasets does not separate from it (every
    method where Friedman's test does not reject equal ranks, or cannot), so that the pairwise test asks only what
    the omnibus test leaves open. Mean ranks and the critical difference are exact, so the leaders do not move with
    a bootstrap's resampling, as the Elo interval's ends do. ([], '') with fewer than two methods."""
    from tabbench.report.significance import significance

    ranks = ctx.pooled
    if ranks.shape[0] < 2 or ranks.shape[1] == 0:
        return [], ""
    result = ctx.once("significance all", lambda: significance("all", ranks, None))
    mean = result.mean_ranks
    order = sorted(mean.index, key=lambda m: (mean[m], m))  # equal mean ranks by name, not by a sort's chance
    if result.cd is None or not result.friedman or result.friedman[1] >= ALPHA:
        return order, "and every other method, as Friedman's test does not separate any"
    close = [m for m in order if mean[m] - mean[order[0]] <= result.cd]
    return close, f"and the methods within Nemenyi's critical difference of it ({result.cd:.2f} ranks)"


def leader_pairs(ctx) -> list[Pair]:
    """Every two of the leaders, Holm-corrected together (computed once per Context)."""
    return ctx.once("leader pairs", lambda: holm_pairs(ctx.pooled, list(combinations(leaders(ctx)[0], 2))))


def leaders_sentence(ctx) -> str:
    """'The leaders: catboost, first by mean rank over the 38 datasets, and the methods within Nemenyi's critical
    difference of it (3.22 ranks): tabm, npt-budget. Wilcoxon-Holm over the 38 datasets settles catboost ahead of
    npt-budget; the other 2 of their 3 pairs are open.', or '' with fewer than two methods."""
    first, how = leaders(ctx)
    if not first:
        return ""
    show = ctx.show
    head = show.get(first[0], first[0])
    n = ctx.pooled.shape[1]
    if len(first) == 1:
        return (f"{head} leads alone: first by mean rank over the {count(n, 'dataset')}, and Nemenyi's critical "
                "difference separates every other method from it.")
    found = leader_pairs(ctx)
    text = (f"The leaders: {head}, first by mean rank over the {count(n, 'dataset')}, {how}: "
            f"{', '.join(show.get(m, m) for m in first[1:])}.")
    if not can_settle(n, len(found)):
        return (text + f" No pair of them can be settled on {count(n, 'dataset')}: Wilcoxon's signed-rank test, "
                f"Holm-corrected for their {len(found)} pairs, cannot reach p < {ALPHA} on so few.")
    settled = [" ahead of ".join(show.get(m, m) for m in winner(p)) for p in found if p.settled]
    if not settled:
        return text + f" Wilcoxon-Holm over the {count(n, 'dataset')} settles none of their {len(found)} pairs."
    return (text + f" Wilcoxon-Holm over the {count(n, 'dataset')} settles {', '.join(settled)}; the other "
            f"{len(found) - len(settled)} of their {len(found)} pairs are open.")


def leaders_block(ctx) -> list:
    """The README block ``leaders``: ``leaders_sentence``, or a line saying why there is none."""
    sentence = leaders_sentence(ctx)
    return [sentence or "No leaders: the leaderboard ranks fewer than two methods."]


class Leaders(Section):
    """Which pairs among the leaders are settled (this module). A statistic: with the report extra only (scipy,
    statsmodels), as the leaderboard's other tests."""

    report_only = True

    def markdown(self, ctx):
        found = leader_pairs(ctx)
        sentence = leaders_sentence(ctx)
        if not sentence:
            return []
        out = ["## Which pairs among the leaders are settled", "", sentence, ""]
        if found and can_settle(ctx.pooled.shape[1], len(found)):
            out += [*pairs_table(ctx.show, found), test_note(ctx.pooled.shape[1], len(found), "the first named"), ""]
        return out
