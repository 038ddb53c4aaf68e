"""What the pytabkit-based plugins (realmlp.py, tabr.py) share: one Estimator around a pytabkit estimator.

pytabkit (Holzmüller et al.) ships scikit-learn estimators that do their own preprocessing. This
wrapper hands one our splits as they are:

    X (train), y  ─┐                      numeric NaN -> training mean (pytabkit refuses NaN)
    X_val, y_val  ─┴─> pytabkit .fit(X, y, X_val=..., y_val=...)   our validation rows, not an
                                                                   internal split, pick the epoch
    X (any rows)  ───> .predict_proba / .predict ──> SeenClasses.widen -> (rows, n_classes)

Categorical columns stay pandas ``Categorical``: pytabkit encodes them itself (a missing value or a
level the training rows lack becomes its "missing" code). Classes are encoded to the ones present in
the training split (validation rows of other classes are dropped), and the probabilities are widened
back to all ``meta.n_classes`` columns.

A subclass names the pytabkit classes (``classifier``, ``regressor``: attribute names in
``pytabkit.models.sklearn.sklearn_interfaces``) and declares its ``Params``; every declared param
other than ``device``/``n_jobs`` whose value is not None is passed through to pytabkit (None: the
package's own default for the task).

Time budget: a ``time_limited`` subclass (RealMLP, TabR) trains under the job's own clock (tabbench/clock.py:
CPU seconds unless the job asks for a GPU) through one Lightning callback in the Trainer pytabkit builds
(``budget_stop``): its epochs planned from the epoch time the machine stored for the same fit
(``TrainingClock.plan_epochs``), guarded after each epoch and batch, time kept for predicting; it keeps its best
validation epoch as always and records ``info_["stopped_by_time_budget"]``, ``epochs`` and ``epoch_plan``.
pytabkit's own limit is not used: RealMLP's ``time_to_fit_in_seconds`` is Lightning's ``max_time``, wall
seconds that other processes move (a job recorded under the cpu clock would have stopped on a wall clock), and
TabR's fit ignores it.

Budget points (``JobContext.budget_points_s``; tabbench/estimator.py, ``Estimator.time_points_``): a subclass
that names the pytabkit module which builds its Lightning Trainer (``trainer_module``) gets, for the fit, a
Trainer with one more callback of its own (``point_callback``: how its pytabkit model keeps its best epoch), and
``at_time`` gives an estimator that predicts with a point's weights swapped into the fitted pytabkit model for
each call and the final ones put back after it (``current_state``, ``restore_state``; a deep copy of a pytabkit
estimator does not predict: its Lightning trainer loses its logger). Memory: a point's weights on the CPU each.

pytabkit's own printing (TabR prints its configuration and every epoch) and Lightning's INFO banners
are silenced around fit and predict (``quiet``).

Determinism: pytabkit seeds torch from ``random_state``; the fit runs inside ``torch_seeded``, so the
caller's random state is left as it was, and on ``n_jobs`` torch threads.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import io
import logging
import tempfile

import numpy as np
import pandas as pd

from tabbench.estimator import PREDICT_SLOWDOWN, Estimator, JobContext, epoch_shape
from tabbench_plugins.devices import resolve_device
from tabbench_plugins.labels import SeenClasses, validation
from tabbench_plugins.torch_training import torch_seeded, torch_threads

#: Params of every pytabkit plugin that are ours, not pytabkit's.
OWN_PARAMS = ("device", "n_jobs")
#: Loggers of Lightning, which pytabkit trains with: its banners ("GPU available: ...") at INFO
LIGHTNING_LOGGERS = ("lightning.pytorch", "pytorch_lightning", "lightning.fabric", "lightning_fabric")


@contextlib.contextmanager
def quiet():
    """Silence what pytabkit prints unconditionally (TabR prints its config and every epoch) and Lightning's
    INFO banners and tips; the logger levels and stdout are restored afterwards. Warnings still show."""
    loggers = [logging.getLogger(name) for name in LIGHTNING_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


@contextlib.contextmanager
def trainer_callbacks(module_name: str, callbacks: list):
    """pytabkit builds its Lightning Trainer inside its fit, from the ``pl`` (Lightning) that the module
    ``module_name`` imported: while the block runs, that module's ``pl`` is a view of Lightning whose Trainer gets
    ``callbacks`` beside its own (Lightning runs them in list order, model checkpoints last). Nested blocks add up."""
    module = importlib.import_module(module_name)
    lightning = module.pl

    class Trainer(lightning.Trainer):
        def __init__(self, *args, callbacks_=tuple(callbacks), callbacks=(), **kwargs):
            super().__init__(*args, callbacks=[*callbacks, *callbacks_], **kwargs)

    class LightningWithCallbacks:
        def __getattr__(self, name):
            return Trainer if name == "Trainer" else getattr(lightning, name)

    module.pl = LightningWithCallbacks()
    try:
        yield
    finally:
        module.pl = lightning


#: Predicting is timed by the validation passes (the same forward pass per row predicted; TabR's also over the
#: training rows as candidates): the margin kept for it is ``tabbench.estimator.PREDICT_SLOWDOWN`` times their
#: rate, for a machine busier when it predicts, and at least this many seconds (loading the best checkpoint,
#: building the predict loop)
PREDICT_MARGIN_MIN_S = 1.0


def budget_stop(estimator, clock, context, shape, val_rows: int):
    """A Lightning callback ending a pytabkit model's training (``estimator``'s, in the Trainer of its
    ``trainer_module``) on the job's clock, so that the job ends by itself with its best checkpoint and its
    predictions before the harness kills it, also where the machine turns busy mid-run:

    * at the start of training (after Lightning's sanity check has timed a validation pass, where the Trainer has
      one: RealMLP's has none, so its reserve for predicting comes with its first validation): the epochs are
      planned from the epoch time this machine stored for the fit's ``shape`` (``TrainingClock.plan_epochs``;
      the clock then guards them, below, instead of deciding them), and stored after training where none was;

    * after each epoch (validated and checkpointed by then): stop when one more epoch as long as the longest
      (``TrainingClock.out_of_time``) would pass the training deadline, or the prediction margin's start;
    * after each batch: stop, the epoch unfinished, when one more batch as long as the longest so far and the
      validation pass that a stop brings (Lightning validates the part of the epoch run, and its checkpoint may
      keep it) would pass either: an epoch slower than those before (a busy machine), or a first epoch longer
      than the whole budget, no longer runs past the deadline;
    * the prediction margin: the job's test and validation rows (``context.predict_rows``) at the rate the last
      validation pass (Lightning's sanity check the first, where the Trainer has one) predicted its ``val_rows``,
      ``PREDICT_SLOWDOWN`` times and at least ``PREDICT_MARGIN_MIN_S``, kept before the job's end
      (``TrainingClock.reserve``: the deadline moves earlier when the training share would leave less).

    ``estimator.clock_stopped_`` records that the clock, not early stopping or the epoch cap, ended training."""
    lightning = importlib.import_module(estimator.trainer_module).pl
    clock_now = clock.now  # the job's clock (tabbench/clock.py), as the deadline counts

    class BudgetStop(lightning.Callback):
        longest_batch, batch_start, validation_start, validation_s = 0.0, None, None, 0.0

        def _stop(self, trainer):
            trainer.should_stop = estimator.clock_stopped_ = True

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            self.batch_start = clock_now()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            now = clock_now()
            self.longest_batch = max(self.longest_batch, now - self.batch_start)
            if not trainer.should_stop and now + self.longest_batch + self.validation_s > clock.deadline:
                self._stop(trainer)

        def on_validation_start(self, trainer, pl_module):
            self.validation_start = clock_now()

        def on_validation_end(self, trainer, pl_module):
            self.validation_s = clock_now() - self.validation_start
            rows = val_rows
            if trainer.sanity_checking:  # a few batches of the validation rows, not all of them
                done, of = sum(_counts(trainer.num_sanity_val_batches)), sum(_counts(trainer.num_val_batches))
                rows = rows * min(done, of) / of if of else 0
            if rows and context.predict_rows:
                row_s = self.validation_s / rows
                clock.reserve(max(PREDICT_SLOWDOWN * row_s * context.predict_rows, PREDICT_MARGIN_MIN_S))

        def on_train_start(self, trainer, pl_module):
            clock.plan_epochs(shape)

        def on_train_end(self, trainer, pl_module):
            clock.keep_epoch_time()

        def on_train_epoch_end(self, trainer, pl_module):
            estimator.epochs_run_ = trainer.current_epoch + 1  # recorded as info["epochs"]
            if not trainer.should_stop and clock.out_of_time():
                self._stop(trainer)

    return BudgetStop()


def _counts(value) -> list:
    """Lightning's batch counts per validation loader, as a list (a number or a list, depending on the version)."""
    return list(value) if isinstance(value, (list, tuple)) else [value]


class PytabkitEstimator(Estimator):
    classifier: str = ""
    regressor: str = ""
    #: Whether the job's time budget limits the fit (``budget_stop``, in the Trainer of ``trainer_module``)
    time_limited: bool = False
    #: The pytabkit module whose ``pl.Trainer`` trains the model (``trainer_callbacks``), for the time limit and
    #: the budget points; "" keeps none
    trainer_module: str = ""

    def library_params(self) -> dict:
        """The params passed to the pytabkit constructor: every declared one that is set."""
        return {k: v for k, v in self.params.items() if k not in OWN_PARAMS and v is not None}

    def _frame(self, X: pd.DataFrame) -> pd.DataFrame:
        """X as pytabkit gets it: numeric NaN replaced by the training mean (a subclass may encode more)."""
        X = X.copy()
        for name, mean in self.numeric_means_.items():
            X[name] = X[name].fillna(mean)
        return X

    def resolve_device(self, asked: str) -> str:
        """The device the fit runs on (devices.resolve_device; a model may narrow it)."""
        return resolve_device(asked)

    def fit(self, X, y, X_val=None, y_val=None, *, context: JobContext = JobContext()):
        from pytabkit.models.sklearn import sklearn_interfaces

        p = self.params
        clock = context.training_clock()
        self.device_ = self.resolve_device(p["device"])
        means = X[[c.name for c in self.meta.numeric]].mean()
        self.numeric_means_ = means.fillna(0.0).to_dict()  # an all-missing column: 0
        self.seen_ = SeenClasses(y, self.meta.n_classes) if self.meta.is_classification else None
        self.model_ = None
        if self.seen_ is not None and len(self.seen_) < 2:
            self.info_ = {"device": self.device_, "single_class": True}
            return self  # predict_proba: the one class
        target = self.seen_.encode(y) if self.seen_ is not None else np.asarray(y, dtype=np.float64)
        val = validation(X_val, y_val, self.seen_)
        if val is None:
            raise ValueError(f"{type(self).__name__} on {self.meta.name}: no validation rows (with a class the training "
                             "rows hold) to pick its epoch; use a split with a validation part")
        X_v, y_v = val
        name = self.classifier if self.meta.is_classification else self.regressor
        points = context.time_points()
        keeping = bool(points.points and self.trainer_module)
        recorder = contextlib.nullcontext()
        if keeping:
            recorder = trainer_callbacks(self.trainer_module, [self.point_callback(points)])
        # tmp_folder: where pytabkit's Lightning checkpoints go (not the working directory); gone after fit
        with tempfile.TemporaryDirectory(prefix="tabbench-pytabkit-") as tmp, quiet():
            self.model_ = getattr(sklearn_interfaces, name)(
                device=self.device_, random_state=self.seed, n_threads=p["n_jobs"], verbosity=0,
                tmp_folder=tmp, **self.library_params())
            with torch_threads(p["n_jobs"]), torch_seeded(self.seed, self.device_), \
                    self.time_limit(clock, context, epoch_shape(self, len(X), len(X_v)), len(X_v)), recorder:
                self.model_.fit(self._frame(X), target, X_val=self._frame(X_v), y_val=y_v)
        self.info_ = {"device": self.device_, "library": f"pytabkit.{name}"}
        if self.epochs_run_ is not None:  # counted by the time limit's callback
            self.info_["epochs"] = self.epochs_run_
        if clock.epoch_plan:  # planned by it
            self.info_["epoch_plan"] = clock.epoch_plan
        if keeping or not points.points:
            self.time_points_ = points.state_times()
            self.point_states_ = {point: state for point, (_, state) in points.kept.items()}
        if self.time_limited:
            self.info_["stopped_by_time_budget"] = self.clock_stopped_
        return self

    @contextlib.contextmanager
    def time_limit(self, clock, context: JobContext, shape: dict, val_rows: int):
        """Around pytabkit's fit, for a ``time_limited`` model with a budget: its Trainer gets ``budget_stop``
        (``trainer_callbacks``), which plans the epochs for the fit's ``shape`` and stops them on the job's clock;
        pytabkit then keeps its best validation epoch as always. (pytabkit's own limit, fit's
        ``time_to_fit_in_seconds``, is Lightning's ``max_time``: wall seconds, which other processes move; TabR's
        fit ignores it.)"""
        self.clock_stopped_, self.epochs_run_ = False, None
        if not self.time_limited or clock.deadline is None:
            yield
            return
        with trainer_callbacks(self.trainer_module, [budget_stop(self, clock, context, shape, val_rows)]):
            yield

    def point_callback(self, points):
        """A Lightning callback that keeps, for each budget point passed (``points``, ``TimePoints``), the weights
        the pytabkit model had selected by validation before it (a subclass with a ``trainer_module`` says how)."""
        raise NotImplementedError(f"{type(self).__name__} names a trainer_module: implement point_callback")

    def current_state(self):
        """A copy of the fitted pytabkit model's weights, in the form ``restore_state`` takes."""
        raise NotImplementedError(f"{type(self).__name__} names a trainer_module: implement current_state")

    def restore_state(self, state) -> None:
        """Put ``state`` (as ``point_callback`` kept it, or ``current_state`` copied it) into the fitted model."""
        raise NotImplementedError(f"{type(self).__name__} names a trainer_module: implement restore_state")

    swapped_state_ = None  # at_time's: the weights each prediction swaps in

    @contextlib.contextmanager
    def _weights(self):
        """Around a prediction: the point's weights in the model (``at_time``), the final ones back after."""
        if self.swapped_state_ is None:
            yield
            return
        final = self.current_state()
        self.restore_state(self.swapped_state_)
        try:
            yield
        finally:
            self.restore_state(final)

    def at_time(self, point_s: float):
        """This fit predicting with the weights it had selected at budget point ``point_s``."""
        other = copy.copy(self)
        other.swapped_state_ = self.point_states_[point_s]
        other.info_ = {"state_s": self.time_points_[point_s]}
        return other

    def predict_proba(self, X):
        if self.model_ is None:
            return self.seen_.constant(len(X))
        with torch_threads(self.params["n_jobs"]), quiet(), self._weights():
            proba = self.model_.predict_proba(self._frame(X))
        # pytabkit's columns follow its classes_ (sorted seen positions 0..k-1), as SeenClasses numbers them
        assert list(self.model_.classes_) == list(range(len(self.seen_))), (
            f"pytabkit's classes {list(self.model_.classes_)} are not the seen positions 0..{len(self.seen_) - 1}")
        return self.seen_.widen(proba)

    def predict_values(self, X):
        with torch_threads(self.params["n_jobs"]), quiet(), self._weights():
            return np.asarray(self.model_.predict(self._frame(X)), dtype=np.float64).reshape(len(X))
