"""Predictions that break the contract (NaN, inf, wrong shape, unnormalised probabilities) fail the job.

A plugin file model whose ``defect`` param spoils its outputs one way, run through
``tabbench.run.execute.execute`` on scikit-learn's bundled datasets, and once through the harness to see the
run summary and the leaderboard count the failures.
"""

import textwrap

import numpy as np
import pytest

from tabbench.data.dataset import DatasetConfig, SplitConfig, load_dataset
from tabbench.data.sources.sklearn import Sklearn
from tabbench.data.splits import make_splits
from tabbench.run.execute import execute
from tabbench.run.jobs import INVALID, OK, Job
from tabbench.plugins import load_models

DEFECTIVE_PLUGIN = textwrap.dedent('''
    """A prior model (class frequencies or the training mean) whose outputs carry one chosen defect."""
    import numpy as np
    import tabbench
    from tabbench.params import Params, param
    from tabbench.spec import ModelSpec

    class DefectiveParams(Params):
        defect: str = param("none", "the defect its outputs carry")

    class Defective:
        def __init__(self, meta, seed, defect="none"):
            self.meta, self.defect = meta, defect

        def fit(self, X, y, X_val=None, y_val=None, *, context=None):
            if self.meta.is_classification:
                self.prior_ = (np.bincount(y, minlength=self.meta.n_classes) + 1.0) / (len(y) + self.meta.n_classes)
            else:
                self.mean_ = float(np.mean(y))
            return self

        def predict_proba(self, X):
            proba = np.tile(self.prior_, (len(X), 1))
            if self.defect == "nan":
                proba[30:] = np.nan
            elif self.defect == "inf":
                proba[0, 0] = np.inf
            elif self.defect == "missing_row":
                proba = proba[1:]
            elif self.defect == "missing_class":
                proba = proba[:, :-1]
            elif self.defect == "unnormalised":
                proba = proba * 2.0
            elif self.defect == "negative":
                proba[:, 0], proba[:, 1] = -0.5, proba[:, 1] + proba[:, 0] + 0.5
            elif self.defect == "float32":  # rounding only: allowed
                logits = np.log(proba).astype(np.float32)
                proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
            return proba

        def predict(self, X):
            if self.meta.is_classification:
                return self.predict_proba(X).argmax(axis=1)
            pred = np.full(len(X), self.mean_)
            if self.defect == "nan":
                pred[30:] = np.nan
            elif self.defect == "inf":
                pred[:2] = [np.inf, -np.inf]
            elif self.defect == "missing_row":
                pred = pred[1:]
            elif self.defect == "column":
                pred = pred[:, None]
            elif self.defect == "text":
                pred = pred.astype(str)
            return pred

    @tabbench.hookimpl
    def register_models(register):
        register(ModelSpec(name="defective", factory=Defective,
                           tasks=frozenset({"binary", "multiclass", "regression"}), params=DefectiveParams))
''')

SETS = {"binary": "breast_cancer", "multiclass": "wine", "regression": "diabetes"}


@pytest.fixture(scope="module")
def defective(tmp_path_factory):
    path = tmp_path_factory.mktemp("plugin") / "defective.py"
    path.write_text(DEFECTIVE_PLUGIN)
    return path


def run_job(plugin, task, defect, paths):
    name = SETS[task]
    dataset = load_dataset(DatasetConfig(name, Sklearn(id=name)), paths)
    split = make_splits(dataset, SplitConfig("holdout"))[0]
    spec = load_models((plugin,))["defective"].spec
    job = Job("k", "s", "defective", "defective", {"defect": defect}, None, name, task, 0, 0, 0,
              dataset.fingerprint, split.fingerprint)
    return execute(job, spec.factory, dataset.meta, dataset.X, dataset.y, split), len(split.test), dataset.meta


def assert_invalid(record, message):
    assert record["status"] == INVALID, record.get("error_message")
    assert record["error_type"] == "tabbench.predictions.InvalidPredictions"
    assert message in record["error_message"]
    assert "metrics" not in record


@pytest.mark.parametrize("task", sorted(SETS))
def test_valid_outputs_are_scored(defective, task, paths):
    record, _, _ = run_job(defective, task, "none", paths)
    assert record["status"] == OK
    assert all(np.isfinite(v) for part in record["metrics"].values() for v in part.values())


