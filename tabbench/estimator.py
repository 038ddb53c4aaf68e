"""The base class offered to model plugins: parameters declared once, stored the scikit-learn way.

A subclass declares every parameter it accepts with its default in ``defaults``; ``spec_for`` (or a
``ModelSpec`` whose ``default_params`` is left out) takes them from there, so they are written once.
``__init__`` only stores: ``meta``, ``seed`` and ``params`` (the defaults overridden by the suite's).
Classifiers implement ``predict_proba``; ``predict`` is its argmax. Regressors implement
``predict_values`` (values in the target's original units). See tabbench/spec.py for the contract.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

from tabbench.spec import DatasetMeta


class Estimator:
    """Stores ``meta``, ``seed`` and ``params``; predicts class indices from ``predict_proba``."""

    defaults: ClassVar[Mapping[str, Any]] = {}

    def __init__(self, meta: DatasetMeta, seed: int = 0, **params):
        unknown = sorted(set(params) - set(self.defaults))
        if unknown:
            raise TypeError(f"{type(self).__name__} got unknown params {unknown}; it accepts {sorted(self.defaults)}")
        self.meta = meta
        self.seed = seed
        self.params = {**self.defaults, **params}

    def predict(self, X):
        """Class indices (the argmax of ``predict_proba``) for classification, else ``predict_values``."""
        if self.meta.is_classification:
            return self.predict_proba(X).argmax(axis=1)
        return self.predict_values(X)

    def predict_proba(self, X):
        raise NotImplementedError(f"{type(self).__name__} is a classifier: implement predict_proba")

    def predict_values(self, X):
        raise NotImplementedError(f"{type(self).__name__} is a regressor: implement predict_values")
