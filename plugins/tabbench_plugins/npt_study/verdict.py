"""Which of NPT's standings are settled: each NPT method (registry model npt) against every other method of a
leaderboard, by the core's pairwise test (tabbench.report.leaders: Wilcoxon's signed-rank test over the datasets on
the per-dataset ranks, Holm-corrected over every pair the block reports). The sentence says which pairs are settled
and which are not.

Shown as a leaderboard section after the core's leaders (``Pairwise``) and carried into the answer atop the site
(answer.py).
"""

from __future__ import annotations

from tabbench.report.leaders import Pair, can_settle, holm_pairs, pairs_table, standing, test_note
from tabbench.report.section import Section
from tabbench.report.significance import ALPHA


def npt_methods(ctx) -> list:
    """The rows of NPT (its registry model npt) in the leaderboard, best first."""
    order = ctx.pooled.mean(axis=1).sort_values().index
    return [m for m in order if ctx.model_of(m) == "npt"]


def pairs(ctx) -> list[Pair]:
    """Every NPT method against every other method (each pair once), Holm-corrected together; [] where the
    leaderboard has no NPT method or no other."""
    asked = []
    for m in npt_methods(ctx):
        for o in ctx.pooled.index:
            if o != m and (o, m) not in asked:
                asked.append((m, o))
    return holm_pairs(ctx.pooled, asked)


def lines(ctx) -> list[str]:
    """The pairwise table and, per NPT method, its sentence; one line where the datasets cannot settle a pair."""
    found = pairs(ctx)
    if not found:
        return []
    n = ctx.pooled.shape[1]
    if not can_settle(n, len(found)):
        return [f"Settled pairs: none can be, on {n} datasets: Wilcoxon's signed-rank test, Holm-corrected for the "
                f"{len(found)} pairs of NPT's rows, cannot reach p < {ALPHA} on so few datasets.", ""]
    return [*pairs_table(ctx.show, found, "NPT row"),
            " ".join(f"{ctx.show.get(m, m)}: {standing(ctx.show, m, found)}." for m in npt_methods(ctx)), "",
            test_note(n, len(found), "the NPT row"), ""]


class Pairwise(Section):
    """NPT's rows against every other method: which pairs are settled (this module). A statistic: with the report
    extra only (scipy, statsmodels), as the leaderboard's other tests."""

    after = "Leaders"
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