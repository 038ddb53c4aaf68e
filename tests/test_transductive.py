"""Transductive models: what the harness hands fit, what it records, and how tables mark them."""

from pathlib import Path

import numpy as np
import pandas as pd

from tabbench.data.cache import DataPaths
from tabbench.data.dataset import DatasetConfig, SplitConfig, load_dataset
from tabbench.data.sources.sklearn import Sklearn
from tabbench.data.splits import make_splits
from tabbench.estimator import TRAINING_SHARE, JobContext
from tabbench.run.execute import execute
from tabbench.run.jobs import Job
from tabbench.report.leaderboard import TRANSDUCTIVE_MARK, TRANSDUCTIVE_NOTE, write_leaderboard
from tabbench.spec import ModelSpec
from tabbench.store import Store
from tests.plugins_for_tests import Spy


def _job(transductive: bool) -> tuple:
    cfg = SplitConfig("kfold", k=5, val_fraction=0.2)
    ds = load_dataset(DatasetConfig("bc", Sklearn(id="breast_cancer"), split=cfg), DataPaths.from_env())
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
    assert set(call) == {"X", "y", "X_val", "y_val", "context"}
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
    assert set(call) == {"X", "y", "X_val", "y_val", "X_unlabelled", "context"}


def test_fit_is_handed_the_jobs_context(tmp_path):
    """The job's time budget, the moment it counts from, its checkpoint folder, the resources reserved for it and
    the rows it predicts after fit (test and validation) reach fit as one argument, ``context``."""
    cfg = SplitConfig("kfold", k=5, val_fraction=0.2)
    ds = load_dataset(DatasetConfig("bc", Sklearn(id="breast_cancer"), split=cfg), DataPaths.from_env())
    split = make_splits(ds, cfg)[0]
    job = Job("k", "s", "spy", "spy", {}, None, "bc", "binary", 0, 0, 0, ds.fingerprint, split.fingerprint,
              resources={"num_cpus": 2, "num_gpus": 0}, time_budget_s=30.0, budget_points_s=(10.0, 30.0))
    Spy.calls.clear()
    record = execute(job, Spy, ds.meta, ds.X, ds.y, split, checkpoint_dir=tmp_path / "ckpt", started=12.5)
    assert record["status"] == "ok", record.get("traceback")
    (call,) = Spy.calls
    assert call["context"] == JobContext(time_budget_s=30.0, started=12.5, checkpoint_dir=tmp_path / "ckpt", cpus=2,
                                         gpus=0, budget_points_s=(10.0, 30.0),
                                         predict_rows=len(split.test) + len(split.val))
    assert call["context"].training_clock().deadline == 12.5 + TRAINING_SHARE * 30.0


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


def test_a_model_the_publication_never_ran_is_marked_in_every_table(tmp_path):
    """With a publication beside the tables, a method whose model it never reports (here TabM beside the NPT
    paper) carries the mark in every Markdown and LaTeX table and the CSV; npt-paper counts as its model,
    npt, which the paper reports, so it is not marked."""
    from tabbench.published import load_published
    from tabbench.report.leaderboard import NOT_PUBLISHED_MARK, not_published_note

    published_path = Path(__file__).resolve().parent.parent / "suites" / "published" / "npt-paper.yaml"
    store = Store(tmp_path / "suite")
    for fold in range(2):
        for dataset in ("breast_cancer", "income"):
            store.append({**_record("npt-paper", dataset, fold, 0.95, True), "model": "npt"})
            store.append(_record("knn", dataset, fold, 0.90, False))
            store.append(_record("tabm", dataset, fold, 0.93, False))
    md = write_leaderboard(store.dir, published_path, report=True).read_text()
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    tabm_rows = [line for line in rows if line.startswith("| tabm")]
    assert len(tabm_rows) >= 5 and all(line.startswith(f"| tabm {NOT_PUBLISHED_MARK} |") for line in tabm_rows)
    assert not any(NOT_PUBLISHED_MARK in line for line in rows if line.startswith(("| npt-paper", "| knn")))
    assert not_published_note(load_published(published_path)) in md
    tex = (store.dir / "leaderboard.tex").read_text()
    assert r"tabm$^{\ddagger}$" in tex and r"npt-paper$^{\dagger}$" in tex and "knn$^" not in tex
    csv = pd.read_csv(store.dir / "leaderboard.csv")
    assert set(csv.loc[~csv["in_publication"], "method"]) == {"tabm"}
