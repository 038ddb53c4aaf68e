"""Transductive models: what the harness hands fit, what it records, and how tables mark them."""

import numpy as np
import pandas as pd

from tabbench.data.cache import DataPaths
from tabbench.data.dataset import DatasetConfig, SplitConfig, load_dataset
from tabbench.data.splits import make_splits
from tabbench.jobs import Job, execute
from tabbench.report.leaderboard import TRANSDUCTIVE_MARK, TRANSDUCTIVE_NOTE, write_leaderboard
from tabbench.spec import ModelSpec
from tabbench.store import Store


class Spy:
    """A majority-class model that keeps every argument fit was given."""

    calls = []

    def __init__(self, meta, seed, **params):
        self.meta = meta

    def fit(self, X, y, X_val=None, y_val=None, **extra):
        Spy.calls.append({"X": X, "y": y, "X_val": X_val, "y_val": y_val, **extra})
        self.p_ = np.bincount(y, minlength=self.meta.n_classes) / len(y)
        return self

    def predict_proba(self, X):
        return np.tile(self.p_, (len(X), 1))

    def predict(self, X):
        return self.predict_proba(X).argmax(axis=1)


def _job(transductive: bool) -> tuple:
    cfg = SplitConfig("kfold", k=5, val_fraction=0.2)
    ds = load_dataset(DatasetConfig("bc", "sklearn", id="breast_cancer", split=cfg), DataPaths.from_env())
    split = make_splits(ds, cfg)[0]
    spec = ModelSpec("spy", Spy, frozenset({"binary"}), transductive=transductive)
    job = Job("k", "s", "spy", "spy", {}, None, "bc", "binary", 0, 0, 0, ds.fingerprint, split.fingerprint,
              transductive=spec.is_transductive({}))
    Spy.calls.clear()
    record = execute(job, Spy, ds.meta, ds.X, ds.y, split)
    (call,) = Spy.calls
    return ds, split, call, record


def test_an_inductive_model_never_receives_test_rows():
    ds, split, call, record = _job(False)
    assert record["status"] == "ok" and record["transductive"] is False
    assert set(call) == {"X", "y", "X_val", "y_val"}
    seen = set(call["X"].index) | set(call["X_val"].index)
    assert seen == set(ds.X.index[split.train]) | set(ds.X.index[split.val])
    assert not seen & set(ds.X.index[split.test])


def test_a_transductive_model_gets_the_test_features_and_never_their_targets():
    ds, split, call, record = _job(True)
    assert record["status"] == "ok" and record["transductive"] is True
    X_test = call["X_unlabelled"]
    assert list(X_test.index) == list(ds.X.index[split.test])
    assert list(X_test.columns) == [c.name for c in ds.meta.columns]  # features only: no target column
    assert ds.meta.target not in X_test.columns
    # the only targets fit receives are the training and validation rows'
    np.testing.assert_array_equal(call["y"], ds.y[split.train])
    np.testing.assert_array_equal(call["y_val"], ds.y[split.val])
    assert set(call) == {"X", "y", "X_val", "y_val", "X_unlabelled"}


def _record(method, dataset, fold, auroc, transductive):
    return {"key": f"{method}-{dataset}-{fold}", "method": method, "model": method, "dataset": dataset,
            "task": "binary", "fold": fold, "repeat": 0, "seed": 0, "trial": None, "status": "ok", "params": {},
            "subset": None, "fit_seconds": 1.0, "predict_seconds": 0.1, "job_rss_bytes": 2**20,
            "transductive": transductive, "metrics": {"val": {"log_loss": 0.1}, "test": {"auroc": auroc}}}


def test_every_table_marks_transductive_methods_and_says_why(tmp_path):
    store = Store(tmp_path / "suite")
    for fold in range(2):
        for dataset in ("d1", "d2"):
            store.append(_record("npt", dataset, fold, 0.95, True))
            store.append(_record("knn", dataset, fold, 0.90, False))
    md = write_leaderboard(store.dir).read_text()
    tables = [line for line in md.splitlines() if line.startswith("| npt") or line.startswith("| knn")]
    assert tables and all(line.startswith(f"| npt {TRANSDUCTIVE_MARK} |") for line in tables if "npt" in line[:6])
    assert not any(TRANSDUCTIVE_MARK in line for line in tables if line.startswith("| knn"))
    assert TRANSDUCTIVE_NOTE in md
    csv = pd.read_csv(store.dir / "leaderboard.csv")
    assert set(csv["method"]) == {"npt", "knn"}  # the data keeps the plain method names
