"""The suite format is declared once (tabbench/suite/declaration.py): the checked-in JSON Schema, the reference in
suites/README.md and every shipped suite agree with it; names never lead out of --results."""

import json
import re
import subprocess
import sys

import jsonschema
import pytest
import yaml

from tabbench.cli import main
from tabbench.plugins import load_models
from tabbench.suite import NAME_PATTERN, SuiteError, json_schema, load_suite, parse_suite, reference_markdown
from tests.conftest import ROOT

SUITES = sorted((ROOT / "suites").glob("*.yaml"))
README = ROOT / "suites" / "README.md"
MODELINE = "# yaml-language-server: $schema=suite.schema.json"
BASE = {"datasets": [{"name": "wine", "source": "sklearn", "id": "wine", "split": {"protocol": "holdout"}}],
        "models": {"knn": {}}}


def test_the_checked_in_schema_is_what_tabbench_schema_prints(capsys):
    assert main(["schema"]) == 0
    printed = capsys.readouterr().out
    assert json.loads(printed) == json_schema(models=load_models())  # the suite format, with each model's params
    assert (ROOT / "suites" / "suite.schema.json").read_text() == printed, (
        "suites/suite.schema.json is stale: tabbench schema > suites/suite.schema.json")


def test_the_schema_is_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(json_schema(models=load_models()))


@pytest.mark.parametrize("path", SUITES, ids=lambda p: p.name)
def test_every_suite_starts_with_the_modeline_and_validates_with_jsonschema_and_tabbench(path):
    assert path.read_text().splitlines()[0] == MODELINE
    schema = json.loads((ROOT / "suites" / "suite.schema.json").read_text())
    jsonschema.validate(yaml.safe_load(path.read_text()), schema, cls=jsonschema.Draft202012Validator)
    load_suite(path)


def test_jsonschema_and_tabbench_reject_the_same_mistakes():
    validator = jsonschema.Draft202012Validator(json_schema())
    bad = [{**BASE, "name": "../up"}, {**BASE, "seeds": []}, {**BASE, "budget": {"time_s": 0}},
           {**BASE, "models": {"a/b": {}}}, {**BASE, "datasets": [{**BASE["datasets"][0], "spilt": {}}]},
           {**BASE, "datasets": [{**BASE["datasets"][0], "source": "file"}]}]
    for raw in bad:
        assert not validator.is_valid(raw), raw
        with pytest.raises(SuiteError):
            parse_suite(raw, "s.yaml")
    assert validator.is_valid(BASE)


def test_split_protocols_come_from_the_split_module():
    from tabbench.data.splits import PROTOCOLS

    assert json_schema()["$defs"]["Split"]["properties"]["protocol"]["enum"] == list(PROTOCOLS)


# --- suites/README.md and the declaration cannot drift ---------------------------------------------------


def _readme_reference() -> str:
    text = README.read_text()
    start = text.index("<!-- field reference:")
    start = text.index("\n", start) + 1
    return text[start:text.index("<!-- end of the field reference -->")].strip()


def _schema_fields() -> set:
    schema = json_schema()
    return {key for node in [schema, *schema["$defs"].values()] for key in node.get("properties", {})}


def test_the_readme_reference_is_generated_from_the_declaration():
    assert _readme_reference() == reference_markdown().strip(), (
        "suites/README.md's field reference is stale: replace it with the output of tabbench schema --markdown")


