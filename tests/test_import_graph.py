"""tabbench and its built-in plugins import in one direction: no module imports, at any depth (function-level
imports included), a module that imports it back; and no package imports, through any of its modules, a package
that imports it back (run/ and report/: the run pipeline imports nothing of the report). A module on a package's
ground floor (tabbench/store.py) counts as a package of its own. Run: python -m pytest tests/test_import_graph.py"""

import ast

from tests.conftest import ROOT

#: import name -> folder, as pyproject.toml maps them.
PACKAGES = {"tabbench": ROOT / "tabbench", "tabbench_plugins": ROOT / "plugins" / "tabbench_plugins"}


def module_files(packages: dict = PACKAGES) -> dict:
    """Dotted module name -> file, for every .py file under each package folder, subpackages included."""
    out = {}
    for package, folder in packages.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports_of(path, modules: set) -> set:
    """The modules of ``modules`` a file imports anywhere in its body (top level, functions, branches)."""
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


def import_graph(packages: dict = PACKAGES) -> dict:
    """module -> the modules (of ``packages``) it imports."""
    files = module_files(packages)
    return {name: imports_of(path, set(files)) for name, path in files.items()}


def package_of(module: str) -> str:
    """The package a module belongs to: its top package and the subpackage below it (tabbench.run.executors.ray:
    tabbench.run; tabbench_plugins.npt.model: tabbench_plugins.npt); a module of the top package itself
    (tabbench.store) and the top package (tabbench) are their own."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict) -> dict:
    """package -> the other packages its modules import (``graph``: import_graph's)."""
    out = {}
    for module, imported in graph.items():
        out.setdefault(package_of(module), set()).update(package_of(m) for m in imported)
    return {package: imported - {package} for package, imported in out.items()}


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


def test_the_cycle_finder_finds_a_function_level_cycle_across_subpackages(tmp_path):
    # the check itself: a cycle closed by an import inside a function, one module in a subpackage, is found
    (tmp_path / "sub").mkdir()
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "a.py").write_text("from pkg.sub.b import x\n")
    (tmp_path / "sub" / "__init__.py").write_text("")
    (tmp_path / "sub" / "b.py").write_text("def f():\n    from pkg import a\n")
    graph = import_graph({"pkg": tmp_path})
    assert set(graph) == {"pkg", "pkg.a", "pkg.sub", "pkg.sub.b"}
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.a"]


def test_the_package_check_finds_a_cycle_between_packages_that_no_module_cycle_shows(tmp_path):
    # run.a imports report.b, report.c imports run.d (inside a function): no module imports itself back, yet the
    # two packages import each other (as run/runner.py writing the leaderboard and report/site.py borrowing
    # run/isolation.py's constant did)
    for folder in ("run", "report"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "store.py").write_text("")
    (tmp_path / "run" / "a.py").write_text("from pkg.report import b\nfrom pkg import store\n")
    (tmp_path / "report" / "b.py").write_text("")
    (tmp_path / "report" / "c.py").write_text("def f():\n    from pkg.run.d import x\n")
    (tmp_path / "run" / "d.py").write_text("")
    graph = import_graph({"pkg": tmp_path})
    assert find_cycle(graph) is None
    assert package_graph(graph) == {"pkg": set(), "pkg.store": set(), "pkg.run": {"pkg.report", "pkg.store"},
                                    "pkg.report": {"pkg.run"}}
    assert find_cycle(package_graph(graph)) == ["pkg.report", "pkg.run", "pkg.report"]


def test_tabbench_and_the_builtin_plugins_have_no_import_cycle_between_modules_or_packages():
    graph = import_graph()
    # the parser sees the package's modules, its subpackages' and the plugins', and their imports
    assert {"tabbench.cli", "tabbench.data.dataset", "tabbench.report.leaderboard",
            "tabbench_plugins.npt"} <= set(graph)
    assert "tabbench.run.runner" in graph["tabbench.cli"]  # a function-level import
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)
    packages = package_graph(graph)
    assert {"tabbench.run", "tabbench.report", "tabbench.data", "tabbench.suite", "tabbench.store"} <= set(packages)
    assert "tabbench.report" not in packages["tabbench.run"]  # the run pipeline imports nothing of the report
    cycle = find_cycle(packages)
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle)


def reached(graph: dict, module: str) -> set:
    """The modules ``module`` imports at any depth (``graph``: import_graph's)."""
    seen, todo = set(), [module]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_the_models_that_train_without_torch_import_nothing_of_torch():
    """The boosters and scikit-learn's models share the device, class and validation helpers with the torch models
    (devices.py, labels.py), not torch's module: none of theirs reaches torch_training.py at any depth, and importing
    them leaves torch unloaded."""
    import subprocess
    import sys

    graph = import_graph()
    for module in ("tabbench_plugins.boosters", "tabbench_plugins.sklearn_models"):
        assert "tabbench_plugins.torch_training" not in reached(graph, module), module
    assert "tabbench_plugins.devices" in graph["tabbench_plugins.boosters"]  # the check sees the shared helpers
    code = ("import sys, tabbench_plugins.boosters, tabbench_plugins.sklearn_models; "
            "loaded = {'torch', 'tabbench_plugins.torch_training'} & set(sys.modules); assert not loaded, loaded")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
