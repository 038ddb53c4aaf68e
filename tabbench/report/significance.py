"""Is a rank gap significant? Friedman's test over datasets, then Nemenyi's post-hoc test drawn as a
critical-difference diagram, and Wilcoxon signed-rank tests with Holm's correction (Demšar 2006;
Benavoli et al. 2016).

The tests are scipy.stats' and scikit-posthocs'. Each test is run only where the number of datasets
lets it reject at all; otherwise the report says how many datasets it would need instead of drawing a
diagram that looks like a finding. Friedman and Nemenyi take the leaderboard's rank matrix (a failed
or missing result at the worst rank; the tests re-rank it with ties at their mid-rank, which changes
nothing without ties); the diagram places each method at the leaderboard's mean rank. Wilcoxon
compares the metric itself, over the datasets where every method has a result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

ALPHA = 0.05


@dataclass
class Significance:
    family: str  # a metric name, or "all" for every dataset together
    mean_ranks: pd.Series  # the leaderboard's, best first
    n_datasets: int
    friedman: tuple | None = None  # (chi-square statistic, p-value)
    nemenyi: pd.DataFrame | None = None  # p-values, methods x methods
    cd: float | None = None  # Nemenyi's critical difference in mean rank
    wilcoxon: pd.DataFrame | None = None  # Holm-adjusted p-values, methods x methods
    notes: tuple = ()


def friedman(ranks: pd.DataFrame) -> tuple:
    """Friedman's chi-square and its p-value; ``ranks``: rows = methods, columns = datasets (blocks)."""
    from scipy.stats import friedmanchisquare

    result = friedmanchisquare(*ranks.to_numpy())
    return float(result.statistic), float(result.pvalue)


def friedman_can_reject(n_datasets: int, n_methods: int, alpha: float = ALPHA) -> bool:
    """Whether perfect agreement of all datasets (the largest statistic, N (k - 1)) would reject."""
    from scipy.stats import chi2

    return n_methods >= 3 and n_datasets >= 2 and chi2.sf(n_datasets * (n_methods - 1), n_methods - 1) < alpha


def nemenyi_cd(n_datasets: int, n_methods: int, alpha: float = ALPHA) -> float:
    """Nemenyi's critical difference: q_alpha / sqrt(2) * sqrt(k (k + 1) / (6 N)) (Demšar 2006, eq. 5)."""
    from scipy.stats import studentized_range

    q = studentized_range.ppf(1 - alpha, n_methods, np.inf) / math.sqrt(2)
    return float(q * math.sqrt(n_methods * (n_methods + 1) / (6 * n_datasets)))


def nemenyi(ranks: pd.DataFrame) -> pd.DataFrame:
    import scikit_posthocs as sp

    p = sp.posthoc_nemenyi_friedman(ranks.T.to_numpy())
    p.index = p.columns = ranks.index
    return p


def wilcoxon_smallest_p(n_datasets: int) -> float:
    """The smallest two-sided p-value the signed-rank test can give on n datasets (all signs agree)."""
    from scipy.stats import wilcoxon

    return float(wilcoxon(np.arange(1.0, n_datasets + 1)).pvalue)


def wilcoxon_holm(scores: pd.DataFrame) -> pd.DataFrame:
    """Pairwise signed-rank p-values over datasets, Holm-adjusted; ``scores``: methods x datasets, complete."""
    import scikit_posthocs as sp

    p = sp.posthoc_wilcoxon(list(scores.to_numpy()), p_adjust="holm")
    p.index = p.columns = scores.index
    return p


def significance(family: str, ranks: pd.DataFrame, scores: pd.DataFrame | None) -> Significance:
    """The tests for one metric family. ``ranks``: the leaderboard's ranks (methods x datasets);
    ``scores``: the mean test metric (methods x datasets, NaN where failed), or None for pooled families."""
    k, n = ranks.shape
    out = Significance(family, ranks.mean(axis=1).sort_values(), n)
    notes = []
    if not friedman_can_reject(n, k):
        notes.append(f"Friedman's test is not run: with {n} dataset(s) and {k} methods even perfect agreement "
                     f"of every dataset could not reject equal ranks at α = {ALPHA}.")
        out.notes = tuple(notes)
        return out
    out.friedman = friedman(ranks)
    stat, p = out.friedman
    notes.append(f"Friedman's test over {n} datasets: χ² = {stat:.2f}, p = {p:.3g}"
                 + (" (the methods' ranks differ)." if p < ALPHA else
                    f": equal ranks are not rejected at α = {ALPHA}, so no pairwise difference is claimed."))
    cd = nemenyi_cd(n, k)
    if cd >= k - 1:
        needed = next(m for m in range(n, 10 * k) if nemenyi_cd(m, k) < k - 1)
        notes.append(f"No critical-difference diagram: Nemenyi's critical difference with {n} datasets is "
                     f"{cd:.2f} ranks, more than the largest possible gap ({k - 1}), so no pair could differ; "
                     f"that needs at least {needed} datasets.")
    else:
        out.cd = cd
        out.nemenyi = nemenyi(ranks) if p < ALPHA else pd.DataFrame(1.0, index=ranks.index, columns=ranks.index)
        notes.append(f"Nemenyi's critical difference: {cd:.2f} ranks (α = {ALPHA}); methods joined by a bar "
                     "are not significantly different.")
    if scores is None:
        out.notes = tuple(notes)
        return out
    complete = scores.dropna(axis=1)
    pairs = k * (k - 1) // 2
    smallest = wilcoxon_smallest_p(complete.shape[1]) * pairs if complete.shape[1] else math.inf
    if smallest >= ALPHA:
        needed = next(n for n in range(max(complete.shape[1], 1), 64) if wilcoxon_smallest_p(n) * pairs < ALPHA)
        notes.append(f"No Wilcoxon-Holm diagram: over the {complete.shape[1]} dataset(s) where every method has a "
                     f"result, no pair could reach a Holm-adjusted p-value below α = {ALPHA} ({pairs} pairs); "
                     f"that needs at least {needed} datasets.")
    elif p < ALPHA:
        out.wilcoxon = wilcoxon_holm(complete)
        notes.append(f"Wilcoxon signed-rank tests over {complete.shape[1]} datasets, Holm-corrected for {pairs} "
                     "pairs: methods joined by a bar are not significantly different.")
    out.notes = tuple(notes)
    return out


def significance_families(ctx) -> list:
    """(family, title, ranks, scores) per metric family of a leaderboard's context (tabbench.report.section), then
    every dataset together ("all", scores None): what the README block `significance` and a study's own blocks test."""
    families = [(t.metric, f"{t.metric.upper() if t.metric != 'accuracy' else 'Accuracy'}", t.ranks[t.datasets],
                 t.mean.loc[t.ranks.index, t.datasets]) for t in ctx.tables.values()]
    return families + [("all", "All datasets together", ctx.pooled, None)]


def separated_pairs(result) -> list | None:
    """(ahead, behind) for every pair further apart in mean rank than Nemenyi's critical difference, best first;
    None where the tests claim no pair (Friedman not run or not rejecting, or no critical difference)."""
    if result.cd is None or not result.friedman or result.friedman[1] >= ALPHA:
        return None
    mean = result.mean_ranks
    return [(a, b) for a in mean.index for b in mean.index if mean[b] - mean[a] > result.cd]
