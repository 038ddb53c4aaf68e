"""Re-running only a suite's slow jobs with budget points, on results/breadth's real records, their budget points taken
off (as the records were made before points existed): the re-run records replace the old ones whichever records file
holds them (tabbench/store.py, ``newer``), and the leaderboard's "Elo against budget"
(tabbench/report/elo_budget.py) reads an old record as what a job that finished early records: its final state at
every point at or after its fit's end, an unknown state before it (its method then left out and named, not ranked as
failed).

The re-run records here are copies of the old ones carrying the points ``tabbench.run.execute`` records for a
model that keeps no states (no state before the fit's end, the final metrics from it on): real metrics, only
their place in time made up for the test.
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

from tabbench.pooling import pooled_records
from tabbench.report.elo_budget import UNKNOWN, EloAgainstBudget, at_point, elo_against_budget, state_at
from tabbench.report.family import dataset_splits
from tabbench.report.leaderboard import write
from tabbench.store import Store
from tests.conftest import ROOT, need

need("bencheval")
need("matplotlib")

BREADTH = ROOT / "results" / "breadth"
POINTS = (30.0, 60.0, 120.0, 240.0, 450.0)  # suites/breadth.yaml's budget.points_s
RERUN_AT = "2026-12-01T00:00:00+00:00"  # after every breadth record finished

pytestmark = pytest.mark.skipif(not (BREADTH / "records").is_dir(), reason="results/breadth's records absent")


def without_points(record: dict) -> dict:
    """A record as it was before the suite asked for budget points (breadth's re-runs added them to some)."""
    return {k: v for k, v in record.items() if k not in ("budget_points", "budget_points_s")}


@pytest.fixture(scope="module")
def breadth():
    return [without_points(r) for r in Store(BREADTH).latest().values()]


def rerun(record: dict) -> dict:
    """``record`` run again with the points: no state before its fit's end, its final metrics from it on."""
    fit_s = record["fit_seconds"]
    final = record["metrics"]
    points = [{"at_s": p, "state_s": fit_s, "finished": True, "val": final["val"], "test": final["test"]}
              if p >= fit_s else {"at_s": p, "state_s": None, "finished": False, "val": None, "test": None}
              for p in POINTS]
    return {**copy.deepcopy(record), "budget_points_s": list(POINTS), "budget_points": points,
            "finished_at": RERUN_AT}


def pick(records, method, slow: bool, dataset=None) -> dict:
    """The first ok record of ``method`` whose fit took more (``slow``) or less than the first point."""
    return next(r for r in records if r["method"] == method and r["status"] == "ok"
                and (r["fit_seconds"] > POINTS[0]) == slow and dataset in (None, r["dataset"]))


def test_a_fast_old_record_has_its_final_metrics_at_every_point(breadth):
    old = pick(breadth, "tabm", slow=False)
    assert "budget_points" not in old and old["fit_seconds"] <= POINTS[0]
    assert all(state_at(old, p) is None for p in POINTS)  # its final state, as recorded
    frame = pd.DataFrame([{**old, **{f"test_{k}": v for k, v in old["metrics"]["test"].items()}}])
    for point in POINTS:
        at, no_state, unknown = at_point(frame, point)
        assert (no_state.sum(), unknown.sum()) == (0, 0)
        assert {k: at.iloc[0][f"test_{k}"] for k in old["metrics"]["test"]} == old["metrics"]["test"]


def test_a_slow_old_record_is_not_finished_before_its_fit_ended_and_its_method_is_named(breadth, tmp_path):
    old = pick(breadth, "tabr", slow=True)
    ended = [p for p in POINTS if p >= old["fit_seconds"]]
    assert [p for p in POINTS if state_at(old, p) is UNKNOWN] == [p for p in POINTS if p not in ended]
    assert all(state_at(old, p) is None for p in ended)
    frame = pd.DataFrame([{**old, **{f"test_{k}": v for k, v in old["metrics"]["test"].items()}}])
    at, no_state, unknown = at_point(frame, POINTS[0])
    assert (no_state["tabr"], unknown["tabr"]) == (0, 1)  # unknown, not counted as without a state
    assert all(np.isnan(at.iloc[0][f"test_{k}"]) for k in old["metrics"]["test"])  # not its final metrics

    # a folder of k-NN re-run with points and TabR's old records: TabR is left out and named, not ranked as failed
    store = Store(tmp_path / "breadth")
    tabr = [r for r in breadth if r["method"] == "tabr"]
    for record in breadth:
        if record["method"] == "knn":
            store.append(rerun(record))
    for record in tabr:
        store.append(record)
    ctx = write(store.dir)
    result = elo_against_budget(ctx.selected, dataset_splits(ctx.selected, ctx.splits))
    slow = sum(r["status"] == "ok" and r["fit_seconds"] > POINTS[0] for r in tabr)
    assert result.left_out == {"tabr": (slow, len(tabr))} and 0 < slow < len(tabr)
    assert set(result.table["method"]) == {"knn"}
    md = "\n".join(EloAgainstBudget().markdown(ctx))
    assert f"tabr ({slow} of its {len(tabr)} runs)" in md and "state there is unknown" in md


def test_a_method_mixing_reruns_and_fast_old_records_is_ranked_and_ends_at_its_final_elo(breadth, tmp_path):
    """TabM and CatBoost (fits from seconds to minutes) re-run where their fit passed 30 s, their fast jobs'
    records kept as they are; k-NN (every fit in well under a second) kept whole, no record of it with points."""
    store = Store(tmp_path / "breadth")
    methods = ("tabm", "catboost", "knn")
    kept = [r for r in breadth if r["method"] in methods]
    slow = [r for r in kept if r["status"] == "ok" and r["fit_seconds"] > POINTS[0]]
    assert {r["method"] for r in slow} == {"tabm", "catboost"}
    for record in kept:
        store.append(record)
    store.archive()
    for record in slow:  # the re-run, a records file after the old one's, as they are added
        store.append(rerun(record))
    ctx = write(store.dir)
    assert (ctx.selected["budget_points"].map(lambda p: isinstance(p, list)).sum()) == len(slow)
    result = elo_against_budget(ctx.selected, dataset_splits(ctx.selected, ctx.splits))
    assert result.left_out == {}
    assert set(result.table["method"]) == set(methods)
    table = result.table.set_index(["point_s", "method"])
    assert table.loc[(30.0, "knn"), "no_state"] == 0  # fast old records: finished at every point
    assert table.loc[(30.0, "tabm"), "no_state"] == sum(r["method"] == "tabm" for r in slow)
    # at the last point every run has its final state: the final leaderboard's mean rank and Elo
    last = table.loc[POINTS[-1]]
    assert (last["no_state"] == 0).all()
    final = ctx.aggregates.table
    assert np.allclose(last["elo"], final.loc[last.index, "elo"])
    assert np.allclose(last["elo_low"], final.loc[last.index, "elo_low"])
    from tabbench.report.family import pooled_ranks

    final_rank = pooled_ranks(ctx.tables).mean(axis=1)
    assert np.allclose(last["mean_rank"], final_rank.loc[last.index])
    # and before it, TabM's re-run jobs without a state pull it down from there
    assert table.loc[(30.0, "tabm"), "elo"] < last.loc["tabm", "elo"]


def _stores(tmp_path, first: list, second: list, live: list = ()):
    """A results folder whose records.jsonl.gz holds ``first``, records-2.jsonl.gz ``second`` (if any), and the
    live records.jsonl ``live``."""
    store = Store(tmp_path)
    for batch in (first, second):
        for record in batch:
            store.append(record)
        store.archive()
    for record in live:
        store.append(record)
    return store


def test_a_rerun_record_replaces_the_old_one_in_whichever_records_file_it_is(breadth, tmp_path):
    old = pick(breadth, "tabr", slow=True)
    new = rerun(old)
    # the re-run in a later archive; and in an archive read before the live file that still holds the old one
    for name, store in [("later", _stores(tmp_path / "later", [old], [new])),
                        ("earlier", _stores(tmp_path / "earlier", [new], [], live=[old]))]:
        assert len(store.records()) == 2
        assert store.latest()[old["key"]]["budget_points"] == new["budget_points"], name
        assert store.frame()["finished_at"].tolist() == [RERUN_AT], name
    # pooled folders follow the same rule, in either order
    for order in (["later", "earlier"], ["earlier", "later"]):
        frame = pooled_records([tmp_path / name for name in order])
        assert len(frame) == 1 and isinstance(frame.iloc[0]["budget_points"], list)
    # two records finished in the same second: the one read later (the later file) wins
    same = {**new, "finished_at": old["finished_at"]}
    assert "budget_points" in _stores(tmp_path / "tie", [old], [same]).latest()[old["key"]]
    assert "budget_points" not in _stores(tmp_path / "tie-swapped", [same], [old]).latest()[old["key"]]
