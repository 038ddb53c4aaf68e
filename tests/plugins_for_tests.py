"""The test doubles the harness tests run: prior models (class frequencies or the training mean), each with
one behaviour to provoke (sleeping, waiting for a file, crashing, holding memory, recording its arguments).

Also a plugin file: a suite's ``plugins: [PLUGIN_FILE]`` or ``RunOptions(plugin_files=(PLUGIN_FILE,))``
registers the models below (``spy`` excepted: tests build its spec themselves, transductive or not).
"""

import os
import signal
import time
from pathlib import Path
from typing import Literal

import numpy as np

import tabbench
from tabbench.estimator import Estimator
from tabbench.params import Params, param
from tabbench.spec import MULTICLASS, REGRESSION, ModelSpec

PLUGIN_FILE = str(Path(__file__).resolve())


class Prior(Estimator):
    """Class frequencies (no smoothing) for classification, the training mean for regression."""

    def fit(self, X, y, X_val=None, y_val=None, *, context=None):
        if self.meta.is_classification:
            self.p_ = np.bincount(y, minlength=self.meta.n_classes) / len(y)
        else:
            self.mean_ = float(np.mean(y))
        return self

    def predict_proba(self, X):
        return np.tile(self.p_, (len(X), 1))

    def predict_values(self, X):
        return np.full(len(X), self.mean_)


class Slow(Prior):
    """Sleeps ``seconds`` in fit."""

    class Params(Params):
        seconds: float = param(0.5, "how long fit sleeps", ge=0)

    def fit(self, X, y, X_val=None, y_val=None, *, context=None):
        time.sleep(self.params["seconds"])
        return super().fit(X, y, X_val, y_val)


class Gated(Prior):
    """With a ``gate`` path, fit says it started (``<gate>.started``) and waits until the gate file exists."""

    class Params(Params):
        gate: str = param("", "a path: fit waits until it exists (empty: no wait)")

    def fit(self, X, y, X_val=None, y_val=None, *, context=None):
        gate = self.params["gate"]
        if gate:
            open(gate + ".started", "a").close()
            deadline = time.time() + 300
            while not os.path.exists(gate) and time.time() < deadline:
                time.sleep(0.05)
        return super().fit(X, y, X_val, y_val)


class Misbehaving(Prior):
    """Breaks its job one way (``how``): sleeps (no CPU time: a hang), spins (CPU time, past any budget), plans its
    work (as NPT's ``steps: "auto"`` does, ``TrainingClock.guard_only``) and then spends 2 CPU-s more than its
    budget, hogs memory, exits, segfaults or raises MemoryError."""

    class Params(Params):
        how: Literal["ok", "sleep", "spin", "planned", "hog", "exit", "segfault", "memoryerror"] = param(
            "ok", "how fit misbehaves")

    def fit(self, X, y, X_val=None, y_val=None, *, context=None):
        how = self.params["how"]
        if how == "sleep":
            time.sleep(60)
        elif how == "spin":
            while True:
                pass
        elif how == "planned":
            context.training_clock().guard_only()
            while time.process_time() < context.time_budget_s + 2.0:
                pass
        elif how == "hog":
            blocks = [np.ones(2**27 // 8) for _ in range(40)]  # noqa: F841 (40 x 128 MiB, touched)
        elif how == "exit":
            os._exit(3)
        elif how == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif how == "memoryerror":
            raise MemoryError("simulated allocation failure")
        return super().fit(X, y, X_val, y_val)


class FailsOnRegression(Prior):
    """Uniform probabilities for classification; fit raises on a regression dataset."""

    def fit(self, X, y, X_val=None, y_val=None, *, context=None):
        if not self.meta.is_classification:
            raise ValueError("this model cannot regress " + self.meta.name)
        self.p_ = np.full(self.meta.n_classes, 1.0 / self.meta.n_classes)
        return self


class Ballast(Prior):
    """Touches ``mib`` MiB during fit, then frees it: the job's peak is known."""

    class Params(Params):
        mib: int = param(150, "MiB fit touches", ge=0)

    def fit(self, X, y, X_val=None, y_val=None, *, context=None):
        block = np.ones(self.params["mib"] * 2**20 // 8)
        super().fit(X, y, X_val, y_val)
        self.mean_ += block[0] - 1.0
        return self


class Spy(Prior):
    """Keeps every argument fit was given, in ``Spy.calls``."""

    calls = []

    def fit(self, X, y, X_val=None, y_val=None, *, context=None, **extra):
        Spy.calls.append({"X": X, "y": y, "X_val": X_val, "y_val": y_val, "context": context, **extra})
        return super().fit(X, y, X_val, y_val)


@tabbench.hookimpl
def register_models(register):
    register(ModelSpec(name="slow", factory=Slow, tasks=frozenset({MULTICLASS})))
    register(ModelSpec(name="gated", factory=Gated, tasks=frozenset({MULTICLASS})))
    register(ModelSpec(name="misbehaving", factory=Misbehaving, tasks=frozenset({REGRESSION})))
    register(ModelSpec(name="flaky", factory=FailsOnRegression, tasks=frozenset({MULTICLASS, REGRESSION})))
    register(ModelSpec(name="ballast", factory=Ballast, tasks=frozenset({REGRESSION})))
