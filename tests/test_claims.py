"""Runs sharing one results folder share its jobs: each job is claimed before it runs, so that two concurrent
`tabbench run`s (or one killed beside another) record every job exactly once. Run: python -m pytest
tests/test_claims.py"""

import collections
import os
import re
import signal
import subprocess
import sys
import time

import yaml

from tabbench.run.claims import LEASE_S, OWNERS_DIR, Claims, _start_time
from tabbench.store import Store
from tests.plugins_for_tests import PLUGIN_FILE

#: k-NN and a small random forest on two of scikit-learn's bundled datasets, 5 folds x 2 seeds: 40 real jobs.
REAL = {"name": "shared", "seeds": [0, 1],
        "datasets": [{"name": name, "source": "sklearn", "id": name, "split": {"protocol": "kfold", "k": 5}}
                     for name in ("wine", "breast_cancer")],
        "models": {"knn": {}, "random_forest": {"params": {"n_estimators": 20}}}}
N_REAL = 40


def _write(tmp_path, suite) -> str:
    path = tmp_path / f"{suite['name']}.yaml"
    path.write_text(yaml.safe_dump(suite))
    return str(path)


def _start(suite, results):
    return subprocess.Popen([sys.executable, "-m", "tabbench.cli", "run", suite, "--results", str(results),
                             "--executor", "local", "--no-progress"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _finish(proc, timeout=600):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return out, err


def _ran(stdout: str) -> int:
    return int(re.search(r"jobs: (\d+) ran", stdout).group(1))


def _keys(store: Store) -> collections.Counter:
    return collections.Counter(r["key"] for r in store.records())


def _claims_left(store: Store) -> list:
    folder = store.path.parent / "claims"
    return sorted(p.name for p in folder.iterdir() if p.name != OWNERS_DIR and not p.name.startswith(".")) + \
        sorted((folder / OWNERS_DIR).iterdir())


def _wait(condition, proc, what, timeout=300):
    deadline = time.time() + timeout
    while not condition():
        assert proc.poll() is None, f"the run ended before {what}: {proc.stderr.read()[-3000:]}"
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_two_concurrent_runs_of_one_suite_share_the_jobs_and_record_each_exactly_once(tmp_path):
    suite, results = _write(tmp_path, REAL), tmp_path / "results"
    store = Store(results / "shared")
    first, second = _start(suite, results), _start(suite, results)
    (out1, _), (out2, _) = _finish(first), _finish(second)
    keys = _keys(store)
    assert len(keys) == N_REAL and set(keys.values()) == {1}, keys.most_common(3)
    assert all(r["status"] == "ok" for r in store.records())
    assert _ran(out1) + _ran(out2) == N_REAL and _ran(out1) > 0 and _ran(out2) > 0  # shared, not doubled
    assert _claims_left(store) == []  # every claim dropped with its record, every heartbeat with its run
    rerun = _finish(_start(suite, results))[0]  # a third run finds everything done
    assert f"{N_REAL} jobs: 0 ran, {N_REAL} skipped" in rerun


def test_a_run_killed_mid_job_beside_another_loses_nothing_and_runs_nothing_twice(tmp_path):
    suite, results = _write(tmp_path, REAL), tmp_path / "results"
    store = Store(results / "shared")
    claims = store.path.parent / "claims"
    victim, survivor = _start(suite, results), _start(suite, results)

    def victim_holds_a_job():
        owners = [os.readlink(p) for p in claims.glob("*") if p.is_symlink()] if claims.is_dir() else []
        return len(store.records()) >= 6 and any(o.split(":")[1] == str(victim.pid) for o in owners)

    _wait(victim_holds_a_job, victim, "the victim to hold a job after 6 records")
    held = {p.name for p in claims.glob("*") if p.is_symlink() and os.readlink(p).split(":")[1] == str(victim.pid)}
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    _finish(survivor)
    keys = _keys(store)
    assert len(keys) == N_REAL and set(keys.values()) == {1}, keys.most_common(3)
    # what the victim held when it died was taken over: its record is there, written by the survivor
    assert held and held <= set(keys)
    assert _claims_left(store) == []  # the dead run's claims and heartbeat were swept


def test_a_run_says_how_many_jobs_another_live_run_holds_and_waits_for_them(tmp_path):
    gate = tmp_path / "gate"
    suite = _write(tmp_path, {"name": "gated", "plugins": [PLUGIN_FILE], "datasets": [
        {"name": "iris", "source": "sklearn", "id": "iris", "split": {"protocol": "kfold", "k": 3}}],
        "models": {"gated": {"params": {"gate": str(gate)}}}})
    results = tmp_path / "results"
    store = Store(results / "gated")
    claims = store.path.parent / "claims"
    first = _start(suite, results)
    _wait(lambda: os.path.exists(f"{gate}.started"), first, "the first run's first job")
    second = _start(suite, results)
    _wait(lambda: len({os.readlink(p) for p in claims.glob("*") if p.is_symlink()}) == 2, second,
          "the second run to hold a job of its own")
    gate.touch()  # every job may finish now
    (out1, _), (out2, err2) = _finish(first), _finish(second)
    assert "1 of the 3 pending jobs are held by another live run on this results folder" in err2
    keys = _keys(store)
    assert len(keys) == 3 and set(keys.values()) == {1}
    assert _ran(out1) + _ran(out2) == 3
    assert re.search(r"ran, [12] ran in another run on the folder", out1 + out2)


def test_a_claim_is_taken_over_only_from_a_dead_owner(tmp_path):
    claims = Claims(tmp_path / "records")
    claims.open()
    try:
        # this host, by pid: a live process keeps its claim, a finished one loses it
        live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            os.symlink(f"{claims.host}:{live.pid}:{_start_time(live.pid)}", claims.dir / "k-live")
            assert not claims.take("k-live") and claims.sweep() == {"k-live": os.readlink(claims.dir / "k-live")}
        finally:
            live.kill()
            live.wait()
        claims.forget()
        assert claims.take("k-live") and claims.owner("k-live") == claims.me
        # the same pid with another start time is a later process reusing it: dead
        os.symlink(f"{claims.host}:{os.getpid()}:1", claims.dir / "k-reused")
        assert claims.take("k-reused")
        # another host, by heartbeat: fresh keeps its claim, older than the lease loses it
        for name, age in (("fresh", 0), ("stale", LEASE_S + 60)):
            owner = f"elsewhere-{name}:4242:7"
            (claims.owners / owner).touch()
            then = time.time() - age
            os.utime(claims.owners / owner, (then, then))
            os.symlink(owner, claims.dir / f"k-{name}")
        assert not claims.take("k-fresh") and claims.take("k-stale")
        assert claims.sweep() == {"k-fresh": "elsewhere-fresh:4242:7"}
        assert not (claims.owners / "elsewhere-stale:4242:7").exists()  # a dead run's heartbeat is swept too
    finally:
        claims.close()
    assert sorted(p.name for p in claims.dir.iterdir() if not p.name.startswith(".")) == ["k-fresh", OWNERS_DIR]
