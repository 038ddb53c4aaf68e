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
from tests.conftest import require_ray

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
    params = {"how": "spin"} if how == "timeout" else {"how": how}
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


# --- damaged records --------------------------------------------------------------------------------------


def _ran_folder(tmp_path) -> Path:
    """A results folder of 6 good records (2 folds of 3 methods), run as a user runs a suite."""
    suite = _suite(tmp_path, {f"prior{i}": {"model": "flaky"} for i in range(3)},
                   [{"name": "iris", "source": "sklearn", "id": "iris", "split": {"protocol": "kfold", "k": 2}}])
    out = _cli("run", suite, "--results", tmp_path / "runs", "--executor", "local", "--no-progress", "--tables-only")
    assert out.returncode == 0, out.stderr
    return tmp_path / "runs" / "broken"


DAMAGED = {  # a line, and the words that must say what is wrong with it
    "not JSON": (b"{'key': 'single quotes'}", "not JSON"),
    "not an object": (b"[1, 2, 3]", "a JSON list, not a record"),
    "no key": (b'{"status": "ok", "method": "x"}', "key: field required"),
    "metrics a string": (None, "metrics: input should be a valid dictionary"),
    "status 5": (None, "status: input should be 'ok'"),
    "fold zero": (None, "fold: input should be a valid integer, got 'zero'"),
}


def test_damaged_record_lines_are_skipped_and_said_by_file_and_line_and_every_good_record_is_kept(tmp_path):
    folder = _ran_folder(tmp_path)
    store = Store(folder)
    good = store.records()
    assert len(good) == 6
    base = good[0]
    bad = {"metrics a string": {**base, "key": "m", "metrics": "0.9"}, "status 5": {**base, "key": "s", "status": 5},
           "fold zero": {**base, "key": "f", "fold": "zero"}}
    lines = [DAMAGED[name][0] or json.dumps(bad[name]).encode() for name in DAMAGED]
    text = store.path.read_bytes().splitlines()
    # the damaged lines between the good ones: lines 2, 4, ... of the file
    mixed = [line for pair in zip(text, lines) for line in pair]
    store.path.write_bytes(b"\n".join(mixed) + b"\n")
    for archived in (False, True):  # the live file, then the archive it moved into (the lines moved as they were)
        if archived:
            assert _cli("archive", folder).returncode == 0
        out = _cli("leaderboard", folder, "--tables-only")
        assert out.returncode == 0, out.stderr
        name = "records.jsonl.gz" if archived else "records.jsonl"
        assert f"{folder / 'records' / name}: 6 damaged lines skipped" in out.stderr
        for number, (name, (_, words)) in enumerate(DAMAGED.items(), 1):
            if number <= 5:  # the message shows five and counts the rest
                assert f"line {2 * number}: {words}" in out.stderr, (name, out.stderr)
        assert "and 1 more" in out.stderr
    reread = Store(folder)
    assert sorted(r["key"] for r in reread.records()) == sorted(r["key"] for r in good)
    assert reread.skipped == {folder / "records" / "records.jsonl.gz": 6, folder / "records" /
                                     "records.jsonl": 0}
    assert "| prior0 |" in (folder / "leaderboard.md").read_text()


def test_a_truncated_archive_keeps_every_record_before_the_cut_and_says_which_file(tmp_path):
    folder = _ran_folder(tmp_path)
    store = Store(folder)
    base = store.records()[0]
    for i in range(40):  # records that do not compress to nothing: the cut falls after most of them
        store.append({**base, "key": f"extra-{i}", "fold": 100 + i, "padding": os.urandom(300).hex()})
    archive = store.archive()
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) - 400])
    for command in ("leaderboard", "run"):
        args = [folder, "--tables-only"] if command == "leaderboard" else [
            tmp_path / "broken.yaml", "--results", tmp_path / "runs", "--executor", "local", "--no-progress",
            "--tables-only"]
        out = _cli(command, *args)
        assert f"{archive}: the compressed data ends early (truncated)" in out.stderr, out.stderr
        assert "Restore the file" in out.stderr
    kept = Store(folder).records()
    assert 30 < len(kept) < 46 and {r["key"] for r in kept} >= {f"extra-{i}" for i in range(20)}



