"""Runs a suite's jobs on Ray: local by default (loopback only), or an existing cluster (--address).

The driver loads each dataset once, puts it into the object store once, submits one task per job
with the model's resources, handles results as they finish and writes every record itself (workers
return small records), so a cluster needs no shared disk.
"""

from __future__ import annotations

import logging
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tabbench.data.cache import DataPaths
from tabbench.data.dataset import load_dataset
from tabbench.data.splits import make_splits
from tabbench.errors import TabbenchError
from tabbench.interrupts import StopRequest
from tabbench.jobs import LOST, OK, execute_isolated, failure_record, plan
from tabbench.plugins import load_models
from tabbench.store import Store
from tabbench.suite import Suite, check_models

#: Ray retries a job whose worker or node died this many times (infrastructure failures only).
INFRA_RETRIES = 2


@dataclass
class RunOptions:
    # A run writes to runs/ (git-ignored); results/ holds the published folders it is checked against.
    results: Path = Path("runs")
    address: str | None = None
    force: bool = False
    retry_failed: bool = False
    models: tuple = ()  # restrict to these method labels
    datasets: tuple = ()  # restrict to these dataset names
    folds: tuple = ()  # restrict to these fold indices
    plugin_files: tuple = ()
    data_paths: DataPaths | None = None
    progress: bool = True
    report: bool = False  # the leaderboard's tests, figures and LaTeX too (the `report` extra), as `tabbench leaderboard`


@dataclass
class RunSummary:
    planned: int = 0
    skipped: int = 0
    done: int = 0
    failures: Counter = field(default_factory=Counter)
    results_dir: Path | None = None

    @property
    def failed(self) -> int:
        return sum(self.failures.values())


class RunError(TabbenchError):
    """The run could not start (bad suite, data or plugin); nothing was computed."""


def load_data(suite: Suite, paths: DataPaths, only=()) -> dict:
    """name -> (config, Dataset, splits) for every dataset, loaded before any job starts."""
    from tabbench.data.cache import DownloadError
    from tabbench.data.dataset import DataError
    from tabbench.data.sources import SourceError

    loaded, errors = {}, []
    for cfg in suite.datasets:
        if only and cfg.name not in only:
            continue
        try:
            dataset = load_dataset(cfg, paths)
            # dataset.split: the suite's, or a mirror stand-in's own (e.g. a subset's own test file)
            loaded[cfg.name] = (cfg, dataset, make_splits(dataset, dataset.split))
        except (DataError, SourceError, DownloadError, OSError, ValueError) as exc:
            errors.append(f"{suite.path}: dataset {cfg.name!r}: {exc}")
    if errors:
        raise RunError("\n".join(errors))
    return loaded


def model_refusals(suite: Suite, registry: dict, loaded: dict, methods=()) -> list[str]:
    """Each model's pre-run check (``ModelSpec.check``) on every dataset and configuration it would run
    (restricted to ``methods`` when given), before anything starts: one line per refusal, naming the
    suite file, the method and the dataset, then the model's message (what it would cost, what to set)."""
    from tabbench.jobs import trial_configs
    from tabbench.spec import SplitSizes

    out = []
    for name, (cfg, dataset, splits) in loaded.items():
        sizes = SplitSizes(*(max(len(getattr(s, part)) for s in splits) for part in ("train", "val", "test")))
        for entry in suite.models:
            spec = registry[entry.model].spec
            if spec.check is None or dataset.meta.task not in spec.tasks or (methods and entry.label not in methods):
                continue
            dataset_params = (cfg.model_params or {}).get(entry.label, {})
            messages = [spec.problem(dataset.meta, sizes, {**params, **dataset_params}, suite.budget.time_s)
                        for _, params in trial_configs(entry, spec)]
            out += [f"{suite.path}: models.{entry.label} on dataset {name!r}: {message}"
                    for message in dict.fromkeys(m for m in messages if m)]
    return out


def _start_ray(address: str | None):
    """Connect to a cluster, or start a quiet local instance that listens on loopback only."""
    if address is None and not os.environ.get("RAY_ADDRESS"):
        # Must be set before ray is imported: pins every Ray socket of a local instance to 127.0.0.1.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    if ray.is_initialized():
        return ray, False
    common = dict(logging_level=logging.ERROR, log_to_driver=False, configure_logging=True)
    if address or os.environ.get("RAY_ADDRESS"):
        ray.init(address=address or os.environ["RAY_ADDRESS"], **common)
    else:
        # address="local": always a new instance, never a cluster some earlier `ray start` left behind
        ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, **common)
    return ray, True


#: Imported by each worker before it forks a job, so the job's child starts with them loaded.
_PRELOAD = ("sklearn.metrics",)


