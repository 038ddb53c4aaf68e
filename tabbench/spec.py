"""What a model plugin registers (ModelSpec) and what its estimator is told about the data (DatasetMeta).

The estimator contract, shared by every model (scikit-learn conventions: ``spec.factory(meta, seed, **params)``
builds it, ``fit(X, y, X_val, y_val, context=...)`` learns and returns self, ``predict`` / ``predict_proba``), the
layout of ``X`` and ``y``, the job context handed to ``fit`` and the optional capabilities (budget curves,
predicting from other rows, resumable fits, ``info_``) with their defaults are documented where a model author
meets them, on ``tabbench.estimator.Estimator`` and ``JobContext`` (tabbench/estimator.py). What a plugin
declares about its model beyond the estimator (tasks, params, resources, transductive, a pre-run check) is
``ModelSpec`` below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

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

    ``default_params`` lists every parameter the model accepts (a suite may override any of them,
    and naming another one is an error caught before a run starts); left out, it is the factory's
    ``defaults`` (tabbench.estimator.Estimator). ``tasks`` defaults to all three. ``search_space`` maps parameter
    names to the candidate values used when a suite asks for tuning. ``gpus`` may be a number or a
    function of the resolved params (e.g. ``lambda p: 1 if p["device"] == "cuda" else 0``).
    ``check(meta, sizes, params, budget_s)``, when given, runs before a run starts for every dataset
    and configuration (``sizes``: SplitSizes; ``params``: defaults overridden by the suite's;
    ``budget_s``: the suite's ``budget.time_s`` or None) and returns None or a message naming the
    params to set (see ``problem``); ``tabbench run`` refuses a suite with such a job before any job starts.
    """

    name: str
    factory: Callable[..., Any]
    tasks: frozenset = frozenset(TASKS)
    # None: the factory's ``defaults`` (a tabbench.estimator.Estimator subclass declares them once there)
    default_params: Mapping | None = None
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
    install_hint: str = ""  # how to get them, e.g. "pip install 'tabbench-harness[boosters]'"
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
    # The model predicts from other rows; where its estimator implements ``predict_with_context``
    # (tabbench.estimator.Estimator) the corruption probe hands it corrupted rows in place of its training rows.
    uses_other_rows: bool = False
    # Params that say how a job runs, not what it computes (threads, a checkpoint interval): a job's key
    # holds their default values, so a re-run with other values finds the jobs already done (its records
    # keep the values it ran with).
    run_params: frozenset = frozenset()
    # Params added after jobs of this model were recorded, each with the value that does what the model did
    # before it existed: at that value a job's key leaves the param out, so recorded jobs are still found
    # done and a killed run still resumes from its checkpoint (e.g. the boosters' one_hot: False).
    added_params: Mapping = field(default_factory=dict)

    def __post_init__(self):
        if self.default_params is None:
            object.__setattr__(self, "default_params", dict(getattr(self.factory, "defaults", {})))
        unknown = set(self.tasks) - set(TASKS)
        if unknown or not self.tasks:
            raise ValueError(f"model {self.name!r}: tasks must be a non-empty subset of {TASKS}, got {sorted(self.tasks)}")
        for field_name in ("search_space", "run_params", "added_params"):
            extra = set(getattr(self, field_name)) - set(self.default_params)
            if extra:
                raise ValueError(f"model {self.name!r}: {field_name} names params not in default_params: {sorted(extra)}")

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
        """Why a job with these params should not start on this dataset (a message), or None."""
        if self.check is None:
            return None
        return self.check(meta, sizes, {**self.default_params, **params}, budget_s)

    def is_transductive(self, params: Mapping) -> bool:
        return bool(self.transductive(params) if callable(self.transductive) else self.transductive)

    def build(self, meta: DatasetMeta, seed: int, params: Mapping):
        """The estimator for one job: defaults overridden by ``params``."""
        return self.factory(meta, seed, **{**self.default_params, **params})
