"""Which pairs of methods a leaderboard settles: Wilcoxon's signed-rank test over the datasets on the per-dataset
ranks the leaderboard ranks by (``Context.pooled``: one rank per dataset, so AUROC, accuracy and RMSE datasets count
alike), Holm-corrected over every pair asked together. A pair is *settled* where its Holm-adjusted p-value is below
ALPHA. The test compares ranks dataset by dataset: it separates a consistent small lead from none, and says nothing
of how large a lead is; on ties (equal ranks) the dataset is dropped (scipy's default).

The core asks it of the leaders (``leaders``: the methods whose Elo interval overlaps the first's, so that the Elo
alone does not order them), in the section ``Leaders`` beside the Elo table and the README block ``leaders``; a
study asks it of its own pairs (``holm_pairs``), as the NPT study does of NPT's rows.
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


def leaders(ctx) -> list:
    """The methods whose Elo 95% interval overlaps the first's (bencheval's, ``ctx.aggregates``), best Elo first:
    those the Elo alone does not order; [] without intervals."""
    table = ctx.aggregates.table if ctx.aggregates is not None else None
    if table is None or table.empty or table[["elo_low", "elo_high"]].isna().any().any():
        return []
    low, high = table.iloc[0][["elo_low", "elo_high"]]
    return [m for m, r in table.iterrows() if r["elo_high"] >= low and r["elo_low"] <= high]


def leader_pairs(ctx) -> list[Pair]:
    """Every two of the leaders, Holm-corrected together (computed once per Context)."""
    return ctx.once("leader pairs", lambda: holm_pairs(ctx.pooled, list(combinations(leaders(ctx), 2))))


def leaders_sentence(ctx) -> str:
    """'The leaders: catboost and the methods whose Elo interval overlaps its own (tabm, npt-budget). Wilcoxon-Holm
    over the 38 datasets settles catboost ahead of npt-budget; the other 2 of their 3 pairs are open.', or '' where
    there are no intervals."""
    found, first = leader_pairs(ctx), leaders(ctx)
    show = ctx.show
    if not first:
        return ""
    head = show.get(first[0], first[0])
    if len(first) == 1:
        return f"{head}'s Elo interval overlaps no other method's: by Elo it is ahead of every method."
    others = ", ".join(show.get(m, m) for m in first[1:])
    text = f"The leaders: {head} and the methods whose Elo interval overlaps its own ({others})."
    n = ctx.pooled.shape[1]
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
    return [sentence or "No leaders: the Elo has no intervals here (bencheval needs results on several datasets)."]


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
