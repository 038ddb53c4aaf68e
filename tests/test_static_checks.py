"""pyflakes' checks over every Python file the project keeps (ruff's F rules, as pyproject.toml's [tool.ruff.lint]
selects them): no unused import, undefined name or redefinition. Run: python -m pytest tests/test_static_checks.py"""

import importlib.util
import subprocess
import sys

import pytest

from tests.conftest import ROOT, require


@pytest.fixture(scope="module")
def ruff():
    require(importlib.util.find_spec("ruff") is not None, "ruff (the test extra)")
    return lambda *args, cwd=ROOT: subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache",
                                                   "--output-format", "concise", *args],
                                                  cwd=cwd, capture_output=True, text=True)


def test_the_project_has_no_unused_import_undefined_name_or_redefinition(ruff):
    done = ruff(".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_project_settings_report_an_unused_import_and_an_undefined_name(ruff, tmp_path):
    """The check above is live: under the project's settings a file with both defects fails, naming each."""
    bad = tmp_path / "bad.py"
    bad.write_text("import json\n\n\ndef f():\n    return undefined_here\n")
    done = ruff("--config", str(ROOT / "pyproject.toml"), str(bad), cwd=tmp_path)
    assert done.returncode == 1
    assert "bad.py:1:8: F401" in done.stdout and "bad.py:5:12: F821" in done.stdout, done.stdout
