"""The paper's suites: they validate, they say what the NPT paper did, and every split protocol in
uci.yaml materialises with the paper's sizes on the offline copies (where the copy is whole) and is
deterministic."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tabbench.data.cache import DataPaths
from tabbench.data.dataset import load_dataset
from tabbench.data.splits import make_splits
from tabbench.plugins import load_models
from tabbench.suite import load_suite
from tests.conftest import SHARED, require_shared

ROOT = Path(__file__).resolve().parents[1]
SUITES = sorted((ROOT / "suites").glob("*.yaml"))
NINE = {"knn", "random_forest", "gradient_boosting", "xgboost", "catboost", "lightgbm", "mlp", "tabnet", "npt"}
needs_shared = pytest.mark.real_data()


def suite(name):
    return load_suite(ROOT / "suites" / f"{name}.yaml")


@pytest.mark.parametrize("path", SUITES, ids=[p.stem for p in SUITES])
def test_every_suite_validates(path):
    s = load_suite(path)
    own = set(load_models(tuple(s.plugins))) - set(load_models()) if s.plugins else set()
    assert {m.model for m in s.models} <= set(load_models()) | own  # a built-in, or a model of its own plugin files
    for d in s.datasets:  # per-dataset params only for methods the suite runs
        assert set(d.model_params or {}) <= {m.label for m in s.models}, d.name


#: The models after NPT (not in the paper), added to the suites the one table over everything pools.
AFTER_NPT = {"realmlp", "modernnca", "tabr", "tabm"}


@pytest.mark.parametrize("name", ["uci", "uci-small", "uci-small-kfold", "uci-large-cpu", "openml-cc18"])
def test_tabular_suites_run_all_nine_methods_and_the_pooled_ones_the_four_after_npt(name):
    pooled = name in ("uci-small", "uci-large-cpu")  # results/uci-cpu's sources
    assert {m.model for m in suite(name).models} == NINE | (AFTER_NPT if pooled else set())


def test_image_suite_runs_all_nine_with_the_papers_npt_patches():
    s = suite("image")
    assert {m.model for m in s.models} == NINE
    shared = next(m for m in s.models if m.model == "npt").params
    assert (shared["batch_size"], shared["lr"], shared["n_layers"]) == (512, 1e-3, 8)
    mnist, cifar = (d.model_params["npt"] for d in s.datasets)
    assert (mnist["n_patches"], mnist["image_shape"], mnist["e"], mnist["steps"], mnist["p_target"]) == \
        (49, [1, 28, 28], 16, 500000, 0.15)
    assert (cifar["n_patches"], cifar["image_shape"], cifar["e"], cifar["steps"], cifar["p_target"]) == \
        (64, [3, 32, 32], 64, 1000000, 1.0)


# The authors' code computes the validation share of each 10-fold training part as 0.2 / (1 - 0.1), which is
# 0.22222222222222224 in floating point: one more validation row than 2/9 on Concrete (see test_splits.py).
AUTHORS_VAL = 0.2 / (1 - 0.1)

# name: (task, protocol, k, folds, val_fraction, test_rows, NPT e/batch/steps/lr as in the paper's table)
PAPER = {
    "higgs": ("binary", "fixed", None, None, 0.125, 500000, (64, 4096, 500000, 1e-3)),
    "poker_hand": ("multiclass", "fixed", None, None, 0.125, None, (64, 4096, 200000, 1e-3)),
    "forest_cover": ("multiclass", "kfold", 5, (0,), 0.125, None, (64, 1800, 800000, 5e-3)),
    "income": ("binary", "fixed", None, None, 0.125, 99762, (64, 2048, 2000000, 1e-3)),
    "kick": ("binary", "kfold", 5, (0,), 0.125, None, (64, 4096, 250000, 1e-3)),
    "breast_cancer": ("binary", "npt_code", 10, None, AUTHORS_VAL, None, (32, None, 2000, 5e-4)),
    "protein": ("regression", "kfold", 5, (0,), 0.125, None, (128, 2048, 400000, 1e-3)),
    "boston": ("regression", "npt_code", 10, None, AUTHORS_VAL, None, (128, None, 2000, 1e-3)),
    "yacht": ("regression", "npt_code", 10, None, AUTHORS_VAL, None, (128, None, 10000, 1e-3)),
    "concrete": ("regression", "npt_code", 10, None, AUTHORS_VAL, None, (128, None, 10000, 1e-3)),
}


def test_uci_suite_is_the_papers_protocol():
    s = suite("uci")
    assert sorted(d.name for d in s.datasets) == sorted(PAPER)
    for d in s.datasets:
        task, protocol, k, folds, val_fraction, test_rows, npt = PAPER[d.name]
        assert (d.task, d.split.protocol, d.split.seed) == (task, protocol, 42), d.name
        if protocol in ("kfold", "npt_code"):
            assert (d.split.k, d.split.folds) == (k, folds), d.name
        assert d.split.val_fraction == (val_fraction if protocol == "npt_code" else pytest.approx(val_fraction)), d.name
        assert d.split.test_rows == test_rows, d.name
        params = d.model_params["npt"]
        assert (params["e"], params["batch_size"], params["steps"], params["lr"]) == npt, d.name
    assert {d.name: (d.source.name, d.source.id) for d in s.datasets if d.source.name == "openml"} == {
        "income": ("openml", 4535), "kick": ("openml", 41162)}
    poker = next(d for d in s.datasets if d.name == "poker_hand")
    assert poker.source.test_url.endswith("poker-hand-testing.data")
    for d in s.datasets:  # suites name the originals; offline layouts live in the mirror mapping
        assert d.source.name in ("openml", "url"), d.name
        assert getattr(d.source, "mirror_path", None) is None and getattr(d.source, "test_mirror_path", None) is None
        assert d.source.name == "openml" or d.source.url.startswith("https://archive.ics.uci.edu/")


def test_each_dataset_is_defined_once_and_suites_hold_no_python():
    """The UCI datasets live in the catalogue; a suite uses them by name (no copy of a URL, column list or split)."""
    import yaml

    catalogue = yaml.safe_load((ROOT / "suites" / "datasets" / "uci.yaml").read_text())["datasets"]
    sources = {entry.get("url") or entry.get("id") for entry in catalogue.values()}
    for path in SUITES:
        for entry in yaml.safe_load(path.read_text())["datasets"]:
            assert entry.get("url", entry.get("id")) not in sources or entry["source"] == "catalogue", (path, entry)
    used = {d.name for name in ("uci", "uci-small", "uci-small-npt-paper", "uci-large-cpu")
            for d in suite(name).datasets}
    assert used == set(catalogue)
    assert not list((ROOT / "suites").rglob("*.py"))


# the categorical columns each of the authors' dataset modules (npt/datasets/*.py) declares, by our names
HULL = ["longitudinal_position", "prismatic_coefficient", "length_displacement_ratio", "beam_draught_ratio",
        "length_beam_ratio"]
AUTHORS_CATEGORICAL = {"breast_cancer": [], "boston": ["CHAS", "RAD"], "yacht": HULL + ["froude_number"],
                       "concrete": [], "protein": [], "higgs": [], "poker_hand": ["S1", "S2", "S3", "S4", "S5"]}


def test_uci_declares_the_authors_categorical_columns():
    declared = {d.name: d.categorical for d in suite("uci").datasets}
    for name, columns in AUTHORS_CATEGORICAL.items():
        assert list(declared[name]) == columns, name
    assert declared["income"] == "auto"  # the authors' rule: <= 55 distinct values -> categorical
    assert len(declared["forest_cover"]) == 44 and len(declared["kick"]) == 18


def test_uci_small_kfold_is_uci_small_with_proper_kfold_and_a_numeric_froude_number():
    paper, proper = suite("uci-small"), suite("uci-small-kfold")
    # the models after NPT, and k-NN over TabArena's space (knn-tabarena), were added to uci-small only
    nine = [m for m in paper.models if m.model in NINE and m.label in NINE]
    assert [m.label for m in nine] == [m.label for m in proper.models]
    # the same methods and budgets; NPT is transductive under the authors' protocol, inductive under proper KFold
    inductive = lambda m: {k: v for k, v in m.params.items() if k != "transductive"}  # noqa: E731
    assert [(inductive(m), m.tuning, m.n_trials) for m in nine] == [(m.params, m.tuning, m.n_trials)
                                                                    for m in proper.models]
    assert {m.label: m.params.get("transductive") for m in paper.models}["npt"] is True
    assert "transductive" not in {m.label: m.params for m in proper.models}["npt"]
    for a, b in zip(paper.datasets, proper.datasets):
        assert replace(a.split, protocol="kfold", val_fraction=0.2222222222222222) == b.split, a.name
        same = ("name", "source", "columns", "target", "task", "model_params")  # the source with its url
        assert [getattr(a, f) for f in same] == [getattr(b, f) for f in same]
        assert list(b.categorical) == (HULL if a.name == "yacht" else list(a.categorical)), a.name


def test_the_yacht_froude_suite_holds_both_encodings_on_the_authors_folds():
    authors, ours = suite("uci-small-yacht-froude").datasets
    small = {d.name: d for d in suite("uci-small").datasets}["yacht"]
    assert (authors.split, ours.split) == (small.split, small.split)
    assert list(authors.categorical) == list(small.categorical) == HULL + ["froude_number"]
    assert list(ours.categorical) == HULL
    tuned = {m.label: (m.tuning, m.n_trials) for m in suite("uci-small").models}
    assert {m.label: (m.tuning, m.n_trials) for m in suite("uci-small-yacht-froude").models} == {
        "knn": tuned["knn"], "lightgbm": tuned["lightgbm"], "lightgbm_onehot": tuned["lightgbm"],
        "catboost": tuned["catboost"], "catboost_onehot": tuned["catboost"]}


def test_the_onehot_methods_are_the_boosters_with_one_hot_input():
    """lightgbm_onehot and catboost_onehot: the registered boosters with one_hot: true, tuned as the plain ones."""
    models = {m.label: m for m in suite("uci-small-yacht-froude").models}
    for booster in ("lightgbm", "catboost"):
        onehot, plain = models[f"{booster}_onehot"], models[booster]
        assert (onehot.model, onehot.params) == (booster, {"one_hot": True})
        assert (onehot.tuning, onehot.n_trials, onehot.search_space) == (plain.tuning, plain.n_trials, None)


def test_image_suite_uses_openml_and_the_papers_splits():
    mnist, cifar = suite("image").datasets
    assert (mnist.source.name, mnist.source.id, mnist.split.protocol, mnist.split.test_rows) == ("openml", 554, "fixed",
                                                                                                10000)
    assert (cifar.source.name, cifar.source.id, cifar.split.test_rows) == ("openml", 40927, 10000)
    assert 50000 * cifar.split.val_fraction == 5000  # 45k / 5k / 10k


def test_openml_cc18_is_study_99_by_task_id():
    datasets = suite("openml-cc18").datasets
    ids = [d.source.task_id for d in datasets]
    assert len(ids) == len(set(ids)) == 72
    assert {d.source.name for d in datasets} == {"openml"} and {d.split.protocol for d in datasets} == {"openml_task"}
    assert {3, 6, 31, 7592, 9946, 146825, 167124, 167141} <= set(ids)


# --- split protocols on the offline copies -------------------------------------------------------------


@pytest.fixture(scope="module")
def uci_offline(tmp_path_factory):
    require_shared()
    paths = DataPaths(cache=tmp_path_factory.mktemp("cache"), mirrors=(SHARED.resolve(),), base=ROOT)
    cfgs = {d.name: d for d in suite("uci").datasets}
    return {name: (cfg, load_dataset(cfg, paths)) for name, cfg in cfgs.items() if name != "kick"}


@needs_shared
@pytest.mark.parametrize("name", ["breast_cancer", "boston", "yacht", "concrete"])
def test_ten_fold_cv_is_70_20_10_and_kfold_partitions_the_rows(name, uci_offline, tmp_path):
    cfg, ds = uci_offline[name]  # uci.yaml: the authors' fold sequence
    proper = {d.name: d for d in suite("uci-small-kfold").datasets}[name]
    n = len(ds)
    for split_cfg in (ds.split, proper.split):
        splits = make_splits(ds, split_cfg)
        assert [s.fold for s in splits] == list(range(10))
        for s in splits:
            assert len(np.intersect1d(s.train, s.val)) == len(np.intersect1d(s.train, s.test)) == 0
            assert len(s.train) + len(s.val) + len(s.test) == n
            assert abs(len(s.test) - 0.1 * n) <= 1 and abs(len(s.val) - 0.2 * n) <= 2
            assert abs(len(s.train) - 0.7 * n) <= 2
    tested = [np.concatenate([s.test for s in make_splits(ds, c)]) for c in (proper.split, ds.split)]
    assert sorted(tested[0].tolist()) == list(range(n))  # proper k-fold: every row a test row once
    covered = len(np.unique(tested[1]))  # the authors' folds: test parts overlap and leave rows out
    assert covered == {"yacht": 199, "concrete": 674}.get(name, covered) and covered < 0.7 * n  # issue 11's counts


# (train, val, test) sizes; whole copies get the paper's sizes, subsets their own (and say so)
SIZES = {
    "protein": [(32011, 4573, 9146)],  # fold 0 of 5 of 45,730 rows: 0.7 / 0.1 / 0.2
    "boston": [(353, 102, 51)] * 6 + [(354, 102, 50)] * 4,
    "higgs": [(6125, 875, 500)],  # subset: its own 500-row test file
    "poker_hand": [(21883, 3127, 18488)],  # whole training file, subset of the testing file
    "forest_cover": [(10584, 1512, 3024)],  # fold 0 of 5 of the 15,120-row subset
    "income": [(28490, 4071, 16281)],  # the Adult substitute's own test file
}


@needs_shared
@pytest.mark.parametrize("name", sorted(SIZES))
def test_split_sizes_on_the_offline_copies(name, uci_offline):
    cfg, ds = uci_offline[name]
    sizes = [(len(s.train), len(s.val), len(s.test)) for s in make_splits(ds, ds.split)]
    assert sizes == SIZES[name]
    assert (ds.subset is None) == (name in ("protein", "boston"))


@needs_shared
@pytest.mark.parametrize("name", ["higgs", "poker_hand", "forest_cover", "breast_cancer", "protein", "concrete"])
def test_splits_are_deterministic(name, uci_offline, tmp_path):
    cfg, ds = uci_offline[name]
    again = load_dataset(cfg, DataPaths(cache=tmp_path, mirrors=(SHARED.resolve(),), base=ROOT))
    assert again.fingerprint == ds.fingerprint
    first, second = make_splits(ds, ds.split), make_splits(again, again.split)
    assert [s.fingerprint for s in first] == [s.fingerprint for s in second]
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a.test, b.test)
        np.testing.assert_array_equal(a.val, b.val)


def test_precision_checks_differ_from_what_they_check_in_amp_only():
    """The bf16-vs-fp32 suites compare like with like: the same datasets, params and steps, amp apart."""
    small, precision = suite("uci-small"), suite("uci-small-npt-precision")
    npt = {m.label: m for m in small.models}["npt"].params
    methods = {m.label: m for m in precision.models}
    assert {label: m.params for label, m in methods.items()} == {"npt-bf16": {**npt, "amp": True},
                                                                 "npt-fp32": {**npt, "amp": False}}
    for a, b in zip(small.datasets, precision.datasets):
        assert replace(b, model_params=a.model_params) == a and len(precision.datasets) == len(small.datasets)
        assert b.model_params == {"npt-bf16": a.model_params["npt"], "npt-fp32": a.model_params["npt"]}

    paper, fp32 = suite("uci-small-npt-paper"), suite("uci-small-npt-paper-fp32")
    e32 = {m.label: m for m in paper.models}["npt-e32"].params
    assert [(m.label, m.params) for m in fp32.models] == [("npt-e32-fp32", {**e32, "amp": False})]
    assert e32["amp"] is True
    yacht = next(d for d in paper.datasets if d.name == "yacht")
    assert [replace(d, model_params=yacht.model_params) for d in fp32.datasets] == [yacht]
    assert fp32.datasets[0].model_params == {"npt-e32-fp32": yacht.model_params["npt-e32"]}


# the paper's eight small-data NPT variants (../shared/docs/npt-reference.md, the authors' uci_class_reg.sh):
# what each changes, and its steps on (breast_cancer, boston, yacht, concrete); S = the dataset's base steps
S = {"breast_cancer": 2000, "boston": 2000, "yacht": 10000, "concrete": 10000}
VARIANTS = {
    "default": ({}, S),
    "feature-mask-0.20": ({"p_feature": 0.2}, S),
    "label-mask-0.50": ({"p_target": 0.5}, {**S, "boston": 4000, "breast_cancer": 4000}),
    "label-mask-0.10": ({"p_target": 0.1}, dict.fromkeys(S, 20000)),
    "heads-16": ({"n_heads": 16}, S),
    "layers-16": ({"n_layers": 16}, S),
    "heads-16-layers-16": ({"n_heads": 16, "n_layers": 16}, S),
    "cosine-cyclic": ({"lr_schedule": "cosine_cyclic", "warmup_fraction": 0.2}, S),
}


def test_the_tuned_npt_suite_runs_the_papers_eight_variants_on_top_of_npt_e32():
    from tabbench.suite.trials import dataset_trials

    tuned, paper = suite("uci-small-npt-tuned"), suite("uci-small-npt-paper")
    (method,) = tuned.models
    e32 = {m.label: m for m in paper.models}["npt-e32"]
    assert (method.model, method.params, method.tuning) == ("npt", e32.params, "configs")
    assert [c.name for c in method.configs] == list(VARIANTS)
    paper_sets = {d.name: d for d in paper.datasets}
    for d in tuned.datasets:
        assert replace(d, model_params=None) == replace(paper_sets[d.name], model_params=None)  # same data and folds
        base = {**method.params, **d.model_params["npt-tuned"]}
        assert base == {**e32.params, **paper_sets[d.name].model_params["npt-e32"]}  # default = npt-e32's config
        for _, name, params in dataset_trials(method, None, d.name, d.model_params["npt-tuned"]):
            change, steps = VARIANTS[name]
            assert params == {**base, **change, "steps": steps[d.name]}, (d.name, name)
            assert params["e"] == 32
