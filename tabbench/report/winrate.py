"""Pairwise win rates: the share of (dataset, fold) pairs on which the row's method beats the column's.

Per (dataset, repeat, fold) a method's result is its test value of the dataset's primary metric,
averaged over seeds (the tuning trial chosen as in the leaderboard; equal counts tie exactly,
tabbench.metrics.settle_ties); a fold with any failed or missing
run has no result. A result beats no result, a tie counts half, and a pair where neither method has a
result is left out, so that failures count against a method as its worst rank does in the leaderboard.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tabbench.metrics import PRIMARY, settle_ties

UNIT = ["dataset", "repeat", "fold"]


def fold_results(selected: pd.DataFrame) -> pd.DataFrame:
    """Rows = (dataset, repeat, fold), columns = methods, values = the test metric signed so that higher
    is better (RMSE negated); NaN where the fold has no complete result."""
    parts = []
    for task, (metric, higher) in PRIMARY.items():
        part = selected[selected["task"] == task]
        column = f"test_{metric}"
        if part.empty or column not in part:
            continue
        value = part[column].where(part["status"] == "ok") * (1 if higher else -1)
        grouped = part[["method", *UNIT]].assign(value=value).groupby(["method", *UNIT], dropna=False)["value"]
        mean = grouped.mean().where(grouped.count() == grouped.size()).unstack("method")  # any failed seed: none
        parts.append(mean.apply(settle_ties, axis=1, metric=metric))  # equal counts tie exactly
    if not parts:
        return pd.DataFrame()
    return pd.concat(parts).sort_index().sort_index(axis=1)


def win_rates(folds: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(share of pairs won, number of pairs compared), both methods x methods, from ``fold_results``;
    the diagonal is NaN."""
    methods = sorted(folds.columns)
    v = folds[methods].to_numpy()[:, :, None]  # (folds, methods, 1) row method
    w = folds[methods].to_numpy()[:, None, :]  # (folds, 1, methods) column method
    has_v, has_w = ~np.isnan(v), ~np.isnan(w)
    wins = (has_v & has_w & (v > w)) + 0.5 * (has_v & has_w & (v == w)) + (has_v & ~has_w)
    counted = has_v | has_w
    n = counted.sum(axis=0).astype(float)
    share = np.where(n > 0, (wins * counted).sum(axis=0) / np.where(n > 0, n, 1), np.nan)
    np.fill_diagonal(share, np.nan)
    np.fill_diagonal(n, np.nan)
    return pd.DataFrame(share, index=methods, columns=methods), pd.DataFrame(n, index=methods, columns=methods)
