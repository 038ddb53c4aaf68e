"""Every registered model, on every task it supports, against the estimator contract, on real data.

binary:      breast cancer (scikit-learn's bundled WDBC), AUROC floor
multiclass:  wine (scikit-learn), accuracy floor
regression:  concrete (../shared/datasets/uci/concrete), RMSE ceiling in MPa, the target's own units

Each model trains with a small budget (``FAST``) so that the whole file runs in a few minutes on two
CPU cores; the floors are set well below what the models reach with those budgets (the paper's tuned
numbers: breast cancer AUROC 0.978-0.997, concrete RMSE 4.3-5.9, k-NN 8.5).
"""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, mean_squared_error, roc_auc_score

from tabbench.data.cache import DataPaths
from tabbench.data.dataset import DatasetConfig, SplitConfig, load_dataset
from tabbench.data.splits import make_splits
from tabbench.plugins import load_models
from tabbench.spec import BINARY, MULTICLASS, REGRESSION, TASKS

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "datasets"
MODELS = load_models()

# Small budgets per model; keys a model does not accept are ignored (see fast_params).
FAST = {
    "xgboost": {"n_estimators": 300, "early_stopping_rounds": 20},
    "catboost": {"n_estimators": 300, "early_stopping_rounds": 20},
    "lightgbm": {"n_estimators": 300, "early_stopping_rounds": 20},
    "random_forest": {"n_estimators": 100},
    "gradient_boosting": {"n_estimators": 100},
    "mlp": {"max_epochs": 60, "patience": 10},
    "tabnet": {"max_epochs": 100, "patience": 20, "batch_size": 128, "virtual_batch_size": 32},
    # A small NPT (2 layers, e=16) for a few hundred steps; lambda starts at 0.5 so that the short run
    # spends half its loss on the targets (the paper's runs anneal from 1 over thousands of steps).
    "npt": {"e": 16, "n_layers": 2, "n_heads": 4, "steps": 300, "lambda_init": 0.5},
}

# Quality bars on the held-out test split; a model may have its own where the paper shows it weaker.
AUROC_FLOOR = {"default": 0.97}
ACCURACY_FLOOR = {"default": 0.80}
# concrete's target has std 16.7 MPa; k-NN: 8.5 in the paper. NPT's budget here (300 steps of a
# 2-layer model) is a sliver of the paper's 10,000 steps; its own quality test is tests/test_npt.py.
RMSE_CEILING = {"default": 7.5, "knn": 10.0, "npt": 10.0}

DATASETS = {
    BINARY: DatasetConfig("breast_cancer", "sklearn", id="breast_cancer"),
    MULTICLASS: DatasetConfig("wine", "sklearn", id="wine"),
    REGRESSION: DatasetConfig("concrete", "file", path="uci/concrete/concrete.txt", format="whitespace"),
}
DEVICE_MODELS = ("xgboost", "catboost", "lightgbm", "mlp", "tabnet")


def fast_params(name: str) -> dict:
    spec = MODELS[name].spec
    return {k: v for k, v in FAST.get(name, {}).items() if k in spec.default_params}


def cases(tasks=TASKS):
    """(model, task) pairs; a task the model does not support is listed as skipped."""
    out = []
    for name in sorted(MODELS):
        for task in tasks:
            supported = task in MODELS[name].spec.tasks
            marks = () if supported else pytest.mark.skip(reason=f"{name} does not support {task}")
            out.append(pytest.param(name, task, marks=marks, id=f"{name}-{task}"))
    return out


@functools.lru_cache(maxsize=None)
def task_data(task: str):
    """(dataset, split) for a task: the paper's 0.7/0.1/0.2-like holdout, seed 42."""
    cfg = DATASETS[task]
    if cfg.source == "file" and not (SHARED / cfg.path).exists():
        pytest.skip(f"{SHARED / cfg.path} is absent (real data lives in ../shared/datasets)")
    import tempfile

    paths = DataPaths.from_env(cache=tempfile.mkdtemp(prefix="tabbench-test-"), mirrors=[SHARED])
    dataset = load_dataset(cfg, paths)
    assert dataset.meta.task == task
    return dataset, make_splits(dataset, SplitConfig("holdout"))[0]


def fit(name: str, task: str, seed: int = 0, rows=None):
    dataset, split = task_data(task)
    train = split.train if rows is None else split.train[rows(dataset.y[split.train])]
    val = split.val if rows is None else split.val[rows(dataset.y[split.val])]
    model = MODELS[name].spec.build(dataset.meta, seed, fast_params(name))
    returned = model.fit(dataset.X.iloc[train], dataset.y[train], dataset.X.iloc[val], dataset.y[val])
    assert returned is model, "fit must return self"
    return model


@functools.lru_cache(maxsize=None)
def fitted(name: str, task: str):
    """One fitted model per (model, task), shared by the tests below."""
    return fit(name, task)


def floor(table: dict, name: str) -> float:
    return table.get(name, table["default"])


# --- the registry ---------------------------------------------------------------------------------


def test_every_model_lists_its_search_space_in_its_params():
    for name, registered in MODELS.items():
        spec = registered.spec
        for key, values in spec.search_space.items():
            assert key in spec.default_params, f"{name}: search key {key!r} is not a param"
            assert isinstance(values, (list, tuple)) and len(values) > 0, f"{name}: empty candidates for {key!r}"


def grid_size(space) -> int:
    return int(np.prod([len(v) for v in space.values()])) if space else 0


@pytest.mark.parametrize("name,size", [("random_forest", 24), ("gradient_boosting", 48), ("xgboost", 48),
                                       ("lightgbm", 48), ("catboost", 48), ("tabnet", 48), ("knn", 40),
                                       ("mlp", 162)])
