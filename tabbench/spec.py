"""What a model plugin registers (ModelSpec) and what its estimator is told about the data (DatasetMeta).

The estimator contract, shared by every model (scikit-learn conventions):

* ``spec.factory(meta, seed, **params)`` builds an estimator; ``params`` are every param of ``ModelSpec.params``,
  values as the suite wrote them (checked before the run). ``__init__`` only stores its arguments (an
  ``Estimator`` checks them against its ``Params`` first).
* ``fit(X, y, X_val, y_val)`` learns from the training split; the validation split is there for
  early stopping or selection, never for training. Returns ``self``.
* ``predict(X)``: class indices (``0 .. n_classes-1``) for classification, values in the target's
  original units for regression.
* ``predict_proba(X)`` (classification only): an ``(n_rows, n_classes)`` array whose column ``k`` is
  the probability of class index ``k`` (``meta.classes[k]``).
* Optionally ``info_``: a dict of facts worth recording after fit (parameter count, best iteration).
* Transductive models (``ModelSpec.transductive``) get ``fit(X, y, X_val, y_val, X_unlabelled=...)``:
  the test rows' features, never their targets. The harness records the mode in every record and
  marks the method in every leaderboard table; an inductive model never receives test rows.
* The job's time budget (the suite's ``budget.time_s``, or None) is set as ``estimator.time_budget_s``
  before ``fit``, for a model that sizes its training to it (NPT's ``steps: "auto"``). A model that trains
  iteratively stops in time instead: ``Estimator.training_clock()`` (tabbench/estimator.py) gives it
  ``TRAINING_SHARE`` (80%) of the budget for training, counted from the job's start (``estimator.job_started``,
  set with ``time_budget_s``), the rest is for loading data before ``fit`` and predicting after; it keeps its best validation epoch (or iteration) and records
  ``info_["stopped_by_time_budget"]`` (True when the budget, not convergence or its epoch cap, ended
  training). Without a budget training is exactly as it would be without the clock.
* Optionally resumable: when the harness gives a job a checkpoint folder it sets
  ``estimator.checkpoint_dir`` (a path, kept across re-runs of the same job, removed once the job's
  record is ``ok``) before ``fit``; a model may save its training state there and continue from it.
  A resumed fit sets ``resumed_fit_seconds_`` (the fit time of the attempts it continues, kept in its
  checkpoint): the record's ``fit_seconds`` is then the whole fit's, as if it had not been interrupted.
* Optionally a budget curve: ``budgets_`` (a list of step counts) and ``at_budget(steps)`` (an
  estimator predicting as a run of that many steps would have); the harness records the metrics of each.
* Optionally predicting from other rows (``ModelSpec.uses_other_rows``): a model whose predictions read
  other rows at predict time (NPT's table, k-NN's neighbours, ModernNCA's and TabR's candidates) implements
  ``predict_with_context(X, context_X, context_y)``: row ``i`` of ``X`` is predicted as if the rows the model
  reads at predict time were block ``i`` of ``context_X`` / ``context_y`` (``len(context_X) == len(X) * n``, rows
  ``i*n .. (i+1)*n-1``; the same column layout and encoding as fit's ``X`` and ``y``) in place of the rows fit
  gave it. ``context_y`` is float64; NaN marks a row whose target the model does not see (a transductive fit's
  unlabelled rows). Returns what ``predict_proba`` (classification) or ``predict`` (regression) returns. The
  corruption probe (tabbench/probe.py, ``tabbench probe corruption``) hands it other rows with every column
  permuted; a model that declares nothing is predicted unchanged (it reads no other rows). A model that
  reads other rows but cannot be handed others declares ``uses_other_rows`` without the method: the probe
  reports it as not probed rather than as a control.
* Optionally a pre-run check on the spec (``ModelSpec.check``): given the dataset, its split sizes,
  the resolved params and the suite's per-job time budget, a message saying why the job should not
  start (e.g. its estimated cost) and which params to set; ``tabbench run`` refuses such a suite
  before any job starts.

``X`` is a pandas DataFrame with the feature columns of ``meta.columns``, in that order: numeric
columns as float64 (NaN = missing), categorical columns as pandas ``Categorical`` whose categories
are ``column.categories`` (the same on every split). ``y`` is an int64 array of class indices for
classification and a float64 array for regression.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from tabbench.params import Params, added, defaults, merged, run_only

BINARY, MULTICLASS, REGRESSION = "binary", "multiclass", "regression"
TASKS = (BINARY, MULTICLASS, REGRESSION)
NUMERIC, CATEGORICAL = "numeric", "categorical"


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # NUMERIC or CATEGORICAL
    categories: tuple = ()  # levels of a categorical column, in code order


@dataclass(frozen=True)
class DatasetMeta:
    """Everything an estimator may know about a dataset besides its rows."""

    name: str
    task: str
    target: str
    columns: tuple  # of Column, the features in X's column order
    classes: tuple = ()  # original class labels (as strings), index = encoded class

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def is_classification(self) -> bool:
        return self.task != REGRESSION

    @property
    def categorical(self) -> list:
        return [c for c in self.columns if c.kind == CATEGORICAL]

    @property
    def numeric(self) -> list:
        return [c for c in self.columns if c.kind == NUMERIC]


@dataclass(frozen=True)
class SplitSizes:
    """Rows of one split, as a pre-run check sees them (the largest over a dataset's splits)."""

    train: int
    val: int
    test: int


@dataclass(frozen=True)
class ModelSpec:
    """A model as a plugin registers it.

    ``params`` is the model's parameter class (tabbench/params.py: every parameter a suite may set, with its
    type, default and description; a name or value it does not accept is refused before a run starts); left
    out, it is the factory's ``Params`` (tabbench.estimator.Estimator), else no parameters; ``default_params``,
    ``run_params`` and ``added_params`` are read from it. ``tasks`` defaults to all three. ``search_space`` maps
    parameter names to the candidate values used when a suite asks for tuning. ``gpus`` may be a number or a
    function of the resolved params (e.g. ``lambda p: 1 if p["device"] == "cuda" else 0``).
    ``check(meta, sizes, params, budget_s)``, when given, runs before a run starts for every dataset
    and configuration (``sizes``: SplitSizes; ``params``: resolved, ``resolve``;
    ``budget_s``: the suite's ``budget.time_s`` or None) and returns None or a message naming the
    params to set (see ``problem``).
    """

    name: str
    factory: Callable[..., Any]
    tasks: frozenset = frozenset(TASKS)
    # None: the factory's ``Params`` (a tabbench.estimator.Estimator subclass declares them once there)
    params: type | None = None
    search_space: Mapping = field(default_factory=dict)
    cpus: float | Callable[[Mapping], float] = 1
    gpus: float | Callable[[Mapping], float] = 0
    # a transductive model sees the test rows' features in fit (see the module docstring); a bool or a
    # function of the resolved params (NPT supports both modes)
    transductive: bool | Callable[[Mapping], bool] = False
    description: str = ""
    # Modules the estimator imports: checked before a run starts, and imported once per Ray worker so
    # that every forked job starts with them loaded (a top-level name is checked without importing it).
    requires: tuple = ()
    install_hint: str = ""  # how to get them, e.g. "pip install 'tabbench-harness[boosters]'"
    # A seeded fit gives the same predictions on any machine up to float rounding (k-NN, tree ensembles).
    # False for seeded neural training (torch), whose last digits differ across CPUs and grow over the
    # epochs: `tabbench compare` then allows a band instead of an exact match.
    deterministic: bool = True
    check: Callable[..., str | None] | None = None
    # Why the model cannot run on CUDA in this environment (a message), or None: ``device: auto`` then means
    # the CPU for it even where there is a GPU (TabR with a faiss that has no GPU index).
    cuda_problem: Callable[[], str | None] | None = None
    # ``estimate(meta, sizes, params, budget_s)``: the seconds one fit takes on the device its params name (one
    # CPU core, or a GPU), by the model's own cost model; ``tabbench plan`` uses it where no record of the
    # method on the dataset gives a time, calibrated on records of the same model there when there are some.
    estimate: Callable[..., float] | None = None
    # The model predicts from other rows; where its estimator implements ``predict_with_context`` (see the module
    # docstring) the corruption probe hands it corrupted rows in place of its training rows.
    uses_other_rows: bool = False
    # Read from ``params``: every param with its default; those that say how a job runs, not what it computes
    # (threads, a checkpoint interval: ``param(run_only=True)``), which a job's key holds at their defaults; those
    # added after jobs of the model were recorded, with the value that does what the model did before they existed
    # (``param(added_as=...)``), which a job's key leaves out at that value (e.g. the boosters' one_hot: False).
    default_params: Mapping = field(init=False, repr=False, compare=False)
    run_params: frozenset = field(init=False, repr=False, compare=False)
    added_params: Mapping = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.params is None:
            object.__setattr__(self, "params", getattr(self.factory, "Params", Params))
        object.__setattr__(self, "default_params", defaults(self.params))
        object.__setattr__(self, "run_params", run_only(self.params))
        object.__setattr__(self, "added_params", added(self.params))
        unknown = set(self.tasks) - set(TASKS)
        if unknown or not self.tasks:
            raise ValueError(f"model {self.name!r}: tasks must be a non-empty subset of {TASKS}, got {sorted(self.tasks)}")
        extra = set(self.search_space) - set(self.default_params)
        if extra:
            raise ValueError(f"model {self.name!r}: search_space names params not in its params: {sorted(extra)}")

    def resolve(self, *layers: Mapping, gpu_available: bool | None = None) -> dict:
        """The params a job runs with: the defaults updated by each of ``layers`` in turn, values as given
        (tabbench.expand.method_params lays a suite's in order); with ``gpu_available``, ``device: auto`` made
        what it means for this model on such a machine (``auto_device``)."""
        resolved = merged(self.params, *layers)
        if gpu_available is not None and resolved.get("device") == "auto":
            resolved["device"] = self.auto_device(gpu_available)
        return resolved

    def key_params(self, params: Mapping) -> dict:
        """``params`` as a job's key sees them: each of ``run_params`` at its default, each of
        ``added_params`` left out where it has its earlier behaviour's value."""
        key = {**params, **{name: self.default_params[name] for name in self.run_params}}
        return {k: v for k, v in key.items() if not (k in self.added_params and v == self.added_params[k])}

    def missing_requirements(self) -> list:
        import importlib.util

        return [module for module in self.requires if importlib.util.find_spec(module) is None]

    def auto_device(self, gpu_available: bool) -> str:
        """What ``device: auto`` means for this model: ``cuda`` where a GPU is available and the model can
        use it here (``cuda_problem``), else ``cpu``."""
        return "cuda" if gpu_available and not (self.cuda_problem and self.cuda_problem()) else "cpu"

    def resources(self, params: Mapping) -> dict:
        """Ray resources for one job of this model with these (resolved) params."""
        gpus = self.gpus(params) if callable(self.gpus) else self.gpus
        cpus = self.cpus(params) if callable(self.cpus) else self.cpus
        return {"num_cpus": cpus, "num_gpus": gpus}

    def problem(self, meta: DatasetMeta, sizes: SplitSizes, params: Mapping, budget_s: float | None = None):
        """Why a job with these (resolved) params should not start on this dataset (a message), or None."""
        if self.check is None:
            return None
        return self.check(meta, sizes, params, budget_s)

    def is_transductive(self, params: Mapping) -> bool:
        return bool(self.transductive(params) if callable(self.transductive) else self.transductive)

    def build(self, meta: DatasetMeta, seed: int, params: Mapping):
        """The estimator for one job: defaults overridden by ``params``."""
        return self.factory(meta, seed, **self.resolve(params))
