"""A training split's classes as a library wants its labels, and the validation rows it can score: what the
plugins' fits share, whatever their library (the boosters', pytabkit's, TabNet's, the plugins' own PyTorch
training).

- ``SeenClasses``: the classes the training rows hold, coded ``0 .. k-1`` for libraries that insist on it, and
  the library's probabilities widened back to all of the dataset's classes;
- ``validation``: the validation split as early stopping may use it (rows of a class the training rows lack
  dropped).
"""

from __future__ import annotations

import numpy as np

from tabbench.preprocess import full_proba


class SeenClasses:
    """The classes present in a training split, for libraries that insist on labels ``0 .. k-1``.

    ``encode`` maps class indices to positions among the seen classes; ``keep`` marks rows (of a
    validation split) whose class was seen; ``widen`` turns the library's probabilities over seen
    classes back into all ``n_classes`` columns (unseen classes get probability 0).
    """

    def __init__(self, y, n_classes: int):
        self.classes = np.unique(np.asarray(y, dtype=np.int64))
        self.n_classes = n_classes
        self._position = np.full(n_classes, -1, dtype=np.int64)
        self._position[self.classes] = np.arange(len(self.classes))

    def __len__(self) -> int:
        return len(self.classes)

    def keep(self, y) -> np.ndarray:
        return self._position[np.asarray(y, dtype=np.int64)] >= 0

    def encode(self, y) -> np.ndarray:
        return self._position[np.asarray(y, dtype=np.int64)]

    def widen(self, proba) -> np.ndarray:
        proba = np.asarray(proba, dtype=np.float64)
        proba = proba / proba.sum(axis=1, keepdims=True)
        return full_proba(proba, self.classes, self.n_classes)

    def constant(self, n_rows: int) -> np.ndarray:
        """Probabilities when the training split holds a single class."""
        return full_proba(np.ones((n_rows, 1)), self.classes, self.n_classes)


def validation(X_val, y_val, seen: SeenClasses | None):
    """The validation split as a library may use it for early stopping, or None when there is none.

    Rows whose class the training split lacks are dropped: a library cannot score them.
    """
    if X_val is None or y_val is None or len(y_val) == 0:
        return None
    if seen is None:
        return X_val, np.asarray(y_val, dtype=np.float64)
    keep = seen.keep(y_val)
    if not keep.any():
        return None
    return X_val[keep], seen.encode(np.asarray(y_val)[keep])
