"""Fork isolation: a job runs in a forked child, so that its time and memory budgets can be enforced from
outside and a crash (segfault, os._exit, kill) becomes a record instead of taking the worker down. Used by
every executor (tabbench/run/executors/)."""

from __future__ import annotations

import os
import pickle
import select
import signal
import sys
import time

from tabbench.clock import CPU, CpuLimit, ask_long_slice, process_cpu_seconds, reader, wall_ceiling
from tabbench.run.execute import execute
from tabbench.run.jobs import CRASH, OOM, TIMEOUT, Job, failure_record
from tabbench.measure import private_kib, proc_status_kib
from tabbench.threads import THREAD_VARIABLES


def _die_with_parent():
    """Linux: the kernel kills this process when its parent (the Ray worker) dies."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


#: glibc's malloc in a job's process: allocations up to MMAP_MAX_BYTES come from its heap, and freed memory stays
#: there for the next allocation instead of going back to the system. By default glibc maps each allocation above a
#: (moving) threshold fresh and gives freed memory back, so a training step that allocates and frees the same
#: activations every step takes a page fault per 4 KiB of them: NPT's smallest budget size on Breast Cancer (e 8,
#: 2 layers) took 5,200 faults a step and 15% longer steps (benchmarks/README.md, "allocator"). The job's peak
#: resident memory is what it was (what it frees is reused, not grown); its resident memory between peaks stays
#: at the peak.
MMAP_MAX_BYTES = 32 << 20


def steady_allocator() -> None:
    """Keep freed memory in the job's heap (see MMAP_MAX_BYTES); a no-op off glibc."""
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # malloc.h
    mallopt(M_MMAP_THRESHOLD, MMAP_MAX_BYTES)
    mallopt(M_TRIM_THRESHOLD, 2**31 - 1)


def _limit_threads(n: int) -> None:
    """Run the job's native thread pools (BLAS, OpenMP, torch) on the CPUs Ray gave it, not every core."""
    for var in THREAD_VARIABLES:
        os.environ[var] = str(n)  # for libraries the job imports itself
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(n)
    from threadpoolctl import threadpool_limits

    threadpool_limits(n)  # for those already loaded (numpy's BLAS)


class _MemoryWatch:
    """Is a job's own memory over its budget? Its private pages (smaps_rollup) decide, but reading them walks
    the process's whole address space (~1-20 ms for a job of a few GB, ~15% of a core at the pipe's 50 ms poll);
    its resident size (one line of /proc/<pid>/status, ~0.01 ms) is an upper bound of them, so the private
    pages are read only when the resident size is over the budget, and then at most every ``every_s``."""

    def __init__(self, pid: int, budget_mb: float, every_s: float = 0.5):
        self.pid, self.budget_kib, self.every_s = pid, budget_mb * 1024, every_s
        self.next_private, self.private_mb = 0.0, 0.0

    def over(self, now: float) -> bool:
        if (proc_status_kib("VmRSS", self.pid) or 0) <= self.budget_kib or now < self.next_private:
            return False
        self.next_private = now + self.every_s
        self.private_mb = (private_kib(self.pid) or 0) / 1024
        return self.private_mb > self.budget_kib / 1024


