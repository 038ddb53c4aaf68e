"""Iterative models stop training before a job's time budget runs out and keep what they have.

Every model that trains in epochs or iterations takes ``TrainingClock`` (tabbench/estimator.py) from the job
context ``fit`` is given (``JobContext.training_clock()``): it trains for at most ``TRAINING_SHARE`` of the job's
time budget, keeps its best validation epoch (or the trees it has) and records
``info_["stopped_by_time_budget"]``. For each such model, on breast cancer (bundled with scikit-learn: no
download), with caps far above what half a second allows:

* without a budget it trains to its cap (its fit takes seconds here) and records ``stopped_by_time_budget``
  False;
* with a 0.5 s budget (0.4 s of training) it stops early: fewer epochs or trees than the unlimited fit, the
  flag True, and valid probabilities (one row per test row, finite, summing to 1).

NPT sizes its steps to the budget itself (``steps: "auto"``, tests/test_npt.py) and obeys the clock too,
for a machine slower than its cost model (here with a fixed step count); TabR through a clock callback in
pytabkit's Lightning trainer (plugins/tabbench_plugins/tabr.py); Random Forest and k-NN do not train iteratively.
"""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

from tabbench.estimator import JobContext, TrainingClock
from tabbench.testing import contract_data
from tests.conftest import ROOT, registered_spec, require_shared

BUDGET_S = 0.5  # the training share, 0.4 s, is far below what each fit below takes without a limit

#: Caps that keep each unlimited fit to a few seconds on one core, early stopping out of the way
#: (patience as long as the cap), so that only the cap or the clock ends training.
LONG = {
    "mlp": {"max_epochs": 100, "patience": 100},
    "tabm": {"k": 8, "d_block": 128, "max_epochs": 60, "patience": 60},
    "modernnca": {"max_epochs": 60, "patience": 60},
    "tabnet": {"max_epochs": 50, "patience": 50},
    "xgboost": {"n_estimators": 6000, "early_stopping_rounds": 6000, "learning_rate": 0.01},
    "lightgbm": {"n_estimators": 10000, "early_stopping_rounds": 10000, "learning_rate": 0.0005,
                 "min_child_samples": 50},  # small steps and leaves: LightGBM stops by itself when no split is left
    "catboost": {"n_estimators": 600, "early_stopping_rounds": 600, "learning_rate": 0.01},
    "gradient_boosting": {"n_estimators": 1000, "learning_rate": 0.01},
    "realmlp": {"n_epochs": 200},
    "tabr": {"n_epochs": 10, "patience": 10, "d_main": 96, "context_size": 16},
    "npt": {"e": 8, "n_layers": 2, "n_heads": 2, "steps": 120, "eval_every": 5, "checkpoint_minutes": 0},
}


def trained(name: str, model) -> int:
    """Epochs or boosting iterations the fit ran, read from the library where the model keeps them."""
    if name in ("mlp", "tabm", "modernnca", "tabnet"):
        return model.info_["epochs"]
    if name == "xgboost":
        return model.model_.get_booster().num_boosted_rounds()
    if name == "lightgbm":
        return model.model_.booster_.current_iteration()
    if name == "catboost":  # every iteration built is scored on the validation split (use_best_model cuts trees)
        return len(next(iter(model.model_.get_evals_result()["validation"].values())))
    if name == "gradient_boosting":
        return model.model_.n_estimators_
    if name == "tabr":  # the Lightning trainer of pytabkit's one sub-split
        return model.model_.alg_interface_.sub_split_interfaces[0].trainer.current_epoch
    if name == "npt":
        return model.info_["steps_run"]
    if name == "realmlp":  # pytabkit's TabNNModule counts the epochs it validated
        return model.model_.cv_alg_interface_.model.progress.epoch
    raise AssertionError(f"no count of trained iterations for {name}")


def spec(name):
    return registered_spec(name)


