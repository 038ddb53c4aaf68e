"""The budget clock (tabbench/clock.py): a job's time budget counts its own CPU seconds, work a model planned
before training is trained in full (its CPU limit raised), so another process on the same core does not change what
it trains, and NPT sizes itself from a speed measured in CPU seconds."""

import os
import subprocess
import sys

import pytest
import yaml

from tabbench.clock import CPU, PLANNED_OVERRUN, WALL, CpuLimit, clock_of, job_clock, process_cpu_seconds, wall_ceiling
from tests.conftest import ROOT, load_module, require_shared

BUDGET = 12  # CPU seconds a job
#: How far apart npt-budget's steps, and TabR's and TabM's epochs, may be in the two runs (issue 60: 10%). Each is
#: decided before training, from the speed or epoch time the machine stored, and trained in full (their clocks
#: only guard a runaway, PLANNED_OVERRUN); the steps still differ by a few, sized after setups of different
#: lengths. While a clock at the budget guarded them, sharing the core cut them: npt-budget 39 of 141 steps beside
#: the loop on CI's machine; while TabM's and TabR's clocks decided their epochs: TabM 26 alone and 19 beside it.
TOLERANCE = 0.10


def test_a_job_counts_cpu_time_unless_it_asks_for_a_gpu_or_the_suite_says_wall():
    assert job_clock(None, 0) == CPU and job_clock(None, 1) == WALL
    assert job_clock("wall", 0) == WALL and job_clock("cpu", 1) == CPU
    assert clock_of({}) == WALL and clock_of({"clock": "cpu"}) == CPU  # records older than the field: wall
    assert wall_ceiling(100) > 100


def test_a_paused_or_starved_worker_moves_no_time_a_report_or_plan_reads_from_a_cpu_clock_record():
    """The cost table and ``spent`` (what the job-times block and the plan read) take a ``cpu``-clock record's CPU
    seconds (``spent_seconds``): the same records with their wall seconds ten times longer (a worker paused, or sharing its
    core) cost the same; read as wall-clock records, they cost ten times more."""
    import pandas as pd

    from tabbench.report.cost import cost_table, spent
    from tabbench.store import Store, records_frame

    frame = records_frame(Store(ROOT / "results" / "breadth-repeats").records())
    assert set(frame["clock"]) == {CPU} and frame["cpu_seconds"].notna().all()
    paused = frame.assign(fit_seconds=frame["fit_seconds"] * 10, wall_seconds=frame["wall_seconds"] * 10)
    rank = pd.Series(1.0, index=sorted(frame["method"].unique()))
    assert spent(paused, "wall_seconds").equals(frame["cpu_seconds"].astype(float))
    assert cost_table(paused, rank)["seconds"].equals(cost_table(frame, rank)["seconds"])
    as_wall, as_wall_paused = frame.assign(clock=WALL), paused.assign(clock=WALL)
    assert (cost_table(as_wall_paused, rank)["seconds"] / cost_table(as_wall, rank)["seconds"]).round(9).eq(10).all()


def test_the_job_times_block_names_the_resumed_jobs_whose_records_lack_their_earlier_cpu_seconds():
    """A job resumed from a checkpoint before records kept its earlier attempts' CPU seconds counts the last
    attempt's alone: matching-splits' records, read raw, give the jobs that the job-times block names; a record
    that keeps them (``cpu_seconds_before_resume``) is not named."""
    from tabbench.report.site import _resumed_note
    from tabbench.store import Store, records_frame

    latest = Store(ROOT / "results" / "matching-splits").latest().values()
    short = sorted((r["method"], r["dataset"]) for r in latest if r.get("clock") == CPU
                   and r.get("fit_seconds_before_resume") and "cpu_seconds_before_resume" not in r)
    assert short, "matching-splits holds resumed npt jobs from before the field existed"
    frame = records_frame(list(latest))
    show = {m: m for m in frame["method"]}
    (note, _) = _resumed_note(frame, show)
    assert note.startswith(f"{len(short)} jobs resumed from a checkpoint")
    assert all(f"{m} on {d}" in note for m, d in short)
    kept = frame.assign(cpu_seconds_before_resume=frame["fit_seconds_before_resume"])
    assert _resumed_note(kept, show) == []


