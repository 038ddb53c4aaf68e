"""Categorical columns on a real mixed-type table: UCI Adult (census income).

../shared/datasets/uci/adult/adult-train.csv: 32,561 rows, comma+space separated, no header, '?' for
missing, the income class last. A stratified subsample keeps the test fast. Checks that the data
layer types the columns right, and that every model learns from them, the boosters natively
(XGBoost categorical splits, CatBoost cat_features, LightGBM categorical features), the neural
models through one-hot encoding (MLP) or embeddings (TabNet).
"""

from __future__ import annotations

import functools
import tempfile

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from tabbench.data.cache import DataPaths
from tabbench.data.dataset import DatasetConfig, SplitConfig, load_dataset
from tabbench.data.sources.file import File
from tabbench.data.splits import make_splits
from tabbench.plugins import load_models
from tabbench.spec import BINARY, CATEGORICAL, NUMERIC

from tests.conftest import SHARED, model_case, quick_params

ADULT = "uci/adult/adult-train.csv"
# Column names from adult.names (the file has no header).
ADULT_COLUMNS = ("age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
                 "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week",
                 "native-country", "income")
CATEGORICAL_COLUMNS = {"workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
                       "native-country"}
ROWS = {"train": 2400, "val": 600, "test": 2000}
MODELS = load_models()
AUROC_FLOOR = {"default": 0.85, "knn": 0.80}  # income > 50K; tuned models reach 0.90-0.93 on the full table
# Bigger batches than in the conformance test: 2,400 training rows. TabR: its best validated epoch here is within the
# first 10 (AUROC 0.905 at 10 epochs and at 40 with patience 16, which ran on to about 26).
FAST_HERE = {"tabnet": {"max_epochs": 40, "patience": 10, "batch_size": 512, "virtual_batch_size": 128},
             "tabr": {"n_epochs": 10}}
SKIP = {"npt": "attention over all rows of a 5,000-row table is too slow for this test on a CPU"}

pytestmark = pytest.mark.real_data(ADULT)


@functools.lru_cache(maxsize=None)
def adult():
    paths = DataPaths.from_env(cache=tempfile.mkdtemp(prefix="tabbench-test-"), mirrors=[SHARED])
    cfg = DatasetConfig("adult", File(path=ADULT), format="csv", na_values=("?",), columns=ADULT_COLUMNS)
    return load_dataset(cfg, paths)


@functools.lru_cache(maxsize=None)
def subsample():
    """Random rows of each part of the paper-like holdout split (its parts are already stratified)."""
    dataset = adult()
    split = make_splits(dataset, SplitConfig("holdout"))[0]
    rng = np.random.default_rng(0)
    return {part: np.sort(rng.choice(getattr(split, part), ROWS[part], replace=False)) for part in ROWS}


def test_adult_columns_are_typed_from_the_raw_file():
    dataset = adult()
    meta = dataset.meta
    assert meta.task == BINARY and meta.target == "income" and meta.classes == ("<=50K", ">50K")
    kinds = {c.name: c.kind for c in meta.columns}
    assert {name for name, kind in kinds.items() if kind == CATEGORICAL} == CATEGORICAL_COLUMNS
    assert all(kinds[name] == NUMERIC for name in ("age", "fnlwgt", "education-num", "capital-gain",
                                                     "capital-loss", "hours-per-week"))
    workclass = dataset.X["workclass"]
    assert str(workclass.dtype) == "category"
    assert "Private" in workclass.cat.categories and "?" not in workclass.cat.categories
    assert workclass.isna().sum() > 1000  # '?' became missing (1,836 rows)
    sex = next(c for c in meta.columns if c.name == "sex")
    assert sex.categories == ("Female", "Male")  # levels stripped of the ", " separator's space


@functools.lru_cache(maxsize=None)
def fitted(name):
    dataset, rows = adult(), subsample()
    model = MODELS[name].spec.build(dataset.meta, 0, {**quick_params(name), **FAST_HERE.get(name, {})})
    X, y = dataset.X, dataset.y
    return model.fit(X.iloc[rows["train"]], y[rows["train"]], X.iloc[rows["val"]], y[rows["val"]])


def model_names():
    return [model_case(name, skip=SKIP.get(name)) for name in sorted(MODELS) if BINARY in MODELS[name].spec.tasks]


@pytest.mark.parametrize("name", model_names())
def test_models_learn_from_a_mixed_type_table(name):
    dataset, rows = adult(), subsample()
    model = fitted(name)
    proba = model.predict_proba(dataset.X.iloc[rows["test"]])
    auroc = roc_auc_score(dataset.y[rows["test"]], proba[:, 1])
    print(f"{name} adult AUROC {auroc:.4f}")
    assert auroc >= AUROC_FLOOR.get(name, AUROC_FLOOR["default"]), f"{name}: adult test AUROC {auroc:.3f}"


def categorical_positions():
    return [i for i, c in enumerate(adult().meta.columns) if c.kind == CATEGORICAL]


def check_xgboost(model):
    types = model.model_.get_booster().feature_types
    assert [i for i, t in enumerate(types) if t == "c"] == categorical_positions()


def check_catboost(model):
    assert sorted(model.model_.get_cat_feature_indices()) == categorical_positions()


def check_lightgbm(model):
    infos = model.model_.booster_.dump_model()["feature_infos"]
    # a categorical feature lists its category values; a numeric one only its range
    categorical = [i for i, name in enumerate(model.model_.booster_.feature_name()) if infos[name]["values"]]
    assert categorical == categorical_positions()


def check_mlp(model):
    names = model.encoder_.feature_names_
    assert "workclass=Private" in names and "sex=Female" in names and "age" in names
    assert len(names) == 6 + sum(len(c.categories) for c in adult().meta.columns if c.kind == CATEGORICAL)


def check_tabnet(model):
    meta = adult().meta
    assert model.info_["cat_idxs"] == categorical_positions()
    assert model.info_["cat_dims"] == [len(c.categories) + 1 for c in meta.columns if c.kind == CATEGORICAL]
    embeddings = model.model_.network.embedder.embeddings  # one embedding table per categorical column
    assert [e.num_embeddings for e in embeddings] == model.info_["cat_dims"]


CHECKS = {"xgboost": check_xgboost, "catboost": check_catboost, "lightgbm": check_lightgbm, "mlp": check_mlp,
          "tabnet": check_tabnet}


@pytest.mark.parametrize("name", [model_case(name) for name in sorted(CHECKS)])
def test_categorical_columns_reach_the_library_as_categorical(name):
    if name not in MODELS:
        pytest.skip(f"{name} is not registered")
    CHECKS[name](fitted(name))


@pytest.mark.parametrize("name", [model_case(name) for name in sorted(CHECKS)])
def test_levels_and_missing_values_unseen_in_training_are_predicted(name):
    """Test rows may hold a level the training rows lack, or a missing value; neither may break a model."""
    if name not in MODELS:
        pytest.skip(f"{name} is not registered")
    dataset, rows = adult(), subsample()
    model = fitted(name)
    X = dataset.X.iloc[rows["test"][:50]].copy()
    train_levels = set(dataset.X["native-country"].iloc[rows["train"]].dropna())
    unseen = next(level for level in X["native-country"].cat.categories if level not in train_levels)
    dtype = X["native-country"].dtype
    X["native-country"] = pd.Categorical.from_codes(np.full(len(X), dtype.categories.get_loc(unseen)), dtype=dtype)
    X.loc[X.index[:10], "occupation"] = np.nan
    X.loc[X.index[10:20], "age"] = np.nan
    proba = model.predict_proba(X)
    assert proba.shape == (50, 2) and np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-6)