def fit(name, budget_s, job_started=None):
    """(fitted model, fit seconds) on breast cancer's default holdout split, given the job's context as the harness
    gives it: the time budget ``budget_s`` counted from the job's start ``job_started`` (a ``time.monotonic()``
    reading; None: fit's start)."""
    model_spec = spec(name)
    dataset, split = contract_data("binary")
    params = {**LONG[name], **({"device": "cpu"} if "device" in model_spec.default_params else {})}
    model = model_spec.build(dataset.meta, 0, params)
    context = JobContext(time_budget_s=budget_s, started=job_started)
    start = time.perf_counter()
    model.fit(dataset.X.iloc[split.train], dataset.y[split.train], dataset.X.iloc[split.val], dataset.y[split.val],
              context=context)
    return model, time.perf_counter() - start


@pytest.mark.parametrize("name", sorted(LONG))
def test_an_iterative_model_stops_within_its_time_budget_and_keeps_a_usable_model(name):
    unlimited, unlimited_s = fit(name, None)  # first: it also pays for the library's imports
    assert unlimited.info_["stopped_by_time_budget"] is False

    limited, limited_s = fit(name, BUDGET_S)
    print(f"{name}: fit {unlimited_s:.2f} s without a budget ({trained(name, unlimited)} iterations), "
          f"{limited_s:.2f} s with {BUDGET_S} s ({trained(name, limited)})")
    assert limited.info_["stopped_by_time_budget"] is True
    assert trained(name, limited) < trained(name, unlimited)

    dataset, split = contract_data("binary")
    proba = limited.predict_proba(dataset.X.iloc[split.test])
    assert proba.shape == (len(split.test), dataset.meta.n_classes)
    assert np.isfinite(proba).all() and (proba >= 0).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-9)


def test_time_a_job_spent_before_fit_comes_out_of_its_training_share():
    """The harness kills a job at its budget counted from the job's start, so the training deadline counts from
    there too: an MLP whose job began 1.9 s before its fit, under a 2 s budget (1.6 s of training), is past its
    deadline at once and stops after one epoch; the same budget counted from the fit lets it train on."""
    late, _ = fit("mlp", 2.0, job_started=time.monotonic() - 1.9)
    assert late.info_["stopped_by_time_budget"] is True and late.info_["epochs"] == 1, late.info_
    on_time, _ = fit("mlp", 2.0, job_started=time.monotonic())
    assert on_time.info_["epochs"] > 1, on_time.info_


def test_a_clock_without_a_budget_never_stops_and_one_past_its_deadline_stops_at_once():
    endless = TrainingClock(None)
    assert not any(endless.out_of_time() for _ in range(1000)) and not endless.stopped
    assert endless.remaining() is None
    spent = TrainingClock(0.0)
    assert spent.out_of_time() and spent.stopped and spent.remaining() == 0.0


def test_a_guard_only_clock_runs_past_the_training_share_to_the_jobs_end_less_its_reserve():
    """A fit sized before training (NPT's steps: auto) keeps its clock only as a guard: the deadline moves from the
    training share (80 of 100 s) to the job's end less the reserve for predicting (10 s), or less GUARD_MARGIN of
    the budget where the reserve is smaller, and a later reserve still moves it."""
    from tabbench.estimator import GUARD_MARGIN

    t = [0.0]
    clock = TrainingClock(100.0, started=0.0, now=lambda: t[0])
    clock.reserve(10.0)
    assert clock.deadline == 80.0
    clock.guard_only()
    assert clock.deadline == 90.0
    clock.reserve(1.0)
    assert clock.deadline == 100.0 - GUARD_MARGIN * 100.0
    t[0] = 84.0
    clock.begin()
    t[0] = 85.0  # a one-second step: a training share's clock would have stopped at 80
    assert not clock.out_of_time()
    t[0] = 94.5
    assert clock.out_of_time() and clock.stopped  # another step as long as the last would end past 95


