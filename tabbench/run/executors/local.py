"""``--executor local`` (today's ``--no-ray``): the jobs one after another, each in a forked child of this
process, with the same isolation, budgets and records as on Ray; for a machine where Ray cannot be installed
(e.g. a GPU box with torch but no Ray). Ray is never imported."""

from __future__ import annotations

import socket
from collections.abc import Iterator

from tabbench.run.executors.base import Executor, cuda_in_a_subprocess, preload
from tabbench.run.isolation import execute_isolated


class LocalExecutor(Executor):
    """Runs the jobs one after another, each in a forked child of this process (no Ray)."""

    name = "local"

    def __init__(self, address: str | None = None):
        super().__init__(address)
        self.refuse_address()

    def start(self, needs_gpu_check: bool = True) -> None:
        self.gpu_available = needs_gpu_check and cuda_in_a_subprocess()

    def run(self, queue, prepared, store, stop) -> Iterator[tuple]:
        """(job, record) as each job finishes. Not deferred: a Ctrl-C stops the run at once, the running job's
        child killed by execute_isolated (a model that checkpoints continues from there on the next run)."""
        node = socket.gethostname()
        for job in queue:  # each claimed as it is reached; waits where another run holds the rest
            stop.check()
            spec = prepared.registry[job.model].spec
            preload(spec.requires)
            dataset = prepared.dataset_of(job)
            record = execute_isolated(job, spec.factory, dataset.meta, dataset.X, dataset.y, prepared.split_of(job),
                                      checkpoint_dir=str(store.checkpoint_dir(job.key)))
            record["node"] = node
            yield job, record
