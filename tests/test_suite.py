"""Suite validation: errors name the file, the field path and what is expected."""

from pathlib import Path

import pytest
import yaml

from tabbench.data.splits import PROTOCOLS
from tabbench.plugins import load_models
from tabbench.suite import SuiteError, check_models, load_suite, parse_suite
from tests.conftest import ROOT, skip_unless_models_run

BASE = {
    "datasets": [{"name": "wine", "source": "sklearn", "id": "wine", "split": {"protocol": "kfold", "k": 5}}],
    "models": {"knn": {"params": {"n_neighbors": 3}}},
}


def _with(path, value):
    raw = yaml.safe_load(yaml.safe_dump(BASE))
    *parents, last = path
    node = raw
    for key in parents:
        node = node[key]
    node[last] = value
    return raw


@pytest.mark.parametrize("path, value, message", [
    (("datasets", 0, "split", "k"), "ten", "s.yaml: datasets[0].split.k: expected an integer >= 2, got 'ten'"),
    (("datasets", 0, "split", "val_fraction"), 1.5, "datasets[0].split.val_fraction: expected a number in (0.0, 1.0)"),
    (("datasets", 0, "split", "protocol"), "kfolds", f"expected one of {', '.join(PROTOCOLS)}, got 'kfolds'; did you mean 'kfold'?"),
    (("datasets", 0, "spilt"), {}, "s.yaml: datasets[0].spilt: unknown field 'spilt'; did you mean 'split'?"),
    (("datasets", 0, "id"), "wines", "datasets[0].id: expected one of breast_cancer, diabetes, wine, digits, iris"),
    (("seeds",), "0", "s.yaml: seeds: expected a non-empty list, each an integer >= 0, got '0' (str)"),
    (("models", "knn", "tunning"), "grid", "models.knn.tunning: unknown field 'tunning'; did you mean 'tuning'?"),
    (("budget",), {"time_s": -1}, "budget.time_s: expected a number > 0.0"),
])
def test_invalid_fields_are_reported_with_file_path_and_expectation(path, value, message):
    with pytest.raises(SuiteError) as err:
        parse_suite(_with(path, value), "s.yaml")
    assert message in str(err.value)


def test_unknown_model_lists_the_registered_ones():
    suite = parse_suite(_with(("models",), {"kn": {}}), "s.yaml")
    with pytest.raises(SuiteError, match=r"s.yaml: models.kn: unknown model 'kn'; did you mean 'knn'\?; registered models: .*gradient_boosting"):
        check_models(suite, load_models())


def test_a_param_the_model_does_not_accept_is_rejected_before_running():
    suite = parse_suite(_with(("models", "knn", "params"), {"n_neighbours": 3}), "s.yaml")
    with pytest.raises(SuiteError, match=r"models.knn.params.n_neighbours: model 'knn' does not accept a parameter "
                                         r"'n_neighbours'; did you mean 'n_neighbors'\?"):
        check_models(suite, load_models())


def test_malformed_yaml_names_the_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("datasets:\n  - name: [unclosed\nmodels: {}\n")
    with pytest.raises(SuiteError, match=r"bad.yaml: not valid YAML: line \d+"):
        load_suite(bad)


def test_variants_are_separate_methods_of_one_registered_model():
    raw = _with(("models",), {"rf": {"model": "random_forest"}, "rf_shallow": {"model": "random_forest",
                                                                             "params": {"max_depth": 3}}})
    suite = parse_suite(raw, "s.yaml")
    check_models(suite, load_models())
    assert [(m.label, m.model, m.params) for m in suite.models] == [
        ("rf", "random_forest", {}), ("rf_shallow", "random_forest", {"max_depth": 3})]