def test_a_guard_only_clock_keeps_a_margin_as_much_larger_as_training_runs_slower_than_planned():
    """Planned at 1 s an epoch, a fit whose epochs take 1 s keeps GUARD_MARGIN of the budget before the job's end;
    one whose epochs take 1.8 s (a core shared with a busy loop) keeps 1.8 times that, since what follows training
    is likely as much slower. The first epoch is left out (a compiled step compiles in it: 12 s here changes
    nothing), the margin follows the mean back down, and a reserve larger than it still decides."""
    from tabbench.estimator import GUARD_MARGIN

    for first_s, epoch_s, slowdown in ((1.0, 1.0, 1.0), (12.0, 1.0, 1.0), (0.5, 0.5, 1.0), (1.8, 1.8, 1.8)):
        t = [0.0]
        clock = TrainingClock(100.0, started=0.0, now=lambda: t[0])
        clock.guard_only(unit_s=1.0)
        for i in range(10):
            t[0] += first_s if i == 0 else epoch_s
            clock.out_of_time()
        assert clock.deadline == pytest.approx(100.0 - GUARD_MARGIN * slowdown * 100.0), (first_s, epoch_s)
    for _ in range(9):  # nine epochs on plan after nine at 1.8 s: the mean 1.4 s
        t[0] += 1.0
        clock.out_of_time()
    assert clock.deadline == pytest.approx(100.0 - GUARD_MARGIN * 1.4 * 100.0)
    clock.reserve(20.0)
    assert clock.deadline == 80.0


def test_planned_epochs_come_from_the_machines_first_fit_of_the_shape_and_only_the_cpu_clock_plans(
        tmp_path, monkeypatch):
    """The first fit of a shape on a machine has no stored epoch time: its clock decides. Here, after a setup of
    1 s and with a reserve of 30 s for predicting (its deadline at 70 s), a first epoch of 10 s and then epochs of
    2 s: it stops after 26, when one more as long as its longest would pass the deadline, and stores its epoch
    times, its setup and its reserve. The next fit of that shape plans 26 epochs before its first, those its
    clock's rule gave the measuring fit (by the mean epoch alone, 2.31 s, it would have planned 29: the first
    epoch's and the last's margins), though a busy machine made its own setup 4 s and its timed reserve 40 s,
    trains them whatever they cost (that machine's 2.6 s epochs here) with its clock only guarding them, and
    stops after them. Another shape, a wall clock or a fit without a budget plans nothing."""
    monkeypatch.setenv("TABBENCH_CACHE", str(tmp_path))
    shape = {"model": "m", "rows": 100}
    t = [1.0]
    first = TrainingClock(100.0, started=0.0, now=lambda: t[0], cpu=True)
    first.reserve(30.0)
    assert first.plan_epochs(shape) is None and first.epoch_plan["speed"] == "measured"
    t[0] = 11.0
    while not first.out_of_time():
        t[0] += 2.0
    first.keep_epoch_time()
    assert first.epochs == 26 and first.epoch_plan["epoch_s"] == pytest.approx(60.0 / 26)
    assert (first.epoch_plan["setup_s"], first.epoch_plan["reserve_s"]) == (1.0, 30.0)
    assert (first.epoch_plan["first_s"], first.epoch_plan["longest_s"]) == (10.0, 10.0)

    t[0] = 4.0
    second = TrainingClock(100.0, started=0.0, now=lambda: t[0], cpu=True)
    second.reserve(40.0)
    assert second.plan_epochs(shape) == 26 and second.epoch_plan["speed"] == "stored"
    assert (second.epoch_plan["setup_s"], second.epoch_plan["reserve_s"]) == (1.0, 30.0)
    assert second.epoch_plan["rest_s"] == pytest.approx(2.0)
    for epoch in range(1, 28):
        t[0] = 4.0 + 2.6 * epoch  # 71.6 s at the 26th: past the first fit's deadline, within the guard
        if second.out_of_time():
            break
    assert epoch == 26 and second.stopped
    second.keep_epoch_time()  # a planned fit stores nothing: the first fit's times stay
    assert TrainingClock(100.0, started=0.0, now=lambda: 1.0, cpu=True).plan_epochs(shape) == 26

    assert TrainingClock(100.0, started=0.0, now=lambda: 1.0, cpu=True).plan_epochs({**shape, "rows": 101}) is None
    assert TrainingClock(100.0, started=0.0, now=lambda: 1.0).plan_epochs(shape) is None  # a wall clock
    assert TrainingClock(None, now=lambda: 1.0, cpu=True).plan_epochs(shape) is None


