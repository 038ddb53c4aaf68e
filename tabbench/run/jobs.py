"""A job: one fit and evaluation, (method, params, dataset, split fold, seed), and the record it leaves.

Its key hashes exactly those, so a re-run recognises finished work whatever order the suite lists things in.
Jobs are expanded from a suite in tabbench/run/expand.py, run by tabbench/run/execute.py (in a forked child:
tabbench/run/isolation.py) and stored by tabbench/store.py.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

from tabbench.record_schema import (CRASH, ERROR, GPU_OOM, INVALID, LOST, OK, OOM, STATUSES,  # noqa: F401 (re-exported)
                                    TIMEOUT)


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
    config: str | None = None  # the named configuration (tuning: configs) this trial runs
    n_trials: int | None = None  # the method's trials on this dataset (expand sets it; None: not known)
    budget_points_s: tuple = ()  # the suite's budget.points_s: elapsed seconds the record scores (budget_points)
    clock: str = "wall"  # what time_budget_s and budget_points_s count (tabbench/clock.py); not in the key
    # grouped | temporal | random (the control of either, tabbench.data.splits.regime); None: a plain split
    split_regime: str | None = None

    def record(self) -> dict:
        out = asdict(self)
        out.pop("resources")
        if not out["budget_points_s"]:  # a suite without budget points: its records as before they existed
            out.pop("budget_points_s")
        else:
            out["budget_points_s"] = list(out["budget_points_s"])
        if out["split_regime"] is None:  # a plain split: its records as before regimes existed
            out.pop("split_regime")
        return out


def job_key(method, model, params, dataset_fingerprint, split_fingerprint, fold, repeat, seed) -> str:
    payload = json.dumps([method, model, params, dataset_fingerprint, split_fingerprint, fold, repeat, seed],
                         sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


def failure_rows(records) -> list[tuple]:
    """(method, dataset, status, jobs, why) for each method, dataset and status among the failed ``records`` (dicts),
    ``why`` being the first line of the first one's error message (cut to 160 characters): what a run's summary and
    a leaderboard where every job failed say."""
    rows: dict = {}
    for r in records:
        if r.get("status") == OK:
            continue
        group = (str(r.get("method")), str(r.get("dataset")), str(r.get("status")))
        count, why = rows.get(group, (0, None))
        if why is None:
            lines = str(r.get("error_message") or r.get("error_type") or "").strip().splitlines()
            why = (lines[0] if lines else "")[:160]
        rows[group] = (count + 1, why)
    return [(*group, count, why) for group, (count, why) in rows.items()]


def failure_record(job: Job, status: str, message: str, error_type: str | None = None) -> dict:
    record = job.record()
    record.update(status=status, error_type=error_type or status, error_message=message,
                  finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    return record