@pytest.mark.parametrize("path", sorted((ROOT / "suites").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_suite_validates(path: Path):
    suite = load_suite(path)
    skip_unless_models_run(suite)
    check_models(suite, load_models(tuple(suite.plugins)))  # as `tabbench validate` does: the suite's plugin files too


def test_a_model_whose_library_is_missing_is_reported_with_the_install_hint():
    import dataclasses

    registry = load_models()
    entry = registry["knn"]
    spec = dataclasses.replace(entry.spec, requires=("sklearn", "no_such_module_xyz"),
                               install_hint="pip install 'tabbench-harness[extra]'")
    registry["knn"] = dataclasses.replace(entry, spec=spec)
    suite = parse_suite(BASE, "s.yaml")
    with pytest.raises(SuiteError, match=r"s.yaml: models.knn: model 'knn' needs no_such_module_xyz, which is not "
                                         r"installed; pip install 'tabbench-harness\[extra\]'"):
        check_models(suite, registry)


def test_published_file_is_checked_when_the_suite_loads(tmp_path):
    suite = {"datasets": [{"name": "bc", "source": "sklearn", "id": "breast_cancer",
                           "split": {"protocol": "kfold", "k": 2}}], "models": {"knn": {}},
             "published": "paper.yaml"}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(suite))
    with pytest.raises(SuiteError, match=r"s\.yaml: published: .*paper\.yaml: cannot read"):
        load_suite(path)
    (tmp_path / "paper.yaml").write_text("metrics:\n  bc: {knn: high}\n")
    with pytest.raises(SuiteError, match=r"metrics\.bc\.knn: expected a number or \[mean, standard error\]"):
        load_suite(path)
    (tmp_path / "paper.yaml").write_text("metrics: [0.98]\n")
    with pytest.raises(SuiteError, match=r"published: .*paper\.yaml: metrics: expected a mapping"):
        load_suite(path)
    (tmp_path / "paper.yaml").write_text("metrics:\n  bc: {knn: [0.98, 0.01]}\n")
    assert [use.path for use in load_suite(path).published] == [tmp_path / "paper.yaml"]


# --- dataset catalogues ---------------------------------------------------------------------------------

CATALOGUE = {"description": "two sets", "datasets": {
    "wine": {"source": "sklearn", "id": "wine", "split": {"protocol": "kfold", "k": 5}},
    "iris": {"source": "sklearn", "id": "iris", "task": "multiclass", "split": {"protocol": "holdout"}}}}


def _catalogued(tmp_path, datasets, catalogue=CATALOGUE, **top):
    (tmp_path / "cat").mkdir(exist_ok=True)
    (tmp_path / "cat" / "sets.yaml").write_text(yaml.safe_dump(catalogue))
    raw = {"catalogue": "cat/sets.yaml", "datasets": datasets, "models": {"knn": {}}, **top}
    return parse_suite(raw, tmp_path / "s.yaml")


def test_a_catalogue_entry_is_the_dataset_written_out_with_the_suites_overrides(tmp_path):
    suite = _catalogued(tmp_path, [
        {"name": "wine", "source": "catalogue", "model_params": {"knn": {"n_neighbors": 3}}},
        {"name": "iris_kfold", "source": "catalogue", "entry": "iris", "split": {"protocol": "kfold", "k": 3}}])
    written_out = parse_suite({"datasets": [
        {"name": "wine", "source": "sklearn", "id": "wine", "split": {"protocol": "kfold", "k": 5},
         "model_params": {"knn": {"n_neighbors": 3}}},
        {"name": "iris_kfold", "source": "sklearn", "id": "iris", "task": "multiclass",
         "split": {"protocol": "kfold", "k": 3}}], "models": {"knn": {}}}, tmp_path / "s.yaml")
    assert suite.datasets == written_out.datasets  # the same DatasetConfig, hence the same job keys


@pytest.mark.parametrize("datasets, top, catalogue, where, message", [
    ([{"name": "wnie", "source": "catalogue"}], {}, CATALOGUE,
     "s.yaml: datasets[0].name", "no dataset 'wnie' in the catalogue cat/sets.yaml; did you mean 'wine'?"),
    ([{"name": "w", "source": "catalogue", "entry": "irs"}], {}, CATALOGUE,
     "s.yaml: datasets[0].entry", "no dataset 'irs' in the catalogue cat/sets.yaml; did you mean 'iris'?"),
    ([{"name": "wine", "source": "catalogue", "spilt": {}}], {}, CATALOGUE,
     "s.yaml: datasets[0].spilt", "unknown field 'spilt'; did you mean 'split'?"),
    ([{"name": "wine", "source": "catalogue", "split": {"protocol": "kfold", "k": 3, "folds": [4]}}], {}, CATALOGUE,
     "s.yaml: datasets[0].split.folds", "fold indices must be below k=3"),
    ([{"name": "wine", "source": "catalogue"}], {"catalogue": None}, CATALOGUE,
     "s.yaml: datasets[0].source", "source: catalogue needs the suite's catalogue: file"),
    ([{"name": "wine", "source": "catalogue"}], {},
     {"datasets": {"wine": {"source": "sklearn", "id": "wine", "split": {"protocol": "kfold", "k": "5"}}}},
     "sets.yaml: datasets.wine.split.k", "expected an integer >= 2, got '5'"),
    ([{"name": "wine", "source": "catalogue"}], {},
     {"datasets": {"wine": {"source": "sklearn", "id": "wine", "split": {"protocol": "kfold"}, "targte": "x"}}},
     "sets.yaml: datasets.wine.targte", "unknown field 'targte'; did you mean 'target'?"),
    ([{"name": "wine", "source": "catalogue"}], {},
     {"datasets": {"wine": {"source": "sklearn", "id": "wine", "split": {"protocol": "kfold"},
                            "model_params": {"knn": {}}}}},
     "sets.yaml: datasets.wine.model_params", "a catalogue entry has no 'model_params'"),
    ([{"name": "wine", "source": "catalogue"}], {}, {"dataset": {}},
     "sets.yaml: datasets", "a catalogue is a mapping with 'datasets'"),
])
def test_catalogue_mistakes_name_the_file_and_field(tmp_path, datasets, top, catalogue, where, message):
    if top.get("catalogue", "") is None:
        top = {}
        raw = {"datasets": datasets, "models": {"knn": {}}}
        with pytest.raises(SuiteError) as err:
            parse_suite(raw, tmp_path / "s.yaml")
    else:
        with pytest.raises(SuiteError) as err:
            _catalogued(tmp_path, datasets, catalogue, **top)
    assert where in str(err.value) and message in str(err.value), str(err.value)


def test_a_file_with_several_mistakes_reports_every_one(tmp_path):
    """One pass fixes a file: each mistake on its own line, misspelt keys with their did-you-mean."""
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nseedz: [0]\ndatasets:\n  - {name: wine, source: sklearn, id: wine,\n"
                    "     split: {protocol: kfold, k: five}}\nmodels:\n  knn: {paramz: {}}\n")
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    lines = str(info.value).splitlines()
    assert sorted(lines) == sorted([
        f"{path}: models.knn.paramz: unknown field 'paramz'; did you mean 'params'?",
        f"{path}: seedz: unknown field 'seedz'; did you mean 'seeds'?",
        f"{path}: datasets[0].split.k: expected an integer >= 2, got 'five' (str)"])
    assert (info.value.path, len(info.value.more)) == ("models.knn.paramz", 2)  # the first, then the others