def test_realmlp_stops_on_the_jobs_cpu_clock_and_then_trains_the_epochs_the_machine_stored(tmp_path, monkeypatch):
    """RealMLP under an 8 CPU-s budget on the job's clock (not pytabkit's ``time_to_fit_in_seconds``, Lightning's
    wall-clock ``max_time``): the first fit of its shape is stopped by that clock and stores its mean epoch; the
    same fit again plans its epochs from it before the first and trains exactly those, whatever else the machine
    does; both keep a usable model. (At a budget of a few seconds the reserve for predicting, at least
    ``PREDICT_MARGIN_MIN_S``, is more than the slack between the planned training share and the job's end.)"""
    from tabbench.clock import CPU

    monkeypatch.setenv("TABBENCH_CACHE", str(tmp_path))
    dataset, split = contract_data("binary")
    fits = []
    for _ in range(2):
        model = spec("realmlp").build(dataset.meta, 0, {"n_epochs": 2000, "device": "cpu"})
        model.fit(dataset.X.iloc[split.train], dataset.y[split.train], dataset.X.iloc[split.val], dataset.y[split.val],
                  context=JobContext(time_budget_s=8.0, clock=CPU, predict_rows=len(split.test) + len(split.val)))
        fits.append(model)
    first, second = (m.info_ for m in fits)
    print(f"realmlp: {first['epochs']} epochs measured ({first['epoch_plan']['epoch_s']:.3f} CPU-s each), then "
          f"{second['epochs']} of {second['epoch_plan']['epochs']} planned")
    assert first["stopped_by_time_budget"] and first["epoch_plan"]["speed"] == "measured"
    assert first["epochs"] == trained("realmlp", fits[0]) < 2000
    assert second["epoch_plan"]["speed"] == "stored" and second["epochs"] == second["epoch_plan"]["epochs"]
    assert second["stopped_by_time_budget"]  # its clock, at the planned epochs, ended it: not its 2000 epochs
    proba = fits[1].predict_proba(dataset.X.iloc[split.test])
    assert proba.shape == (len(split.test), 2) and np.isfinite(proba).all()


