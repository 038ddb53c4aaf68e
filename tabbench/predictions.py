"""What an estimator returns, checked against the contract (tabbench.estimator.Estimator) before it is scored.

A job whose outputs break the contract (NaN or infinite values, the wrong number of rows or
classes, probabilities that are negative or do not sum to 1, class indices out of range) is a
failed job, not a score: metrics computed from such outputs are NaN or silently wrong. The same
checks back ``tabbench.testing``, the contract checks offered to plugin authors.
"""

from __future__ import annotations

import numpy as np

from tabbench.errors import TabbenchError

#: How far a row of probabilities may sum from 1. Rounding a float32 softmax row of k classes is off
#: by at most about k * 2**-24 (6e-6 for 100 classes, 6e-5 for 1,000), so probabilities normalised
#: in float32 or float64 pass; a normalisation mistake (scores, logits, a dropped column) is off by
#: far more. The metrics renormalise what is left.
ROW_SUM_TOLERANCE = 1e-4


class InvalidPredictions(TabbenchError, ValueError):
    """An estimator's output breaks the contract; the message says what is wrong, with counts."""


def _numeric(values, what: str) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype.kind not in "biuf":
        raise InvalidPredictions(f"{what} returned values of dtype {array.dtype}; expected numbers")
    return array


def _count_non_finite(array: np.ndarray, noun: str) -> None:
    n_nan, n_inf = int(np.isnan(array).sum()), int(np.isinf(array).sum())
    if n_nan or n_inf:
        parts = ([f"{n_nan} of {array.size} {noun} are NaN"] if n_nan else []) + \
                ([f"{n_inf} of {array.size} {noun} are infinite"] if n_inf else [])
        raise InvalidPredictions(", ".join(parts))


def check_regression_predictions(pred, n_rows: int) -> np.ndarray:
    """``predict`` for regression: one finite number per row, as float64."""
    array = _numeric(pred, "predict")
    if array.shape != (n_rows,):
        raise InvalidPredictions(f"predict returned shape {array.shape} for {n_rows} rows; expected "
                                 f"one value per row, shape ({n_rows},)")
    array = array.astype(np.float64)
    _count_non_finite(array, "predictions")
    return array


def check_class_predictions(pred, n_rows: int, n_classes: int) -> np.ndarray:
    """``predict`` for classification: one integer class index in 0..n_classes-1 per row."""
    array = _numeric(pred, "predict")
    if array.shape != (n_rows,):
        raise InvalidPredictions(f"predict returned shape {array.shape} for {n_rows} rows; expected "
                                 f"one class index per row, shape ({n_rows},)")
    if array.dtype.kind not in "iu":
        raise InvalidPredictions(f"predict returned values of dtype {array.dtype}; expected integer class "
                                 f"indices 0..{n_classes - 1}")
    outside = (array < 0) | (array >= n_classes)
    if outside.any():
        raise InvalidPredictions(f"{int(outside.sum())} of {n_rows} class predictions are outside "
                                 f"0..{n_classes - 1} (e.g. {array[outside][0]})")
    return array


def check_probabilities(proba, n_rows: int, n_classes: int) -> np.ndarray:
    """``predict_proba``: an (n_rows, n_classes) float64 array of finite, non-negative rows summing to 1."""
    array = _numeric(proba, "predict_proba")
    if array.shape != (n_rows, n_classes):
        raise InvalidPredictions(f"predict_proba returned shape {array.shape}; expected ({n_rows}, {n_classes}): "
                                 f"one row per input row, one column per class index")
    array = array.astype(np.float64)
    _count_non_finite(array, "probabilities")
    negative = array < -ROW_SUM_TOLERANCE
    if negative.any():
        raise InvalidPredictions(f"{int(negative.sum())} of {array.size} probabilities are negative "
                                 f"(smallest {array.min():.4g})")
    off = np.abs(array.sum(axis=1) - 1.0) > ROW_SUM_TOLERANCE
    if off.any():
        row = int(np.argmax(off))
        raise InvalidPredictions(f"{int(off.sum())} of {n_rows} probability rows do not sum to 1 within "
                                 f"{ROW_SUM_TOLERANCE:g} (row {row} sums to {array[row].sum():.6g})")
    return array
