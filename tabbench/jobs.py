"""Jobs: planning (suite x registry x data -> Job list, with tuning trials) and execution (in a worker).

A job is one fit and evaluation: (method, params, dataset, split fold, seed). Its key hashes exactly
those, so a re-run recognises finished work whatever order the suite lists things in.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import pickle
import random
import select
import signal
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

import numpy as np

from tabbench.measure import PeakMemory, environment, proc_status_kib
from tabbench.metrics import classification_metrics, regression_metrics
from tabbench.predictions import InvalidPredictions, check_probabilities, check_regression_predictions

#: Every status a record can have. ``lost`` is an infrastructure failure (a Ray worker or node died
#: and Ray's bounded retries were spent); the others are the job's own outcome and never retried.
#: ``invalid``: the model ran, but its predictions break the contract (NaN, wrong shape, ...).
OK, ERROR, TIMEOUT, OOM, GPU_OOM, CRASH, LOST = "ok", "error", "timeout", "oom", "gpu_oom", "crash", "lost"
INVALID = "invalid"


@dataclass(frozen=True)
class Job:
    key: str
    suite: str
    method: str  # the suite's label for the model entry (a variant has its own)
    model: str  # the registered model name
    params: dict  # every param, defaults included, device resolved
    trial: int | None  # index of the tuning config, None when not tuned
    dataset: str
    task: str
    fold: int
    repeat: int
    seed: int
    dataset_fingerprint: str
    split_fingerprint: str
    subset: str | None = None
    resources: dict = field(default_factory=dict)
    time_budget_s: float | None = None
    memory_budget_mb: float | None = None
    transductive: bool = False  # fit sees the test rows' features (never their targets)
    # what reports need to know of the model, recorded so that they read records only (no registry):
    key_params: dict | None = None  # params as the job's key sees them (spec.key_params: run params at defaults)
    deterministic: bool = True  # spec.deterministic: a seeded fit repeats to float rounding on any machine

    def record(self) -> dict:
        out = asdict(self)
        out.pop("resources")
        return out


def job_key(method, model, params, dataset_fingerprint, split_fingerprint, fold, repeat, seed) -> str:
    payload = json.dumps([method, model, params, dataset_fingerprint, split_fingerprint, fold, repeat, seed],
                         sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


def trial_configs(entry, spec) -> list[tuple[int | None, dict]]:
    """(trial index, params) for a model entry: one config, the full grid, or a random sample of it."""
    if entry.tuning == "none":
        return [(None, dict(entry.params))]
    space = entry.search_space or dict(spec.search_space)
    names = sorted(space)
    grid = [dict(zip(names, values)) for values in itertools.product(*(space[n] for n in names))]
    if entry.tuning == "random" and entry.n_trials < len(grid):
        grid = random.Random(entry.tuning_seed).sample(grid, entry.n_trials)
    return [(i, {**entry.params, **config}) for i, config in enumerate(grid)]


def resolve_params(spec, params: dict, gpu_available: bool) -> dict:
    resolved = {**spec.default_params, **params}
    if resolved.get("device") == "auto":
        resolved["device"] = "cuda" if gpu_available else "cpu"
    return resolved


def plan(suite, registry, loaded, gpu_available=False) -> list[Job]:
    """Every job of a suite. ``loaded`` maps dataset name -> (DatasetConfig, Dataset, splits)."""
    jobs = []
    for name, (cfg, dataset, splits) in loaded.items():
        for entry in suite.models:
            spec = registry[entry.model].spec
            if dataset.meta.task not in spec.tasks:
                continue
            dataset_params = (cfg.model_params or {}).get(entry.label, {})
            for trial, params in trial_configs(entry, spec):
                params = resolve_params(spec, {**params, **dataset_params}, gpu_available)
                key_params = spec.key_params(params)
                for split in splits:
                    for seed in suite.seeds:
                        key = job_key(entry.label, entry.model, key_params, dataset.fingerprint,
                                      split.fingerprint, split.fold, split.repeat, seed)
                        jobs.append(Job(key, suite.name, entry.label, entry.model, params, trial, name,
                                        dataset.meta.task, split.fold, split.repeat, seed, dataset.fingerprint,
                                        split.fingerprint, dataset.subset, spec.resources(params),
                                        suite.budget.time_s, suite.budget.memory_mb,
                                        spec.is_transductive(params), key_params, spec.deterministic))
    return jobs


def _evaluate(estimator, meta, X, y) -> dict:
    """Metrics of the estimator's outputs on (X, y); outputs that break the contract raise InvalidPredictions."""
    if meta.is_classification:
        return classification_metrics(y, check_probabilities(estimator.predict_proba(X), len(X), meta.n_classes),
                                      meta.n_classes)
    return regression_metrics(y, check_regression_predictions(estimator.predict(X), len(X)))