def test_an_archive_of_several_gzip_members_is_read_whole_and_a_cut_in_the_last_keeps_the_first(tmp_path):
    from tabbench.store import _gunzip

    first, second = b"".join(b'{"key": "a%d"}\n' % i for i in range(30000)), b'{"key": "b"}\n' * 10
    both = gzip.compress(first) + gzip.compress(second)  # `cat a.gz b.gz`: gzip readers read both
    assert _gunzip(both) == (first + second, "")
    kept, said = _gunzip(both[:-12])
    assert kept.startswith(first) and said == "the compressed data ends early (truncated)"

# --- a data source that raises ------------------------------------------------------------------------------

RAISING_SOURCE = '''
import tabbench
from tabbench.data.source import DataSource


class Raising(DataSource):
    """A source whose service fails its own way: a KeyError, not SourceError."""

    name = "raising"

    def load(self, cfg, paths):
        raise KeyError("table 7 is not in the service")


@tabbench.hookimpl
def register_sources(register):
    register(Raising)
'''


def test_a_data_source_that_raises_fails_its_dataset_not_the_run_or_the_plan(tmp_path):
    plugin = tmp_path / "raising_source.py"
    plugin.write_text(RAISING_SOURCE)
    split = {"protocol": "kfold", "k": 2}
    suite = _suite(tmp_path, {"prior": {"model": "flaky"}},
                   [{"name": "remote", "source": "raising", "split": split},
                    {"name": "iris", "source": "sklearn", "id": "iris", "split": split}],
                   plugins=(PLUGIN_FILE, str(plugin)))
    said = (f"dataset 'remote': data source 'raising' (from {plugin}) failed: KeyError: 'table 7 is not in the "
            "service'")
    run = ["run", suite, "--results", tmp_path / "runs", "--executor", "local", "--no-progress", "--tables-only"]
    stopped = _cli(*run)
    assert stopped.returncode == 2 and said in stopped.stderr and "--skip-refused" in stopped.stderr
    assert not (tmp_path / "runs" / "broken" / "records").exists()
    rest = _cli(*run, "--skip-refused")
    assert rest.returncode == 0, rest.stderr
    assert "2 jobs: 2 ran" in rest.stdout and "Not run (--skip-refused): 1 dataset could not be loaded (their jobs are not counted): remote" in (
        rest.stdout)
    assert len(Store(tmp_path / "runs" / "broken").records()) == 2
    plan = _cli("plan", suite, "--results", tmp_path / "runs")
    assert plan.returncode == 0 and said in plan.stdout and "2 jobs planned, 2 already done" in plan.stdout


# --- two datasets on the same table and split -----------------------------------------------------------------


def test_two_dataset_entries_declaring_the_same_data_and_split_are_refused_naming_both(tmp_path):
    split = {"protocol": "kfold", "k": 3}
    for twin in ({"name": "wine_b"}, {"name": "wine_b", "subset": "the first rows"}):
        suite = _suite(tmp_path, {"prior": {"model": "flaky"}},
                       [{"name": "wine_a", "source": "sklearn", "id": "wine", "split": split},
                        {"source": "sklearn", "id": "wine", "split": split, **twin}])
        for command in (["validate", suite], ["plan", suite], ["run", suite, "--results", tmp_path / "runs"]):
            out = _cli(*command)
            assert out.returncode == 2
            assert (f"{suite}: datasets[1]: dataset 'wine_b' declares the same data and split as datasets[0] "
                    "'wine_a': their jobs would be the same jobs") in out.stderr
            assert "Keep one of them, or make them differ" in out.stderr
    assert not (tmp_path / "runs").exists()
    # another split seed makes them two datasets
    suite = _suite(tmp_path, {"prior": {"model": "flaky"}},
                   [{"name": "wine_a", "source": "sklearn", "id": "wine", "split": split},
                    {"name": "wine_b", "source": "sklearn", "id": "wine", "split": {**split, "seed": 7}}])
    assert _cli("validate", suite).returncode == 0