def _remote_execute(job, factory, meta, data, split, preload, checkpoint_dir):
    import importlib

    import ray

    for module in (*_PRELOAD, *preload):  # once per worker process; forked jobs inherit them
        importlib.import_module(module)
    X, y = data
    record = execute_isolated(job, factory, meta, X, y, split, checkpoint_dir=checkpoint_dir)
    record["node"] = ray.util.get_node_ip_address()
    return record


def run_suite(suite: Suite, options: RunOptions) -> RunSummary:
    """Run the suite's pending jobs and write its leaderboard.

    SIGINT (Ctrl-C) at any phase stops the run: every finished job's record is kept, the message
    says how to resume, and KeyboardInterrupt is raised (see tabbench.interrupts)."""
    store = Store(suite.results_dir(options.results))
    summary = RunSummary(results_dir=store.dir)
    with StopRequest() as stop:
        try:
            return _run(suite, options, store, summary, stop)
        except KeyboardInterrupt:
            print(f"\nInterrupted: {summary.done} jobs finished and are saved in {store.path}. Run the same "
                  "command again to resume; finished jobs are skipped.", file=sys.stderr)
            raise


def _run(suite: Suite, options: RunOptions, store: Store, summary: RunSummary, stop: StopRequest) -> RunSummary:
    stop.pause_point("load")
    registry = load_models(tuple(options.plugin_files) + tuple(suite.plugins))
    check_models(suite, registry)
    if options.models:
        unknown = set(options.models) - {m.label for m in suite.models}
        if unknown:
            raise RunError(f"--models names {sorted(unknown)}, not in {suite.path}; its models: "
                           f"{', '.join(m.label for m in suite.models)}")
    if options.datasets:
        unknown = set(options.datasets) - {d.name for d in suite.datasets}
        if unknown:
            raise RunError(f"--datasets names {sorted(unknown)}, not in {suite.path}; its datasets: "
                           f"{', '.join(d.name for d in suite.datasets)}")
    paths = options.data_paths or DataPaths.from_env(base=suite.path.parent)
    loaded = load_data(suite, paths, options.datasets)
    refusals = model_refusals(suite, registry, loaded, options.models)
    if refusals:
        raise RunError("\n".join(refusals))

    with stop.deferred():  # a first Ctrl-C never breaks into Ray start; checked once Ray is up
        stop.pause_point("ray-start")
        ray, started = _start_ray(options.address)
    try:
        stop.check()
        gpu_available = ray.cluster_resources().get("GPU", 0) > 0
        jobs = plan(suite, registry, loaded, gpu_available)
        if options.models:
            jobs = [j for j in jobs if j.method in options.models]
        if options.folds:
            jobs = [j for j in jobs if j.fold in options.folds]
        summary.planned = len(jobs)
        if not options.force:
            existing = store.latest()
            keep = lambda r: r is None or (options.retry_failed and r.get("status") != OK)  # noqa: E731
            pending = [j for j in jobs if keep(existing.get(j.key))]
        else:
            pending = jobs
        summary.skipped = len(jobs) - len(pending)
        with stop.deferred():
            _execute_all(ray, pending, registry, loaded, store, summary, options.progress, stop)
    finally:
        if started:
            with stop.deferred():
                ray.shutdown()
    stop.check()
    from tabbench.report.leaderboard import write_leaderboard

    stop.pause_point("leaderboard")
    write_leaderboard(store.dir, suite.published, report=options.report)
    stop.check()  # a SIGINT whose KeyboardInterrupt something swallowed still stops the run
    return summary


def _execute_all(ray, jobs, registry, loaded, store: Store, summary: RunSummary, progress: bool, stop: StopRequest):
    if not jobs:
        return
    from tqdm import tqdm

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
    bar = tqdm(total=len(jobs), disable=not progress, unit="job", dynamic_ncols=True, file=sys.stderr)

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

    # Called inside stop.deferred(): a first Ctrl-C is seen by stop.check() within a second (ray.wait's
    # timeout), and every result received is written. Jobs still running are not cancelled one by one (a forced
    # cancel of a retriable task can abort the driver inside Ray): they end with the driver's Ray job.
    try:
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
                stop.pause_point("record")
                store.append(record)
                if record["status"] == OK:  # a failed job keeps its checkpoint: a re-run continues from it
                    store.remove_checkpoint(job.key)
                summary.done += 1
                if record["status"] != OK:
                    summary.failures[record["status"]] += 1
                bar.update(1)
                bar.set_postfix(done=summary.done, failed=summary.failed, skipped=summary.skipped, refresh=False)
    finally:
        bar.close()