def _status_of(exc: BaseException) -> str:
    if isinstance(exc, InvalidPredictions):
        return INVALID
    name = type(exc).__name__
    if name == "OutOfMemoryError" or "CUDA out of memory" in str(exc):
        return GPU_OOM
    if isinstance(exc, MemoryError):
        return OOM
    return ERROR


def _fit(estimator, job: Job, X, y, split):
    """The job's fit call: training and validation rows; a transductive job also gets the test rows'
    features (``X`` holds features only: the targets ``y`` of the test rows never reach the model)."""
    fit_args = (X.iloc[split.train], y[split.train], X.iloc[split.val], y[split.val])
    if job.transductive:
        return estimator.fit(*fit_args, X_unlabelled=X.iloc[split.test])
    return estimator.fit(*fit_args)


def _budget_curve(estimator, meta, X, y, split) -> list:
    """Metrics at each step budget a model kept weights for (``budgets_`` / ``at_budget``)."""
    curve = []
    for steps in getattr(estimator, "budgets_", None) or []:
        shorter = estimator.at_budget(steps)
        curve.append({"steps": steps, "best_step": shorter.info_.get("best_step"),
                      "val": _evaluate(shorter, meta, X.iloc[split.val], y[split.val]),
                      "test": _evaluate(shorter, meta, X.iloc[split.test], y[split.test])})
    return curve


