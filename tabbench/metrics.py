"""Metrics per task. RMSE is in the target's original units; lower is better only for losses."""

from __future__ import annotations

import numpy as np

from tabbench.spec import BINARY, REGRESSION

#: The leaderboard's primary metric per task, and whether larger is better.
PRIMARY = {BINARY: ("auroc", True), "multiclass": ("accuracy", True), REGRESSION: ("rmse", False)}
#: The validation score that selects a configuration when tuning (as in the NPT paper).
SELECTION = {BINARY: "log_loss", "multiclass": "log_loss", REGRESSION: "mse"}


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
