"""Jobs run in their own process: time and memory budgets are enforced, a dying job is a record, on Ray and
in-process (--no-ray) alike."""

import textwrap

import pytest

from tabbench.runner import RunOptions, run_suite
from tabbench.store import load_records
from tabbench.suite import parse_suite

MISBEHAVING = textwrap.dedent('''
    import os, signal, time
    import numpy as np
    import tabbench
    from tabbench.spec import ModelSpec

    class Misbehaving:
        def __init__(self, meta, seed, how="ok"):
            self.meta, self.how = meta, how
        def fit(self, X, y, X_val=None, y_val=None):
            if self.how == "sleep":
                time.sleep(60)
            elif self.how == "hog":
                blocks = [np.ones(2**27 // 8) for _ in range(40)]  # 40 x 128 MiB, touched
            elif self.how == "exit":
                os._exit(3)
            elif self.how == "segfault":
                os.kill(os.getpid(), signal.SIGSEGV)
            elif self.how == "memoryerror":
                raise MemoryError("simulated allocation failure")
            self.mean_ = float(np.mean(y))
            return self
        def predict(self, X):
            return np.full(len(X), self.mean_)

    @tabbench.hookimpl
    def register_models(register):
        register(ModelSpec(name="misbehaving", factory=Misbehaving, tasks=frozenset({"regression"}),
                           default_params={"how": "ok"}))
''')


@pytest.mark.parametrize("ray", [True, False], ids=["ray", "no-ray"])
def test_limits_and_crashes_become_records_and_the_run_goes_on(tmp_path, request, ray):
    if ray:
        request.getfixturevalue("ray_session")
    plugin = tmp_path / "misbehaving.py"
    plugin.write_text(MISBEHAVING)
    hows = ["ok", "sleep", "hog", "exit", "segfault", "memoryerror"]
    raw = {
        "name": "limits",
        "budget": {"time_s": 8, "memory_mb": 700},
        "datasets": [{"name": "diabetes", "source": "sklearn", "id": "diabetes", "split": {"protocol": "holdout"}}],
        "models": {how: {"model": "misbehaving", "params": {"how": how}} for how in hows},
    }
    suite = parse_suite(raw, tmp_path / "limits.yaml")
    summary = run_suite(suite, RunOptions(results=tmp_path / "results", progress=False, plugin_files=(str(plugin),),
                                             ray=ray))
    frame = load_records(tmp_path / "results" / "limits").set_index("method")
    assert frame.loc["ok", "status"] == "ok"
    assert frame.loc["sleep", "status"] == "timeout" and "time budget is 8 s" in frame.loc["sleep", "error_message"]
    assert frame.loc["hog", "status"] == "oom" and "memory budget is 700 MiB" in frame.loc["hog", "error_message"]
    assert frame.loc["exit", "status"] == "crash" and "exited with code 3" in frame.loc["exit", "error_message"]
    assert frame.loc["segfault", "status"] == "crash" and "SIGSEGV" in frame.loc["segfault", "error_message"]
    assert frame.loc["memoryerror", "status"] == "oom"
    assert summary.failures == {"timeout": 1, "oom": 2, "crash": 2}
