"""The data layer imports in one direction: no module of tabbench/data imports, at any depth (function-level
imports included), a module that imports it back (tests/test_import_graph.py checks all of tabbench and the
plugins the same way). Run: python -m pytest tests/test_data_layer.py"""

import pytest

from tests.conftest import ROOT
from tests.test_import_graph import find_cycle, import_graph as import_graph_of

PACKAGE = "tabbench.data"
FOLDER = ROOT / "tabbench" / "data"


def import_graph() -> dict:
    """The data layer's part of tabbench's import graph (tests/test_import_graph.py builds and checks it whole)."""
    return import_graph_of({PACKAGE: FOLDER})


def test_the_data_layer_has_no_import_cycle():
    graph = import_graph()
    assert graph[f"{PACKAGE}.dataset"], "the parser found no imports at all; the check would be vacuous"
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle in tabbench/data: " + " -> ".join(cycle)


def test_plain_types_sit_at_the_bottom():
    graph = import_graph()
    assert graph[f"{PACKAGE}.types"] == set()
    assert f"{PACKAGE}.dataset" not in graph[f"{PACKAGE}.splits"]


# --- errors name the dataset once ---------------------------------------------------------------------


def test_a_data_error_names_the_suite_and_dataset_once(tmp_path, shared):
    from tabbench.data.cache import DataPaths
    from tabbench.run.runner import RunError, load_data
    from tabbench.suite import parse_suite

    rows = (shared / "uci/concrete/concrete.txt").read_text().split("\n")
    rows = [row.split() for row in rows if row.strip()]
    one_rare = [features + ["1" if i == 0 else "0"] for i, (*features, _) in enumerate(rows)]
    constant = [features + ["42.0"] for *features, _ in rows]
    for name, table in (("rare", one_rare), ("flat", constant)):
        (tmp_path / f"{name}.txt").write_text("\n".join(" ".join(row) for row in table) + "\n")
    raw = {"models": {"knn": {}}, "datasets": [
        {"name": "d", "source": "file", "path": "rare.txt", "task": "binary", "split": {"protocol": "holdout"}},
        {"name": "e", "source": "file", "path": "flat.txt", "task": "regression", "split": {"protocol": "holdout"}}]}
    suite = parse_suite(raw, tmp_path / "s.yaml")
    with pytest.raises(RunError) as err:
        load_data(suite, DataPaths(cache=tmp_path / "cache", base=tmp_path))
    lines = str(err.value).splitlines()
    assert lines == [
        f"{tmp_path / 's.yaml'}: dataset 'd': a class has fewer than 2 rows in the dataset, too few for a stratified "
        "split; set split.stratify: false or merge rare classes",
        f"{tmp_path / 's.yaml'}: dataset 'e': regression target 'col8' is constant (42); there is nothing to learn: "
        "pick another target column"]