def test_every_field_is_in_the_reference_and_the_example_names_only_real_fields():
    documented = set(re.findall(r"^\| `(\w+)` \|", _readme_reference(), flags=re.M))
    assert documented == _schema_fields()
    example = README.read_text().split("```yaml", 2)[2].split("```", 1)[0]  # the second yaml block
    code = "\n".join(line.split("#")[0] for line in example.splitlines())  # comments are prose
    keys = set(re.findall(r"(?:^|[{,-])\s*(\w+):", code, flags=re.M))  # `key:`, `- key:`, `{key: ...}`
    keys |= set(re.findall(r"(\w+) / ", code)) | set(re.findall(r" / (\w+)", code))  # `a / b / c`
    method_names = {"knn", "random_forest", "rf_shallow", "xgboost", "npt"}  # the example's methods
    param_names = {"n_estimators", "max_depth", "learning_rate", "e", "steps"}  # its models' params
    dataset_names = {"concrete"}  # published[].datasets maps a dataset of the example onto TabArena's
    assert keys - method_names - param_names - dataset_names <= _schema_fields(), "the example shows fields that do not exist"
    assert len(keys & _schema_fields()) > 30  # the example was found and parsed


# --- names that become paths ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../../escaped", "a/b", "/tmp/abs", "..", ".hidden", ""])
def test_a_suite_name_that_is_not_a_plain_folder_name_is_rejected_naming_the_field(name):
    with pytest.raises(SuiteError, match=r"^s\.yaml: name: expected a plain folder name .* got "):
        parse_suite({**BASE, "name": name}, "s.yaml")


@pytest.mark.parametrize("where", ["dataset", "method"])
def test_dataset_and_method_names_follow_the_same_rule(where):
    raw = yaml.safe_load(yaml.safe_dump(BASE))
    if where == "dataset":
        raw["datasets"][0]["name"] = "../x"
        path = r"datasets\[0\]\.name"
    else:
        raw["models"] = {"../x": {"model": "knn"}}
        path = r"models\.\.\./x"
    with pytest.raises(SuiteError, match=rf"^s\.yaml: {path}: expected a plain folder name"):
        parse_suite(raw, "s.yaml")


def test_a_file_name_that_is_not_a_plain_folder_name_needs_a_name(tmp_path):
    path = tmp_path / "my suite.yaml"
    path.write_text(yaml.safe_dump(BASE))
    with pytest.raises(SuiteError, match=r"my suite\.yaml: name: .*file name 'my suite' is not a plain folder name"):
        load_suite(path)
    path.write_text(yaml.safe_dump({**BASE, "name": "mine"}))
    assert load_suite(path).name == "mine"


def test_the_results_folder_is_checked_even_for_a_suite_built_in_code(tmp_path):
    import dataclasses

    suite = parse_suite({**BASE, "name": "ok"}, tmp_path / "s.yaml")
    assert suite.results_dir(tmp_path / "results") == tmp_path / "results" / "ok"
    for bad in ("../escaped", "/abs", ".", "a/../.."):
        with pytest.raises(SuiteError, match=r"s\.yaml: name: .* not in the results folder"):
            dataclasses.replace(suite, name=bad).results_dir(tmp_path / "results")


@pytest.mark.parametrize("name", ["../../escaped", "nested/escaped", "/tmp/absolute-escaped"])
def test_tabbench_run_rejects_an_escaping_name_before_any_job_and_writes_nothing(tmp_path, name):
    work = tmp_path / "work"
    (work / "results").mkdir(parents=True)
    (work / "evil.yaml").write_text(yaml.safe_dump({**BASE, "name": name}))
    before = {p for p in tmp_path.rglob("*")}
    run = subprocess.run([sys.executable, "-m", "tabbench.cli", "run", "evil.yaml", "--results", "results",
                          "--no-progress"], cwd=work, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.startswith("tabbench: evil.yaml: name: expected a plain folder name"), run.stderr
    assert {p for p in tmp_path.rglob("*")} == before  # no record, no leaderboard, no folder anywhere


def test_name_pattern_is_the_documented_rule():
    assert all(re.fullmatch(NAME_PATTERN, n) for n in ("uci-small", "uci.v2", "A_1", "2021"))
    assert not any(re.fullmatch(NAME_PATTERN, n) for n in ("..", ".x", "a/b", "a\\b", "/a", "a b", ""))
