"""Preprocessing helpers models share: imputation, categorical encoding, standardisation.

Everything is fitted on the training split only and then applied to any rows, so nothing about
the validation or test rows leaks into a model.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tabbench.spec import CATEGORICAL, DatasetMeta


class TabularEncoder:
    """Turns the harness's typed DataFrame into a float matrix.

    categorical: ``"onehot"`` (one column per level; a missing value is all zeros), ``"ordinal"``
    (the category code as a float, -1 for missing) or ``"code"`` (the code as an int-valued float,
    missing as NaN, for libraries with native categorical support).
    numeric missing values are imputed with the training mean, and numeric columns are standardised
    when ``standardize`` is true.
    """

    def __init__(self, meta: DatasetMeta, categorical: str = "onehot", standardize: bool = True):
        if categorical not in ("onehot", "ordinal", "code"):
            raise ValueError(f"categorical must be 'onehot', 'ordinal' or 'code', got {categorical!r}")
        self.meta = meta
        self.categorical = categorical
        self.standardize = standardize

    def fit(self, X: pd.DataFrame) -> "TabularEncoder":
        numeric = [c.name for c in self.meta.numeric]
        values = X[numeric].to_numpy(dtype=np.float64) if numeric else np.zeros((len(X), 0))
        with np.errstate(all="ignore"):
            mean = np.nanmean(values, axis=0) if len(values) else np.zeros(values.shape[1])
            std = np.nanstd(values, axis=0) if len(values) else np.ones(values.shape[1])
        self.mean_ = np.where(np.isfinite(mean), mean, 0.0)
        self.scale_ = np.where(np.isfinite(std) & (std > 0), std, 1.0)
        self.feature_names_ = []
        self.categorical_indices_ = []  # positions of categorical columns in the output (code/ordinal)
        for col in self.meta.columns:
            if col.kind == CATEGORICAL and self.categorical == "onehot":
                self.feature_names_ += [f"{col.name}={level}" for level in col.categories]
            else:
                if col.kind == CATEGORICAL:
                    self.categorical_indices_.append(len(self.feature_names_))
                self.feature_names_.append(col.name)
        return self

    def transform(self, X: pd.DataFrame) -> np.ndarray:
        blocks, numeric_pos = [], 0
        for col in self.meta.columns:
            if col.kind == CATEGORICAL:
                codes = X[col.name].cat.codes.to_numpy()
                if self.categorical == "onehot":
                    block = np.zeros((len(X), len(col.categories)))
                    present = codes >= 0
                    block[np.nonzero(present)[0], codes[present]] = 1.0
                elif self.categorical == "ordinal":
                    block = codes.astype(np.float64)[:, None]
                else:
                    block = np.where(codes >= 0, codes, np.nan).astype(np.float64)[:, None]
            else:
                values = X[col.name].to_numpy(dtype=np.float64)
                values = np.where(np.isnan(values), self.mean_[numeric_pos], values)
                if self.standardize:
                    values = (values - self.mean_[numeric_pos]) / self.scale_[numeric_pos]
                block = values[:, None]
                numeric_pos += 1
            blocks.append(block)
        if not blocks:
            return np.zeros((len(X), 0))
        return np.hstack(blocks)

    def fit_transform(self, X: pd.DataFrame) -> np.ndarray:
        return self.fit(X).transform(X)


class TargetScaler:
    """Standardises a regression target on the training split; inverse maps predictions back."""

    def fit(self, y: np.ndarray) -> "TargetScaler":
        self.mean_ = float(np.mean(y))
        std = float(np.std(y))
        self.scale_ = std if std > 0 else 1.0
        return self

    def transform(self, y: np.ndarray) -> np.ndarray:
        return (np.asarray(y, dtype=np.float64) - self.mean_) / self.scale_

    def inverse_transform(self, y: np.ndarray) -> np.ndarray:
        return np.asarray(y, dtype=np.float64) * self.scale_ + self.mean_


def full_proba(proba: np.ndarray, seen_classes, n_classes: int) -> np.ndarray:
    """Widen a predict_proba matrix over the classes a model saw to all ``n_classes`` columns.

    A training split can lack a rare class; its column is then zero.
    """
    out = np.zeros((proba.shape[0], n_classes))
    out[:, np.asarray(seen_classes, dtype=int)] = proba
    return out