def test_a_cpu_limit_raised_in_the_jobs_process_is_what_its_watcher_reads():
    """The job's process (a fork, as tabbench/run/isolation.py starts it) raises its CpuLimit when its model plans
    its work; the watching process reads the raised limit from the page they share."""
    limit = CpuLimit(10)
    assert limit.seconds == 10 and not limit.raised
    pid = os.fork()
    if pid == 0:  # the job's process
        limit.allow_planned()
        os._exit(0)
    os.waitpid(pid, 0)
    assert limit.seconds == PLANNED_OVERRUN * 10 and limit.raised


def test_process_cpu_seconds_counts_a_busy_process_and_not_a_sleeping_one():
    busy = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                             "while time.process_time() - t < 0.6: pass\nprint(flush=True)\ntime.sleep(60)"],
                            stdout=subprocess.PIPE, text=True)
    idle = subprocess.Popen([sys.executable, "-c", "import time; print(flush=True); time.sleep(60)"],
                            stdout=subprocess.PIPE, text=True)
    try:
        busy.stdout.readline(), idle.stdout.readline()  # each has spun its 0.6 CPU-s, or started and slept
        assert 0.55 <= process_cpu_seconds(busy.pid) <= 1.5
        assert process_cpu_seconds(idle.pid) < 0.3
    finally:
        for p in (busy, idle):
            p.kill()
            p.wait()
    assert process_cpu_seconds(busy.pid) is None  # gone