@pytest.mark.real_data("uci/concrete")
def test_two_files_holding_the_same_table_are_refused_before_any_job_naming_both(tmp_path, shared):
    for name in ("a.txt", "b.txt"):  # two copies of one table: only their data shows they are twins
        (tmp_path / name).write_bytes((shared / "uci/concrete/concrete.txt").read_bytes())
    entry = {"source": "file", "format": "whitespace", "split": {"protocol": "holdout"}}
    suite = _suite(tmp_path, {"prior": {"model": "flaky"}}, [{"name": "concrete_a", "path": "a.txt", **entry},
                                                              {"name": "concrete_b", "path": "b.txt", **entry}])
    Store(tmp_path / "runs" / "broken").append({"key": "earlier", "status": "ok"})
    for command in (["plan", suite], ["run", suite, "--results", tmp_path / "runs", "--executor", "local"]):
        out = _cli(*command)
        assert out.returncode == 2
        assert (f"{suite}: datasets 'concrete_a' and 'concrete_b' load the same table (data fingerprint ") in out.stderr
        assert "with the same split: their jobs would be the same jobs" in out.stderr
    assert [r["key"] for r in Store(tmp_path / "runs" / "broken").records()] == ["earlier"]


# --- a results folder that cannot be written ------------------------------------------------------------------


def _read_only(folder: Path) -> list:
    """A command prefix that runs what follows with ``folder`` mounted read-only in a mount namespace of its own
    (tests run as root, whom chmod does not stop); the test is skipped where namespaces or mounts are refused."""
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind -o ro {folder} {folder} && "
                            f"! touch {folder}/.probe 2>/dev/null"], capture_output=True)
    if probe.returncode:
        pytest.skip(f"no read-only bind mount here: {probe.stderr.decode()[-200:]}")
    return ["unshare", "-m", "sh", "-c", f'mount --bind -o ro {folder} {folder} && exec "$@"', "sh"]


