"""Nothing finished is lost: a killed driver, Ctrl-C, and concurrent runs leave a sound store."""

import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from tabbench.store import Store
from tests.conftest import require_ray
from tests.plugins_for_tests import PLUGIN_FILE


def _suite(tmp_path, n_methods=3, seconds=0.5) -> str:
    """10 folds of iris, each method's job sleeping about ``seconds``."""
    suite = {"name": "slow", "plugins": [PLUGIN_FILE],
             "datasets": [{"name": "iris", "source": "sklearn", "id": "iris", "split": {"protocol": "kfold", "k": 10}}],
             "models": {f"slow{i}": {"model": "slow", "params": {"seconds": seconds + i / 100}} for i in range(n_methods)}}
    path = tmp_path / "slow.yaml"
    path.write_text(yaml.safe_dump(suite))
    return str(path)


def _start(suite, results):
    return subprocess.Popen([sys.executable, "-m", "tabbench.cli", "run", suite, "--results", str(results),
                             "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _wait_for_records(store: Store, n: int, proc, timeout=240):
    deadline = time.time() + timeout
    while time.time() < deadline and len(store.records()) < n:
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        time.sleep(0.2)
    assert len(store.records()) >= n


def _rerun(suite, results, *options) -> str:
    out = subprocess.run([sys.executable, "-m", "tabbench.cli", "run", suite, "--results", str(results),
                          "--no-progress", *options], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_driver_killed_with_sigkill_leaves_a_sound_store_and_rerun_completes_only_the_missing_jobs(tmp_path):
    require_ray()
    # jobs of 0.2 s: the driver is killed within a poll (0.2 s) of its 4th record, 26 jobs short of the end
    suite, results = _suite(tmp_path, seconds=0.2), tmp_path / "results"
    store = Store(results / "slow")
    proc = _start(suite, results)
    _wait_for_records(store, 4, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    lines = store.path.read_bytes().split(b"\n")
    assert lines[-1] == b""  # no partial line
    before = [json.loads(line) for line in lines[:-1]]
    assert len({r["key"] for r in before}) == len(before) < 30  # no duplicate, and the run was cut short
    out = _rerun(suite, results)
    assert f"30 jobs: {30 - len(before)} ran, {len(before)} skipped" in out
    after = store.records()
    assert len(after) == 30 and len({r["key"] for r in after}) == 30


# Ctrl-C, one case per phase of a run. The driver starts with SIGINT ignored, as a shell starts a
# background job (`tabbench run ... &` in a script): Python then installs no handler of its own,
# which is how a Ctrl-C was ignored in issue 14. A phase is reached deterministically either through
# the TABBENCH_PAUSE_AT hook (tabbench.run.interrupts) or, while jobs run, by a job that waits for a file.

RESUME = "Run the same command again to resume"
SEEDED = 3  # records of quick jobs that an earlier run finished, copied into every case


def _gated_suite(folder: Path) -> str:
    """10 quick jobs, then 10 held jobs that wait for the file <folder>/gate."""
    suite = {"name": "ctrlc", "plugins": [PLUGIN_FILE],
             "datasets": [{"name": "iris", "source": "sklearn", "id": "iris", "split": {"protocol": "kfold", "k": 10}}],
             "models": {"quick": {"model": "gated"},
                        "held": {"model": "gated", "params": {"gate": str(folder / "gate")}}}}
    path = folder / "ctrlc.yaml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    return str(path)


def _ignore_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Driver:
    """`tabbench run` started as a background job (SIGINT ignored), its stderr read as it comes."""

    def __init__(self, suite, results, *args, pause_at=None):
        env = {**os.environ, "TABBENCH_PAUSE_AT": pause_at or ""}
        self.proc = subprocess.Popen([sys.executable, "-m", "tabbench.cli", "run", suite, "--results", str(results),
                                      "--no-progress", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, start_new_session=True, preexec_fn=_ignore_sigint)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    # Time limits only stop a hung test; they are wide because this machine can be very busy (load 90 seen).
    def wait_until(self, condition, what, timeout=900):
        deadline = time.time() + timeout
        while not condition():
            assert self.proc.poll() is None, f"the run ended before {what}:\n{self.stderr[-3000:]}"
            assert time.time() < deadline, f"no {what} within {timeout} s:\n{self.stderr[-3000:]}"
            time.sleep(0.05)

    def interrupt(self, timeout=300) -> int:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"SIGINT did not stop the run within {timeout} s:\n{self.stderr[-3000:]}") from None
        self.reader.join(timeout=10)
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """A results folder holding the records of an earlier run that finished 3 quick jobs (run without Ray:
    the records are the same either way, and the --no-ray test below needs no Ray)."""
    folder = tmp_path_factory.mktemp("seeded")
    out = subprocess.run([sys.executable, "-m", "tabbench.cli", "run", _gated_suite(folder), "--results",
                          str(folder / "results"), "--no-progress", "--no-ray", "--models", "quick",
                          "--folds", "0,1,2"],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return folder / "results"


@pytest.fixture
def run_dir(tmp_path, seeded):
    shutil.copytree(seeded, tmp_path / "results")
    yield tmp_path
    (tmp_path / "gate").touch()  # releases any held job still waiting in a worker


def _keys(results) -> list:
    return [r["key"] for r in Store(results / "ctrlc").records()]


# phase -> jobs the interrupted run finished (7 quick jobs are pending; "record" pauses at the first)
PHASES = {"load": 0, "ray-start": 0, "record": 1, "leaderboard": 7}


@pytest.mark.parametrize("phase", PHASES)
def test_ctrl_c_at_each_phase_exits_130_keeps_finished_records_and_says_how_to_resume(run_dir, phase):
    require_ray()
    results = run_dir / "results"
    before = _keys(results)
    driver = Driver(_gated_suite(run_dir), results, "--models", "quick", pause_at=phase)
    try:
        driver.wait_until(lambda: f"tabbench: pausing at {phase}" in driver.stderr, f"pause at {phase}")
        assert driver.interrupt() == 130, driver.stderr[-3000:]
    finally:
        driver.kill()
    assert RESUME in driver.stderr and f"Interrupted: {PHASES[phase]} jobs finished" in driver.stderr
    after = _keys(results)
    assert len(before) == SEEDED and after[:SEEDED] == before  # nothing finished is lost
    assert len(after) == len(set(after)) == SEEDED + PHASES[phase]


def _append_many(path, writer, n):
    store = Store(path)
    for i in range(n):
        store.append({"key": f"{writer}-{i}", "payload": "x" * (i * 37 % 5000)})


def test_concurrent_runs_appending_to_one_store_never_interleave(tmp_path):
    procs = [multiprocessing.Process(target=_append_many, args=(tmp_path, w, 300)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    records = Store(tmp_path).records()
    assert len(records) == 900 and len({r["key"] for r in records}) == 900


def test_a_partial_last_line_is_ignored_and_cut_off_by_the_next_writer(tmp_path):
    store = Store(tmp_path)
    store.append({"key": "a"})
    with open(store.path, "ab") as fh:
        fh.write(b'{"key": "half-writ')  # what a writer killed mid-write leaves
    assert [r["key"] for r in store.records()] == ["a"]
    store.append({"key": "b"})
    assert [r["key"] for r in store.records()] == ["a", "b"]
    assert store.path.read_bytes().count(b"half") == 0


@pytest.mark.parametrize("executor", [pytest.param("ray", marks=pytest.mark.slow), "no-ray"])
def test_ctrl_c_while_jobs_run_exits_130_keeps_finished_records_and_the_rerun_does_only_the_rest(run_dir, executor):
    """On Ray the held job still runs when Ctrl-C comes: the run must not wait for it. --no-ray runs the jobs in the
    driver's own children: a first Ctrl-C kills the held job and the run exits at once (within 60 s, not after the
    held job's 300 s wait)."""
    if executor == "ray":
        require_ray()
    results, suite = run_dir / "results", _gated_suite(run_dir)
    driver = Driver(suite, results, *(["--no-ray"] if executor == "no-ray" else []))
    try:
        driver.wait_until(lambda: len(_keys(results)) == 10 and (run_dir / "gate.started").exists(),
                          "10 quick records and a held job running")
        assert driver.interrupt(timeout=300 if executor == "ray" else 60) == 130, driver.stderr[-3000:]
    finally:
        driver.kill()
    assert RESUME in driver.stderr and "Interrupted: 7 jobs finished" in driver.stderr
    assert len(set(_keys(results))) == 10
    (run_dir / "gate").touch()
    assert "20 jobs: 10 ran, 10 skipped" in _rerun(suite, results, "--no-ray")


def test_ctrl_c_before_any_record_says_nothing_was_written_and_names_no_records_file(tmp_path):
    """A first run interrupted while it loads data has no records file: the message must not name one."""
    results = tmp_path / "results"
    driver = Driver(_gated_suite(tmp_path), results, "--no-ray", "--models", "quick", pause_at="load")
    try:
        driver.wait_until(lambda: "tabbench: pausing at load" in driver.stderr, "pause at load")
        assert driver.interrupt() == 130, driver.stderr[-3000:]
    finally:
        driver.kill()
    assert "Interrupted before any job finished: nothing was written. Run the same command again" in driver.stderr
    assert "records.jsonl" not in driver.stderr and not (results / "ctrlc" / "records" / "records.jsonl").exists()