def test_search_space_sizes_follow_the_paper(name, size):
    if name not in MODELS:
        pytest.skip(f"{name} is not registered")
    assert grid_size(MODELS[name].spec.search_space) == size


@pytest.mark.parametrize("name", ["gradient_boosting", "xgboost", "lightgbm", "catboost"])
def test_boosting_grid_is_the_papers(name):
    assert MODELS[name].spec.search_space == {
        "learning_rate": [1e-3, 1e-2, 0.1, 0.3], "max_depth": [3, 5, 10], "n_estimators": [50, 100, 500, 1000]}


@pytest.mark.parametrize("name", DEVICE_MODELS)
def test_device_param_decides_the_gpu_request(name):
    spec = MODELS[name].spec
    assert spec.default_params["device"] == "auto"
    params = dict(spec.default_params)
    assert spec.resources({**params, "device": "cpu"})["num_gpus"] == 0
    # LightGBM's wheel has no CUDA: it never asks for a GPU.
    assert spec.resources({**params, "device": "cuda"})["num_gpus"] == (0 if name == "lightgbm" else 1)


@pytest.mark.parametrize("name", [n for n in DEVICE_MODELS if n != "lightgbm"])
def test_cuda_without_a_cuda_device_is_a_clear_error(name):
    from tabbench_plugins.baseline_utils import cuda_available

    if cuda_available():
        pytest.skip("this machine has a CUDA device")
    dataset, split = task_data(BINARY)
    model = MODELS[name].spec.build(dataset.meta, 0, {**fast_params(name), "device": "cuda"})
    with pytest.raises(RuntimeError, match="no CUDA device"):
        model.fit(dataset.X.iloc[split.train], dataset.y[split.train], dataset.X.iloc[split.val],
                  dataset.y[split.val])


def test_listing_models_imports_no_heavy_library():
    code = ("import sys; from tabbench.plugins import load_models; load_models(); "
            "heavy = {'torch', 'xgboost', 'catboost', 'lightgbm', 'pytorch_tabnet'} & set(sys.modules); "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# --- the estimator contract -------------------------------------------------------------------------


@pytest.mark.parametrize("name,task", cases())
def test_fit_predict_contract_and_quality(name, task):
    dataset, split = task_data(task)
    model = fitted(name, task)
    X_test, y_test = dataset.X.iloc[split.test], dataset.y[split.test]
    pred = np.asarray(model.predict(X_test))
    assert pred.shape == (len(split.test),)
    info = getattr(model, "info_", {}) or {}
    if "device" in info and name in DEVICE_MODELS:
        from tabbench_plugins.baseline_utils import cuda_available

        assert info["device"] == ("cuda" if cuda_available() and name != "lightgbm" else "cpu")
    if info.get("best_iteration") is not None:  # early stopping kept a tree count within the cap
        params = {**MODELS[name].spec.default_params, **fast_params(name)}
        assert 0 <= info["best_iteration"] < params["n_estimators"]

    if task == REGRESSION:
        assert pred.dtype.kind == "f" and np.isfinite(pred).all()
        rmse = float(np.sqrt(mean_squared_error(y_test, pred)))
        print(f"{name} concrete RMSE {rmse:.3f}")
        assert rmse <= floor(RMSE_CEILING, name), f"{name}: concrete test RMSE {rmse:.2f}"
        return

    proba = np.asarray(model.predict_proba(X_test))
    assert proba.shape == (len(split.test), dataset.meta.n_classes)
    assert np.isfinite(proba).all() and (proba >= 0).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-6)
    assert pred.dtype.kind in "iu" and set(np.unique(pred)) <= set(range(dataset.meta.n_classes))
    np.testing.assert_array_equal(pred, proba.argmax(axis=1))  # predict agrees with the column order
    if task == BINARY:
        # column 1 is the probability of class index 1 ('malignant'): swapped columns would score ~0.03
        auroc = roc_auc_score(y_test, proba[:, 1])
        print(f"{name} breast cancer AUROC {auroc:.4f}")
        assert auroc >= floor(AUROC_FLOOR, name), f"{name}: breast cancer test AUROC {auroc:.3f}"
    else:
        accuracy = accuracy_score(y_test, pred)
        print(f"{name} wine accuracy {accuracy:.4f}")
        assert accuracy >= floor(ACCURACY_FLOOR, name), f"{name}: wine test accuracy {accuracy:.3f}"


@pytest.mark.parametrize("name,task", cases((BINARY, REGRESSION)))
def test_same_seed_same_predictions(name, task):
    dataset, split = task_data(task)
    X_test = dataset.X.iloc[split.test]
    first, again = fitted(name, task), fit(name, task, seed=0)
    if task == REGRESSION:
        np.testing.assert_array_equal(first.predict(X_test), again.predict(X_test))
    else:
        np.testing.assert_array_equal(first.predict_proba(X_test), again.predict_proba(X_test))


@pytest.mark.parametrize("name,task", cases((MULTICLASS,)))
def test_class_missing_from_training_keeps_its_column(name, task):
    """Train on wine without its class 2: probabilities still have a column per class, in index order."""
    dataset, split = task_data(task)
    model = fit(name, task, rows=lambda y: y != 2)
    X_test, y_test = dataset.X.iloc[split.test], dataset.y[split.test]
    proba = np.asarray(model.predict_proba(X_test))
    assert proba.shape == (len(split.test), 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-6)
    pred = np.asarray(model.predict(X_test))
    assert not (pred == 2).any(), f"{name} predicts a class it never saw"
    seen = y_test != 2
    accuracy = accuracy_score(y_test[seen], pred[seen])
    assert accuracy >= floor(ACCURACY_FLOOR, name), f"{name}: accuracy {accuracy:.3f} on classes 0 and 1"
