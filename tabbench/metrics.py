"""Metrics per task. RMSE is in the target's original units; lower is better only for losses."""

from __future__ import annotations

import numpy as np

from tabbench.spec import BINARY, REGRESSION

#: The leaderboard's primary metric per task, and whether larger is better.
PRIMARY = {BINARY: ("auroc", True), "multiclass": ("accuracy", True), REGRESSION: ("rmse", False)}
#: The validation score that selects a configuration when tuning (as in the NPT paper).
SELECTION = {BINARY: "log_loss", "multiclass": "log_loss", REGRESSION: "mse"}
#: Metrics that are counts (accuracy: rows right of rows; AUROC: pairs ordered of pairs): two results closer than
#: this are the same count, apart only by the float rounding of averaging folds and seeds (about 1e-15), and tie.
#: Distinct counts are further apart: at least 1 / (folds x n x (n + 1)) for folds of n and n + 1 test rows, more
#: than 1e-12 up to ten folds of 100,000 rows.
TIE_TOLERANCE = {"accuracy": 1e-12, "auroc": 1e-12}


def classification_metrics(y: np.ndarray, proba: np.ndarray, n_classes: int) -> dict:
    """``proba`` has passed tabbench.predictions.check_probabilities; clipping and renormalising only
    removes the rounding it tolerates."""
    from sklearn.metrics import accuracy_score, log_loss, roc_auc_score

    proba = np.clip(np.asarray(proba, dtype=np.float64), 0.0, None)
    proba = proba / np.maximum(proba.sum(axis=1, keepdims=True), 1e-300)
    out = {
        "accuracy": float(accuracy_score(y, proba.argmax(axis=1))),
        "log_loss": float(log_loss(y, np.clip(proba, 1e-15, 1.0), labels=np.arange(n_classes))),
    }
    if n_classes == 2:
        out["auroc"] = float(roc_auc_score(y, proba[:, 1])) if len(np.unique(y)) == 2 else float("nan")
    return out


def regression_metrics(y: np.ndarray, pred: np.ndarray) -> dict:
    """``pred`` has passed tabbench.predictions.check_regression_predictions: one finite value per row."""
    err = np.asarray(pred, dtype=np.float64) - np.asarray(y, dtype=np.float64)
    mse = float(np.mean(err**2))
    return {"rmse": float(np.sqrt(mse)), "mse": mse, "mae": float(np.mean(np.abs(err)))}


def settle_ties(values, metric: str):
    """``values`` (results of ``metric`` to be ranked against each other, NaN for none) with every run of results
    within TIE_TOLERANCE of its neighbour set to the run's smallest, so that equal counts rank, win and enter Elo as
    ties; a metric that declares no tolerance is returned as it is. The one place metric values meet before they
    are compared (tabbench.report.family's dataset means, tabbench.report.winrate's fold results)."""
    import pandas as pd

    tolerance = TIE_TOLERANCE.get(metric)
    values = pd.Series(values, dtype=float)
    present = values.dropna().sort_values(kind="stable")
    if tolerance is None or len(present) < 2:
        return values
    starts = present.diff().fillna(np.inf).to_numpy() > tolerance  # a new run where the gap exceeds the tolerance
    settled = pd.Series(present.to_numpy()[np.maximum.accumulate(np.where(starts, np.arange(len(present)), 0))],
                        index=present.index)
    return settled.reindex(values.index).where(values.notna())
