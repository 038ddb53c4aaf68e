"""Jobs run in their own process: time and memory budgets are enforced, a dying job is a record, on Ray and
in this process's children (--executor local) alike."""

import subprocess
import sys

import numpy as np
import pandas as pd
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
    hows = ["ok", "spin", "planned", "hog", "exit", "segfault", "memoryerror"]
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
    # the budget counts the job's own CPU seconds (tabbench/clock.py): a job that spins is stopped at 8 of them
    assert frame.loc["spin", "status"] == "timeout" and "time budget is 8 CPU-s" in frame.loc["spin", "error_message"]
    # unless its model planned its work before training: it may then run past its budget (tabbench/clock.py)
    planned = frame.loc["planned"]
    assert planned["status"] == "ok" and planned["cpu_seconds"] > 8 and planned["cpu_limit_s"] == 4 * 8
    assert pd.isna(frame.loc["ok", "cpu_limit_s"])
    # and the cost section's budget table says which results ran past their budget, and by how much
    from tabbench.report.cost import budget_table

    past = budget_table(frame.reset_index())[["past", "past_most"]]
    assert past.loc["planned", "past"] == 1 and past.loc["planned", "past_most"] == planned["cpu_seconds"] / 8
    assert past.drop(index="planned")["past"].eq(0).all()
    from tabbench.report.leaderboard import make_context
    from tabbench.report.sections import CostAgainstQuality

    folder = tmp_path / "results" / "limits"
    note = "\n".join(CostAgainstQuality().markdown(make_context(tmp_path / "board", [folder], frame.reset_index(),
                                                                 report=True)))
    assert f"| planned | 1 | 0 | 0 | 1 (up to {past.loc['planned', 'past_most']:.1f}x) |" in note, note
    assert "'past the budget': results of work the model planned" in note
    assert frame.loc["hog", "status"] == "oom" and "memory budget is 700 MiB" in frame.loc["hog", "error_message"]
    assert frame.loc["exit", "status"] == "crash" and "exited with code 3" in frame.loc["exit", "error_message"]
    assert frame.loc["segfault", "status"] == "crash" and "SIGSEGV" in frame.loc["segfault", "error_message"]
    assert frame.loc["memoryerror", "status"] == "oom"
    assert summary.failures == {"timeout": 1, "oom": 2, "crash": 2}
    del ballast


FAULTS = """
import resource, sys
import numpy as np
if sys.argv[1] == "steady":
    from tabbench.run.isolation import steady_allocator
    steady_allocator()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    step = [np.ones(1 << 18) for _ in range(10)]  # 2 MiB each, written
    del step
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults_reallocating(steady: bool) -> int:
    """Minor page faults of a fresh process (glibc's settings as a process starts with them, which a long-lived
    one's allocations move) that 20 times allocates and writes ten 2 MiB arrays, then frees them all, with or
    without the job's allocator setting (what a training step does with its activations)."""
    out = subprocess.run([sys.executable, "-c", FAULTS, "steady" if steady else "default"], capture_output=True,
                         text=True, check=True)
    return int(out.stdout.split()[-1])


def test_a_jobs_process_reuses_freed_memory_instead_of_faulting_it_in_again():
    # 20 x 20 MiB = 102,400 pages of 4 KiB: glibc's defaults give the freed arrays back and fault them in again
    steady, default = _faults_reallocating(steady=True), _faults_reallocating(steady=False)
    assert steady < 10_000, steady  # the first step's arrays only (5,120 pages)
    assert default > 50_000, default  # what the setting changes
