"""What a model plugin registers (ModelSpec) and what its estimator is told about the data (DatasetMeta).

The estimator contract, shared by every model (scikit-learn conventions: ``spec.factory(meta, seed, **params)``
builds it from every param of ``ModelSpec.params``, values as the suite wrote them (checked before the
run); ``fit(X, y, X_val, y_val, context=...)`` learns and returns self, ``predict`` / ``predict_proba``), the
layout of ``X`` and ``y``, the job context handed to ``fit`` and the optional capabilities (budget curves,
predicting from other rows, resumable fits, ``info_``) with their defaults are documented where a model author
meets them, on ``tabbench.estimator.Estimator`` and ``JobContext`` (tabbench/estimator.py). What a plugin
declares about its model beyond the estimator (tasks, params, resources, transductive, a pre-run check) is
``ModelSpec`` below; what the estimator implements is declared there only (``ModelSpec.uses_other_rows`` reads
``predict_with_context``).
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
    params to set (see ``problem``); ``tabbench run`` refuses a suite with such a job before any job starts.
    """

    name: str
    factory: Callable[..., Any]
    tasks: frozenset = frozenset(TASKS)
    # None: the factory's ``Params`` (a tabbench.estimator.Estimator subclass declares them once there)
    params: type | None = None
    search_space: Mapping = field(default_factory=dict)
    cpus: float | Callable[[Mapping], float] = 1
    gpus: float | Callable[[Mapping], float] = 0
    # a transductive model sees the test rows' features in fit (``X_unlabelled``, Estimator.fit); a bool or a
    # function of the resolved params (NPT supports both modes)
    transductive: bool | Callable[[Mapping], bool] = False
    description: str = ""
    # Modules the estimator imports: checked before a run starts, and imported once per Ray worker so
    # that every forked job starts with them loaded (a top-level name is checked without importing it).
    requires: tuple = ()
    # The tabbench-harness extra that installs them (pyproject.toml's optional-dependencies: boosters, torch,
    # modern), "" where none does (scikit-learn, always installed; a plugin's own libraries).
    extra: str = ""
    # How to get them; by default the extra's: "pip install 'tabbench-harness[EXTRA]'".
    install_hint: str = ""
    # A seeded fit gives the same predictions on any machine up to float rounding (k-NN, tree ensembles).
    # False for seeded neural training (torch), whose last digits differ across CPUs and grow over the
    # epochs: `tabbench compare` then allows a band instead of an exact match.
    deterministic: bool = True
    check: Callable[..., str | None] | None = None
    # Why the model cannot run on CUDA in this environment (a message), or None: ``device: auto`` then means
    # the CPU for it even where there is a GPU (TabR with a faiss that has no GPU index).
    cuda_problem: Callable[[], str | None] | None = None
    # A small training budget (params far below the defaults) under which one fit takes seconds on a CPU core:
    # what the contract checks (tabbench.testing.check_model) and the project's tests fit the model with.
    quick_params: Mapping = field(default_factory=dict)
    # The keys the estimator's ``info_`` always holds after a fit (the record's "info"), checked by the tests;
    # empty: it records nothing worth keeping; None: not declared.
    info_keys: frozenset | None = None
    # ``estimate(meta, sizes, params, budget_s)``: the seconds one fit takes on the device its params name (one
    # CPU core, or a GPU), by the model's own cost model; ``tabbench plan`` uses it where no record of the
    # method on the dataset gives a time, calibrated on records of the same model there when there are some.
    estimate: Callable[..., float] | None = None
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
        if self.extra and not self.install_hint:
            object.__setattr__(self, "install_hint", f"pip install 'tabbench-harness[{self.extra}]'")
        unknown = set(self.tasks) - set(TASKS)
        if unknown or not self.tasks:
            raise ValueError(f"model {self.name!r}: tasks must be a non-empty subset of {TASKS}, got {sorted(self.tasks)}")
        extra = set(self.search_space) - set(self.default_params)
        if extra:
            raise ValueError(f"model {self.name!r}: search_space names params not in its params: {sorted(extra)}")

    def resolve(self, *layers: Mapping, gpu_available: bool | None = None) -> dict:
        """The params a job runs with: the defaults updated by each of ``layers`` in turn, values as given
        (tabbench.suite.trials.method_params lays a suite's in order); with ``gpu_available``, ``device: auto`` made
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

    @property
    def uses_other_rows(self) -> bool:
        """Whether the model predicts from other rows, declared in one place: its estimator class implements
        ``predict_with_context`` (tabbench.estimator.Estimator, whose default is None). The corruption probe hands
        such a model corrupted rows in place of its training rows, and records this flag."""
        return getattr(self.factory, "predict_with_context", None) is not None

    def is_transductive(self, params: Mapping) -> bool:
        return bool(self.transductive(params) if callable(self.transductive) else self.transductive)

    def build(self, meta: DatasetMeta, seed: int, params: Mapping):
        """The estimator for one job: defaults overridden by ``params``."""
        return self.factory(meta, seed, **self.resolve(params))
