"""Each model's parameters, declared once as a typed class (tabbench/params.py): a value outside a parameter's type,
bounds or choices is refused by ``tabbench validate`` and by the checked-in JSON Schema before anything runs, for
every registered model; the params a job runs with are resolved in one place (tabbench.suite.trials.method_params), and
every committed record's job key is what that resolution of its suite gives today."""

import functools
import gzip
import json

import jsonschema
import pytest
import yaml

from tabbench.cli import main
from tabbench.suite.trials import method_params
from tabbench.run.jobs import job_key
from tabbench.params import allowed, problems, yaml_text
from tabbench.plugins import load_models
from tabbench.suite import load_suite
from tests.conftest import ROOT

MODELS = load_models()
SCHEMA = json.loads((ROOT / "suites" / "suite.schema.json").read_text())
WINE = {"name": "wine", "source": "sklearn", "id": "wine", "split": {"protocol": "holdout"}}
#: Values tried in turn as a wrong value for a parameter: the first its model refuses is used.
WRONG = ["not-a-value", -1_000_000, 1.5, {"a": 1}]


def _validate(tmp_path, capsys, models: dict, datasets=(WINE,)) -> tuple:
    """(exit code, stderr, whether the checked-in schema accepts it) of ``tabbench validate`` on a suite file."""
    doc = {"datasets": list(datasets), "models": models}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    code = main(["validate", str(path)])
    return code, capsys.readouterr().err, jsonschema.Draft202012Validator(SCHEMA).is_valid(doc)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_wrong_value_of_each_param_is_refused_naming_file_method_param_value_and_what_is_allowed(
        name, tmp_path, capsys):
    cls = MODELS[name].spec.params
    assert cls.model_fields, f"{name} declares no params"
    assert problems(cls, {}) == []  # its defaults are values it accepts
    for param in cls.model_fields:
        wrong = next(v for v in WRONG if problems(cls, {param: v}))
        code, err, schema_ok = _validate(tmp_path, capsys, {"method": {"model": name, "params": {param: wrong}}})
        assert code == 2 and not schema_ok, (name, param, wrong)
        assert err.startswith(f"tabbench: {tmp_path / 's.yaml'}: models.method.params.{param}: model {name!r}: "
                              f"{param} must be {allowed(cls, param)}, got {yaml_text(wrong)}"), err
    assert _validate(tmp_path, capsys, {"method": {"model": name}})[::2] == (0, True)


def test_a_misspelt_choice_is_refused_with_a_suggestion_and_nothing_runs(tmp_path, capsys):
    code, err, schema_ok = _validate(tmp_path, capsys, {"npt": {"params": {"clip_mode": "nrom"}}})
    assert code == 2 and not schema_ok
    assert err == (f"tabbench: {tmp_path / 's.yaml'}: models.npt.params.clip_mode: model 'npt': clip_mode must be "
                   "'value' or 'norm', got 'nrom'; did you mean 'norm'?\n")
    assert main(["run", str(tmp_path / "s.yaml"), "--results", str(tmp_path / "results"), "--no-ray",
                 "--no-progress"]) == 2
    assert "clip_mode must be 'value' or 'norm'" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()  # refused before any data, job or record


def test_each_place_a_suite_sets_a_value_is_checked_where_it_is_written(tmp_path, capsys):
    cases = [  # (models, datasets, message, whether the schema sees the mistake)
        ({"knn": {"tuning": "grid", "search_space": {"n_neighbors": [5, 0]}}}, [WINE],
         "models.knn.search_space.n_neighbors[1]: model 'knn': n_neighbors must be a whole number >= 1, got 0", True),
        ({"knn": {"tuning": "configs", "configs": {"far": {"params": {"weights": "far"}}}}}, [WINE],
         "models.knn.configs.far.params.weights: model 'knn': weights must be 'uniform' or 'distance', got 'far'",
         True),
        ({"npt": {"params": {"steps": 2.5}}}, [WINE],
         "models.npt.params.steps: model 'npt': steps must be a whole number >= 0 or 'auto', got 2.5", True),
        # a dataset's model_params name a method, whose model a schema cannot look up: tabbench alone checks them
        ({"knn": {}}, [{**WINE, "model_params": {"knn": {"p": "two"}}}],
         "datasets[0].model_params.knn.p: model 'knn': p must be a number > 0, got 'two'", False),
    ]
    for models, datasets, message, in_schema in cases:
        code, err, schema_ok = _validate(tmp_path, capsys, models, datasets)
        assert (code, schema_ok) == (2, not in_schema), message
        assert err.startswith(f"tabbench: {tmp_path / 's.yaml'}: {message}"), err


