"""The quick selection's rules (tests/conftest.py) name tests that exist: a renamed test that a rule still names by
its old name runs in the quick selection unnoticed (the CPU-hog test did, for a session, after TabM joined it)."""

import ast

from tests.conftest import ROOT, SLOW_CASES, SLOW_TESTS


def _tests_of(module: str) -> set:
    tree = ast.parse((ROOT / "tests" / module).read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def test_every_test_the_slow_rules_name_is_a_test_of_its_module():
    named = {(module, test) for module, tests in SLOW_TESTS.items() for test in tests - {"*"}}
    named |= {(module, test) for module, tests in SLOW_CASES.items() for test in tests}
    missing = sorted(f"{module}::{test}" for module, test in named if test not in _tests_of(module))
    assert not missing, f"tests/conftest.py's slow rules name tests that do not exist: {missing}"