def test_a_read_only_results_folder_stops_run_leaderboard_and_archive_before_anything_is_computed(tmp_path):
    folder = _ran_folder(tmp_path)
    before = folder.joinpath("records", "records.jsonl").read_bytes()
    board = (folder / "leaderboard.md").read_text()
    prefix = _read_only(tmp_path / "runs")
    suite = tmp_path / "broken.yaml"
    raw = yaml.safe_load(suite.read_text())
    raw["datasets"][0]["split"]["k"] = 3  # new jobs to run
    suite.write_text(yaml.safe_dump(raw))
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins"),
                                                                os.environ.get("PYTHONPATH", "")])}
    for command, said in ((["run", suite, "--results", tmp_path / "runs", "--executor", "local", "--no-progress",
                            "--tables-only"], "a run could not save its records there, so it runs nothing"),
                          (["leaderboard", folder, "--tables-only"], "the leaderboard was not written"),
                          (["archive", folder], "nothing was archived")):
        out = subprocess.run([*prefix, sys.executable, "-m", "tabbench.cli", *map(str, command)], env=environment,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        assert f"is on a read-only file system: {said}" in out.stderr and f"Make {folder} writable" in out.stderr
    assert folder.joinpath("records", "records.jsonl").read_bytes() == before
    assert (folder / "leaderboard.md").read_text() == board


def test_a_results_folder_under_a_file_stops_run_and_leaderboard_naming_the_file(tmp_path):
    folder = _ran_folder(tmp_path)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the results root should be\n")
    run = _cli("run", tmp_path / "broken.yaml", "--results", blocker, "--executor", "local", "--no-progress")
    assert run.returncode == 2
    assert f"{blocker} is a file, not a folder: a run could not save its records there" in run.stderr
    board = _cli("leaderboard", folder, "--name", "pooled", "--results", blocker, "--tables-only")
    assert board.returncode == 2 and f"{blocker} is a file, not a folder: the leaderboard was not written" in (
        board.stderr)
    assert len(Store(folder).records()) == 6


# --- a cluster that is not there -------------------------------------------------------------------------------


def test_run_address_where_no_cluster_answers_says_it_waits_then_gives_up_saying_what_to_check(tmp_path):
    require_ray()
    import socket

    with socket.socket() as probe:  # a loopback port nothing listens on (bound, then freed)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    suite = _suite(tmp_path, {"prior": {"model": "flaky"}})
    Store(tmp_path / "runs" / "broken").append({"key": "earlier", "status": "ok"})
    out = _cli("run", suite, "--address", f"127.0.0.1:{port}", "--results", tmp_path / "runs", "--no-progress",
               env={"TABBENCH_RAY_CONNECT_TIMEOUT": "3"}, timeout=120)
    assert out.returncode == 2
    assert f"Waiting for the Ray cluster at 127.0.0.1:{port} to answer (up to 3 s" in out.stderr
    assert f"no Ray cluster answered at 127.0.0.1:{port} within 3 s (Connection refused)" in out.stderr
    for check in ("that its head is running", "the address is the one `ray start --head` printed", "RAY_AUTH_TOKEN"):
        assert check in out.stderr
    assert [r["key"] for r in Store(tmp_path / "runs" / "broken").records()] == ["earlier"]


# --- a local Ray that dies mid-run ----------------------------------------------------------------------------


def _children(pid: int) -> list:
    """(pid, command line) of every descendant of ``pid``: the local Ray a driver started is its children."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        table[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmdline)
    found, frontier = [], {pid}
    while frontier:
        frontier = {p for p, (parent, _) in table.items() if parent in frontier}
        found += [(p, table[p][1]) for p in frontier]
    return found


@pytest.mark.slow
def test_a_local_ray_that_dies_mid_run_ends_saying_what_was_saved_and_the_rerun_completes(tmp_path):
    """The raylet of the run's own local Ray is killed (as the kernel's OOM killer would) while jobs run: the run
    ends with tabbench's own ending (what is saved, run the same command again), not Ray's state dump alone."""
    from tests.conftest import require_ray
    from tests.test_reliability import _suite as slow_suite

    require_ray()
    import signal
    import time

    suite, results = slow_suite(tmp_path, seconds=0.5), tmp_path / "results"  # 30 jobs of ~0.5 s on Ray
    store = Store(results / "slow")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins"),
                                                                os.environ.get("PYTHONPATH", "")])}
    driver = subprocess.Popen([sys.executable, "-m", "tabbench.cli", "run", suite, "--results", str(results),
                               "--no-progress", "--tables-only"], env=environment, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.time() + 240
        while time.time() < deadline and len(store.records()) < 3:
            assert driver.poll() is None, driver.stderr.read()[-3000:]
            time.sleep(0.2)
        raylets = [pid for pid, cmd in _children(driver.pid) if "/raylet/raylet " in cmd]
        assert len(raylets) == 1, _children(driver.pid)
        os.kill(raylets[0], signal.SIGKILL)
        out, err = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    saved = len(store.records())
    assert driver.returncode == 2 and "Traceback" not in out + err, err[-3000:]
    assert "tabbench: the local Ray stopped mid-run: its raylet process exited (code -9" in err
    assert f"{saved} jobs finished and are saved in {store.path}; run the same command again to resume" in err
    assert 3 <= saved < 30
    again = _cli("run", suite, "--results", results, "--no-progress", "--tables-only", timeout=600)
    assert again.returncode == 0 and f"30 jobs: {30 - saved} ran, {saved} skipped" in again.stdout
    assert len({r["key"] for r in store.records()}) == len(store.records()) == 30
