"""The estimator contract (tabbench.estimator.Estimator) as checks any model plugin can run on its own model.

    from tabbench.testing import check_model

    def test_my_model_meets_the_tabbench_contract():
        check_model("prior", plugin_files=["tabbench_prior.py"])  # or a ModelSpec, or an installed name

``check_model`` fits the model on real data scikit-learn ships (breast cancer for binary, wine for
multi-class, diabetes for regression; no download) for every task the model supports, and raises
``ContractError`` naming the model, the task and what is wrong. It checks what the harness relies
on, not how good the model is:

* ``fit`` takes the job's context (the keyword ``context``, a ``JobContext``) and returns ``self``;
* ``predict`` gives one finite value per row (regression) or one class index in 0..n_classes-1 per
  row that agrees with the argmax of ``predict_proba`` (classification);
* ``predict_proba`` is (rows, n_classes), finite, non-negative, rows summing to 1;
* the same seed gives the same outputs;
* a class absent from the training rows keeps its column and is not predicted (multi-class);
* categorical columns (pandas Categorical), a level the training rows lack and missing values
  (NaN in numeric and categorical columns) are handled.

The project's own conformance tests (tests/test_conformance.py) run the same checks on every
registered model; the building blocks below let them reuse one fitted model for several checks.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import numpy as np
import pandas as pd

from tabbench.errors import TabbenchError
from tabbench.estimator import JobContext
from tabbench.predictions import (InvalidPredictions, check_class_predictions, check_probabilities,
                                  check_regression_predictions)
from tabbench.spec import BINARY, CATEGORICAL, MULTICLASS, REGRESSION, TASKS, Column, ModelSpec

#: Real data per task, bundled with scikit-learn, so the checks run offline.
CONTRACT_DATASETS = {BINARY: "breast_cancer", MULTICLASS: "wine", REGRESSION: "diabetes"}


class ContractError(TabbenchError, AssertionError):
    """A model breaks the estimator contract. An AssertionError, so pytest reports it as a failed check."""


@functools.lru_cache(maxsize=None)
def contract_data(task: str):
    """(dataset, split) for a task: the scikit-learn set of CONTRACT_DATASETS, the default holdout split."""
    import tempfile

    from tabbench.data.cache import DataPaths
    from tabbench.data.dataset import DatasetConfig, SplitConfig, load_dataset
    from tabbench.data.sources.sklearn import Sklearn
    from tabbench.data.splits import make_splits

    name = CONTRACT_DATASETS[task]
    paths = DataPaths(cache=tempfile.mkdtemp(prefix="tabbench-contract-"))  # a bundled set reads no file
    dataset = load_dataset(DatasetConfig(name, Sklearn(id=name)), paths)
    return dataset, make_splits(dataset, SplitConfig("holdout"))[0]


def _where(spec: ModelSpec, meta) -> str:
    return f"model {spec.name!r} on {meta.name} ({meta.task})"


def fit_checked(spec: ModelSpec, dataset, split, seed: int = 0, params=None,
                rows: Callable[[np.ndarray], np.ndarray] | None = None):
    """Build and fit ``spec`` on the split's training rows (``rows`` filters them by target); fit returns self.
    A transductive model also gets the test rows' features, as in a run."""
    train, val = split.train, split.val
    if rows is not None:
        train, val = train[rows(dataset.y[train])], val[rows(dataset.y[val])]
    params = dict(params or {})
    model = spec.build(dataset.meta, seed, params)
    extra = {}
    if spec.is_transductive(spec.resolve(params)):  # as the harness calls it: test features only
        extra["X_unlabelled"] = dataset.X.iloc[split.test]
    try:  # as the harness calls it: with the job's context, here one outside a job (no budget, no checkpoint)
        returned = model.fit(dataset.X.iloc[train], dataset.y[train], dataset.X.iloc[val], dataset.y[val],
                             context=JobContext(), **extra)
    except TypeError as exc:
        if "keyword argument 'context'" not in str(exc):
            raise
        raise ContractError(f"{_where(spec, dataset.meta)}: fit does not take the keyword argument context, the "
                            "job's JobContext the harness always passes (tabbench/estimator.py); add "
                            "`*, context=JobContext()` to its signature, even where it is not used") from exc
    if returned is not model:
        raise ContractError(f"{_where(spec, dataset.meta)}: fit returned {type(returned).__name__}, not self")
    return model


def check_outputs(spec: ModelSpec, model, meta, X: pd.DataFrame):
    """(predictions, probabilities or None) of a fitted model on X, each checked against the contract."""
    try:
        if not meta.is_classification:
            return check_regression_predictions(model.predict(X), len(X)), None
        proba = check_probabilities(model.predict_proba(X), len(X), meta.n_classes)
        pred = check_class_predictions(model.predict(X), len(X), meta.n_classes)
    except InvalidPredictions as exc:
        raise ContractError(f"{_where(spec, meta)}: {exc}") from None
    disagree = pred != proba.argmax(axis=1)
    if disagree.any():
        raise ContractError(f"{_where(spec, meta)}: predict disagrees with the argmax of predict_proba on "
                            f"{int(disagree.sum())} of {len(X)} rows (column k must be class index k)")
    return pred, proba