def test_a_rule_over_several_params_is_checked_on_each_dataset_as_resolved(tmp_path, capsys):
    """NPT's patches must tile its image: n_patches alone is refused on the dataset where it is resolved."""
    code, err, _ = _validate(tmp_path, capsys, {"npt": {}}, [{**WINE, "model_params": {"npt": {"n_patches": 49}}}])
    assert code == 2
    assert err == (f"tabbench: {tmp_path / 's.yaml'}: models.npt: model 'npt' on dataset 'wine': n_patches needs "
                   "image_shape: [channels, height, width], got null\n")
    code, err, _ = _validate(tmp_path, capsys, {"npt": {"params": {"n_patches": 60, "image_shape": [3, 32, 32]}}})
    assert code == 2 and "n_patches=60 must be a square grid (g x g) dividing the 32x32 image" in err


def test_models_name_prints_each_param_with_what_it_allows_its_default_and_flags(capsys):
    assert main(["models", "npt"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines()[3:] if line.strip() and not line.startswith("run-only")}
    assert set(MODELS["npt"].spec.default_params) <= set(rows)
    assert "'value' or 'norm'" in rows["clip_mode"] and "'value'" in rows["clip_mode"]
    assert "run-only" in rows["cpus"] and "run-only" not in rows["e"]
    assert main(["models", "nptt"]) == 2 and "did you mean 'npt'?" in capsys.readouterr().err


# --- job keys: unchanged for every committed record ----------------------------------------------------------


def _records(folder):
    for path in sorted((folder / "records").glob("*.jsonl*")):
        with (gzip.open if path.suffix == ".gz" else open)(path, "rt") as lines:
            yield from (json.loads(line) for line in lines)


@functools.lru_cache(maxsize=None)
def _suites_writing_to() -> dict:
    """Results folder name -> the committed suites that write into it (a suite's ``name``)."""
    out = {}
    for path in sorted((ROOT / "suites").glob("*.yaml")):
        suite = load_suite(path)
        out.setdefault(suite.name, []).append(suite)
    return out


@pytest.mark.parametrize("folder", sorted(p for p in (ROOT / "results").iterdir() if (p / "records").is_dir()),
                         ids=lambda p: p.name)
def test_every_committed_record_keeps_its_job_key_under_todays_resolution_of_its_suite(folder):
    """Each record (live and archived) is a trial of its committed suite: resolving that suite's method on the
    record's dataset (method_params, on a GPU machine where the record ran on CUDA) gives today the params whose key,
    with the record's data and split fingerprints, fold and seed, is the record's key; and the params it ran
    with are values its model's params class accepts."""
    writing = _suites_writing_to()
    # one suite, or several sharing a folder (image-reduced's two); a folder of another name holds the
    # records of the suite they name
    suites = writing.get(folder.name) or [s for name in sorted({r["suite"] for r in _records(folder)})
                                          for s in writing[name]]
    resolved, checked = {}, 0
    for r in _records(folder):
        spec = MODELS[r["model"]].spec
        assert problems(spec.params, r["params"]) == [], (r["method"], r["params"])
        on_gpu = r["params"].get("device") == "cuda"
        where = (r["method"], r["dataset"], on_gpu)
        if where not in resolved:
            resolved[where] = [spec.key_params(params) for suite in suites
                               for entry in suite.models if entry.label == r["method"]
                               for dataset in suite.datasets if dataset.name == r["dataset"]
                               for _, _, params in method_params(entry, spec, dataset, gpu_available=on_gpu)]
        keys = {job_key(r["method"], r["model"], key_params, r["dataset_fingerprint"], r["split_fingerprint"],
                        r["fold"], r["repeat"], r["seed"]) for key_params in resolved[where]}
        assert r["key"] in keys, (folder.name, r["method"], r["dataset"], r["fold"])
        checked += 1
    assert checked
