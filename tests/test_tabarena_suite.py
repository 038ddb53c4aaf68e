"""suites/tabarena.yaml validates offline: TabArena's 51 OpenML tasks, on their own folds, every model at its
defaults. Its data needs OpenML once (`tabbench fetch`); nothing here touches the network."""

from tabbench.data.dataset import describe
from tabbench.data.cache import DataPaths
from tabbench.plugins import load_models
from tabbench.suite import check_models, load_suite
from tests.conftest import ROOT, skip_unless_models_run


def test_tabarena_suite_validates_with_its_models_and_no_network():
    suite = load_suite(ROOT / "suites" / "tabarena.yaml")
    skip_unless_models_run(suite)
    check_models(suite, load_models())
    assert len(suite.datasets) == 51
    task_ids = [d.source.task_id for d in suite.datasets]
    assert len(set(task_ids)) == 51 and all(363612 <= t <= 363712 for t in task_ids)  # TabArena v0.1's ids
    for d in suite.datasets:
        assert d.source.name == "openml" and d.split.protocol == "openml_task" and d.split.folds is None
        assert d.split.repeats in (None, (0, 1, 2)), d.name  # 10 repeats (all) under 2,500 rows, else 3
    # every model at its defaults under one budget; NPT's steps are what the budget buys (steps: auto)
    assert suite.budget.time_s is not None and all(m.tuning == "none" for m in suite.models)
    assert {m.label: m.params for m in suite.models if m.params} == {"npt": {"steps": "auto"}}
    assert {m.model for m in suite.models} == set(load_models())


def test_tabarena_datasets_are_located_without_downloading(tmp_path):
    suite = load_suite(ROOT / "suites" / "tabarena.yaml")
    paths = DataPaths(cache=tmp_path / "cache", mirrors=())
    shown = describe(suite.datasets[0], paths, load=False)
    assert shown["location"] == "remote" and shown["source"] == "openml task 363612"
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.arff"))