def check_same_seed(spec: ModelSpec, model, dataset, split, params=None) -> None:
    """A second fit with the fitted model's seed (0) gives identical outputs on the test rows."""
    X = dataset.X.iloc[split.test]
    again = fit_checked(spec, dataset, split, seed=0, params=params)
    first, second = check_outputs(spec, model, dataset.meta, X), check_outputs(spec, again, dataset.meta, X)
    for a, b, what in zip(first, second, ("predict", "predict_proba")):
        if a is not None and not np.array_equal(a, b):
            rows = int((a != b).reshape(len(X), -1).any(axis=1).sum())
            raise ContractError(f"{_where(spec, dataset.meta)}: two fits with seed 0 give different {what} "
                                f"outputs on {rows} of {len(X)} rows; all randomness must come from the seed")


def fit_without_last_class(spec: ModelSpec, dataset, split, params=None):
    """The model fitted on the training rows of every class but the last (multi-class)."""
    return fit_checked(spec, dataset, split, params=params, rows=lambda y: y != dataset.meta.n_classes - 1)


def check_missing_class(spec: ModelSpec, model, dataset, split) -> None:
    """A model from ``fit_without_last_class`` keeps the absent class's column and never predicts it."""
    meta = dataset.meta
    absent = meta.n_classes - 1
    try:
        pred, _ = check_outputs(spec, model, meta, dataset.X.iloc[split.test])
    except ContractError as exc:  # typically a classifier's columns for the classes it saw, not for the task's
        raise ContractError(f"{exc}; trained without class index {absent}, predict_proba must still have one "
                            f"column per class of the task (meta.n_classes = {meta.n_classes}), the absent "
                            "class's column holding 0") from None
    if (pred == absent).any():
        raise ContractError(f"{_where(spec, meta)}: trained without class index {absent}, it predicts that "
                            f"class for {int((pred == absent).sum())} rows")


def with_categorical(dataset, split):
    """The dataset with its first numeric column binned into a categorical one (quartile levels, plus a
    level only test rows hold) and missing values in both kinds of column, in every split."""
    meta, X = dataset.meta, dataset.X.copy()
    column = meta.numeric[0].name
    levels = ("q1", "q2", "q3", "q4", "only_in_test")
    codes = pd.qcut(X[column].rank(method="first"), 4, labels=False).to_numpy().copy()
    codes[split.test[:5]] = 4
    codes[np.concatenate([split.train[:10], split.val[:3], split.test[5:10]])] = -1  # missing
    X[column] = pd.Categorical.from_codes(codes, categories=list(levels))
    other = meta.numeric[1].name
    X.loc[X.index[np.concatenate([split.train[10:20], split.val[3:6], split.test[10:15]])], other] = np.nan
    columns = tuple(Column(c.name, CATEGORICAL, levels) if c.name == column else c for c in meta.columns)
    return dataclasses.replace(dataset, meta=dataclasses.replace(meta, columns=columns), X=X)


def check_categorical(spec: ModelSpec, dataset, split, params=None) -> None:
    """The model fits and predicts valid outputs with a categorical column and missing values."""
    mixed = with_categorical(dataset, split)
    try:
        model = fit_checked(spec, mixed, split, params=params)
        check_outputs(spec, model, mixed.meta, mixed.X.iloc[split.test])
    except ContractError:
        raise
    except Exception as exc:
        raise ContractError(f"{_where(spec, mixed.meta)} with a categorical column {mixed.meta.categorical[0].name!r} "
                            f"and missing values: {type(exc).__name__}: {exc}") from exc


def _resolve(spec_or_name, plugin_files) -> ModelSpec:
    if isinstance(spec_or_name, ModelSpec):
        return spec_or_name
    from tabbench.plugins import load_models

    models = load_models(tuple(plugin_files))
    if spec_or_name not in models:
        raise ContractError(f"no model named {spec_or_name!r} is registered; registered: {', '.join(sorted(models))}")
    return models[spec_or_name].spec


def check_model(spec_or_name, params=None, plugin_files=(), tasks=TASKS) -> list[str]:
    """Run every contract check on a model (a ModelSpec or a registered name, ``plugin_files`` loaded
    first) for each of ``tasks`` it supports, with ``params`` over its defaults (None: the spec's
    ``quick_params``, its small training budget). Returns the checks that passed, as ``"task: check"``;
    raises ContractError at the first that fails."""
    spec = _resolve(spec_or_name, plugin_files)
    params = spec.quick_params if params is None else params
    passed = []
    for task in (t for t in tasks if t in spec.tasks):
        dataset, split = contract_data(task)
        try:
            model = fit_checked(spec, dataset, split, params=params)
            check_outputs(spec, model, dataset.meta, dataset.X.iloc[split.test])
            passed.append(f"{task}: fit and outputs")
            check_same_seed(spec, model, dataset, split, params)
            passed.append(f"{task}: same seed, same outputs")
            if task == MULTICLASS:
                check_missing_class(spec, fit_without_last_class(spec, dataset, split, params), dataset, split)
                passed.append(f"{task}: class absent from training")
        except ContractError:
            raise
        except Exception as exc:
            raise ContractError(f"{_where(spec, dataset.meta)}: {type(exc).__name__}: {exc}") from exc
        check_categorical(spec, dataset, split, params)
        passed.append(f"{task}: categorical column and missing values")
    if not passed:
        raise ContractError(f"model {spec.name!r} supports none of the tasks {list(tasks)}")
    return passed
