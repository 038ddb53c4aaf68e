"""Jobs run in their own process: time and memory budgets are enforced, a dying job is a record, on Ray and
in this process's children (--executor local) alike."""

import numpy as np
import pytest

from tabbench.run.runner import RunOptions, run_suite
from tabbench.store import load_records
from tabbench.suite import parse_suite
from tests.plugins_for_tests import PLUGIN_FILE


@pytest.mark.parametrize("executor", ["ray", "local"])
def test_limits_and_crashes_become_records_and_the_run_goes_on(tmp_path, request, executor):
    if executor == "ray":
        request.getfixturevalue("ray_session")
    # a driver larger than the memory budget (as a pytest process with torch loaded is): under --executor local
    # every job is its fork, and the pages it shares with the driver are not the job's memory
    ballast = np.ones(800 * 2**20 // 8)
    hows = ["ok", "sleep", "hog", "exit", "segfault", "memoryerror"]
    raw = {
        "name": "limits",
        "budget": {"time_s": 8, "memory_mb": 700},
        "datasets": [{"name": "diabetes", "source": "sklearn", "id": "diabetes", "split": {"protocol": "holdout"}}],
        "models": {how: {"model": "misbehaving", "params": {"how": how}} for how in hows},
    }
    suite = parse_suite(raw, tmp_path / "limits.yaml")
    summary = run_suite(suite, RunOptions(results=tmp_path / "results", progress=False, plugin_files=(PLUGIN_FILE,),
                                             executor=executor))
    frame = load_records(tmp_path / "results" / "limits").set_index("method")
    assert frame.loc["ok", "status"] == "ok"
    assert frame.loc["sleep", "status"] == "timeout" and "time budget is 8 s" in frame.loc["sleep", "error_message"]
    assert frame.loc["hog", "status"] == "oom" and "memory budget is 700 MiB" in frame.loc["hog", "error_message"]
    assert frame.loc["exit", "status"] == "crash" and "exited with code 3" in frame.loc["exit", "error_message"]
    assert frame.loc["segfault", "status"] == "crash" and "SIGSEGV" in frame.loc["segfault", "error_message"]
    assert frame.loc["memoryerror", "status"] == "oom"
    assert summary.failures == {"timeout": 1, "oom": 2, "crash": 2}
    del ballast
