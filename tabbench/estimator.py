"""The base class offered to model plugins: parameters declared once, stored the scikit-learn way.

A subclass declares every parameter it accepts once, as ``class Params(tabbench.params.Params)`` (types,
bounds, choices, defaults, descriptions; see tabbench/params.py); a ``ModelSpec`` whose ``params`` is left out
takes them from there. ``__init__`` checks the values against that class and stores ``meta``, ``seed`` and
``params`` (the defaults updated by the values given, as given).
Classifiers implement ``predict_proba``; ``predict`` is its argmax. Regressors implement
``predict_values`` (values in the target's original units). See tabbench/spec.py for the contract.

A model that trains iteratively asks ``self.training_clock()`` at the start of ``fit`` for a
``TrainingClock`` and stops before the job's time budget runs out (see ``TrainingClock``).
"""

from __future__ import annotations

import time
from typing import ClassVar

from tabbench.params import Params, check, merged
from tabbench.spec import DatasetMeta

#: The share of a job's time budget (``time_budget_s``) a model may spend training. The rest belongs to what
#: the same job does around training, under the same limit: loading and encoding the data before ``fit``,
#: predicting the test and validation rows after it. A job over its budget is killed with nothing to show.
TRAINING_SHARE = 0.8


class TrainingClock:
    """Whether an iterative model has time for one more epoch (or tree) before its training deadline.

    The deadline is ``TRAINING_SHARE`` of ``budget_s`` after ``started`` (a ``time.monotonic()`` reading: the
    job's start, as the harness counts its budget, so that what the job did before ``fit`` is spent from the
    same budget; None: when the clock is made, at the start of ``fit``). ``budget_s`` None means no limit: the
    clock then never stops a fit. Call ``out_of_time()`` after each epoch, where another would otherwise follow:
    it is True when one more epoch as long as the longest so far (the first one counted from the clock's
    creation, setup included) would end past the deadline, and from then on ``stopped`` is True (recorded as
    ``info_["stopped_by_time_budget"]``). The model then keeps what it has: the weights of its best validation
    epoch, or the trees up to its best iteration.
    """

    def __init__(self, budget_s: float | None, share: float = TRAINING_SHARE, started: float | None = None):
        self._last = time.monotonic()
        start = self._last if started is None else started
        self.deadline = None if budget_s is None else start + share * float(budget_s)
        self.longest = 0.0  # seconds, the longest epoch so far
        self.stopped = False

    def remaining(self) -> float | None:
        """Seconds left before the deadline (never below 0), or None without a budget."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def out_of_time(self) -> bool:
        """Count the epoch that just ended; True when another as long as the longest would pass the deadline."""
        now = time.monotonic()
        self.longest = max(self.longest, now - self._last)
        self._last = now
        if self.deadline is not None and now + self.longest > self.deadline:
            self.stopped = True
        return self.stopped


class Estimator:
    """Stores ``meta``, ``seed`` and ``params``; predicts class indices from ``predict_proba``."""

    Params: ClassVar[type[Params]] = Params  # none: a subclass declares its own

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "defaults" in vars(cls):  # the declaration before typed params: refused rather than silently ignored
            raise TypeError(f"{cls.__name__} declares a defaults dict: declare its params as a nested "
                            "class Params(tabbench.params.Params) with one param(...) field each (tabbench/params.py)")

    def __init__(self, meta: DatasetMeta, seed: int = 0, **params):
        check(self.Params, params, type(self).__name__)
        self.meta = meta
        self.seed = seed
        self.params = merged(self.Params, params)

    def training_clock(self) -> TrainingClock:
        """A clock for this fit's training loop, from the job's time budget (``time_budget_s``, set by the
        harness before ``fit``; None, or unset outside the harness: no limit), counted from the job's start
        (``job_started``, set with it; unset: from now)."""
        return TrainingClock(getattr(self, "time_budget_s", None), started=getattr(self, "job_started", None))

    def predict(self, X):
        """Class indices (the argmax of ``predict_proba``) for classification, else ``predict_values``."""
        if self.meta.is_classification:
            return self.predict_proba(X).argmax(axis=1)
        return self.predict_values(X)

    def predict_proba(self, X):
        raise NotImplementedError(f"{type(self).__name__} is a classifier: implement predict_proba")

    def predict_values(self, X):
        raise NotImplementedError(f"{type(self).__name__} is a regressor: implement predict_values")
