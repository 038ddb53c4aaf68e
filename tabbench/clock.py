"""The clock a job's time budget and budget points count on.

``cpu`` (the default for a job that asks for no GPU): the CPU seconds of the job's own process, every thread
counted (``time.process_time`` in the job, /proc/<pid>/stat in the process that watches it). Another process on
the same core takes wall time from the job but not CPU time, so the same job on the same machine trains the
same epochs and steps alone or beside a CPU hog (tests/test_clock.py). The job still ends in bounded wall time:
the watching process kills it after ``wall_ceiling(budget)`` wall seconds (a job that hangs, or one starved by
a machine many times oversubscribed), recorded as a timeout that names the ceiling.

``wall`` (a job that asks for a GPU, whose work is no CPU time of the job's; or a suite's ``budget.clock:
wall``): elapsed seconds (``time.monotonic``), what every record made before the clock was chosen counted on
(records without a ``clock`` field read as ``wall``, ``clock_of``).

A job that asks for several CPUs and runs several threads spends CPU seconds faster than wall seconds: its
budget is CPU time over all of them, as its ``cpus`` reserve.

CPU time is not quite still either, so a job does not stop on it where its model planned its work. A model that
sizes its training before it starts, from a speed the machine measured once and stored (NPT's ``steps: "auto"``,
the epochs TabR, TabM and RealMLP plan from a stored epoch time: ``TrainingClock.guard_only``), trains that work
whatever CPU seconds it comes to on the day, up to PLANNED_OVERRUN times its budget: the job raises its
``CpuLimit`` (the seconds its watcher kills it at) from the budget to that, and its record says so
(``cpu_limit_s``; ``cpu_seconds`` is what it spent). Every other job is killed at its budget. Why: a job that
shares its core with another busy process in the scheduler's default slices (a few ms) loses its caches and
branch predictors at every switch, and pays for it in CPU time. On
this project's 2-core Xeon VM (Linux 6.18) a fixed torch workload (400 steps of a 64-512-512-1 MLP, batch 256,
one thread) took 3.5 CPU-s alone and 4.6 to 5.8 beside a busy loop on its core; asking for 100 ms slices (``ask_long_slice``: EEVDF's per-task slice, Linux 6.12 and later) brought it to 3.6. So a ``cpu``-clock job
asks for them before it starts (tabbench/run/isolation.py); its share of the core is the same, only switched less
often. Where the kernel has no such slice the call changes nothing. It does not make CPU time still everywhere: the
same day NPT's training step (breast cancer, e8-l2-b512) still cost about 2.5 times the CPU seconds beside the
loop (3.5 times on CI's machine), and in breadth's runs the same 1,584 planned steps on wells took 238 to 344
CPU-s with other jobs on the other core. Where the kernel's accounting and the caches are quieter (another machine
of the same kind: about 5%) the overrun is not needed; the rule is the same everywhere.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
import time
from typing import Callable

CPU, WALL = "cpu", "wall"
CLOCKS = (CPU, WALL)

#: A ``cpu``-clock job is killed after this many times its budget in wall seconds, plus WALL_CEILING_SLACK_S: one
#: that hangs (a deadlock, a blocked read) does not hold its worker for ever, while one on a core shared with
#: several other busy processes still finishes (a 2-core machine at a load average of 14 gave a job about a
#: seventh of a core).
WALL_CEILING_FACTOR = 10.0
WALL_CEILING_SLACK_S = 60.0


def job_clock(asked: str | None, gpus: float | None) -> str:
    """The clock a job counts its budget on: ``asked`` (a suite's ``budget.clock``) where given, else ``wall`` for
    a job that asks for a GPU and ``cpu`` otherwise."""
    if asked in CLOCKS:
        return asked
    return WALL if gpus else CPU


#: How many times its budget, in CPU seconds, a ``cpu``-clock job whose model planned its work may run to before its
#: watcher kills it (``CpuLimit.allow_planned``). Beside a busy loop on its core NPT's planned steps cost 2.5 times
#: their CPU seconds alone on this project's Xeon VM and 3.5 times on CI's (tests/test_clock.py); the work they do
#: and what they learn are the same.
PLANNED_OVERRUN = 4.0


class CpuLimit:
    """The CPU seconds after which the process that watches a ``cpu``-clock job kills it: the job's budget, or
    PLANNED_OVERRUN times it from the moment its model says it planned its work (``allow_planned``). One float on
    a page the job's process and its watcher share (mapped before the fork, tabbench/run/isolation.py): the job
    writes it, the watcher reads it at each poll."""

    def __init__(self, budget_s: float):
        self.budget_s = float(budget_s)
        self._page = mmap.mmap(-1, 8)
        self._set(self.budget_s)

    def _set(self, seconds: float) -> None:
        self._page[:8] = struct.pack("d", float(seconds))

    @property
    def seconds(self) -> float:
        return struct.unpack("d", self._page[:8])[0]

    @property
    def raised(self) -> bool:
        return self.seconds > self.budget_s

    def allow_planned(self) -> None:
        """The job's work was planned before training from a stored speed: let it run to PLANNED_OVERRUN times its
        budget."""
        self._set(PLANNED_OVERRUN * self.budget_s)


#: The scheduler slice a ``cpu``-clock job asks for (the most EEVDF grants), in ms.
LONG_SLICE_MS = 100
_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274}  # the syscall's number, per architecture


def ask_long_slice(ms: float = LONG_SLICE_MS) -> bool:
    """Ask the kernel to run this thread, and the threads and processes it starts from now on, in slices of ``ms``
    (``sched_setattr`` with ``sched_runtime`` for a SCHED_OTHER thread: EEVDF's per-task slice, Linux 6.12 and
    later; an older kernel accepts and ignores it). False where the call is not there or fails."""
    import ctypes
    import platform

    number = _SCHED_SETATTR.get(platform.machine())
    if number is None or not sys.platform.startswith("linux"):
        return False

    class SchedAttr(ctypes.Structure):  # struct sched_attr, sched_setattr(2)
        _fields_ = [("size", ctypes.c_uint32), ("policy", ctypes.c_uint32), ("flags", ctypes.c_uint64),
                    ("nice", ctypes.c_int32), ("priority", ctypes.c_uint32), ("runtime", ctypes.c_uint64),
                    ("deadline", ctypes.c_uint64), ("period", ctypes.c_uint64)]

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        attr = SchedAttr(ctypes.sizeof(SchedAttr), 0, 0, os.getpriority(os.PRIO_PROCESS, 0), 0, int(ms * 1e6), 0, 0)
        return libc.syscall(number, 0, ctypes.byref(attr), 0) == 0
    except (OSError, AttributeError):
        return False


def clock_of(record: dict) -> str:
    """The clock a record's budget counted on; records made before the field existed counted wall time."""
    return record.get("clock") or WALL


def spent_seconds(record, wall_field: str = "fit_seconds") -> float | None:
    """The seconds a record's job spent, on the clock its budget counted: under ``cpu`` the CPU seconds of the
    job's process (``cpu_seconds``: every thread; its fit, predictions and scoring, as the budget counted them;
    a job resumed from a checkpoint, every attempt's to the checkpoint it continued where the record has
    ``cpu_seconds_before_resume``, else this attempt's alone), which a paused worker or a busy machine does not
    move; under ``wall`` the record's ``wall_field`` (``fit_seconds``: the fit's; ``wall_seconds``: the whole
    job's). ``record``: a record, or a row of ``tabbench.store.records_frame``."""
    clock, cpu = record.get("clock"), record.get("cpu_seconds")
    if clock == CPU and cpu is not None and cpu == cpu:  # a frame's missing value is NaN
        return float(cpu)
    value = record.get(wall_field)
    return None if value is None or value != value else float(value)


def reader(clock: str) -> Callable[[], float]:
    """A function giving the current reading of ``clock`` in seconds, in the job's own process."""
    return time.process_time if clock == CPU else time.monotonic


def wall_ceiling(budget_s: float) -> float:
    """The wall seconds after which a ``cpu``-clock job of ``budget_s`` CPU seconds is killed."""
    return WALL_CEILING_FACTOR * budget_s + WALL_CEILING_SLACK_S


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PROC = os.path.isdir("/proc/self")


def process_cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds of process ``pid``, all its threads (Linux /proc; psutil elsewhere); None
    when it cannot be read (the process is gone)."""
    if _PROC:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime: fields 14 and 15 of stat(5)
    import psutil

    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system
