"""What a stored record line must be (issue 63): a JSON object with a non-empty ``key``, and, where present, the
fields every reader relies on with their types (``status`` one of the record statuses, ``fold`` an integer,
``metrics`` {split: {metric: number}}, ...). tabbench/store.py reads each line through ``parse_line``, so a
damaged line is skipped and said (file and line), never a traceback, and every good record is kept.

Presence is not required beyond ``key``: records written by older versions lack some fields, and a line's
other fields pass as they are (the record read is the line's own dict, not this model's output).
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

#: Every status a record can have (tabbench/run/jobs.py re-exports them). ``lost`` is an infrastructure failure (a
#: Ray worker or node died and Ray's bounded retries were spent); the others are the job's own outcome and never
#: retried. ``invalid``: the model ran, but its predictions break the contract (NaN, wrong shape, ...).
OK, ERROR, TIMEOUT, OOM, GPU_OOM, CRASH, LOST = "ok", "error", "timeout", "oom", "gpu_oom", "crash", "lost"
INVALID = "invalid"
STATUSES = (OK, ERROR, TIMEOUT, OOM, GPU_OOM, CRASH, LOST, INVALID)


class RecordLine(BaseModel):
    """The checked fields of one record; strict: a value is never converted (``fold: "0"`` is refused)."""

    model_config = ConfigDict(strict=True, extra="allow")

    key: str = Field(min_length=1)
    status: Literal[STATUSES] = None  # absent: a record of a test double; null or another word: damaged
    method: str = None
    model: str = None
    dataset: str = None
    task: str = None
    fold: int = None
    repeat: int = None
    seed: int = None
    trial: int | None = None
    params: dict = None
    key_params: dict | None = None
    metrics: dict[str, dict[str, float | None]] | None = None
    finished_at: str | None = None
    fit_seconds: float | None = None
    wall_seconds: float | None = None
    cpu_seconds: float | None = None
    clock: Literal["cpu", "wall"] | None = None  # tabbench/clock.py; absent: wall (older records)
    cpu_limit_s: float | None = None  # a job whose model planned its work: the CPU seconds it could run to


def parse_line(raw: bytes) -> tuple[dict | None, str]:
    """(the record, "") for a good line, else (None, what is wrong with it) in a few words."""
    try:
        record = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return None, f"not JSON ({exc.msg if isinstance(exc, json.JSONDecodeError) else exc.reason})"
    if not isinstance(record, dict):
        return None, f"a JSON {type(record).__name__}, not a record (an object)"
    try:
        RecordLine.model_validate(record)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"]))
        given = "" if first["type"] == "missing" else f", got {first['input']!r}"[:80]
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        return None, f"{where}: {first['msg'].lower()}{given}{more}"
    return record, ""
