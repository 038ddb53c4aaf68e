"""``--executor ray`` (the default): a local Ray instance on loopback, or an existing cluster (``--address``,
``$RAY_ADDRESS``). The driver puts each dataset into the object store once and submits one task per job with the
model's resources, as many at once as the cluster's resources allow; workers return small records, so a cluster
needs no shared disk. Only a worker or node lost is retried (``INFRA_RETRIES``), never a job's own failure.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator

from tabbench.run.executors.base import Executor, ExecutorError, ExecutorLost, preload
from tabbench.run.isolation import execute_isolated
from tabbench.run.jobs import LOST, failure_record

#: Ray retries a job whose worker or node died this many times (infrastructure failures only).
INFRA_RETRIES = 2


#: How long `--address` waits for the cluster's head to answer before giving up (seconds; the environment variable
#: overrides it): long enough for a head that is still starting (a batch script's), far short of Ray's own retries.
CONNECT_TIMEOUT_S, CONNECT_TIMEOUT_ENV = 60.0, "TABBENCH_RAY_CONNECT_TIMEOUT"
#: What to check when no cluster answers.
CHECK = ("Check that its head is running (`ray status` on the head node), that the address is the one `ray start "
         "--head` printed (host and port, default 6379) and reachable from here (firewall), and, where the cluster "
         "uses token authentication, that RAY_AUTH_MODE and RAY_AUTH_TOKEN here match the head's. Without --address "
         "(and RAY_ADDRESS unset) the run starts its own Ray on this machine")


def wait_for_head(address: str) -> None:
    """Wait, saying so, until something listens at the cluster's address (``host:port`` or ``ray://host:port``),
    at most TABBENCH_RAY_CONNECT_TIMEOUT seconds (default 60); an ExecutorError saying what to check after that.
    Ray's own connection attempts to an address where nothing listens go on for about 14 minutes."""
    import socket
    import time

    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():  # "auto" and other forms: Ray resolves them itself
        return
    timeout = float(os.environ.get(CONNECT_TIMEOUT_ENV) or CONNECT_TIMEOUT_S)
    deadline, said, error = time.monotonic() + timeout, False, None
    while True:
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=2).close()
            return
        except OSError as exc:
            error = exc
        if time.monotonic() >= deadline:
            break
        if not said:
            print(f"Waiting for the Ray cluster at {address} to answer (up to {timeout:g} s, "
                  f"{CONNECT_TIMEOUT_ENV})...", file=sys.stderr, flush=True)
            said = True
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
    raise ExecutorError(f"no Ray cluster answered at {address} within {timeout:g} s "
                        f"({error.strerror or error}). {CHECK}")


class RayMissing(ExecutorError, ImportError):
    """A run that needs Ray where Ray is not installed (a machine set up for --executor local)."""


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
                         "children with `tabbench run --executor local` (or `tabbench run --no-ray`)") from exc

    if ray.is_initialized():
        return ray, False
    common = dict(logging_level=logging.ERROR, log_to_driver=False, configure_logging=True)
    if address or os.environ.get("RAY_ADDRESS"):
        address = address or os.environ["RAY_ADDRESS"]
        wait_for_head(address)
        try:
            ray.init(address=address, **common)
        except Exception as exc:  # noqa: BLE001 - Ray's own failure to join: said with what to check, no traceback
            raise ExecutorError(f"could not join the Ray cluster at {address}: {type(exc).__name__}: "
                                f"{str(exc)[:500]}. {CHECK}") from None
    else:
        # address="local": always a new instance, never a cluster some earlier `ray start` left behind
        ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, **common)
    return ray, True


def _remote_execute(job, factory, meta, data, split, modules, checkpoint_dir):
    import ray

    preload(modules)  # once per worker process; forked jobs inherit them
    X, y = data
    record = execute_isolated(job, factory, meta, X, y, split, checkpoint_dir=checkpoint_dir)
    record["node"] = ray.util.get_node_ip_address()
    return record


