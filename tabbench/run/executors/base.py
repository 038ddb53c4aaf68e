"""The executor interface: where a run's pending jobs reach a process.

An executor is one execution mode (AMLB's runners are the model: one class per mode, chosen by one option). The
runner (tabbench/run/runner.py) drives every executor the same way, and only through this interface:

    executor = make_executor(name, address, plugin_files)   # tabbench/run/executors/__init__.py: by name
    with stop.deferred():
        executor.start(needs_gpu_check=...)     # acquire the processes; set gpu_available
    try:
        jobs = prepared.jobs(executor.gpu_available)
        queue = JobQueue(pending, store, claims, mark, stop)   # tabbench/run/claims.py
        for job, record in executor.run(queue, prepared, store, stop):
            ...                                 # the runner writes each record as it comes back
    finally:
        executor.close()

Every executor runs each job through the same fork isolation (tabbench/run/isolation.py: time and memory
budgets, crash records) and returns the records to the driver, which alone writes the store; where the job's
process lives is all that differs. A new execution mode is one ``Executor`` subclass, registered by name through
the ``register_executors`` hook (a plugin's, or the core's in this package's ``__init__``).
"""

from __future__ import annotations

import abc
import functools
import importlib
import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from typing import ClassVar

from tabbench.errors import TabbenchError

#: Imported before a job is forked, so the job's child starts with them loaded.
PRELOAD = ("sklearn.metrics",)
#: What a library imports only on first use, preloaded with it: torch's optimizers import torch._dynamo when the
#: first one is built (about 1 CPU-second), which every forked job of a torch model would otherwise pay again,
#: inside its fit time.
FIRST_USE = {"torch": ("torch._dynamo",)}


class ExecutorError(TabbenchError):
    """An executor cannot be chosen or set up as asked (an unknown name, an option it does not take)."""


class ExecutorLost(ExecutorError):
    """The processes an executor started died mid-run (a local Ray killed, by the OOM killer say): raised from
    ``run``; the driver keeps every record it wrote and says how to resume."""


class Executor(abc.ABC):
    """One execution mode of a run's jobs.

    ``gpu_available``: whether the jobs' processes see a GPU, known once ``start`` has returned (False before);
    a method whose ``device`` is ``auto`` resolves to cuda or cpu by it when the jobs are expanded, so it enters
    their keys.
    """

    #: The name ``--executor`` chooses it by (its key in ``load_executors()``).
    name: ClassVar[str]

    def __init__(self, address: str | None = None):
        """``address``: the cluster the jobs run on (``--address``); an executor that runs jobs on this machine
        alone refuses one (``refuse_address``)."""
        self.address = address
        self.gpu_available = False

    def refuse_address(self) -> None:
        """For an executor without a cluster: an address is a mistake the user must hear of, not ignore."""
        if self.address is not None:
            raise ExecutorError(f"--address {self.address}: the {self.name!r} executor runs the jobs on this "
                                "machine and connects to no cluster; drop --address, or choose --executor ray")

    @abc.abstractmethod
    def start(self, needs_gpu_check: bool = True) -> None:
        """Acquire the processes the jobs will run in (start or join a cluster, ...) and set ``gpu_available``.

        Called once, before the jobs are expanded, inside ``stop.deferred()`` (a first Ctrl-C never breaks into
        it). ``needs_gpu_check``: whether some method's device is ``auto``; an executor may skip a costly GPU
        check when it is False. Raises a TabbenchError, with the fix, where the mode cannot start here."""

    @abc.abstractmethod
    def run(self, queue, prepared, store, stop) -> Iterator[tuple]:
        """Run the jobs of ``queue`` and yield ``(job, record)`` as each one finishes, in any order.

        ``queue``: a ``tabbench.run.claims.JobQueue``, which claims each job as it is taken, so that runs sharing
        the results folder share the work. Take a job only when it can start (``queue.take()``, None when every
        job left is held by another live run; then, with nothing running, ``queue.wait()``) until ``queue.done``;
        a sequential executor simply iterates over it (``for job in queue``), which waits where needed.

        ``prepared``: the ``PreparedSuite`` the jobs were expanded from (registry, datasets, ``split_of(job)``);
        ``store``: where the job keeps its training state (``store.checkpoint_dir(job.key)``); the executor never
        writes records, the driver does. ``stop``: the run's ``StopRequest``; call ``stop.check()`` between jobs,
        at least once a second, so that Ctrl-C stops the run at a safe point. A job's own failure is a record
        (isolation.py makes it one); a lost process is a record with status ``lost``, never an exception."""

    def close(self) -> None:
        """Release what ``start`` acquired (called once, even after a failed or interrupted run). Nothing by
        default."""


def preload(modules=()) -> None:
    """Import ``PRELOAD`` and a model's ``requires`` in the process that forks the jobs, once, so that every
    forked child starts with them loaded instead of importing them again (with what they import on first use,
    ``FIRST_USE``)."""
    for module in (*PRELOAD, *modules):
        importlib.import_module(module)
        for lazy in FIRST_USE.get(module.split(".")[0], ()):
            importlib.import_module(lazy)


@functools.lru_cache(maxsize=None)
def cuda_in_a_subprocess() -> bool:
    """Whether torch sees a CUDA device, asked in a child process: CUDA initialised in this process would not
    survive the fork each job runs in. False where torch is not installed, or is PyTorch's CPU-only build (its
    version ends in +cpu, as the README's CPU route installs it): no child is needed to know. Asked once per
    process (a child that imports torch costs about 1.5 CPU-seconds)."""
    if importlib.util.find_spec("torch") is None:
        return False
    from importlib import metadata

    try:
        if metadata.version("torch").endswith("+cpu"):
            return False
    except metadata.PackageNotFoundError:  # importable without an installed distribution (a source tree): ask
        pass
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                           capture_output=True, text=True)
    return probe.stdout.strip() == "True"
