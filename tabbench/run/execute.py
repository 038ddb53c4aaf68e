"""Executing one job in this process: fit, evaluate on validation and test, and return its record; a model's
own failure is recorded (status error, invalid, oom, gpu_oom), never raised. tabbench/run/isolation.py runs this
in a forked child with the job's limits enforced."""

from __future__ import annotations

import os
import re
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from tabbench.clock import reader
from tabbench.estimator import JobContext, optional
from tabbench.run.jobs import ERROR, GPU_OOM, INVALID, OK, OOM, Job
from tabbench.measure import PeakMemory, environment
from tabbench.metrics import classification_metrics, regression_metrics
from tabbench.predictions import InvalidPredictions, check_probabilities, check_regression_predictions


def outputs(estimator, meta, X):
    """What the metrics read of an estimator on X: ``predict_proba`` (classification) or ``predict``."""
    return estimator.predict_proba(X) if meta.is_classification else estimator.predict(X)


def score(meta, y, out) -> dict:
    """Metrics of outputs (as ``outputs`` gives them) against y; outputs that break the contract raise
    InvalidPredictions."""
    if meta.is_classification:
        return classification_metrics(y, check_probabilities(out, len(y), meta.n_classes), meta.n_classes)
    return regression_metrics(y, check_regression_predictions(out, len(y)))


def _evaluate(estimator, meta, X, y) -> dict:
    """Metrics of the estimator's outputs on (X, y); outputs that break the contract raise InvalidPredictions."""
    return score(meta, y, outputs(estimator, meta, X))


def _status_of(exc: BaseException) -> str:
    if isinstance(exc, InvalidPredictions):
        return INVALID
    name = type(exc).__name__
    if name == "OutOfMemoryError" or "CUDA out of memory" in str(exc):
        return GPU_OOM
    if isinstance(exc, MemoryError):
        return OOM
    return ERROR


def portable_traceback() -> str:
    """The exception being handled's traceback with each frame's file named from its import root (the
    ``sys.path`` entry it was found under: ``tabbench/run/execute.py``, ``torch/nn/modules/module.py``) or, for a
    plugin file loaded by path, from the working folder, so a committed record names no folder of the machine it
    ran on."""
    roots = sorted({str(Path(p).resolve()) for p in [*sys.path, os.getcwd()] if p}, key=len, reverse=True)

    def relative(match: re.Match) -> str:
        path = match.group(1)
        for root in roots:
            if path.startswith(root + os.sep):
                return f'File "{path[len(root) + 1:]}"'
        return match.group(0)

    return re.sub(r'File "([^"]+)"', relative, traceback.format_exc())


def fit_context(job: Job, checkpoint_dir=None, started: float | None = None, split=None, limit=None) -> JobContext:
    """What ``fit`` is told about the job: its time budget counted from ``started``, its checkpoint folder,
    the resources the scheduler reserved for it, its budget points, (given its ``split``) the rows it
    predicts after fit, and (``limit``) the CPU limit its watcher kills it at."""
    return JobContext(time_budget_s=job.time_budget_s, started=started,
                      checkpoint_dir=None if checkpoint_dir is None else Path(checkpoint_dir),
                      cpus=job.resources.get("num_cpus"), gpus=job.resources.get("num_gpus"),
                      budget_points_s=tuple(job.budget_points_s),
                      predict_rows=None if split is None else len(split.test) + len(split.val), clock=job.clock,
                      cpu_limit=limit)


def _fit(estimator, job: Job, X, y, split, context: JobContext):
    """The job's fit call: training and validation rows and the job's context; a transductive job also gets the
    test rows' features (``X`` holds features only: the targets ``y`` of the test rows never reach the model)."""
    fit_args = (X.iloc[split.train], y[split.train], X.iloc[split.val], y[split.val])
    if job.transductive:
        return estimator.fit(*fit_args, X_unlabelled=X.iloc[split.test], context=context)
    return estimator.fit(*fit_args, context=context)


def _scored(estimator, meta, X, y, split) -> dict:
    """The validation and test metrics of one of a fit's states (the budget curve's, the budget points')."""
    return {"val": _evaluate(estimator, meta, X.iloc[split.val], y[split.val]),
            "test": _evaluate(estimator, meta, X.iloc[split.test], y[split.test])}


def _budget_curve(estimator, meta, X, y, split) -> list:
    """Metrics at each step budget a model kept weights for (``budgets_`` / ``at_budget``)."""
    curve = []
    for steps in optional(estimator, "budgets_"):
        shorter = estimator.at_budget(steps)
        curve.append({"steps": steps, "best_step": shorter.info_.get("best_step"),
                      **_scored(shorter, meta, X, y, split)})
    return curve