class RayExecutor(Executor):
    """Runs the jobs as Ray tasks, as many at once as the cluster's resources allow."""

    name = "ray"

    def __init__(self, address: str | None = None):
        super().__init__(address)
        self.ray, self.started = None, False

    def start(self, needs_gpu_check: bool = True) -> None:
        self.ray, self.started = _start_ray(self.address)
        self.gpu_available = self.ray.cluster_resources().get("GPU", 0) > 0

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()

    def _check_alive(self) -> None:
        """ExecutorLost where the local Ray this run started has lost its raylet or GCS (killed, out of memory):
        Ray would end the driver about 15 s later, from C++, with no word of what was kept. A cluster's
        (``--address``) lost nodes are Ray's to handle (INFRA_RETRIES)."""
        if not self.started or self.address or os.environ.get("RAY_ADDRESS"):
            return
        node = getattr(self.ray._private.worker, "_global_node", None)
        dead = [(kind, process.returncode) for kind, process in (node.dead_processes() if node else ())
                if kind in ("raylet", "gcs_server")]
        if dead:
            self.started = False  # nothing left to shut down cleanly
            kind, code = dead[0]
            raise ExecutorLost(f"the local Ray stopped mid-run: its {kind} process exited (code {code}; -9 is a "
                               "kill, by the kernel's out-of-memory killer for one)")

    def run(self, queue, prepared, store, stop) -> Iterator[tuple]:
        """(job, record) as each job finishes, inside stop.deferred(): a first Ctrl-C is seen by
        stop.check() within a second (ray.wait's timeout, JobQueue.wait's). Jobs still running are not cancelled
        one by one (a forced cancel of a retriable task can abort the driver inside Ray): they end with the
        driver's Ray job."""
        with stop.deferred():
            yield from self._run(queue, prepared, store, stop)

    def _run(self, queue, prepared, store, stop) -> Iterator[tuple]:
        ray = self.ray
        from ray import cloudpickle

        # a model from a plugin file travels by value: workers can't import it
        for entry in prepared.registry.values():
            module = sys.modules.get(entry.spec.factory.__module__)
            if module is not None and module.__name__.startswith("tabbench_plugin_file_"):
                cloudpickle.register_pickle_by_value(module)

        data_refs = {name: ray.put((dataset.X, dataset.y)) for name, (_, dataset, _) in prepared.loaded.items()}
        remote = ray.remote(_remote_execute)
        capacity = max(4, 2 * int(ray.cluster_resources().get("CPU", 1)))
        in_flight = {}

        def submit(job):
            spec = prepared.registry[job.model].spec
            # Ray retries only system failures (a lost worker or node), never the job's own exceptions,
            # which execute_isolated records instead of raising.
            options = {**job.resources, "max_retries": INFRA_RETRIES, "retry_exceptions": False}
            if job.resources.get("num_gpus"):
                options["max_calls"] = 1  # a fresh worker per GPU job: memory is returned and measured cleanly
            ref = remote.options(**options).remote(job, spec.factory, prepared.dataset_of(job).meta,
                                                   data_refs[job.dataset], prepared.split_of(job), spec.requires,
                                                   str(store.checkpoint_dir(job.key)))
            in_flight[ref] = job

        while not queue.done or in_flight:
            stop.check()
            # claimed only when submitted: a run beside this one takes the jobs this one has not reached
            while len(in_flight) < capacity and (job := queue.take()) is not None:
                submit(job)
            if not in_flight:
                if not queue.done:  # every job left is held by another live run
                    queue.wait()
                continue
            self._check_alive()
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=1.0)
            for ref in ready:
                job = in_flight.pop(ref)
                try:
                    record = ray.get(ref)
                except ray.exceptions.RayError as exc:  # worker or node lost, retries spent
                    record = failure_record(job, LOST, f"{exc}"[:2000], f"{type(exc).__module__}.{type(exc).__name__}")
                yield job, record