def execute(job: Job, factory, meta, X, y, split, checkpoint_dir=None) -> dict:
    """Fit and evaluate one job; never raises for a model's own failure (it is recorded instead).
    ``checkpoint_dir``: a folder the model may keep its training state in (see tabbench/spec.py)."""
    record = job.record()
    record["started_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    estimator = None
    t_start = time.perf_counter()
    memory = PeakMemory()
    try:
        with memory:
            estimator = factory(meta, job.seed, **job.params)
            if checkpoint_dir is not None:
                estimator.checkpoint_dir = str(checkpoint_dir)
            t0 = time.perf_counter()
            _fit(estimator, job, X, y, split)
            earlier = getattr(estimator, "resumed_fit_seconds_", 0.0)  # of a fit resumed from a checkpoint
            record["fit_seconds"] = time.perf_counter() - t0 + earlier
            if earlier:
                record["fit_seconds_before_resume"] = earlier
            t0 = time.perf_counter()
            test = _evaluate(estimator, meta, X.iloc[split.test], y[split.test])
            record["predict_seconds"] = time.perf_counter() - t0
            val = _evaluate(estimator, meta, X.iloc[split.val], y[split.val])
            curve = _budget_curve(estimator, meta, X, y, split)
        record["metrics"] = {"val": val, "test": test}
        if curve:
            record["budget_curve"] = curve
        record["status"] = OK
    except Exception as exc:  # a model's own failure: record it, the run goes on
        record["status"] = _status_of(exc)
        record["error_type"] = f"{type(exc).__module__}.{type(exc).__qualname__}"
        record["error_message"] = str(exc)[:2000]
        record["traceback"] = traceback.format_exc()[-20000:]
    record.update(memory.record() if hasattr(memory, "peak_bytes") else {})
    info = getattr(estimator, "info_", None)
    if isinstance(info, dict):
        record["info"] = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in info.items()}
    # the whole job's, as fit_seconds: a job resumed from a checkpoint adds its earlier attempts' fit time
    record["wall_seconds"] = time.perf_counter() - t_start + record.get("fit_seconds_before_resume", 0.0)
    record["environment"] = environment()
    record["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return record


def failure_record(job: Job, status: str, message: str, error_type: str | None = None) -> dict:
    record = job.record()
    record.update(status=status, error_type=error_type or status, error_message=message,
                  finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    return record


def _die_with_parent():
    """Linux: the kernel kills this process when its parent (the Ray worker) dies."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _limit_threads(n: int) -> None:
    """Run the job's native thread pools (BLAS, OpenMP, torch) on the CPUs Ray gave it, not every core."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(n)  # for libraries the job imports itself
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(n)
    from threadpoolctl import threadpool_limits

    threadpool_limits(n)  # for those already loaded (numpy's BLAS)


def execute_isolated(job: Job, factory, meta, X, y, split, poll_s: float = 0.05, checkpoint_dir=None) -> dict:
    """Run ``execute`` in a forked child so that the job's limits can be enforced from outside.

    The child inherits the data copy-on-write (nothing is serialised). The parent enforces the
    job's time budget (kill -> ``timeout``) and host memory budget (resident memory polled, kill ->
    ``oom``), and turns a child that dies without a record (segfault, os._exit, killed) into
    ``crash``. Where fork is unavailable the job runs in-process without enforced limits.
    """
    if not hasattr(os, "fork"):
        return execute(job, factory, meta, X, y, split, checkpoint_dir)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, send the record, leave without running the parent's exit handlers
        code = 0
        try:
            os.close(read_fd)
            _die_with_parent()
            _limit_threads(max(1, int(job.resources.get("num_cpus") or 1)))
            payload = pickle.dumps(execute(job, factory, meta, X, y, split, checkpoint_dir))
            view = memoryview(payload)
            while view:
                view = view[os.write(write_fd, view):]
        except BaseException:
            code = 70
        finally:
            os._exit(code)
    os.close(write_fd)
    started = time.monotonic()
    chunks, status, peak_mb = [], None, 0.0
    try:
        while True:
            ready, _, _ = select.select([read_fd], [], [], poll_s)
            if ready:
                chunk = os.read(read_fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
                continue
            elapsed = time.monotonic() - started
            peak_mb = max(peak_mb, (proc_status_kib("VmRSS", pid) or 0) / 1024)
            if job.time_budget_s is not None and elapsed > job.time_budget_s:
                status = TIMEOUT
            elif job.memory_budget_mb is not None and peak_mb > job.memory_budget_mb:
                status = OOM
            if status is not None:
                os.kill(pid, signal.SIGKILL)
                break
    finally:
        os.close(read_fd)
        _, wait_status = os.waitpid(pid, 0)
    elapsed = time.monotonic() - started
    if status == TIMEOUT:
        return failure_record(job, TIMEOUT, f"killed after {elapsed:.1f} s: the job's time budget is "
                              f"{job.time_budget_s:g} s (suite budget.time_s)")
    if status == OOM:
        return failure_record(job, OOM, f"killed at {peak_mb:.0f} MiB resident: the job's memory budget is "
                              f"{job.memory_budget_mb:g} MiB (suite budget.memory_mb)")
    if chunks and os.WIFEXITED(wait_status) and os.WEXITSTATUS(wait_status) == 0:
        return pickle.loads(b"".join(chunks))
    if os.WIFSIGNALED(wait_status):
        sig = os.WTERMSIG(wait_status)
        how = f"killed by signal {sig} ({signal.Signals(sig).name})"
        return failure_record(job, CRASH, f"the job's process was {how} after {elapsed:.1f} s", "signal")
    return failure_record(job, CRASH, f"the job's process exited with code {os.WEXITSTATUS(wait_status)} "
                          f"after {elapsed:.1f} s without a result", "exit")
