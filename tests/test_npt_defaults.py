"""NPT's defaults on a user's own table: ``batch_size: "auto"`` (the whole table up to AUTO_BATCH_ROWS
rows, class-stratified minibatches above) and the pre-run cost check that refuses, before any job
starts, a configuration a CPU cannot finish (over the suite's budget, or far beyond reason)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import need

need("torch")

from tabbench.data.cache import DataPaths  # noqa: E402
from tabbench.estimator import TRAINING_SHARE, JobContext, TrainingClock  # noqa: E402
from tabbench.params import defaults  # noqa: E402
from tabbench.plugins import load_models  # noqa: E402
from tabbench.run.runner import RunError, RunOptions, load_data, model_refusals, run_suite  # noqa: E402
from tabbench.suite import load_suite  # noqa: E402
from tabbench_plugins.npt import NPT  # noqa: E402
from tabbench.spec import SplitSizes  # noqa: E402
from tabbench_plugins.npt.cost import (AUTO_BATCH_ROWS, AUTO_BUDGET_SHARE, auto_steps,  # noqa: E402
                                     estimate_cpu_seconds, n_batches)

COVER = "uci/covertype/covertype-kaggle-train.csv"  # 15,120 rows x 54 features, 7 classes (SOURCES.md)
ROOT = Path(__file__).resolve().parents[1]
SMALL = {"e": 8, "n_layers": 2, "steps": 1, "budgets": []}  # the defaults' batching, a model a test can fit


def own_table_suite(tmp_path, shared, npt="{}", budget=""):
    """A suite as a user writes it for their own CSV file (the Covertype copy), with ``npt`` params."""
    path = tmp_path / "own.yaml"
    path.write_text(f"""name: own-table
{budget}
datasets:
  - name: cover
    source: file
    path: {shared / COVER}
    header: true
    drop: [Id]
    target: Cover_Type
    task: multiclass
    split: {{protocol: kfold, k: 5, folds: [0], seed: 42}}
models:
  npt: {npt}
""")
    return load_suite(path)


def refusal(tmp_path, suite) -> str:
    """The RunError of ``tabbench run`` on the suite; asserts that no job ran (no record written)."""
    with pytest.raises(RunError) as info:
        run_suite(suite, RunOptions(results=tmp_path / "runs", progress=False,
                                    data_paths=DataPaths(cache=tmp_path / "cache")))
    records = tmp_path / "runs" / suite.name / "records"
    assert not records.exists() or not any(p.stat().st_size for p in records.iterdir())
    return str(info.value)


@pytest.fixture(scope="module")
def cover(shared, tmp_path_factory):
    """(meta, X, y, split fold 0) of the Covertype copy as suites/uci-large-cpu.yaml loads it."""
    suite = load_suite(ROOT / "suites" / "uci-large-cpu.yaml")
    _, dataset, splits = load_data(suite, DataPaths(cache=tmp_path_factory.mktemp("cache"), mirrors=(shared,)),
                                   ("forest_cover",))["forest_cover"]
    return dataset.meta, dataset.X, dataset.y, splits[0]


def test_defaults_over_the_suites_budget_are_refused_before_any_job(tmp_path, shared):
    # on the CPU (device auto would take a GPU where there is one, and its cost is within the budget)
    suite = own_table_suite(tmp_path, shared, npt="{params: {device: cpu}}", budget="budget: {time_s: 1800}")
    message = refusal(tmp_path, suite)
    assert str(suite.path) in message and "models.npt" in message and "'cover'" in message
    assert "budget.time_s of 1,800 s" in message
    for param in ("steps", "batch_size", "e or n_layers", "eval_every", "cpus", "device: cuda"):
        assert param in message, param


def test_a_configuration_far_beyond_reason_is_refused_without_a_budget(tmp_path, shared):
    # the whole 10,584-row training table per step, 2,000 steps: over 100 CPU-hours
    suite = own_table_suite(tmp_path, shared, npt="{params: {batch_size: null, steps: 2000, device: cpu}}")
    message = refusal(tmp_path, suite)
    assert "the whole table" in message and "without a budget" in message and "set budget.time_s" in message
    assert f'batch_size (e.g. "auto": minibatches of at most {AUTO_BATCH_ROWS:,} rows' in message


def test_defaults_without_a_budget_pass_the_check_on_the_same_table(tmp_path, shared):
    suite = own_table_suite(tmp_path, shared)
    registry = load_models(())
    loaded = load_data(suite, DataPaths(cache=tmp_path / "cache"))
    assert model_refusals(suite, registry, loaded) == []


def test_auto_rule_whole_table_up_to_the_threshold_then_batches_of_at_most_that_many_rows():
    assert n_batches(1030, "auto") == n_batches(AUTO_BATCH_ROWS, "auto") == 1  # Concrete: the paper's whole table
    assert n_batches(AUTO_BATCH_ROWS + 1, "auto") == 2
    assert n_batches(15_120, "auto") == -(-15_120 // AUTO_BATCH_ROWS)
    # explicit values keep their meaning: null = the whole table, a number = batches of about that many rows
    assert n_batches(50_000, None) == 1 and n_batches(50_000, 512) == 98 and n_batches(300, 512) == 1


def test_auto_trains_on_the_whole_table_below_the_threshold(cover):
    meta, X, y, split = cover
    rows = split.train[:AUTO_BATCH_ROWS - 24]
    model = NPT(meta, seed=0, **SMALL).fit(X.iloc[rows], y[rows])
    assert model.info_["batch_rows"] == len(rows)
    assert model.run_.batches == []  # the epoch was one batch: the whole table


def _class_counts(model, batches):
    """(batches, classes) rows of each class in each training batch of the model's table."""
    labels = model.table_.x[:, -1].long().cpu().numpy()
    return np.array([np.bincount(labels[b.cpu().numpy()], minlength=model.meta.n_classes) for b in batches])


