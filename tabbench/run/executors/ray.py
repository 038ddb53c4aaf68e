"""Executors: how a run's pending jobs reach a process. Both run each job through the same fork isolation
(tabbench/run/isolation.py: time and memory budgets, crash records) and hand the records back to the runner,
which writes them to the store; only where the job runs differs.

- ``RayExecutor`` (the default): a local Ray instance on loopback, or an existing cluster (--address). The
  driver puts each dataset into the object store once and submits one task per job with the model's
  resources; workers return small records, so a cluster needs no shared disk.
- ``LocalExecutor`` (``tabbench run --no-ray``): one job at a time in this process's forked children, for a
  machine where Ray cannot be installed (e.g. a GPU box with torch but no Ray). Ray is never imported.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from collections.abc import Iterator

from tabbench.errors import TabbenchError
from tabbench.run.isolation import execute_isolated
from tabbench.run.jobs import LOST, failure_record

#: Ray retries a job whose worker or node died this many times (infrastructure failures only).
INFRA_RETRIES = 2

#: Imported before a job is forked, so the job's child starts with them loaded.
_PRELOAD = ("sklearn.metrics",)


def _preload(modules) -> None:
    import importlib

    for module in (*_PRELOAD, *modules):
        importlib.import_module(module)


class LocalExecutor:
    """Runs the jobs one after another, each in a forked child of this process (no Ray)."""

    def __init__(self):
        self.gpu_available = False

    def start(self, needs_gpu_check: bool = True) -> None:
        self.gpu_available = needs_gpu_check and _cuda_in_a_subprocess()

    def close(self) -> None:
        pass

    def run(self, jobs, registry, loaded, store, stop) -> Iterator[tuple]:
        """(job, record) as each job finishes. Not deferred: a Ctrl-C stops the run at once, the running job's
        child killed by execute_isolated (a model that checkpoints continues from there on the next run)."""
        splits = {name: {(s.fold, s.repeat): s for s in split_list} for name, (_, _, split_list) in loaded.items()}
        node = socket.gethostname()
        for job in jobs:
            stop.check()
            spec = registry[job.model].spec
            _preload(spec.requires)
            _, dataset, _ = loaded[job.dataset]
            record = execute_isolated(job, spec.factory, dataset.meta, dataset.X, dataset.y,
                                      splits[job.dataset][(job.fold, job.repeat)],
                                      checkpoint_dir=str(store.checkpoint_dir(job.key)))
            record["node"] = node
            yield job, record


def _cuda_in_a_subprocess() -> bool:
    """Whether torch sees a CUDA device, asked in a child process: CUDA initialised in this process would not
    survive the fork each job runs in. False where torch is not installed."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return False
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                           capture_output=True, text=True)
    return probe.stdout.strip() == "True"


class RayMissing(TabbenchError, ImportError):
    """A run that needs Ray where Ray is not installed (a machine set up for --no-ray)."""


def _start_ray(address: str | None):
    """Connect to a cluster, or start a quiet local instance that listens on loopback only."""
    if address is None and not os.environ.get("RAY_ADDRESS"):
        # Must be set before ray is imported: pins every Ray socket of a local instance to 127.0.0.1.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError as exc:
        raise RayMissing("Ray is not installed: `pip install 'ray[default]'`, or run the jobs in this process's "
                         "children with `tabbench run --no-ray`") from exc

    if ray.is_initialized():
        return ray, False
    common = dict(logging_level=logging.ERROR, log_to_driver=False, configure_logging=True)
    if address or os.environ.get("RAY_ADDRESS"):
        ray.init(address=address or os.environ["RAY_ADDRESS"], **common)
    else:
        # address="local": always a new instance, never a cluster some earlier `ray start` left behind
        ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, **common)
    return ray, True


def _remote_execute(job, factory, meta, data, split, preload, checkpoint_dir):
    import ray

    _preload(preload)  # once per worker process; forked jobs inherit them
    X, y = data
    record = execute_isolated(job, factory, meta, X, y, split, checkpoint_dir=checkpoint_dir)
    record["node"] = ray.util.get_node_ip_address()
    return record


class RayExecutor:
    """Runs the jobs as Ray tasks, as many at once as the cluster's resources allow."""

    def __init__(self, address: str | None = None):
        self.address, self.ray, self.started, self.gpu_available = address, None, False, False

    def start(self, needs_gpu_check: bool = True) -> None:
        self.ray, self.started = _start_ray(self.address)
        self.gpu_available = self.ray.cluster_resources().get("GPU", 0) > 0

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()

    def run(self, jobs, registry, loaded, store, stop) -> Iterator[tuple]:
        """(job, record) as each job finishes, inside stop.deferred(): a first Ctrl-C is seen by
        stop.check() within a second (ray.wait's timeout). Jobs still running are not cancelled one by one (a
        forced cancel of a retriable task can abort the driver inside Ray): they end with the driver's Ray job."""
        with stop.deferred():
            yield from self._run(jobs, registry, loaded, store, stop)

    def _run(self, jobs, registry, loaded, store, stop) -> Iterator[tuple]:
        if not jobs:
            return
        ray = self.ray
        from ray import cloudpickle

        for entry in registry.values():  # a model from a plugin file travels by value: workers can't import it
            module = sys.modules.get(entry.spec.factory.__module__)
            if module is not None and module.__name__.startswith("tabbench_plugin_file_"):
                cloudpickle.register_pickle_by_value(module)

        data_refs = {name: ray.put((dataset.X, dataset.y)) for name, (_, dataset, _) in loaded.items()}
        splits = {name: {(s.fold, s.repeat): s for s in split_list} for name, (_, _, split_list) in loaded.items()}
        remote = ray.remote(_remote_execute)
        capacity = max(4, 2 * int(ray.cluster_resources().get("CPU", 1)))
        queue, in_flight = list(reversed(jobs)), {}

        def submit(job):
            spec = registry[job.model].spec
            # Ray retries only system failures (a lost worker or node), never the job's own exceptions,
            # which execute_isolated records instead of raising.
            options = {**job.resources, "max_retries": INFRA_RETRIES, "retry_exceptions": False}
            if job.resources.get("num_gpus"):
                options["max_calls"] = 1  # a fresh worker per GPU job: memory is returned and measured cleanly
            _, dataset, _ = loaded[job.dataset]
            ref = remote.options(**options).remote(job, spec.factory, dataset.meta, data_refs[job.dataset],
                                                   splits[job.dataset][(job.fold, job.repeat)], spec.requires,
                                                   str(store.checkpoint_dir(job.key)))
            in_flight[ref] = job

        while queue or in_flight:
            stop.check()
            while queue and len(in_flight) < capacity:
                submit(queue.pop())
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=1.0)
            for ref in ready:
                job = in_flight.pop(ref)
                try:
                    record = ray.get(ref)
                except ray.exceptions.RayError as exc:  # worker or node lost, retries spent
                    record = failure_record(job, LOST, f"{exc}"[:2000], f"{type(exc).__module__}.{type(exc).__name__}")
                yield job, record