def test_nan_regression_predictions_fail_the_job_and_say_how_many(defective, paths):
    record, n, _ = run_job(defective, "regression", "nan", paths)
    assert_invalid(record, f"{n - 30} of {n} predictions are NaN")


def test_infinite_regression_predictions_fail_the_job(defective, paths):
    record, n, _ = run_job(defective, "regression", "inf", paths)
    assert_invalid(record, f"2 of {n} predictions are infinite")


@pytest.mark.parametrize("defect,shape", [("missing_row", "({n1},)"), ("column", "({n}, 1)")])
def test_regression_predictions_of_the_wrong_shape_fail_the_job(defective, paths, defect, shape):
    record, n, _ = run_job(defective, "regression", defect, paths)
    assert_invalid(record, f"predict returned shape {shape.format(n=n, n1=n - 1)} for {n} rows")


def test_non_numeric_regression_predictions_fail_the_job(defective, paths):
    record, _, _ = run_job(defective, "regression", "text", paths)
    assert_invalid(record, "predict returned values of dtype <U")


@pytest.mark.parametrize("task", ["binary", "multiclass"])
def test_nan_probabilities_fail_the_job(defective, paths, task):
    record, n, meta = run_job(defective, task, "nan", paths)
    k = meta.n_classes
    assert_invalid(record, f"{(n - 30) * k} of {n * k} probabilities are NaN")


@pytest.mark.parametrize("task", ["binary", "multiclass"])
def test_infinite_probabilities_fail_the_job(defective, paths, task):
    record, n, meta = run_job(defective, task, "inf", paths)
    assert_invalid(record, f"1 of {n * meta.n_classes} probabilities are infinite")


@pytest.mark.parametrize("task", ["binary", "multiclass"])
@pytest.mark.parametrize("defect", ["missing_row", "missing_class"])
def test_probabilities_of_the_wrong_shape_fail_the_job(defective, paths, task, defect):
    record, n, meta = run_job(defective, task, defect, paths)
    k = meta.n_classes
    got = (n - 1, k) if defect == "missing_row" else (n, k - 1)
    assert_invalid(record, f"predict_proba returned shape {got}; expected ({n}, {k})")


@pytest.mark.parametrize("task", ["binary", "multiclass"])
def test_probabilities_that_do_not_sum_to_one_fail_the_job(defective, paths, task):
    record, n, _ = run_job(defective, task, "unnormalised", paths)
    assert_invalid(record, f"{n} of {n} probability rows do not sum to 1 within 0.0001 (row 0 sums to 2)")


@pytest.mark.parametrize("task", ["binary", "multiclass"])
def test_negative_probabilities_fail_the_job(defective, paths, task):
    record, n, _ = run_job(defective, task, "negative", paths)
    assert_invalid(record, f"{n} of {n * (2 if task == 'binary' else 3)} probabilities are negative (smallest -0.5)")


@pytest.mark.parametrize("task", ["binary", "multiclass"])
def test_float32_rounding_of_probabilities_is_tolerated(defective, paths, task):
    record, _, _ = run_job(defective, task, "float32", paths)
    assert record["status"] == OK, record.get("error_message")


def test_invalid_jobs_are_failures_in_the_summary_and_the_leaderboard(defective, tmp_path, ray_session):
    from tabbench.run.runner import RunOptions, run_suite
    from tabbench.suite import parse_suite

    raw = {"name": "invalid", "plugins": [str(defective)],
           "datasets": [{"name": n, "source": "sklearn", "id": n, "split": {"protocol": "holdout"}}
                        for n in ("diabetes", "wine")],
           "models": {"sound": {"model": "defective"},
                      "nan": {"model": "defective", "params": {"defect": "nan"}}}}
    summary = run_suite(parse_suite(raw, tmp_path / "invalid.yaml"), RunOptions(results=tmp_path, progress=False))
    assert (summary.done, summary.failures) == (4, {INVALID: 2})
    board = (tmp_path / "invalid" / "leaderboard.md").read_text()
    assert "nan on diabetes (1 of 1 runs failed)" in board and "nan on wine (1 of 1 runs failed)" in board
    assert "| nan | 2 | invalid 2 |" in board  # the costs table counts them by status
