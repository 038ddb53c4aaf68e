"""The data layer imports in one direction: no module of tabbench/data imports, at any depth (function-level
imports included), a module that imports it back. Run: python -m pytest tests/test_data_layer.py"""

import ast

import pytest

from tests.conftest import ROOT

PACKAGE = "tabbench.data"
FOLDER = ROOT / "tabbench" / "data"


def _module_names() -> set:
    return {PACKAGE if p.stem == "__init__" else f"{PACKAGE}.{p.stem}" for p in FOLDER.glob("*.py")}


def _imports(path, modules: set) -> set:
    """The data-layer modules a file imports anywhere in its body (top level, functions, branches)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from tabbench.data import mirror` imports the module tabbench.data.mirror
            found |= {f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module
                      for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            raise AssertionError(f"{path}: use absolute imports, as the rest of tabbench does")
    return found & modules


def import_graph() -> dict:
    modules = _module_names()
    return {(PACKAGE if p.stem == "__init__" else f"{PACKAGE}.{p.stem}"): _imports(p, modules)
            for p in FOLDER.glob("*.py")}


def find_cycle(graph: dict) -> list | None:
    """One import cycle as [a, b, ..., a], or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_cycle_finder_finds_a_function_level_cycle(tmp_path):
    # the check itself: a cycle closed by an import inside a function is found
    (tmp_path / "a.py").write_text("from tabbench.data.b import x\n")
    (tmp_path / "b.py").write_text("def f():\n    from tabbench.data import a\n")
    modules = {"tabbench.data.a", "tabbench.data.b"}
    graph = {f"tabbench.data.{p.stem}": _imports(p, modules) for p in tmp_path.glob("*.py")}
    assert find_cycle(graph) == ["tabbench.data.a", "tabbench.data.b", "tabbench.data.a"]


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
    from tabbench.runner import RunError, load_data
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