def _budget_points(estimator, job: Job, meta, X, y, split, final: dict, fit_end_s: float, started: float,
                   point_cost_s: float, limit_s: float | None = None) -> list:
    """The record's ``budget_points``: per point of ``job.budget_points_s`` (seconds from the job's start),
    the metrics of the state validation had selected by then.

    A point the model kept a state for (``time_points_``, ``at_time``) is scored as that state (points with the
    same state share its scoring); a point past the model's training, or past the fit's end for a model that
    keeps no states, takes the final metrics (``final``, as recorded: nothing is predicted again), ``finished``
    true; a point before a state existed, or before the fit's end of a model that keeps none, has no state
    (``state_s``, ``val`` and ``test`` null). Scoring a kept state costs about ``point_cost_s`` (what the final
    predictions took): a point whose scoring could pass the job's time budget is left unscored (``unscored``),
    so that the points never cost the job its record (``limit_s``: the seconds it may run to, tabbench/clock.py's
    ``CpuLimit``, raised where its model planned its work; default its time budget)."""
    kept = optional(estimator, "time_points_")
    limit_s = job.time_budget_s if limit_s is None else limit_s
    deadline = None if limit_s is None else started + limit_s
    points, scored = [], {}
    for at_s in job.budget_points_s:
        at_s = float(at_s)
        if (kept is None and at_s >= fit_end_s) or (kept is not None and at_s not in kept):
            points.append({"at_s": at_s, "state_s": fit_end_s, "finished": True, **final})
            continue
        state_s = kept.get(at_s) if kept is not None else None
        point = {"at_s": at_s, "state_s": state_s, "finished": False, "val": None, "test": None}
        if state_s is not None and state_s not in scored:
            # room for twice what the final predictions took, and a margin, before the job's budget
            if deadline is not None and reader(job.clock)() + 2 * point_cost_s + 0.02 * limit_s > deadline:
                point["unscored"] = "the job's time budget"
                points.append(point)
                continue
            scored[state_s] = _scored(estimator.at_time(at_s), meta, X, y, split)
        points.append({**point, **scored.get(state_s, {})})
    return points


def execute(job: Job, factory, meta, X, y, split, checkpoint_dir=None, started: float | None = None,
            limit=None) -> dict:
    """Fit and evaluate one job; never raises for a model's own failure (it is recorded instead).
    ``checkpoint_dir``: a folder the model may keep its training state in (``JobContext``).
    ``started``: the reading of the job's clock (``job.clock``) its time budget counts from (default: now).
    ``limit``: the ``tabbench.clock.CpuLimit`` its watcher kills a ``cpu``-clock job at (None: in-process, no
    watcher); a model that planned its work raises it, and the record keeps the raised limit (``cpu_limit_s``)."""
    now = reader(job.clock)
    started = now() if started is None else started
    record = job.record()
    record["started_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    estimator = None
    t_start, cpu_start = time.perf_counter(), time.process_time()
    memory = PeakMemory()
    try:
        with memory:
            estimator = factory(meta, job.seed, **job.params)
            t0 = time.perf_counter()
            _fit(estimator, job, X, y, split, fit_context(job, checkpoint_dir, started, split, limit))
            fit_end_s = now() - started  # on the budget's clock: where budget points after it are final
            earlier = optional(estimator, "resumed_fit_seconds_")  # of a fit resumed from a checkpoint
            record["fit_seconds"] = time.perf_counter() - t0 + earlier
            if earlier:
                record["fit_seconds_before_resume"] = earlier
            t0, c0 = time.perf_counter(), now()
            test = _evaluate(estimator, meta, X.iloc[split.test], y[split.test])
            record["predict_seconds"] = time.perf_counter() - t0
            val = _evaluate(estimator, meta, X.iloc[split.val], y[split.val])
            point_cost_s = now() - c0  # test and validation predictions: what scoring a state costs, on its clock
            curve = _budget_curve(estimator, meta, X, y, split)
            points = []
            if job.budget_points_s:
                try:  # the points never cost the job its final result: their failure is recorded beside it
                    points = _budget_points(estimator, job, meta, X, y, split, {"val": val, "test": test},
                                            fit_end_s, started, point_cost_s,
                                            limit.seconds if limit is not None else None)
                except Exception as exc:  # noqa: BLE001
                    record["budget_points_error"] = f"{type(exc).__name__}: {exc}"[:2000]
        record["metrics"] = {"val": val, "test": test}
        if curve:
            record["budget_curve"] = curve
        if points:
            record["budget_points"] = points
        record["status"] = OK
    except Exception as exc:  # a model's own failure: record it, the run goes on
        record["status"] = _status_of(exc)
        record["error_type"] = f"{type(exc).__module__}.{type(exc).__qualname__}"
        record["error_message"] = str(exc)[:2000]
        record["traceback"] = portable_traceback()[-20000:]
    record.update(memory.record() if hasattr(memory, "peak_bytes") else {})
    info = optional(estimator, "info_")
    if isinstance(info, dict):
        record["info"] = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in info.items()}
    # the whole job's, as fit_seconds: a job resumed from a checkpoint adds its earlier attempts' fit time
    record["wall_seconds"] = time.perf_counter() - t_start + record.get("fit_seconds_before_resume", 0.0)
    # every thread of the job's process; a job resumed from a checkpoint adds its earlier attempts' CPU seconds
    earlier_cpu = optional(estimator, "resumed_cpu_seconds_")
    record["cpu_seconds"] = time.process_time() - cpu_start + earlier_cpu
    if earlier_cpu:
        record["cpu_seconds_before_resume"] = earlier_cpu
    if limit is not None and limit.raised:  # its model planned its work: it could run past its budget
        record["cpu_limit_s"] = limit.seconds
    record["environment"] = environment()
    record["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return record
