"""Nothing finished is lost: a killed driver, Ctrl-C, and concurrent runs leave a sound store."""

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import yaml

from tabbench.store import Store

SLOW_PLUGIN = textwrap.dedent('''
    import time
    import numpy as np
    import tabbench
    from tabbench.spec import ModelSpec

    class Slow:
        def __init__(self, meta, seed, seconds=0.5):
            self.meta, self.seconds = meta, seconds
        def fit(self, X, y, X_val=None, y_val=None):
            time.sleep(self.seconds)
            self.p_ = np.bincount(y, minlength=self.meta.n_classes) / len(y)
            return self
        def predict_proba(self, X):
            return np.tile(self.p_, (len(X), 1))
        def predict(self, X):
            return self.predict_proba(X).argmax(axis=1)

    @tabbench.hookimpl
    def register_models(register):
        register(ModelSpec(name="slow", factory=Slow, tasks=frozenset({"multiclass"}),
                           default_params={"seconds": 0.5}))
''')


def _suite(tmp_path, n_methods=3) -> str:
    (tmp_path / "slow.py").write_text(SLOW_PLUGIN)
    suite = {"name": "slow", "plugins": ["slow.py"],
             "datasets": [{"name": "iris", "source": "sklearn", "id": "iris", "split": {"protocol": "kfold", "k": 10}}],
             "models": {f"slow{i}": {"model": "slow", "params": {"seconds": 0.5 + i / 100}} for i in range(n_methods)}}
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


def _rerun(suite, results) -> str:
    out = subprocess.run([sys.executable, "-m", "tabbench.cli", "run", suite, "--results", str(results),
                          "--no-progress"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_driver_killed_with_sigkill_leaves_a_sound_store_and_rerun_completes_only_the_missing_jobs(tmp_path):
    suite, results = _suite(tmp_path), tmp_path / "results"
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


def test_ctrl_c_keeps_finished_jobs_and_says_how_to_resume(tmp_path):
    suite, results = _suite(tmp_path), tmp_path / "results"
    store = Store(results / "slow")
    proc = _start(suite, results)
    _wait_for_records(store, 3, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert "Run the same command again to resume" in err
    kept = len(store.records())
    assert kept >= 3
    assert f"{30 - kept} ran, {kept} skipped" in _rerun(suite, results)


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
