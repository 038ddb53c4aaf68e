"""Which of NPT's standings are settled: each NPT method (registry model npt) against every other method of a
leaderboard, Wilcoxon's signed-rank test over the datasets on the per-dataset ranks the leaderboard ranks by
(``Context.pooled``: one rank per dataset, so AUROC, accuracy and RMSE datasets count alike), Holm-corrected over
every pair the block reports. A pair is *settled* where its Holm-adjusted p-value is below ALPHA; the sentence says
which pairs are and which are not. The test compares ranks dataset by dataset: it separates a consistent small lead
from none, and says nothing of how large a lead is; on ties (equal ranks) the dataset is dropped (scipy's default).

Shown as a leaderboard section beside the Elo table (``Pairwise``) and carried into the answer atop the site
(answer.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from tabbench.report.section import Section
from tabbench.report.significance import ALPHA, wilcoxon_smallest_p


@dataclass(frozen=True)
class Pair:
    method: str  # an NPT method
    other: str
    datasets: int  # where both have a rank
    ahead: int  # datasets where ``method`` ranks better
    behind: int
    mean_gap: float  # mean of other's rank minus method's (positive: method ahead)
    p: float  # Holm-adjusted
    settled: bool


def npt_methods(ctx) -> list:
    """The rows of NPT (its registry model npt) in the leaderboard, best first."""
    order = ctx.pooled.mean(axis=1).sort_values().index
    return [m for m in order if ctx.model_of(m) == "npt"]


def pairs(ctx) -> list[Pair]:
    """Every NPT method against every other method (each pair once), Holm-corrected together; [] where the
    leaderboard has no NPT method or no other."""
    from scipy.stats import wilcoxon
    from statsmodels.stats.multitest import multipletests

    ranks = ctx.pooled
    npt = npt_methods(ctx)
    asked = []
    for m in npt:
        for o in ranks.index:
            if o != m and (o, m) not in asked:
                asked.append((m, o))
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


def can_settle(ctx, n_pairs: int) -> bool:
    """Whether any pair could be settled: the smallest p-value the test can give on this many datasets, times the
    pairs (Holm's first step), below ALPHA."""
    n = ctx.pooled.shape[1]
    return n > 0 and wilcoxon_smallest_p(n) * n_pairs < ALPHA


def _name(ctx, m) -> str:
    return ctx.show.get(m, m)


def standing(ctx, method: str, found: list[Pair]) -> str:
    """Which of ``method``'s pairs are settled, and which are not: "settled ahead of A, B; not settled against C"."""
    mine = [p for p in found if method in (p.method, p.other)]

    def other(p):
        return p.other if p.method == method else p.method

    def ahead(p):
        return (p.ahead > p.behind) == (p.method == method)

    won = [other(p) for p in mine if p.settled and ahead(p)]
    lost = [other(p) for p in mine if p.settled and not ahead(p)]
    open_ = [other(p) for p in mine if not p.settled]
    parts = [f"settled ahead of {', '.join(_name(ctx, o) for o in won) or 'no method'}"]
    if lost:
        parts.append(f"settled behind {', '.join(_name(ctx, o) for o in lost)}")
    if open_:
        parts.append(f"not settled against {', '.join(_name(ctx, o) for o in open_)}")
    return "; ".join(parts)


def lines(ctx) -> list[str]:
    """The pairwise table and, per NPT method, its sentence; one line where the datasets cannot settle a pair."""
    from tabbench.report.format import markdown_table

    found = pairs(ctx)
    if not found:
        return []
    n = ctx.pooled.shape[1]
    if not can_settle(ctx, len(found)):
        return [f"Settled pairs: none can be, on {n} datasets: Wilcoxon's signed-rank test, Holm-corrected for the "
                f"{len(found)} pairs of NPT's rows, cannot reach p < {ALPHA} on so few datasets.", ""]
    rows = [[_name(ctx, p.method), _name(ctx, p.other), f"{p.ahead}–{p.behind}", f"{p.mean_gap:+.2f}",
             f"{p.p:.3g}", "**settled**" if p.settled else "not settled"] for p in found]
    out = [markdown_table(["NPT row", "against", "datasets ahead–behind", "mean rank gap", "Holm p", ""], rows), "",
           " ".join(f"{_name(ctx, m)}: {standing(ctx, m, found)}." for m in npt_methods(ctx)), "",
           f"Settled: Wilcoxon's signed-rank test over the {n} datasets on the per-dataset ranks (a positive gap: "
           f"the NPT row ahead), Holm-corrected for the {len(found)} pairs shown, p < {ALPHA}; a tie on a dataset "
           "leaves it out of its pair. It separates consistent leads dataset by dataset, not their size.", ""]
    return out


class Pairwise(Section):
    """NPT's rows against every other method: which pairs are settled (this module). A statistic: with the report
    extra only (scipy, statsmodels), as the leaderboard's other tests."""

    after = "Arena"
    report_only = True

    def markdown(self, ctx):
        body = lines(ctx)
        return ["## Which of NPT's pairs are settled", "", *body] if body else []


def regimes_verdict(ctx) -> list:
    """Whether NPT's place holds under splits that match the data (tabbench.report.regimes.led_by, NPT's methods
    first): one paragraph, none where the folder holds no paired regimes or no NPT method."""
    from tabbench.report.regimes import compare, led_by

    cmp = compare(ctx)
    npt = [m for m in cmp.overall.index if ctx.model_of(m) == "npt"] if cmp is not None else []
    if not npt:
        return []
    return [led_by(cmp, npt, "Does NPT's place hold when a test row's neighbours are no longer its twins?"), ""]


class RegimesVerdict(Section):
    """Under splits that match the data (tabbench.report.regimes, a folder of paired regimes): whether NPT's
    place holds once a test row's twin is no longer among the training rows. NPT attends from test rows to
    training rows, so a twin there helps it as it helps k-NN, and more than a booster."""

    after = "SplitRegimes"

    def markdown(self, ctx):
        lines = regimes_verdict(ctx)
        return ["## Does NPT's place hold under splits that match the data?", "", *lines] if lines else []