def test_auto_trains_on_class_stratified_minibatches_above_the_threshold(cover):
    meta, X, y, split = cover
    rows = split.train
    assert len(rows) > AUTO_BATCH_ROWS
    auto = NPT(meta, seed=0, **SMALL).fit(X.iloc[rows], y[rows])
    n_b = -(-len(rows) // AUTO_BATCH_ROWS)
    assert auto.info_["batch_rows"] == -(-len(rows) // n_b) <= AUTO_BATCH_ROWS
    batches = auto.run_.batches  # the epoch's batches after its first step
    assert len(batches) == n_b - 1
    counts = _class_counts(auto, batches)
    share = np.bincount(y[rows], minlength=meta.n_classes) / len(rows)
    expected = counts.sum(1, keepdims=True) * share
    assert np.abs(counts - expected).max() <= 2, "every minibatch keeps the table's class proportions"

    # the same batch size given as a number, without class_balance: shuffled, not stratified
    plain = NPT(meta, seed=0, **{**SMALL, "batch_size": AUTO_BATCH_ROWS}).fit(X.iloc[rows], y[rows])
    counts = _class_counts(plain, plain.run_.batches)
    assert np.abs(counts - counts.sum(1, keepdims=True) * share).max() > 2


# --- steps: "auto" -------------------------------------------------------------------------------------


def test_auto_steps_are_the_most_the_cost_model_fits_in_the_budget(cover):
    meta, _, _, split = cover
    sizes = SplitSizes(len(split.train), len(split.val), len(split.test))
    params = {**defaults(NPT.Params), "steps": "auto"}
    found = []
    for budget, cpus in ((1800, 1), (1800, 2), (3600, 1), (36000, 1)):
        p = {**params, "cpus": cpus}
        steps = auto_steps(meta, sizes, p, budget)
        limit = AUTO_BUDGET_SHARE * budget * cpus  # CPU-seconds: the budget is wall time on cpus cores
        assert estimate_cpu_seconds(meta, sizes, {**p, "steps": steps})["seconds"] <= limit
        assert estimate_cpu_seconds(meta, sizes, {**p, "steps": steps + 1})["seconds"] > limit
        found.append(steps)
    assert 0 < found[0] < found[1] == found[2] < found[3]  # twice the time, or twice the cores: twice the CPU


def test_auto_steps_need_a_budget_and_one_step_that_fits_it(tmp_path, shared):
    message = refusal(tmp_path, own_table_suite(tmp_path, shared, npt="{params: {steps: auto}}"))
    assert 'steps "auto"' in message and "budget.time_s" in message and "give steps a number" in message
    message = refusal(tmp_path, own_table_suite(tmp_path, shared, npt="{params: {steps: auto, device: cpu}}",
                                                budget="budget: {time_s: 5}"))
    assert "not one training step fits" in message
    # on a GPU the fit times its own steps: the reference CPU's rates refuse nothing there
    suite = own_table_suite(tmp_path, shared, npt="{params: {steps: auto, device: cuda}}", budget="budget: {time_s: 5}")
    assert model_refusals(suite, load_models(()), load_data(suite, DataPaths(cache=tmp_path / "cache"))) == []
    suite = own_table_suite(tmp_path, shared, npt="{params: {steps: auto}}", budget="budget: {time_s: 3600}")
    loaded = load_data(suite, DataPaths(cache=tmp_path / "cache"))
    assert model_refusals(suite, load_models(()), loaded) == []


def test_a_fit_with_auto_steps_runs_the_steps_its_budget_buys_and_records_them():
    from tabbench.data.cache import DataPaths as Paths
    from tabbench.data.dataset import DatasetConfig, SplitConfig, load_dataset
    from tabbench.data.sources.sklearn import Sklearn
    from tabbench.data.splits import make_splits

    cfg = SplitConfig("kfold", k=10, val_fraction=2 / 9)
    ds = load_dataset(DatasetConfig("bc", Sklearn(id="breast_cancer"), split=cfg), Paths.from_env())
    sp = make_splits(ds, cfg)[0]
    params = {"e": 8, "n_layers": 2, "n_heads": 4, "steps": "auto", "budgets": [], "device": "cpu", "eval_every": 2}
    fit_args = (ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val])
    with pytest.raises(ValueError, match="budget.time_s"):
        NPT(ds.meta, 0, **params).fit(*fit_args)  # no budget given
    for bad in (-1, 2.5, "many"):
        with pytest.raises(ValueError, match="steps must be a whole number >= 0"):
            NPT(ds.meta, 0, **{**params, "steps": bad}).fit(*fit_args)
    sizes = SplitSizes(len(sp.train), len(sp.val), 0)
    full = {**defaults(NPT.Params), **params}
    budget = next(b for b in np.geomspace(1e-3, 100, 300) if auto_steps(ds.meta, sizes, full, b) >= 200)
    model = NPT(ds.meta, 0, **params)

    class Unhurried(JobContext):
        """The budget for ``steps: auto``, the clock out of the way (its stop is tests/test_time_budget.py's):
        the steps the budget buys all run."""

        def training_clock(self, share=TRAINING_SHARE):
            return TrainingClock(None)

    model.fit(*fit_args, context=Unhurried(time_budget_s=budget))
    slowdown = model.info_["slowdown_vs_cost_model"]
    expected = auto_steps(ds.meta, sizes, full, budget, slowdown)
    print(f"one pass here is {slowdown:.2f}x the cost model's; {expected} steps of the {budget:.3g} s budget")
    assert 0 < slowdown < float("inf")
    assert model.info_["steps"] == model.info_["steps_run"] == model.run_.step == expected >= 1
    assert model.info_["stopped_by_time_budget"] is False
    assert model.info_["steps_from_budget_s"] == budget


def test_a_slower_machine_buys_fewer_steps_and_the_speed_measurement_changes_nothing():
    """``steps: auto`` on a machine twice as slow as the cost model gets about half the steps; measuring the
    speed (one timed training pass) leaves the weights, gradients, generators and mode as they were."""
    import torch

    from tabbench.data.cache import DataPaths as Paths
    from tabbench.data.dataset import DatasetConfig, SplitConfig, load_dataset
    from tabbench.data.sources.sklearn import Sklearn
    from tabbench.data.splits import make_splits
    from tabbench_plugins.npt.speed import timed_pass_seconds

    cfg = SplitConfig("kfold", k=10, val_fraction=2 / 9)
    ds = load_dataset(DatasetConfig("bc", Sklearn(id="breast_cancer"), split=cfg), Paths.from_env())
    sp = make_splits(ds, cfg)[0]
    full = {**defaults(NPT.Params), "e": 8, "n_layers": 2, "n_heads": 4, "eval_every": 2}
    sizes = SplitSizes(len(sp.train), len(sp.val), 0)
    at_1, at_2 = (auto_steps(ds.meta, sizes, full, 60.0, slowdown) for slowdown in (1.0, 2.0))
    assert at_2 < at_1 and abs(at_2 - at_1 / 2) <= full["eval_every"] + 1, (at_1, at_2)

    model = NPT(ds.meta, 0, e=8, n_layers=2, n_heads=4, steps=1, device="cpu")
    model.fit(ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val])
    weights = [p.detach().clone() for p in model.model_.parameters()]
    generator = torch.get_rng_state()
    assert not model.model_.training
    seconds = timed_pass_seconds(model.table_, model.model_, torch, 64)
    assert 0 < seconds < float("inf")
    assert all(torch.equal(a, b) for a, b in zip(weights, model.model_.parameters()))
    assert all(p.grad is None for p in model.model_.parameters())
    assert torch.equal(torch.get_rng_state(), generator) and not model.model_.training