def execute_isolated(job: Job, factory, meta, X, y, split, poll_s: float = 0.05, checkpoint_dir=None) -> dict:
    """Run ``execute`` in a forked child so that the job's limits can be enforced from outside.

    The child inherits the data copy-on-write (nothing is serialised). The parent enforces the
    job's time budget on the job's clock (``job.clock``, tabbench/clock.py: its own CPU seconds, read from outside,
    with a wall-clock ceiling; or wall seconds) (kill -> ``timeout``) and host memory budget (the child's own resident memory
    polled, kill -> ``oom``: pages it still shares copy-on-write with its parent are not the job's, so a
    large driver, as under ``--no-ray``, does not eat the budget), and turns a child that dies without a record (segfault, os._exit, killed) into
    ``crash``. Where fork is unavailable the job runs in-process without enforced limits.
    """
    if not hasattr(os, "fork"):
        return execute(job, factory, meta, X, y, split, checkpoint_dir)
    read_fd, write_fd = os.pipe()
    budget = job.time_budget_s
    on_cpu = job.clock == CPU and budget is not None
    limit = CpuLimit(budget) if on_cpu else None  # the budget, raised by a job that planned its work
    started = time.monotonic()  # wall time: the time budget counts from here (cpu clock: from the child's start)
    pid = os.fork()
    if pid == 0:  # the child: run, send the record, leave without running the parent's exit handlers
        code = 0
        try:
            os.close(read_fd)
            _die_with_parent()
            steady_allocator()
            _limit_threads(max(1, int(job.resources.get("num_cpus") or 1)))
            if job.clock == CPU:
                ask_long_slice()  # fewer switches beside another busy process: less CPU time lost (clock.py)
            # the child's CPU time starts at its fork: its own budget's reading at start is taken here
            began = reader(job.clock)() if job.clock == CPU else started
            payload = pickle.dumps(execute(job, factory, meta, X, y, split, checkpoint_dir, began, limit))
            view = memoryview(payload)
            while view:
                view = view[os.write(write_fd, view):]
        except BaseException:
            code = 70
        finally:
            os._exit(code)
    os.close(write_fd)
    chunks, status = [], None
    memory = _MemoryWatch(pid, job.memory_budget_mb) if job.memory_budget_mb is not None else None
    ceiling = wall_ceiling(budget) if on_cpu else budget
    used_cpu = 0.0
    try:
        while True:
            ready, _, _ = select.select([read_fd], [], [], poll_s)
            if ready:
                chunk = os.read(read_fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
                continue
            now = time.monotonic()
            if on_cpu:
                used_cpu = process_cpu_seconds(pid) or used_cpu
            if budget is not None and (now - started > ceiling or (on_cpu and used_cpu > limit.seconds)):
                status = TIMEOUT
            elif memory is not None and memory.over(now):
                status = OOM
            if status is not None:
                os.kill(pid, signal.SIGKILL)
                break
    except BaseException:  # e.g. Ctrl-C in a driver that runs jobs itself (--no-ray): the job stops with it
        os.kill(pid, signal.SIGKILL)
        raise
    finally:
        os.close(read_fd)
        _, wait_status = os.waitpid(pid, 0)
    elapsed = time.monotonic() - started
    if status == TIMEOUT and on_cpu and used_cpu > limit.seconds:
        planned = (f"; its model planned its work, so it may run to {limit.seconds:g} (tabbench/clock.py, "
                   "PLANNED_OVERRUN)" if limit.raised else "")
        return failure_record(job, TIMEOUT, f"killed after {used_cpu:.1f} CPU-s ({elapsed:.1f} s elapsed): the "
                              f"job's time budget is {budget:g} CPU-s (suite budget.time_s, clock cpu){planned}")
    if status == TIMEOUT and on_cpu:
        return failure_record(job, TIMEOUT, f"killed after {elapsed:.1f} s elapsed with {used_cpu:.1f} CPU-s used: "
                              f"past the wall-clock ceiling of a {budget:g} CPU-s budget ({ceiling:g} s: a job "
                              "that hangs or is starved of CPU; tabbench/clock.py)")
    if status == TIMEOUT:
        return failure_record(job, TIMEOUT, f"killed after {elapsed:.1f} s: the job's time budget is "
                              f"{job.time_budget_s:g} s (suite budget.time_s)")
    if status == OOM:
        return failure_record(job, OOM, f"killed at {memory.private_mb:.0f} MiB resident (its own pages): the job's memory budget is "
                              f"{job.memory_budget_mb:g} MiB (suite budget.memory_mb)")
    if chunks and os.WIFEXITED(wait_status) and os.WEXITSTATUS(wait_status) == 0:
        return pickle.loads(b"".join(chunks))
    if os.WIFSIGNALED(wait_status):
        sig = os.WTERMSIG(wait_status)
        how = f"killed by signal {sig} ({signal.Signals(sig).name})"
        return failure_record(job, CRASH, f"the job's process was {how} after {elapsed:.1f} s", "signal")
    return failure_record(job, CRASH, f"the job's process exited with code {os.WEXITSTATUS(wait_status)} "
                          f"after {elapsed:.1f} s without a result", "exit")
