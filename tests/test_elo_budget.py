"""The leaderboard's "Elo against budget" (tabbench/report/elo_budget.py), from records made here: k-NN (keeps no
states), XGBoost and Gradient Boosting (keep them) on scikit-learn's three bundled tables, each job scored at
budget points from a moment after its start (no state anywhere yet) to one after every fit.

* per point the section ranks and rates the states the records hold; a run without a state counts as failed
  (the worst rank), so at the first point every method ties;
* at the last point, after every fit, the ranks and Elo are the final leaderboard's;
* the figure, its CSV and the report page carry it; records without points leave the section out.
"""

from __future__ import annotations

import time

import pandas as pd
import pytest

from tabbench.report.leaderboard import write_leaderboard
from tabbench.run.execute import execute
from tabbench.run.jobs import Job
from tabbench.store import Store
from tabbench.testing import contract_data
from tests.conftest import need, registered_spec

need("matplotlib")
need("bencheval")

POINTS = (1e-4, 0.3, 1.0, 600.0)  # before any state; during the boosters' fits; after every fit
MODELS = {"knn": {}, "xgboost": {"n_estimators": 400, "learning_rate": 0.05, "device": "cpu"},
          "gradient_boosting": {"n_estimators": 200}}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("points") / "suite")
    for task in ("binary", "multiclass", "regression"):
        dataset, split = contract_data(task)
        for name, params in MODELS.items():
            spec = registered_spec(name)
            job = Job(f"{name}-{task}", "suite", name, name, spec.resolve(params), None, dataset.meta.name, task,
                      0, 0, 0, dataset.fingerprint, split.fingerprint, time_budget_s=600.0, budget_points_s=POINTS)
            record = execute(job, spec.factory, dataset.meta, dataset.X, dataset.y, split, started=time.monotonic())
            assert record["status"] == "ok", record.get("traceback")
            store.append(record)
    write_leaderboard(store.dir, report=True)
    return store.dir


def test_each_point_is_ranked_and_rated_and_the_last_is_the_final_leaderboard(folder):
    table = pd.read_csv(folder / "elo-against-budget.csv")
    assert sorted(table["point_s"].unique()) == list(POINTS)
    first = table[table["point_s"] == POINTS[0]].set_index("method")
    assert (first["no_state"] == 3).all() and (first["mean_rank"] == 3).all()  # nothing finished: all failed, tied
    last = table[table["point_s"] == POINTS[-1]].set_index("method")
    assert (last["no_state"] == 0).all()
    final = pd.read_csv(folder / "leaderboard.csv")
    final_rank = final[final["table"] == "rank_all"].set_index("method")["value"]
    final_elo = final[final["table"] == "elo"].set_index("method")["value"]
    pd.testing.assert_series_equal(last["mean_rank"], final_rank.loc[last.index], check_names=False, atol=1e-6)
    pd.testing.assert_series_equal(last["elo"], final_elo.loc[last.index], check_names=False, atol=0.05)
    # k-NN keeps no states: before its fit returned it had none; the boosters have theirs inside their fits
    middle = table[table["point_s"] == 0.3].set_index("method")
    assert middle.loc["knn", "no_state"] == 0  # k-NN fits in milliseconds: finished by 0.3 s


def test_the_section_the_figure_and_the_page_show_it(folder):
    md = (folder / "leaderboard.md").read_text()
    assert "## Elo against budget" in md and "![Elo against budget, per method](elo-against-budget.svg)" in md
    assert "| method | 0.0001 s | 0.3 s | 1 s | 600 s |" in md
    assert "Where each method reaches its final Elo (at 600 s)" in md
    for suffix in ("svg", "png"):
        assert (folder / f"elo-against-budget.{suffix}").stat().st_size > 0
    svg = (folder / "elo-against-budget.svg").read_text()
    assert "gradient_boosting" in svg and "budget point" in svg
    assert "Elo against budget" in (folder / "report.html").read_text()


def test_records_without_points_leave_the_section_out(tmp_path):
    dataset, split = contract_data("binary")
    store = Store(tmp_path / "plain")
    for name in ("knn", "gradient_boosting"):
        spec = registered_spec(name)
        job = Job(name, "plain", name, name, spec.resolve({}), None, dataset.meta.name, "binary", 0, 0, 0,
                  dataset.fingerprint, split.fingerprint)
        store.append(execute(job, spec.factory, dataset.meta, dataset.X, dataset.y, split))
    md = write_leaderboard(store.dir, report=True).read_text()
    assert "Elo against budget" not in md and not (store.dir / "elo-against-budget.csv").exists()