def test_a_measured_speed_is_scaled_by_the_machines_reference_pass(monkeypatch, tmp_path):
    """The first measurement on a kind of machine stores its reference pass's time (plugins/tabbench_plugins/npt/
    speed.py) and takes its slowdown as measured (load 1); a later one scales its slowdown by the stored time over
    the reference's time now. With a book whose reference pass once took three times as long as it does now (a
    machine that was busy then), the same fit measures about three times the slowdown and a load of about a third:
    a fit measured on a busy machine is scaled back the same way. Timing the reference leaves torch's generator as
    it was (the fit's masks and dropout do not depend on whether it measured)."""
    import torch

    from tabbench.data.cache import DataPaths as Paths
    from tabbench.data.dataset import DatasetConfig, SplitConfig, load_dataset
    from tabbench.data.sources.sklearn import Sklearn
    from tabbench.data.splits import make_splits
    from tabbench_plugins.npt.cost import SpeedBook
    from tabbench_plugins.npt.speed import ReferencePass, reference_key

    state = torch.get_rng_state()
    assert ReferencePass(torch, True).seconds() > 0 and torch.equal(torch.get_rng_state(), state)
    cfg = SplitConfig("kfold", k=10, val_fraction=2 / 9)
    ds = load_dataset(DatasetConfig("bc", Sklearn(id="breast_cancer"), split=cfg), Paths.from_env())
    sp = make_splits(ds, cfg)[0]
    fit_args = (ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val])

    def fit(cache):
        monkeypatch.setenv("TABBENCH_CACHE", str(cache))
        model = NPT(ds.meta, 0, e=8, n_layers=2, n_heads=4, steps="auto", budgets=[], device="cpu", eval_every=2)
        model.fit(*fit_args, context=JobContext(time_budget_s=3.0, clock="cpu"))
        return model

    first = fit(tmp_path / "first")
    assert first.info_["speed"] == "measured" and first.info_["speed_load"] == 1.0
    (key, entry), = ((k, v) for k, v in SpeedBook().read().items() if '"pass": "reference pass"' in k)
    assert key == reference_key(torch, first.amp_) and entry["seconds"] > 0
    monkeypatch.setenv("TABBENCH_CACHE", str(tmp_path / "later"))
    SpeedBook().put(key, {"seconds": 3 * entry["seconds"]})
    later = fit(tmp_path / "later")
    ratio = later.info_["slowdown_vs_cost_model"] / first.info_["slowdown_vs_cost_model"]
    print(f"slowdown {first.info_['slowdown_vs_cost_model']:.2f} then {later.info_['slowdown_vs_cost_model']:.2f} "
          f"(x{ratio:.2f}), load {later.info_['speed_load']:.2f}")
    assert 2.0 < ratio < 4.5 and 0.2 < later.info_["speed_load"] < 0.5
    assert later.info_["steps"] < first.info_["steps"]
