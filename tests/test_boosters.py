"""The boosters' one_hot param against the published Yacht records of the one-hot boosters.

results/uci-small-yacht-froude holds, on Yacht with all six features categorical, LightGBM and CatBoost
with their native categorical handling (``lightgbm``, ``catboost``) and fed one 0/1 column per level
(``lightgbm_onehot``, ``catboost_onehot``: the encoding the NPT authors' baselines used, run before it
was a param). Each published job, re-run here with the record's params, must give the record's test
metrics: ``one_hot: true`` for the one-hot methods, the defaults for the native ones.
"""

from __future__ import annotations

import pytest

from tabbench.data.cache import DataPaths
from tabbench.data.dataset import load_dataset
from tabbench.data.splits import make_splits
from tabbench.run.execute import execute
from tabbench.run.jobs import Job
from tabbench.plugins import load_models
from tabbench.store import Store
from tabbench.suite import load_suite
from tests.conftest import ROOT, SHARED, unavailable

#: every test here fits LightGBM and CatBoost: skipped together where either is not installed
MISSING = unavailable("lightgbm") or unavailable("catboost")
pytestmark = [pytest.mark.real_data(), pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]
FOLDER = ROOT / "results" / "uci-small-yacht-froude"
ONE_HOT = {"lightgbm_onehot": "lightgbm", "catboost_onehot": "catboost"}


@pytest.fixture(scope="module")
def yacht(tmp_path_factory):
    """Yacht with every feature categorical, and its fold-0 split, as the published suite declares them."""
    (cfg,) = [d for d in load_suite(ROOT / "suites" / "uci-small-yacht-froude.yaml").datasets if d.name == "yacht"]
    dataset = load_dataset(cfg, DataPaths(cache=tmp_path_factory.mktemp("cache"), mirrors=(SHARED,), base=ROOT))
    return dataset, make_splits(dataset, dataset.split)[0]


def published(method: str, trial: int) -> dict:
    def identity(r):
        return r["method"], r["dataset"], r["fold"], r["trial"]

    (record,) = [r for r in Store(FOLDER).latest().values() if identity(r) == (method, "yacht", 0, trial)]
    return record


@pytest.mark.parametrize("method", ["lightgbm", "lightgbm_onehot", "catboost", "catboost_onehot"])
def test_one_hot_reproduces_the_published_one_hot_boosters_and_the_default_the_native_ones(yacht, method):
    dataset, split = yacht
    record = published(method, trial=1)  # lightgbm: 100 trees at learning rate 1e-3; catboost: 500 at 0.1
    assert (record["dataset_fingerprint"], record["split_fingerprint"]) == (dataset.fingerprint, split.fingerprint)
    model = ONE_HOT.get(method, method)
    spec = load_models()[model].spec
    assert spec.default_params["one_hot"] is False  # the native categorical handling unless asked
    params = {**spec.default_params, **record["params"], **({"one_hot": True} if method in ONE_HOT else {})}
    job = Job(record["key"], record["suite"], method, model, params, record["trial"], "yacht", dataset.meta.task,
              0, 0, record["seed"], dataset.fingerprint, split.fingerprint)
    ours = execute(job, spec.factory, dataset.meta, dataset.X, dataset.y, split)
    assert ours["status"] == "ok", ours.get("traceback")
    assert ours["metrics"]["test"] == pytest.approx(record["metrics"]["test"], rel=1e-9)
    assert ours["info"]["best_iteration"] == record["info"]["best_iteration"]


def test_one_hot_gives_the_libraries_one_column_per_level_and_catboost_no_cat_features(yacht):
    dataset, split = yacht
    X, y = dataset.X.iloc[split.train], dataset.y[split.train]
    levels = sum(len(c.categories) for c in dataset.meta.columns)  # all six Yacht features are categorical
    registry = load_models()
    for one_hot in (False, True):
        params = {"n_estimators": 20, "one_hot": one_hot, "device": "cpu"}
        lgbm = registry["lightgbm"].spec.build(dataset.meta, 0, params).fit(X, y)
        cat = registry["catboost"].spec.build(dataset.meta, 0, params).fit(X, y)
        assert lgbm.model_.n_features_in_ == (levels if one_hot else len(dataset.meta.columns))
        assert cat.model_.get_cat_feature_indices() == ([] if one_hot else list(range(len(dataset.meta.columns))))
