"""Budget points: each job's validation-selected state scored at fixed points of its elapsed time.

A suite's ``budget.points_s`` reaches ``fit`` as ``JobContext.budget_points_s``; a model that keeps states
offers ``time_points_`` / ``at_time`` (tabbench/estimator.py) and the harness scores them into the record's
``budget_points`` (tabbench/run/execute.py). On breast cancer (bundled with scikit-learn) with log-spaced points
from 0.05 s, so that several fall inside each fit:

* the points do not change the final result: the same fit with and without them predicts the same;
* a point's state is the validation-best one among those finished before it (boosters: exactly the library's
  iteration; the epoch loop: exactly the best epoch validated before the point);
* a model that finishes before a point carries its final state (and its final metrics) to it, and a model that
  keeps no states has none before its fit returned.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from tabbench.estimator import JobContext, TimePoints
from tabbench.run.execute import execute
from tabbench.run.jobs import Job
from tabbench.suite import SuiteError, parse_suite
from tabbench.testing import contract_data
from tests.conftest import need, registered_spec

#: 0.05 s to about 10 s, each 1.5 times the last: a few fall inside even the shortest fit below
POINTS = tuple(round(0.05 * 1.5 ** i, 4) for i in range(14))

#: Small fits (a second or a few on one core), early stopping out of the way where it would end them at once;
#: every model that keeps states at budget points
FITS = {
    "xgboost": {"n_estimators": 300, "learning_rate": 0.05},
    "lightgbm": {"n_estimators": 300, "learning_rate": 0.05},
    "catboost": {"n_estimators": 150, "learning_rate": 0.05},
    "gradient_boosting": {"n_estimators": 150},
    "mlp": {"max_epochs": 30, "patience": 30},
    "tabm": {"k": 4, "d_block": 64, "max_epochs": 6, "patience": 6},
    "modernnca": {"max_epochs": 10, "patience": 10},
    "tabnet": {"max_epochs": 15, "patience": 15},
    "realmlp": {"n_epochs": 15},
    "tabr": {"n_epochs": 8, "patience": 8, "d_main": 64, "context_size": 16},
    "npt": {"e": 8, "n_layers": 1, "n_heads": 2, "steps": 24, "eval_every": 3, "checkpoint_minutes": 0},
}


def fit(name: str, points=(), started=None):
    """``name`` fitted on breast cancer's holdout split with the budget points ``points`` (seconds from
    ``started``, default: now), no time budget."""
    spec = registered_spec(name)
    dataset, split = contract_data("binary")
    params = {**FITS[name], **({"device": "cpu"} if "device" in spec.default_params else {})}
    model = spec.build(dataset.meta, 0, params)
    context = JobContext(started=time.monotonic() if started is None else started, budget_points_s=points)
    model.fit(dataset.X.iloc[split.train], dataset.y[split.train], dataset.X.iloc[split.val],
              dataset.y[split.val], context=context)
    return model


def _test_rows():
    dataset, split = contract_data("binary")
    return dataset.X.iloc[split.test]


@pytest.mark.parametrize("name", sorted(FITS))
def test_points_do_not_change_the_final_result_and_each_state_precedes_its_point(name):
    X_test = _test_rows()
    plain = fit(name)
    with_points = fit(name, POINTS)
    final = with_points.predict_proba(X_test)
    np.testing.assert_array_equal(final, plain.predict_proba(X_test))  # deterministic on the CPU
    kept = with_points.time_points_
    states = [(p, s) for p, s in kept.items() if s is not None]
    assert states, f"{name}: no point fell inside the fit ({kept})"
    assert list(kept) == sorted(kept) and set(kept) <= set(POINTS)
    assert all(s <= p for p, s in states), kept  # a point's state was validated before it
    assert [s for _, s in states] == sorted(s for _, s in states)  # later points: the same state or a later one
    for point, _ in states:
        proba = with_points.at_time(point).predict_proba(X_test)
        assert proba.shape == final.shape and np.isfinite(proba).all()
    np.testing.assert_array_equal(with_points.predict_proba(X_test), final)  # scoring the points changed nothing


def test_points_of_a_fit_without_points_are_none_kept():
    model = fit("xgboost")
    assert model.time_points_ == {}


@pytest.mark.parametrize("name", ["xgboost", "lightgbm", "catboost"])
def test_a_boosters_point_uses_the_best_validation_iteration_among_those_ended_before_it(name):
    model = fit(name, POINTS)
    ended = model.iteration_ends_s_
    curve = model._validation_curve()
    assert model.info_["best_iteration"] == int(np.argmin(curve[:len(ended)]))  # the library's own choice
    kept = {p: s for p, s in model.time_points_.items() if s is not None}
    assert kept
    for point, state_s in kept.items():
        done = [i for i, t in enumerate(ended) if t <= point]
        best = min(done, key=lambda i: (curve[i], i))  # the first best, as the libraries break ties
        assert model.point_trees_[point] == best + 1 and state_s == ended[best]
    assert all(p > ended[-1] for p in set(POINTS) - set(model.time_points_))  # the rest: after the last tree


def test_the_epoch_loop_keeps_the_best_epoch_validated_before_each_point():
    """``EarlyStopping`` driven as ``train_epochs`` drives it, each epoch's weights a constant (the epoch's
    number) and its loss made up of a known sequence, each epoch 0.1 s long: each point's state is the weights of
    the best epoch among those validated before it."""
    torch = need("torch")
    from tabbench.estimator import TrainingClock
    from tabbench_plugins.torch_training import EarlyStopping

    network = torch.nn.Linear(1, 1)
    points = TimePoints((0.05, 0.25, 0.45, 0.65, 5.0), started=time.monotonic())
    stopping = EarlyStopping(network, patience=100, max_epochs=8, clock=TrainingClock(None), points=points)
    losses, validated = [3.0, 1.0, 2.0, 0.5, 0.7, 0.6, 0.8, 0.4], []
    for epoch in stopping:
        time.sleep(0.1)
        with torch.no_grad():
            network.weight.fill_(epoch)
        validated.append(points.elapsed())
        stopping.update(losses[epoch])
    stopping.restore()
    times, states = stopping.point_states()
    assert 5.0 not in times  # after training: the final state's
    assert times[0.05] is None and states[0.05] is None  # nothing validated yet
    for point in (0.25, 0.45, 0.65):
        before = [e for e, t in enumerate(validated) if t < point]
        best = min(before, key=lambda e: losses[e])
        assert float(states[point]["weight"].detach()) == best, (point, validated)
        assert validated[best] <= times[point] < point
    assert float(network.weight.detach()) == 7  # the best epoch overall is restored, as without points


def job(name, points, budget_s=None):
    spec = registered_spec(name)
    dataset, split = contract_data("binary")
    params = spec.resolve({**FITS.get(name, {}), **({"device": "cpu"} if "device" in spec.default_params else {})})
    return Job("k", "s", name, name, params, None, "breast_cancer", "binary", 0, 0, 0, dataset.fingerprint,
               split.fingerprint, time_budget_s=budget_s, budget_points_s=points), spec, dataset, split


@pytest.mark.parametrize("name", ["knn", "xgboost"])
def test_the_record_scores_each_point_and_a_point_after_the_fit_carries_the_final_metrics(name):
    """The record's ``budget_points``: one entry per point in order; after the fit the final metrics (finished);
    a model that keeps states (xgboost) has its kept states scored, one that keeps none (k-NN) has none before
    its fit returned."""
    points = (1e-4, *POINTS, 500.0)
    the_job, spec, dataset, split = job(name, points, budget_s=600)
    record = execute(the_job, spec.factory, dataset.meta, dataset.X, dataset.y, split, started=time.monotonic())
    assert record["status"] == "ok", record.get("traceback")
    assert record["budget_points_s"] == list(points)
    got = record["budget_points"]
    assert [p["at_s"] for p in got] == list(points)
    assert set(got[0]) >= {"at_s", "state_s", "finished", "val", "test"}
    first, last = got[0], got[-1]
    assert first == {"at_s": 1e-4, "state_s": None, "finished": False, "val": None, "test": None}
    assert last["finished"] and last["val"] == record["metrics"]["val"] and last["test"] == record["metrics"]["test"]
    finished = [p for p in got if p["finished"]]
    assert all(p["state_s"] == finished[0]["state_s"] and p["test"] == last["test"] for p in finished)
    during = [p for p in got if not p["finished"] and p["state_s"] is not None]
    if name == "knn":
        assert not during and all(p["test"] is None for p in got if not p["finished"])
    else:
        assert during, got
        for p in during:
            assert p["state_s"] <= p["at_s"] and set(p["test"]) == set(record["metrics"]["test"])
        best = max(during, key=lambda p: p["at_s"])
        assert best["val"]["log_loss"] >= record["metrics"]["val"]["log_loss"] - 1e-12  # the final: best of all


def test_a_suite_without_points_records_as_before():
    the_job, spec, dataset, split = job("knn", ())
    record = execute(the_job, spec.factory, dataset.meta, dataset.X, dataset.y, split)
    assert "budget_points" not in record and "budget_points_s" not in record


BASE = {"datasets": [{"name": "wine", "source": "sklearn", "id": "wine", "split": {"protocol": "holdout"}}],
        "models": {"knn": {}}}


def test_the_suite_declares_points_ascending_within_the_budget():
    suite = parse_suite({**BASE, "budget": {"time_s": 450, "points_s": [30, 60, 120, 240, 450]}}, "s.yaml")
    assert suite.budget.points_s == (30.0, 60.0, 120.0, 240.0, 450.0)
    assert parse_suite(BASE, "s.yaml").budget.points_s == ()
    with pytest.raises(SuiteError, match=r"budget\.points_s: .*must ascend"):
        parse_suite({**BASE, "budget": {"points_s": [60, 30]}}, "s.yaml")
    with pytest.raises(SuiteError, match=r"budget\.points_s: budget point 500 s lies past the job's budget"):
        parse_suite({**BASE, "budget": {"time_s": 450, "points_s": [30, 500]}}, "s.yaml")


def test_points_whose_scoring_could_pass_the_jobs_budget_are_left_unscored():
    """Scoring a kept state predicts the test and validation rows again: where that could pass the job's time
    budget (here the job is 0.1 s from its end and a scoring costs about 1 s), the point is left unscored rather
    than the job killed with nothing; points after the fit still carry the final metrics, which cost nothing."""
    from tabbench.run.execute import _budget_points

    model = fit("xgboost", POINTS)
    kept = [p for p, s in model.time_points_.items() if s is not None]
    assert kept
    the_job, spec, dataset, split = job("xgboost", (kept[0], 500.0), budget_s=600)
    final = {"val": {"log_loss": 0.1}, "test": {"auroc": 0.9}}
    got = _budget_points(model, the_job, dataset.meta, dataset.X, dataset.y, split, final, fit_end_s=400.0,
                         started=time.monotonic() - 599.9, point_cost_s=1.0)
    assert got[0] == {"at_s": kept[0], "state_s": model.time_points_[kept[0]], "finished": False, "val": None,
                      "test": None, "unscored": "the job's time budget"}
    assert got[1] == {"at_s": 500.0, "state_s": 400.0, "finished": True, **final}
    scored = _budget_points(model, the_job, dataset.meta, dataset.X, dataset.y, split, final, fit_end_s=400.0,
                            started=time.monotonic(), point_cost_s=1.0)
    assert scored[0]["test"] is not None and "unscored" not in scored[0]