def test_a_thread_that_asks_for_a_long_slice_gets_it_and_so_do_the_processes_it_starts():
    """``ask_long_slice`` (what a cpu-clock job's process calls first, tabbench/run/isolation.py): the kernel's
    record of the thread's slice (/proc/<pid>/sched, ``se.slice`` in ns) says LONG_SLICE_MS, also in a process it
    starts afterwards. Skipped where the kernel keeps no per-task slice (before Linux 6.12, or not Linux)."""
    from tabbench.clock import LONG_SLICE_MS

    code = ("from tabbench.clock import ask_long_slice; import subprocess, sys; ok = ask_long_slice(); "
            "read = lambda: [l.split(':')[1].strip() for l in open('/proc/self/sched') if l.startswith('se.slice')]; "
            "print(ok, read(), subprocess.run([sys.executable, '-c', "
            "\"print([l.split(':')[1].strip() for l in open('/proc/self/sched') if l.startswith('se.slice')])\"], "
            "capture_output=True, text=True).stdout.strip())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout.strip()
    ok, own, child = out.split(" ", 1)[0], *out.split(" ", 1)[1].rsplit(" ", 1)
    if ok != "True" or own == "[]":
        pytest.skip(f"no per-task scheduler slice here ({out.strip()})")
    assert own == child == f"['{LONG_SLICE_MS * 10**6}']", out


def _run_on_one_core(tmp_path, name: str, hog: bool) -> dict:
    """breast cancer's holdout under npt-budget, TabR and TabM, every process of the run (and a busy loop,
    with ``hog``) pinned to one core by benchmarks/clock_under_load.py's ``run_on_one_core``, the runs of one test
    sharing a data cache (so NPT's speed, measured by the first, is read from the cache by the second, as on any
    machine after its first fit of a shape). TabR and TabM train until their clocks stop them (a patience, or
    epochs, no table reaches). Returns method -> record."""
    bench = load_module(ROOT / "benchmarks" / "clock_under_load.py", "clock_under_load")
    raw = {"name": name, "seeds": [0], "budget": {"time_s": BUDGET},
           "datasets": [{"name": "breast_cancer", "source": "sklearn", "id": "breast_cancer",
                         "split": {"protocol": "holdout"}}],
           "models": {"npt-budget": {"model": "npt", "params": {"size": "budget", "steps": "auto", "device": "cpu"}},
                      "tabr": {"params": {"device": "cpu", "d_main": 96, "context_size": 32, "patience": 10**6}},
                      "tabm": {"params": {"device": "cpu", "patience": 10**6}}}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    env = {**os.environ, "TABBENCH_CACHE": str(tmp_path / "cache")}
    done, records, _ = bench.run_on_one_core(path, tmp_path / "runs", env, min(os.sched_getaffinity(0)), hog)
    assert done.returncode == 0, done.stderr[-3000:]
    return records


def test_npt_budget_tabr_and_tabm_train_the_same_beside_a_cpu_hog_on_their_core(tmp_path):
    """The same jobs alone on a core and then beside a busy loop on that core: npt-budget measures its speed in the
    first run and reads it in the second, takes the same rung and trains the same steps; TabR and TabM, stopped by
    their clocks in the first run, store its epoch time and plan their epochs from it in the second, within
    TOLERANCE of the first run's. Planned work is trained whatever CPU seconds it costs beside the loop (2.5 to 3.5
    times alone, for NPT's step on this project's VMs), up to PLANNED_OVERRUN times the budget, and the record says
    so (``cpu_limit_s``); a job its clock stops ends within its budget; every record names its clock. So a test on
    the other core does not change the comparison either (the test ran alone while a guard at the budget could
    cut the planned steps: 149 of 191 beside the hog with another test on the other core). Under the
    wall clock these moved with the load: npt-budget measured itself 6.3 times slower on a busy credit_card fold
    and took another size; under a CPU clock that cut planned work, npt-budget trained 39 of 141 steps beside the
    loop on CI's machine."""
    require_shared()
    alone = _run_on_one_core(tmp_path, "alone", hog=False)
    busy = _run_on_one_core(tmp_path, "busy", hog=True)
    for records in (alone, busy):
        for method, r in records.items():
            assert r["status"] == "ok", (method, r.get("error_message"))
            planned = method == "npt-budget" or records is busy
            assert r["clock"] == CPU and r["cpu_seconds"] < (PLANNED_OVERRUN if planned else 1) * BUDGET, (
                method, r["cpu_seconds"])
            assert r.get("cpu_limit_s") == (PLANNED_OVERRUN * BUDGET if planned else None), method
    a, b = alone["npt-budget"]["info"], busy["npt-budget"]["info"]
    print(f"npt-budget alone {a['size_rung']} {a['steps_run']} of {a['steps']} steps "
          f"({alone['npt-budget']['cpu_seconds']:.1f} CPU-s, {alone['npt-budget']['wall_seconds']:.1f} s), beside a "
          f"hog {b['size_rung']} {b['steps_run']} of {b['steps']} ({busy['npt-budget']['cpu_seconds']:.1f} CPU-s, "
          f"{busy['npt-budget']['wall_seconds']:.1f} s)")
    assert (a["speed"], b["speed"]) == ("measured", "stored")
    assert a["size_rung"] == b["size_rung"] and a["steps_run"] == a["steps"]
    assert abs(a["steps_run"] - b["steps_run"]) <= TOLERANCE * a["steps_run"]
    for method in ("tabr", "tabm"):
        a, b = alone[method]["info"], busy[method]["info"]
        print(f"{method} alone {a['epochs']} epochs ({a['epoch_plan']['epoch_s']:.3f} CPU-s each), beside a hog "
              f"{b['epochs']} of {b['epoch_plan']['epochs']} planned ({busy[method]['cpu_seconds']:.1f} CPU-s)")
        assert a["stopped_by_time_budget"] and (a["epoch_plan"]["speed"], b["epoch_plan"]["speed"]) == (
            "measured", "stored"), method
        assert abs(a["epochs"] - b["epochs"]) <= max(1, TOLERANCE * a["epochs"]), method
