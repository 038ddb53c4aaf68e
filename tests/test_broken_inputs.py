"""Broken inputs a user or another run leaves (issue 63, reliability): a folder where every job failed, twin
datasets, a data source that raises, damaged records, a plugin of the old API, a read-only results folder, a
cluster that is not there. Each case feeds the broken input to the command as a user runs it and checks the
message, the exit code, that no traceback is printed and that no record is lost."""

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tabbench.store import Store
from tests.plugins_for_tests import PLUGIN_FILE

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args, env=None, timeout=300, cwd=None) -> subprocess.CompletedProcess:
    """`tabbench ARGS` in a child, as a user runs it; never a traceback, whatever the input."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins"),
                                                                os.environ.get("PYTHONPATH", "")]), **(env or {})}
    out = subprocess.run([sys.executable, "-m", "tabbench.cli", *map(str, args)], capture_output=True, text=True,
                         env=environment, timeout=timeout, cwd=cwd)
    assert "Traceback" not in out.stdout + out.stderr, out.stdout[-3000:] + out.stderr[-3000:]
    return out


def _suite(tmp_path, models: dict, datasets=None, name="broken", plugins=(PLUGIN_FILE,)) -> Path:
    datasets = datasets or [{"name": "diabetes", "source": "sklearn", "id": "diabetes",
                             "split": {"protocol": "kfold", "k": 2}}]
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "plugins": list(plugins), "datasets": datasets,
                                    "models": models}))
    return path


# --- a folder where every job failed ------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["memoryerror", "timeout"])
def test_a_folder_where_every_job_failed_gets_the_runs_summary_and_a_leaderboard_saying_why(tmp_path, how):
    params = {"how": "sleep"} if how == "timeout" else {"how": how}
    suite = _suite(tmp_path, {"bad": {"model": "misbehaving", "params": params}})
    if how == "timeout":  # one job alone, stopped by its budget
        raw = yaml.safe_load(suite.read_text())
        raw["budget"] = {"time_s": 1}
        raw["datasets"][0]["split"] = {"protocol": "holdout"}
        suite.write_text(yaml.safe_dump(raw))
    status = "timeout" if how == "timeout" else "oom"
    out = _cli("run", suite, "--results", tmp_path / "runs", "--executor", "local", "--no-progress", "--tables-only")
    assert out.returncode == 1
    jobs = 1 if how == "timeout" else 2
    assert f"{jobs} failed ({jobs} {status})" in out.stdout
    assert f"bad on diabetes: {jobs} {status}: " in out.stdout
    folder = tmp_path / "runs" / "broken"
    assert len(Store(folder).records()) == jobs
    board = (folder / "leaderboard.md").read_text()
    assert "Every job failed" in board and f"| bad | diabetes | {status} | {jobs} |" in board
    if how == "memoryerror":
        assert "simulated allocation failure" in board
    again = _cli("leaderboard", folder, "--tables-only")
    assert again.returncode == 0 and (folder / "leaderboard.md").read_text() == board
    assert len(Store(folder).records()) == jobs