def test_the_leaderboard_counts_the_jobs_the_budget_stopped_and_the_ones_it_killed(tmp_path):
    """A 6 s budget on wine's holdout split (a job's process imports torch in about 2 s of it): the MLP (no epoch
    cap to speak of) is stopped by the clock and keeps a result; a Random Forest of 100,000 trees has no clock and
    is killed (timeout); k-NN is neither. The cost section's budget table counts exactly that."""
    import yaml

    from tabbench.report.cost import budget_table
    from tabbench.report.leaderboard import make_context
    from tabbench.report.sections import CostAgainstQuality
    from tabbench.store import Store

    raw = {"name": "budgeted", "seeds": [0], "budget": {"time_s": 6},
           "datasets": [{"name": "wine", "source": "sklearn", "id": "wine", "split": {"protocol": "holdout"}}],
           "models": {"knn": {}, "mlp": {"params": {"max_epochs": 10**6, "patience": 10**6, "device": "cpu"}},
                      "random_forest": {"params": {"n_estimators": 100000}}}}
    (tmp_path / "budgeted.yaml").write_text(yaml.safe_dump(raw))
    # a fresh process, as a user runs it: the jobs are forked from it, and a pytest worker that already ran CUDA
    # autograd (its device threads do not survive a fork) would fail them
    done = subprocess.run([sys.executable, "-m", "tabbench.cli", "run", str(tmp_path / "budgeted.yaml"), "--no-ray",
                           "--no-progress", "--tables-only", "--results", str(tmp_path / "runs")])
    assert done.returncode == 1  # the killed forests are failed jobs
    runs = Store(tmp_path / "runs" / "budgeted").frame()
    failed = runs[(runs["status"] != "ok") & (runs["model"] != "random_forest")]
    assert failed.empty, failed.reindex(columns=["model", "status", "error_type", "error_message"]).to_string()
    table = budget_table(runs)
    assert table.loc["mlp", ["jobs", "stopped", "killed"]].tolist() == [1, 1, 0]
    assert table.loc["random_forest", ["jobs", "stopped", "killed"]].tolist() == [1, 0, 1]
    assert table.loc["knn", ["jobs", "stopped", "killed"]].tolist() == [1, 0, 0]
    note = "\n".join(CostAgainstQuality().markdown(make_context(tmp_path / "board", [tmp_path / "runs" / "budgeted"],
                                                                 runs, report=True)))
    assert "Time budget: 6 s a job" in note and "| random_forest | 1 | 0 | 1 | – |" in note
    assert budget_table(runs.drop(columns="time_budget_s")).empty


def test_tabr_whose_first_epoch_outlasts_its_budget_ends_mid_epoch_on_its_own_clock(tmp_path):
    """TabR through the harness (``tabbench run``, local executor) on Higgs' 7,000-row offline subset, sized so that
    one epoch is longer than the whole 8 CPU-s budget (d_main 256, context 96: about 22 CPU-s an epoch under a 90 s
    budget here; at d_main 96 and context 32, 2.5 CPU-s). A clock asked only after each epoch let such a job run
    into the harness's kill (``timeout``, as measured before the per-batch check and the prediction margin,
    plugins/tabbench_plugins/pytabkit_wrapper.py ``budget_stop``). The job must end by itself in its first epoch:
    its record ``ok``, training ``stopped_by_time_budget``, the whole job within its budget. (This test ran beside a
    busy loop on the job's core while budgets were wall clocks; the CPU clock sees the same epoch, only dearer.)"""
    import yaml

    from tabbench.store import Store

    BUDGET = 8
    registered_spec("tabr")
    mirror = require_shared("uci/higgs").parents[1]
    raw = {"name": "long-epoch", "catalogue": str(ROOT / "suites" / "datasets" / "uci.yaml"), "seeds": [0],
           "budget": {"time_s": BUDGET}, "datasets": [{"name": "higgs", "source": "catalogue"}],
           "models": {"tabr": {"params": {"device": "cpu", "d_main": 256, "context_size": 96}}}}
    (tmp_path / "long-epoch.yaml").write_text(yaml.safe_dump(raw))
    done = subprocess.run([sys.executable, "-m", "tabbench.cli", "run", str(tmp_path / "long-epoch.yaml"), "--no-ray",
                           "--no-progress", "--tables-only", "--results", str(tmp_path / "runs"), "--mirror",
                           str(mirror)], capture_output=True, text=True)
    (record,) = Store(tmp_path / "runs" / "long-epoch").latest().values()
    assert done.returncode == 0 and record["status"] == "ok", (record.get("error_message"), done.stderr[-2000:])
    assert record["info"]["stopped_by_time_budget"] is True and record["info"]["epochs"] == 1
    assert record["clock"] == "cpu" and record["cpu_seconds"] < BUDGET  # its budget is its own CPU time
    print(f"tabr with an epoch longer than its budget: {record['cpu_seconds']:.1f} CPU-s, "
          f"{record['wall_seconds']:.1f} s")
