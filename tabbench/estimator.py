"""What a model is to the harness: the base class offered to model plugins (``Estimator``), the job context the
harness hands ``fit`` (``JobContext``) and the training clock made from it (``TrainingClock``).

A subclass declares every parameter it accepts once, as ``class Params(tabbench.params.Params)`` (types,
bounds, choices, defaults, descriptions; see tabbench/params.py); a ``ModelSpec`` whose ``params`` is left out
takes them from there. ``__init__`` checks the values against that class and stores ``meta``, ``seed`` and
``params`` (the defaults updated by the values given, as given).
Classifiers implement ``predict_proba``; ``predict`` is its argmax. Regressors implement
``predict_values`` (values in the target's original units). ``Estimator`` documents the whole contract:
``fit`` and the predictions every model has, then the optional capabilities (budget curves, states at budget
points, predicting from other rows, resumable fits, ``info_``), each with the default a model that does not
provide it has.

A model that trains iteratively asks ``context.training_clock()`` at the start of ``fit`` for a
``TrainingClock`` and stops before the job's time budget runs out (see ``TrainingClock``). One that keeps its
validation-selected state at the suite's budget points (``budget.points_s``) asks ``context.time_points()`` for
``TimePoints`` and offers ``time_points_`` / ``at_time`` (see ``Estimator``).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Mapping

from tabbench.clock import CPU, WALL, reader
from tabbench.params import Params, check, merged
from tabbench.spec import DatasetMeta

#: The share of a job's time budget (``JobContext.time_budget_s``) a model may spend training. The rest belongs to
#: what the same job does around training, under the same limit: loading and encoding the data before ``fit``,
#: predicting the test and validation rows after it. A job over its budget is killed with nothing to show.
TRAINING_SHARE = 0.8

#: The share of a job's time budget that a clock guarding a fit sized up front (``TrainingClock.guard_only``) still
#: keeps free before the job's end, whatever the fit's own reserve for predicting; times the slowdown its training
#: shows against the plan, where that is over 1 (what follows training is likely as much slower: beside a busy
#: loop on its core a job's CPU seconds grew 1.7-fold on this project's Xeon VM, and jobs were killed at a 12 s
#: budget with the unscaled margin).
GUARD_MARGIN = 0.05

#: How many times slower than the passes a model timed during training (its validation passes, per row) its
#: predicting after training may run: the machine may be busier by then. A model that sizes what it keeps for
#: predicting (``TrainingClock.reserve``) from those passes keeps this many times their time (NPT's
#: ``training.prediction_reserve``, TabR's ``budget_stop``; each sizes the rows and passes its own way).
PREDICT_SLOWDOWN = 2.0


class TrainingClock:
    """Whether an iterative model has time for one more epoch (or tree) before its training deadline.

    The deadline is ``TRAINING_SHARE`` of ``budget_s`` after ``started`` (a reading of ``now``, the job's clock,
    tabbench/clock.py: the job's start, as the harness counts its budget, so that what the job did before ``fit``
    is spent from the same budget; None: when the clock is made, at the start of ``fit``). ``budget_s`` None means no limit: the
    clock then never stops a fit. Call ``out_of_time()`` after each epoch, where another would otherwise follow:
    it is True when one more epoch as long as the longest so far (the first one counted from the clock's
    creation, setup included) would end past the deadline, and from then on ``stopped`` is True (recorded as
    ``info_["stopped_by_time_budget"]``). The model then keeps what it has: the weights of its best validation
    epoch, or the trees up to its best iteration.

    On the ``cpu`` clock a model whose epochs its budget decides may first ask ``plan_epochs`` for them: from an
    epoch time this kind of machine measured once and stored, not from the epochs' CPU seconds in this fit
    (which a process sharing the core still moves, through the caches: TabM trained 26 epochs alone and 19
    beside a busy loop on its core when its clock decided). The clock then only guards the planned epochs.
    """

    def __init__(self, budget_s: float | None, share: float = TRAINING_SHARE, started: float | None = None,
                 now=time.monotonic, cpu: bool = False, limit=None):
        self.now, self.cpu = now, cpu  # cpu: ``now`` reads the job's own CPU seconds (tabbench/clock.py)
        self.limit = limit  # the job's tabbench.clock.CpuLimit (None: no watcher), raised by guard_only
        self._last = now()
        start = self._start = self._last if started is None else started
        self.deadline = None if budget_s is None else start + share * float(budget_s)
        self.end = None if budget_s is None else start + float(budget_s)  # the job's end: killed there
        self._share_deadline = self.deadline
        self._reserved = 0.0
        self.longest = 0.0  # seconds, the longest epoch so far
        self.stopped = False
        self.epochs = 0  # epochs counted by out_of_time
        self.epoch_plan: dict | None = None  # plan_epochs': what decided the epochs (recorded by the model)
        self._planned: int | None = None
        self._epoch_key: str | None = None
        self._book = None  # the machine's epoch times (tabbench.machine_book), once plan_epochs has read them
        self._trained_s = 0.0  # seconds of the epochs counted, from begin()
        self._unit_s: float | None = None  # guard_only's: the seconds an epoch (step) was planned to take
        self._first_s = 0.0  # seconds of the first epoch counted
        self._setup_s = 0.0  # plan_epochs': seconds from the clock's start to training's
        self._reserve_s = 0.0  # plan_epochs': the reserve for predicting as training began

    def begin(self) -> None:
        """Training starts now: the first epoch counts from here, not from the clock's creation (for a model
        whose setup, such as timing its own passes, is long and says nothing of an epoch's length)."""
        self._last = self.now()

    def reserve(self, seconds: float) -> None:
        """Keep ``seconds`` free before the job's end for what follows training (predicting; a model that knows
        its prediction's cost, say from its timed validation passes, calls this as it learns it, with
        ``PREDICT_SLOWDOWN`` times that cost): the deadline moves earlier when the training share would leave
        less, never later than the training share's."""
        self._reserved = float(seconds)
        if self.end is not None:
            self.deadline = min(self._share_deadline, self.end - self._reserved)

    def guard_only(self, unit_s: float | None = None) -> None:
        """For a fit whose work was sized before training to fill the training share (NPT's ``steps: "auto"``,
        from the machine's stored speed; the epochs of ``plan_epochs``): the clock guards the planned work instead
        of deciding how much the fit trains. On the ``cpu`` clock the job's end moves to PLANNED_OVERRUN times its
        budget (tabbench/clock.py: a core shared with another busy process costs a job CPU seconds too, 2.5 to 3.5
        times for NPT's step on this project's VMs) and its watcher's limit with it (``limit``), so the same job
        trains the same steps alone or beside a CPU hog; the record shows what it spent. The deadline is then that
        end less the reserve. ``unit_s``: the seconds one epoch (or step) was planned to take; where the mean of the
        epochs after the first (which may hold a compile or a warm-up) comes out slower, the margin kept before the
        job's end (``GUARD_MARGIN``) grows by as much."""
        from tabbench.clock import PLANNED_OVERRUN

        self._unit_s = unit_s
        if self.cpu and self.end is not None:
            budget = self.end - self._start
            self.end = self._start + PLANNED_OVERRUN * budget
            if self.limit is not None:
                self.limit.allow_planned()
        self._guard(1.0)

    def _guard(self, slowdown: float) -> None:
        if self.end is not None:
            self._share_deadline = self.end - GUARD_MARGIN * slowdown * (self.end - self._start)
            self.reserve(self._reserved)

    def plan_epochs(self, shape: Mapping) -> int | None:
        """The epochs a fit of ``shape`` (what sets an epoch's length: the model, its params, the table and its
        rows; JSON-able) trains, decided now, before its first epoch, from the epoch times this kind of machine
        stored for that shape (tabbench.machine_book, ``EPOCH_TIMES``): as many as ``out_of_time``'s rule lets the
        measuring fit's epochs (its first, the mean of the rest, its longest) train between the end of the setup
        (the seconds from the clock's start to training's) and the deadline (the training share, or the job's end
        less the reserve for predicting, whichever comes first) that the measuring fit had, at least one: at the
        same budget, the epochs the measuring fit trained (the mean alone gave more where the first epoch was long:
        TabM 20 planned against 18 trained alone, on a Zen 4). The clock then only guards them (``guard_only``) and
        ``out_of_time`` ends training after them, so the same job trains the same epochs alone or beside a CPU hog
        (tests/test_clock.py). None where no time is stored (this machine's first fit of the shape: its clock
        decides, and ``keep_epoch_time`` stores its epoch times, its setup and its reserve), on a wall clock
        (another process's load is in a wall-clock epoch's time) and without a budget. Training starts now
        (``begin``). ``epoch_plan`` says which, for the record."""
        self.begin()
        if not self.cpu or self.deadline is None:
            return None
        from tabbench.machine_book import EPOCH_TIMES, MachineBook, torch_version

        self._setup_s, self._reserve_s = self._last - self._start, self._reserved
        book = self._book = MachineBook(EPOCH_TIMES)
        self._epoch_key = json.dumps({**shape, "torch": torch_version()}, sort_keys=True, default=str)
        stored = book.get(self._epoch_key)
        if stored is None:
            self.epoch_plan = {"speed": "measured", "machine": book.machine}
            return None
        epoch_s = float(stored["epoch_s"])
        # the setup's seconds and the reserve for predicting (timed from a validation pass, where the model has
        # made one by now) as the measuring fit had them: this fit's own move with the load as an epoch's do
        # (beside a busy loop on its core TabR's setup took 2.5 times its CPU seconds alone, and its reserve moved
        # the deadline: 44 planned epochs against 50 and 63 alone at a 12 s budget)
        setup_s = float(stored.get("setup_s", self._setup_s))
        reserve_s = float(stored.get("reserve_s", self._reserved))
        # out_of_time's rule on epochs of the stored first, then the mean of the rest: after epoch k training goes on
        # while setup + first + (k - 1) rest + longest <= deadline (an entry stored without them: every epoch the mean)
        first_s, longest_s = (float(stored.get(key, epoch_s)) for key in ("first_s", "longest_s"))
        n = int(stored.get("epochs") or 1)
        rest_s = max(1e-9, (epoch_s * n - first_s) / (n - 1) if n > 1 and "first_s" in stored else epoch_s)
        room = min(self._share_deadline, self.end - reserve_s) - self._start - setup_s
        self._planned = max(1, int((room - first_s - longest_s) // rest_s) + 2)
        self.epoch_plan = {"speed": "stored", "machine": book.machine, "epoch_s": epoch_s, "first_s": first_s,
                           "rest_s": rest_s, "longest_s": longest_s, "setup_s": setup_s, "reserve_s": reserve_s,
                           "epochs": self._planned}
        self.guard_only(rest_s)
        return self._planned

    def keep_epoch_time(self) -> None:
        """After training: where ``plan_epochs`` found no stored time for its shape, store the mean epoch this fit
        measured, its first and its longest, the setup before it and the reserve for predicting it held when
        training began (``epoch_s``, ``first_s``, ``longest_s``, ``setup_s``, ``reserve_s``, in ``epoch_plan``
        too), for the machine's later fits of the shape."""
        if self._epoch_key is None or self._planned is not None or not self.epochs:
            return
        epoch_s = self._trained_s / self.epochs
        kept = {"epoch_s": epoch_s, "first_s": self._first_s, "longest_s": self.longest, "setup_s": self._setup_s,
                "reserve_s": self._reserve_s}
        self._book.put(self._epoch_key, {**kept, "epochs": self.epochs})
        self.epoch_plan = {**self.epoch_plan, **kept}

    def remaining(self) -> float | None:
        """Seconds left before the deadline (never below 0), or None without a budget."""
        return None if self.deadline is None else max(0.0, self.deadline - self.now())

    def out_of_time(self) -> bool:
        """Count the epoch that just ended; True when another as long as the longest would pass the deadline."""
        now = self.now()
        self.longest = max(self.longest, now - self._last)
        self._trained_s += now - self._last
        self._last = now
        self.epochs += 1
        if self.epochs == 1:
            self._first_s = self._trained_s
        elif self._unit_s:  # the epochs after the first (which may hold a compile or a warm-up) against the plan
            self._guard(max(1.0, (self._trained_s - self._first_s) / ((self.epochs - 1) * self._unit_s)))
        if self.deadline is not None and now + self.longest > self.deadline:
            self.stopped = True
        if self._planned is not None and self.epochs >= self._planned:
            self.stopped = True  # the epochs the budget planned are done
        return self.stopped


def epoch_shape(estimator, rows: int, val_rows: int = 0) -> dict:
    """What sets how long one of ``estimator``'s epochs takes (``TrainingClock.plan_epochs``' key): its class and
    params, the table's name, columns and classes, and the rows it trains and validates on."""
    meta = estimator.meta
    columns = hashlib.sha256(json.dumps([[c.name, c.kind] for c in meta.columns]).encode()).hexdigest()[:12]
    return {"model": f"{type(estimator).__module__}.{type(estimator).__qualname__}", "params": dict(estimator.params),
            "table": meta.name, "columns": [len(meta.columns), columns], "classes": len(meta.classes),
            "rows": int(rows), "val_rows": int(val_rows)}


class TimePoints:
    """The job's budget points (``JobContext.budget_points_s``: seconds on the job's clock, ``now``, counted from the
    job's start, ``started``, as the time budget counts) as a training loop keeps states for them.

    A loop that validates after each epoch (or tree) calls ``keep(state_s, state, now)`` there, before the epoch
    it just validated can become the best (dated ``now`` too, the one ``elapsed()`` reading of that moment): ``state`` is the state validation had selected until then (the best
    epoch's weights, None before any) and ``state_s`` the elapsed time at which it was validated. Every point
    passed since the last call gets it: the best state among those finished before the point. ``due`` says
    whether a point has passed (so that a loop copies a state only then). At the end of training the loop
    calls ``keep`` once more with its final selection, for the points passed during the last epoch. ``kept``:
    point -> (state_s, state); points never passed (after training) are not in it: the final state is theirs.
    """

    def __init__(self, points_s=(), started: float | None = None, now=time.monotonic):
        self.now = now
        self.points = tuple(sorted(float(p) for p in points_s))
        self.started = now() if started is None else started
        self.kept: dict = {}
        self._next = 0  # the first point not passed yet

    def elapsed(self) -> float:
        """Seconds since the job's start, on the job's clock."""
        return self.now() - self.started

    def passed(self, now: float | None = None) -> bool:
        """Whether a point has passed since the last ``keep`` (by ``now``, an ``elapsed()`` reading; default: now)."""
        now = self.elapsed() if now is None else now
        return self._next < len(self.points) and now >= self.points[self._next]

    @property
    def due(self) -> bool:
        """Whether a point has passed since the last ``keep``."""
        return self.passed()

    def due_within(self, seconds: float) -> bool:
        """Whether the next point not kept yet passes within ``seconds`` from now (a loop that must copy a state
        before a stretch of work the point may fall inside)."""
        return self._next < len(self.points) and self.elapsed() + seconds >= self.points[self._next]

    def keep(self, state_s: float | None, state, now: float | None = None) -> list:
        """``state`` (validated at ``state_s``) for every point passed since the last call, by ``now`` (an
        ``elapsed()`` reading: the moment a loop also dates a state it selects after, so that no point falls
        between the two; default: now); returns those points."""
        now, passed = self.elapsed() if now is None else now, []
        while self._next < len(self.points) and now >= self.points[self._next]:
            passed.append(self.points[self._next])
            self.kept[self.points[self._next]] = (state_s, state if state_s is not None else None)
            self._next += 1
        return passed

    def state_times(self) -> dict:
        """point -> the elapsed time of the state kept for it (None: no state had been validated yet), as
        ``Estimator.time_points_`` gives them."""
        return {p: s for p, (s, _) in self.kept.items()}


@dataclass(frozen=True)
class JobContext:
    """What the harness tells ``fit`` about the job it runs in (TabArena's ``_fit(..., time_limit, num_cpus,
    num_gpus)``), passed as ``fit(..., context=...)``. Every field may be None: a fit outside the harness (a
    test, a notebook) gets ``JobContext()``, with no budget and no checkpoint folder, and trains as it would
    without a harness.

    ``time_budget_s``: the suite's ``budget.time_s`` for the whole job (loading, fit, predicting), or None. A model
    that sizes its training to it reads it (NPT's ``steps: "auto"``); a model that trains iteratively stops in
    time through ``training_clock()`` instead.
    ``clock``: what the budget and the points count (tabbench/clock.py: ``cpu``, the job's own CPU seconds, or
    ``wall``); ``now()`` reads it. ``started``: its reading the budget counts from (the job's start, before its
    data was loaded), or None: the clock's creation, at the start of ``fit``.
    ``checkpoint_dir``: a folder the model may keep its training state in and continue from when the same job
    runs again (kept across re-runs of the job, removed once its record is ``ok``), or None: no resuming.
    ``cpus`` and ``gpus``: what the scheduler reserved for the job (``ModelSpec.resources``; threads are
    already limited to ``cpus`` in the job's process), or None outside a job.
    ``budget_points_s``: the suite's ``budget.points_s`` (ascending seconds from ``started``), at which a model
    that can keeps its validation-selected state (``time_points()``, ``Estimator.time_points_``); () none.
    ``predict_rows``: the rows the job predicts after ``fit`` (its test and validation rows), for a model that
    keeps time for predicting them before ``started + time_budget_s`` (``TrainingClock.reserve``: NPT, TabR); None
    outside a job.
    ``cpu_limit``: a ``cpu``-clock job's ``tabbench.clock.CpuLimit``, which its training clock raises when the
    model plans its work (``TrainingClock.guard_only``); None outside a watched job.
    """

    time_budget_s: float | None = None
    started: float | None = None
    checkpoint_dir: Path | None = None
    cpus: float | None = None
    gpus: float | None = None
    budget_points_s: tuple = ()
    predict_rows: int | None = None
    clock: str = WALL
    cpu_limit: Any = None

    def now(self) -> float:
        """The current reading of the job's clock (seconds; compare it with ``started``)."""
        return reader(self.clock)()

    def time_points(self) -> TimePoints:
        """This fit's budget points, counted from the job's start (none without ``budget_points_s``)."""
        return TimePoints(self.budget_points_s, self.started, reader(self.clock))

    def training_clock(self, share: float = TRAINING_SHARE) -> TrainingClock:
        """A clock for this fit's training loop: ``share`` of the job's time budget, counted from the job's start
        (no limit without a budget)."""
        return TrainingClock(self.time_budget_s, share, started=self.started, now=reader(self.clock),
                             cpu=self.clock == CPU, limit=self.cpu_limit)


class Estimator:
    """The estimator contract (scikit-learn conventions) and the base class that implements its plumbing: it
    stores ``meta``, ``seed`` and ``params`` and predicts class indices from ``predict_proba``.

    ``ModelSpec.factory(meta, seed, **params)`` builds an estimator (a subclass of this one, or any class with
    the same methods, whose ``__init__`` only stores its arguments). The harness then calls ``fit`` once and the
    predictions, and reads the optional capabilities below through ``optional``: a model that provides none of
    them is complete with ``fit`` and ``predict_proba`` (classification) or ``predict_values`` (regression).
    """

    Params: ClassVar[type[Params]] = Params  # none: a subclass declares its own

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "defaults" in vars(cls):  # the declaration before typed params: refused rather than silently ignored
            raise TypeError(f"{cls.__name__} declares a defaults dict: declare its params as a nested "
                            "class Params(tabbench.params.Params) with one param(...) field each (tabbench/params.py)")

    # --- optional capabilities: the defaults below are what a model that does not provide one has ----------

    #: Facts worth recording after ``fit`` (parameter count, best iteration, ...), copied into the job's record as
    #: ``info``; ``ModelSpec.info_keys`` lists the keys a model always records. Default: nothing recorded. A model
    #: that trains against the job's time budget records ``info_["stopped_by_time_budget"]`` (True when the
    #: budget, not convergence or its epoch cap, ended training).
    info_: Mapping[str, Any] = MappingProxyType({})

    #: A budget curve: the step counts below its own at which this fit kept the weights a shorter run would have
    #: used (``at_budget``); the harness records the metrics at each. Default: none.
    budgets_: tuple | list = ()

    #: Budget points (``JobContext.budget_points_s``, seconds from the job's start) at which this fit kept the
    #: state validation had selected: point -> the elapsed time at which that state was validated (None: no
    #: state yet at that point). A point not in it came after training ended: the final state is its. The harness
    #: scores each kept state through ``at_time`` (the record's ``budget_points``). Default None: the model keeps
    #: no states, so a point before its fit returned has none, and later points get the final metrics.
    time_points_: Mapping[float, float | None] | None = None

    #: A fit resumed from its checkpoint (``JobContext.checkpoint_dir``) sets this to the fit seconds of the
    #: attempts it continues (kept in its checkpoint): the record's ``fit_seconds`` is then the whole fit's, as
    #: if it had not been interrupted. Default: 0.0 (nothing resumed).
    resumed_fit_seconds_: float = 0.0

    #: The same fit's CPU seconds (every thread of the process) in the attempts it continues, to their checkpoint:
    #: the record's ``cpu_seconds`` is then the whole job's, every attempt's, as its cost. Default: 0.0.
    resumed_cpu_seconds_: float = 0.0

    #: ``predict_with_context(X, context_X, context_y)``, for a model whose predictions read other rows at predict
    #: time (NPT's table, k-NN's neighbours, ModernNCA's and TabR's candidates): the one declaration of that
    #: capability (``ModelSpec.uses_other_rows`` is True where the estimator class implements it):
    #: row ``i`` of ``X`` predicted as if the rows the model reads at predict time were block ``i`` of
    #: ``context_X`` / ``context_y`` (``len(context_X) == len(X) * n``, rows ``i*n .. (i+1)*n-1``; the same column
    #: layout and encoding as fit's ``X`` and ``y``) in place of the rows fit gave it. ``context_y`` is float64;
    #: NaN marks a row whose target the model does not see (a transductive fit's unlabelled rows). Returns what
    #: ``predict_proba`` (classification) or ``predict`` (regression) returns. The corruption probe
    #: (tabbench/probe.py) hands it other rows with every column permuted. Default None: the model reads no other
    #: rows; the probe predicts it unchanged (the control).
    predict_with_context = None

    def __init__(self, meta: DatasetMeta, seed: int = 0, **params):
        check(self.Params, params, type(self).__name__)
        self.meta = meta
        self.seed = seed
        self.params = merged(self.Params, params)

    def fit(self, X, y, X_val=None, y_val=None, *, context: JobContext = JobContext()):
        """Learn from the training split and return ``self``.

        ``X`` is a pandas DataFrame with the feature columns of ``meta.columns``, in that order: numeric columns
        as float64 (NaN = missing), categorical columns as pandas ``Categorical`` whose categories are
        ``column.categories`` (the same on every split). ``y`` is an int64 array of class indices
        (``0 .. n_classes-1``) for classification and a float64 array for regression. ``X_val`` / ``y_val``, the
        validation split, are for early stopping or selection only, never for training.

        ``context`` (keyword): the job's ``JobContext``; the harness always passes it, so a model's ``fit``
        accepts it even where it ignores it. A transductive model (``ModelSpec.transductive``) also gets
        ``X_unlabelled=``: the test rows' features, never their targets (the harness records the mode and marks
        the method in every leaderboard table; an inductive model never receives test rows).
        """
        raise NotImplementedError(f"{type(self).__name__}: implement fit")

    def predict(self, X):
        """Class indices (the argmax of ``predict_proba``) for classification, else ``predict_values``."""
        if self.meta.is_classification:
            return self.predict_proba(X).argmax(axis=1)
        return self.predict_values(X)

    def predict_proba(self, X):
        """Classification: an ``(n_rows, n_classes)`` array whose column ``k`` is the probability of class index
        ``k`` (``meta.classes[k]``)."""
        raise NotImplementedError(f"{type(self).__name__} is a classifier: implement predict_proba")

    def predict_values(self, X):
        """Regression: one value per row, in the target's original units."""
        raise NotImplementedError(f"{type(self).__name__} is a regressor: implement predict_values")

    def at_budget(self, steps: int) -> "Estimator":
        """An estimator predicting as a run of ``steps`` steps (one of ``budgets_``) would have. Default: there
        is no budget curve (``budgets_`` is empty)."""
        raise ValueError(f"{type(self).__name__} keeps no budget curve; budgets_ is {list(self.budgets_)}")

    def at_time(self, point_s: float) -> "Estimator":
        """An estimator predicting as this fit's validation-selected state at budget point ``point_s`` (a key of
        ``time_points_`` with a state). Default: no states are kept (``time_points_`` is None)."""
        raise ValueError(f"{type(self).__name__} keeps no states at budget points; time_points_ is "
                         f"{self.time_points_}")


def optional(estimator, name: str):
    """The estimator's optional capability ``name`` (an attribute of ``Estimator`` above), or ``Estimator``'s
    default where the estimator does not derive from it and lacks it (a plain factory's class)."""
    return getattr(estimator, name, getattr(Estimator, name))
