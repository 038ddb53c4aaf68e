"""Runs a suite: prepare it (``prepare_suite``, the one preparation ``tabbench plan`` and ``tabbench probe`` use
too: registry, selection, every dataset loaded and split, the models' pre-run checks), expand the jobs, select
(--models, --datasets, --folds) and skip those already done, hand the rest to the executor chosen by name
(tabbench/run/executors/: ``ray`` by default, ``local``, or a plugin's) one claimed job at a time
(tabbench/run/claims.py: runs sharing a results folder share its jobs), write every record as it comes back, then
call the ``after_run`` hook, where the report writes the leaderboard (the run imports nothing of the report).
"""

from __future__ import annotations

import functools
import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from tabbench.clock import WALL, clock_of
from tabbench.data.cache import DataPaths
from tabbench.data.dataset import load_dataset
from tabbench.data.splits import make_splits
from tabbench.errors import TabbenchError
from tabbench.run.claims import Claims, JobQueue
from tabbench.run.executors import DEFAULT, make_executor
from tabbench.run.executors.base import ExecutorLost
from tabbench.run.expand import Selection, expand
from tabbench.suite.trials import method_params
from tabbench.run.interrupts import StopRequest
from tabbench.run.jobs import OK
from tabbench.plugins import get_plugin_manager, load_models
from tabbench.store import Store
from tabbench.suite import Suite, check_models


@dataclass
class RunOptions:
    # A run writes to runs/ (git-ignored); results/ holds the published folders it is checked against.
    results: Path = Path("runs")
    executor: str = DEFAULT  # where the jobs run, by name (tabbench.run.executors.load_executors): ray, local, ...
    address: str | None = None  # the Ray cluster to run on (default: $RAY_ADDRESS, else a local Ray)
    force: bool = False
    retry_failed: bool = False
    # why --force / --retry-failed re-run jobs that have a record: each re-run record names it (``rerun``)
    rerun_reason: str | None = None
    force_only: tuple = ()  # with force: only jobs whose newest record is one of these (FORCE_ONLY); () every job
    models: tuple = ()  # restrict to these method labels
    datasets: tuple = ()  # restrict to these dataset names
    folds: tuple = ()  # restrict to these fold indices
    plugin_files: tuple = ()
    data_paths: DataPaths | None = None
    checkpoints: Path | None = None  # root for unfinished jobs' training state (default: the suite folder's)
    progress: bool = True
    report: bool = False  # the leaderboard's tests, figures and LaTeX too (the `report` extra), as `tabbench leaderboard`
    # run the jobs that can run when some datasets do not load or a model refuses some jobs (else the run stops)
    skip_refused: bool = False
    cpu: str | None = None  # run only on the kind of CPU of this id (tabbench.measure.cpu_id); None: on any

    def selection(self) -> Selection:
        return Selection(tuple(self.models), tuple(self.datasets), tuple(self.folds))

    def rerun(self) -> Rerun:
        return Rerun(self.force, self.retry_failed, self.rerun_reason, tuple(self.force_only))


@dataclass(frozen=True)
class Rerun:
    """Which of a suite's jobs that have a record a run does again: ``tabbench run``'s and ``tabbench plan``'s one
    rule. None without ``force`` or ``retry_failed`` (a failed record too: a job runs where it has no record);
    ``retry_failed``: those whose newest record failed; ``force``: every one of them (those of ``only``'s kinds,
    FORCE_ONLY, where given) but the jobs a forced run for the same ``reason`` already ran, so that the same forced
    command resumes where it stopped."""

    force: bool = False
    retry_failed: bool = False
    reason: str | None = None
    only: tuple = ()

    def pending(self, jobs: list, existing: dict) -> list:
        """The ``jobs`` a run does, ``existing``: key -> the job's newest record."""
        if self.force:
            return [j for j in jobs if not ran_for(existing.get(j.key), self.reason)
                    and is_one_of(existing.get(j.key), self.only)]
        return [j for j in jobs if existing.get(j.key) is None
                or (self.retry_failed and existing[j.key].get("status") != OK)]


@dataclass
class RunSummary:
    planned: int = 0
    skipped: int = 0
    done: int = 0
    elsewhere: int = 0  # pending jobs that another run on the same folder recorded while this one ran
    failures: Counter = field(default_factory=Counter)
    results_dir: Path | None = None
    left_out: list = field(default_factory=list)  # what --skip-refused left out (PreparedSuite.left_out)
    stopped: int = 0  # jobs of this run that their time budget cut short (info.stopped_by_time_budget)
    failed_records: list = field(default_factory=list)  # of each failed job: method, dataset, status, error_message

    @property
    def failed(self) -> int:
        return sum(self.failures.values())

    def failure_lines(self, most: int = 12) -> list[str]:
        """What failed and why: a line per method, dataset and status (tabbench.run.jobs.failure_rows)."""
        from tabbench.run.jobs import failure_rows

        rows = failure_rows(self.failed_records)
        lines = [f"  {method} on {dataset}: {n} {status}: {why}" for method, dataset, status, n, why in rows[:most]]
        return lines + ([f"  ... and {len(rows) - most} more; each record's error_message says why"]
                        if len(rows) > most else [])


#: The option of `tabbench run` that runs what can run when some datasets do not load or some jobs are refused.
SKIP_REFUSED = "--skip-refused"


class RunError(TabbenchError):
    """A suite cannot be run (or probed, or planned): a bad selection, dataset or plugin, or a model refusing its
    jobs; nothing was computed."""


def load_data(suite: Suite, paths: DataPaths, only=()) -> dict:
    """name -> (config, Dataset, splits) for every dataset, loaded before any job starts."""
    from tabbench.data.cache import DownloadError
    from tabbench.data.dataset import DataError
    from tabbench.data.source import SourceError

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
        except Exception as exc:  # noqa: BLE001 - a source's own failure is its dataset's failure, not the run's
            errors.append(f"{suite.path}: dataset {cfg.name!r}: data source {_source_of(cfg)} failed: "
                          f"{type(exc).__name__}: {exc} (a source reports a problem as SourceError naming the field "
                          "at fault; anything else is a bug in the source or its service: tell its authors)")
    if errors:
        raise RunError("\n".join(errors))
    return loaded


def _source_of(cfg) -> str:
    """'NAME (from FILE)': a dataset's source and the file its class is defined in (a plugin's or tabbench's)."""
    cls = type(cfg.source)
    module = sys.modules.get(cls.__module__)
    where = getattr(module, "__file__", None) or cls.__module__
    return f"{getattr(cls, 'name', cls.__name__)!r} (from {where})"


@dataclass(frozen=True)
class Refusal:
    """A model's pre-run refusal of one method's jobs on one dataset; ``str()`` is the line that explains it."""

    method: str
    dataset: str
    message: str  # the suite file, the method and the dataset, then the model's message

    def __str__(self) -> str:
        return self.message


def model_refusals(suite: Suite, registry: dict, loaded: dict, methods=(), gpu_available: bool | None = None,
                   ) -> list[Refusal]:
    """Each model's pre-run check (``ModelSpec.check``) on every dataset and configuration it would run
    (restricted to ``methods`` when given), before anything starts: one ``Refusal`` per message, naming the
    suite file, the method and the dataset, then the model's message (what it would cost, what to set).
    ``gpu_available`` resolves a ``device: auto`` (None: the model asks this machine)."""
    from tabbench.spec import SplitSizes

    out = []
    for name, (cfg, dataset, splits) in loaded.items():
        sizes = SplitSizes(*(max(len(getattr(s, part)) for s in splits) for part in ("train", "val", "test")))
        for entry in suite.models:
            spec = registry[entry.model].spec
            if spec.check is None or dataset.meta.task not in spec.tasks or (methods and entry.label not in methods):
                continue
            messages = [spec.problem(dataset.meta, sizes, params, suite.budget.time_s)
                        for _, _, params in method_params(entry, spec, cfg, gpu_available)]
            out += [Refusal(entry.label, name, f"{suite.path}: models.{entry.label} on dataset {name!r}: {message}")
                    for message in dict.fromkeys(m for m in messages if m)]
    return out


@dataclass(frozen=True)
class PreparedSuite:
    """A suite checked against its registry, with every selected dataset loaded and split."""

    suite: Suite
    registry: dict  # model name -> tabbench.plugins.RegisteredModel
    selection: Selection
    loaded: dict  # dataset name -> (DatasetConfig, Dataset, splits) for every selected dataset that loaded
    unloaded: dict = field(default_factory=dict)  # dataset name -> why it could not be loaded
    refusals: list = field(default_factory=list)  # the models' pre-run refusals (``model_refusals``)
    # (dataset, fold, repeat) -> Split: built here once, for every executor and the probe
    splits: dict = field(init=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "splits", {(name, s.fold, s.repeat): s
                                            for name, (_, _, splits) in self.loaded.items() for s in splits})

    def dataset_of(self, job):
        """The loaded ``Dataset`` a job runs on."""
        return self.loaded[job.dataset][1]

    def split_of(self, job):
        """The ``Split`` a job runs on."""
        return self.splits[(job.dataset, job.fold, job.repeat)]

    @property
    def device_auto(self) -> bool:
        """Whether some method's device is left to the machine ('auto'), so that the executor must say if a GPU
        is there before the jobs are expanded."""
        return _device_auto(self.suite, self.registry)

    def _expanded(self, gpu_available: bool) -> list:
        return self.selection.select(expand(self.suite, self.registry, self.loaded, gpu_available))

    def _refused(self, job) -> bool:
        return any((r.method, r.dataset) == (job.method, job.dataset) for r in self.refusals)

    def jobs(self, gpu_available: bool) -> list:
        """The selected jobs that can run (the refused ones left out), expanded as every command expands them
        (same keys); ``gpu_available`` resolves a ``device: auto``."""
        return [job for job in self._expanded(gpu_available) if not self._refused(job)]

    def on_gpus(self, gpu_available: bool) -> "PreparedSuite":
        """The same suite with its refusals checked for a machine that has a GPU, or has none
        (``device: auto`` resolved so): what a plan for another machine (``tabbench plan --gpus``) starts from."""
        return replace(self, refusals=model_refusals(self.suite, self.registry, self.loaded, self.selection.models,
                                                     gpu_available))

    def refused_jobs(self, gpu_available: bool) -> list:
        """The selected jobs a model's pre-run check refused (``refusals``): never run, never planned."""
        return [job for job in self._expanded(gpu_available) if self._refused(job)]

    def refused_cost(self, gpu_available: bool) -> tuple[int, float | None]:
        """(the refused jobs, the CPU-hours their models' cost models give them, each at most its time budget;
        None where a refused model has no cost model)."""
        from tabbench.spec import SplitSizes

        jobs, hours = self.refused_jobs(gpu_available), 0.0
        for job in jobs:
            spec, split = self.registry[job.model].spec, self.split_of(job)
            if spec.estimate is None:
                return len(jobs), None
            sizes = SplitSizes(len(split.train), len(split.val), len(split.test))
            seconds = spec.estimate(self.dataset_of(job).meta, sizes, job.params, job.time_budget_s)
            hours += min(seconds, job.time_budget_s or seconds) * float(job.resources.get("num_cpus") or 0) / 3600
        return len(jobs), hours

    def stand_ins(self) -> dict:
        """dataset -> its label, for every loaded dataset that is not the whole original (a mirror's subset, or a
        SUBSTITUTE: another dataset), as its records and leaderboards will carry it."""
        return {name: dataset.subset for name, (_, dataset, _) in self.loaded.items() if dataset.subset}

    def left_out(self) -> list[str]:
        """A few short lines naming what cannot run: the datasets that did not load, the refused methods per
        dataset with the refused jobs' count and cost; empty when everything can."""
        lines = []
        if self.unloaded:
            lines.append(f"{len(self.unloaded)} dataset{'s' * (len(self.unloaded) > 1)} could not be loaded "
                         f"(their jobs are not counted): {', '.join(self.unloaded)}")
        by_method: dict = {}
        for r in self.refusals:
            by_method.setdefault(r.method, []).append(r.dataset)
        lines += [f"{method} refused by its model's pre-run check on {', '.join(dict.fromkeys(datasets))}"
                  for method, datasets in by_method.items()]
        if self.refusals:
            jobs, hours = self.refused_cost(gpu_available=False)
            lines.append(f"{jobs:,} refused job{'s' * (jobs != 1)}" + ("" if hours is None else
                         f", about {hours:,.0f} CPU-hours by the models' cost models"))
        return lines

    def no_task(self) -> list[str]:
        """A line per selected method whose model supports none of the tasks of the loaded datasets (a model
        passes over a dataset of a task it does not support, so such a method has no job at all)."""
        tasks = {dataset.meta.task for _, dataset, _ in self.loaded.values()}
        chosen = [e for e in self.suite.models if not self.selection.models or e.label in self.selection.models]
        return [f"{e.label} has no job: its model {e.model} supports {', '.join(sorted(spec.tasks))}, and the "
                f"selected datasets are {', '.join(sorted(tasks))}" for e in chosen
                for spec in [self.registry[e.model].spec] if tasks and not tasks & set(spec.tasks)]

    def raise_unless_ready(self, skip: bool = False, option: str = "") -> None:
        """``RunError`` naming every dataset that did not load and every model's refusal, then a short summary
        ending with ``option`` (the command's way to run the rest, e.g. ``--skip-refused``): a run or a probe
        starts nothing then. With ``skip`` the rest is run (the caller says what is left out, ``left_out``),
        unless nothing is left to run."""
        problems = [*self.unloaded.values(), *map(str, self.refusals)]
        if not problems:
            return
        if skip and self.jobs(gpu_available=False):  # whether a job is left does not depend on the device
            return
        summary = ["", "Not runnable: " + "; ".join(self.left_out()) + "."]
        summary += stand_in_lines(self.stand_ins()) if self.stand_ins() else []
        if option and not skip:
            runnable = len(self.jobs(gpu_available=False))
            summary.append(f"{option} runs every other job of the selection ({runnable:,}) and says what it left out; "
                           "`tabbench plan SUITE` lists the jobs and their cost.")
        elif skip:
            summary.append("Nothing else is left to run.")
        raise RunError("\n".join(problems + summary))


def stand_in_lines(stand_ins: dict) -> list[str]:
    """The datasets that are not the whole original (``PreparedSuite.stand_ins``), one line each with what it is."""
    return (["Not the original data (stand-ins; every record and leaderboard carries the label):"]
            + [f"  {name}: {label}" for name, label in stand_ins.items()])


def prepare_suite(suite: Suite, selection: Selection = Selection(), paths: DataPaths | None = None,
                  plugin_files=()) -> PreparedSuite:
    """Registry (built-ins, ``plugin_files`` and the suite's ``plugins:``), models checked, selection checked
    (a ``RunError`` naming what the suite lacks), every selected dataset loaded and split (``paths``: default
    the environment's, relative to the suite's folder), and the models' refusals on those that loaded."""
    registry = load_models(tuple(plugin_files) + tuple(suite.plugins))
    check_models(suite, registry)
    problems = selection.problems(suite)
    if problems:
        raise RunError("\n".join(problems))
    paths = paths or DataPaths.from_env(base=suite.path.parent)
    loaded, unloaded = {}, {}
    for cfg in suite.datasets:
        if selection.wants_dataset(cfg.name):
            try:
                loaded.update(load_data(suite, paths, (cfg.name,)))
            except RunError as exc:
                unloaded[cfg.name] = str(exc)
    refuse_twin_jobs(suite, registry, loaded)
    return PreparedSuite(suite, registry, selection, loaded, unloaded,
                         model_refusals(suite, registry, loaded, selection.models))


def refuse_twin_jobs(suite: Suite, registry: dict, loaded: dict) -> None:
    """A RunError for two loaded datasets whose jobs share keys: the same table with the same split under two names
    (two copies of one file, say; entries that declare the same data are refused on load, tabbench.suite.load)."""
    from tabbench.suite.load import TWINS

    first: dict = {}
    for job in expand(suite, registry, loaded):
        twin = first.setdefault(job.key, job)
        if twin.dataset != job.dataset:
            raise RunError(f"{suite.path}: datasets {twin.dataset!r} and {job.dataset!r} load the same table (data "
                           f"fingerprint {job.dataset_fingerprint}) with the same split: {TWINS}")


def run_suite(suite: Suite, options: RunOptions) -> RunSummary:
    """Run the suite's pending jobs, then the ``after_run`` hook (the report's writes the leaderboard).

    SIGINT (Ctrl-C) at any phase stops the run: every finished job's record is kept, the message
    says how to resume, and KeyboardInterrupt is raised (see tabbench.run.interrupts)."""
    store = Store(suite.results_dir(options.results), options.checkpoints)
    summary = RunSummary(results_dir=store.dir)
    with StopRequest() as stop:
        try:
            return _run(suite, options, store, summary, stop)
        except ExecutorLost as exc:
            raise RunError(f"{exc}. {summary.done} jobs finished and are saved in {store.path}; run the same command "
                           "again to resume (finished jobs are skipped).") from None
        except KeyboardInterrupt:
            if store.path.exists():
                print(f"\nInterrupted: {summary.done} jobs finished and are saved in {store.path}. Run the same "
                      "command again to resume; finished jobs are skipped.", file=sys.stderr)
            else:  # no job had finished: naming a records file that does not exist would send the user looking
                print("\nInterrupted before any job finished: nothing was written. Run the same command again to "
                      "start.", file=sys.stderr)
            raise


def _run(suite: Suite, options: RunOptions, store: Store, summary: RunSummary, stop: StopRequest) -> RunSummary:
    if options.cpu is not None:
        _refuse_another_cpu(options.cpu)
    plugin_files = tuple(options.plugin_files) + tuple(suite.plugins)
    # an unknown name stops the run before any load
    executor = make_executor(options.executor, options.address, plugin_files)
    store.check_writable("a run could not save its records there, so it runs nothing (a results folder elsewhere: "
                         "--results DIR)")
    claims = Claims(store.path.parent)
    stop.pause_point("load")
    prepared = prepare_suite(suite, options.selection(), options.data_paths, options.plugin_files)
    prepared.raise_unless_ready(options.skip_refused, option=f"`tabbench run {suite.path} ... {SKIP_REFUSED}`")
    summary.left_out = prepared.left_out()
    if summary.left_out:
        print(f"Not run ({SKIP_REFUSED}): " + "; ".join(summary.left_out) + ".", file=sys.stderr)
    for line in prepared.no_task():
        print(f"Not run: {line}.", file=sys.stderr)

    with stop.deferred():  # a first Ctrl-C never breaks into the executor's start (Ray's); checked once it is up
        stop.pause_point("ray-start")
        executor.start(needs_gpu_check=prepared.device_auto)
    try:
        stop.check()
        jobs = prepared.jobs(executor.gpu_available)
        summary.planned = len(jobs)
        claims.open()
        mark = store.mark()  # before reading what is done: a record written in between is seen by the queue
        existing = store.latest()
        pending = options.rerun().pending(jobs, existing)
        summary.skipped = len(jobs) - len(pending)
        _say_held_elsewhere(claims.sweep(), pending)
        _say_other_cpu(existing, pending)
        queue = JobQueue(pending, store, claims, mark, stop)
        try:
            done = rerun_marked(executor.run(queue, prepared, store, stop), existing, options.rerun_reason,
                                options.force)
            _record_all(done, len(pending), store, summary, queue, options.progress, stop, describe_jobs(pending))
        finally:
            summary.elsewhere = queue.recorded_elsewhere
    finally:
        with stop.deferred():
            claims.close()
            executor.close()
    stop.check()
    stop.pause_point("leaderboard")
    get_plugin_manager(plugin_files).hook.after_run(folder=store.dir, suite=suite, options=options)
    stop.check()  # a SIGINT whose KeyboardInterrupt something swallowed still stops the run
    return summary


def rerun_marked(records, existing: dict, reason: str | None, forced: bool = False):
    """Each (job, record) as it comes, a record that replaces one of ``existing`` (key -> the newest record before
    the run) marked ``rerun``: ``reason`` (``--rerun-reason``; None: not given) and the replaced record's
    ``finished_at`` and ``status``, so that a folder's history says which jobs ran again and why
    (tabbench/report/provenance.py). In a ``forced`` run (--force) a job's first record is marked too, replacing
    nothing (``replaces`` None), so that the same forced command, run again after an interruption, passes over
    every job it already ran (``ran_for``)."""
    for job, record in records:
        old = existing.get(job.key)
        if old is not None:
            record = {**record, "rerun": {"reason": reason, "replaces": {"finished_at": old.get("finished_at"),
                                                                        "status": old.get("status")}}}
        elif forced:
            record = {**record, "rerun": {"reason": reason, "replaces": None}}
        yield job, record


def _wall_stopped(record: dict) -> bool:
    stopped = (record.get("info") or {}).get("stopped_by_time_budget") is True or record.get("status") == "timeout"
    return stopped and clock_of(record) == WALL


@functools.lru_cache(maxsize=1)
def _this_machine() -> dict:
    from tabbench.measure import fingerprint

    return fingerprint()  # read once: fingerprint() reads /proc/cpuinfo


@functools.lru_cache(maxsize=1)
def _this_cpu() -> str | None:
    from tabbench.measure import cpu_id

    return cpu_id(_this_machine())


def _other_cpu(record: dict) -> bool:
    from tabbench.measure import cpu_id

    return cpu_id((record.get("environment") or {}).get("hardware")) != _this_cpu()


#: ``tabbench run --force --force-only WHICH``: the records whose jobs a forced run re-runs, by what may have made
#: their result differ from the same job's here and now: a budget counted in wall seconds (which other processes
#: move, tabbench/clock.py) ended or killed the job, it ran on another kind of CPU (or before the fingerprint was
#: recorded), or its budget counted wall seconds at all. A job with no record runs in any case.
FORCE_ONLY = {"wall-stopped": _wall_stopped, "other-cpu": _other_cpu,
              "wall-clock": lambda record: clock_of(record) == WALL}


def is_one_of(record: dict | None, which: tuple) -> bool:
    """Whether a forced run re-runs the job of ``record`` (its newest, None: none) when limited to ``which``
    (names in FORCE_ONLY; empty: no limit)."""
    return record is None or not which or any(FORCE_ONLY[name](record) for name in which)


def ran_for(record: dict | None, reason: str | None) -> bool:
    """Whether ``record`` was written by a forced run (--force) for ``reason``."""
    field = (record or {}).get("rerun")
    return reason is not None and isinstance(field, dict) and field.get("reason") == reason


def describe_jobs(jobs) -> str:
    """'npt x 3 on breast_cancer, wine, diabetes; knn x 12 on ...': the jobs by method, with their datasets."""
    by_method: dict = {}
    for job in jobs:
        by_method.setdefault(job.method, []).append(job.dataset)
    return "; ".join(f"{method} x {len(datasets)} on {', '.join(dict.fromkeys(datasets))}"
                     for method, datasets in by_method.items())


def _device_auto(suite: Suite, registry: dict) -> bool:
    """Whether some method's device is left to the machine ('auto'), so that the executor must say if a GPU is
    there before the jobs are expanded."""
    return any(params.get("device") == "auto" for e in suite.models for d in suite.datasets
               for _, _, params in method_params(e, registry[e.model].spec, d))


def _refuse_another_cpu(wanted: str) -> None:
    """``--cpu ID``: stop before anything runs where this machine's kind of CPU is not ID's."""
    from tabbench.measure import hardware_label

    here = _this_cpu()
    if here != wanted:
        raise RunError(f"--cpu {wanted}: this machine's CPU is another kind, {hardware_label(_this_machine(), False)} "
                       f"(its --cpu id {here}), so no job ran: a time budget counts one kind of CPU's seconds, and "
                       f"the comparison this run adds to is {wanted}'s (every CPU job's record carries its id in "
                       "environment.hardware.id). Run it on a machine of that kind, or leave out --cpu.")


def _say_other_cpu(existing: dict, pending: list) -> None:
    """Tell the user, before any job runs, when the folder's results of the methods this run runs came from another
    kind of CPU than this machine's: a time budget is seconds of a CPU, which another kind spends at another rate,
    so a comparison that mixes them is not one kind of CPU (``--force --force-only other-cpu`` runs theirs here)."""
    from collections import Counter

    from tabbench.measure import short_name

    methods = {job.method for job in pending}
    other = Counter(short_name(hardware) if (hardware := (r.get("environment") or {}).get("hardware")) else
                    "a machine not recorded" for r in existing.values()
                    if r.get("method") in methods and r.get("status") == OK and _other_cpu(r))
    if other:
        where = ", ".join(f"{name} ({n})" for name, n in other.most_common())
        print(f"{sum(other.values())} of this folder's results of the methods run here came from another kind of CPU "
              f"than this machine's {short_name(_this_machine())}: {where}. A time budget counts that CPU's seconds, so "
              "their comparison with this run's is not one kind of CPU; `--force --force-only other-cpu` runs "
              "their jobs again here.", file=sys.stderr)


def _say_held_elsewhere(held: dict, pending: list) -> None:
    """Tell the user, before any job runs, how many of this run's jobs other live runs on the folder hold."""
    mine = [held[j.key] for j in pending if j.key in held]
    if mine:
        owners = ", ".join(f"{host} pid {pid}" for host, pid, _ in sorted({tuple(o.split(":", 2)) for o in mine}))
        print(f"{len(mine)} of the {len(pending)} pending jobs are held by another live run on this results folder "
              f"({owners}); this run takes the others, then waits for those and runs any whose run dies.",
              file=sys.stderr)


def _record_all(records, total: int, store: Store, summary: RunSummary, queue: JobQueue, progress: bool,
                stop: StopRequest, running: str = ""):
    """Write each (job, record) the executor hands back as it comes, then drop the job's claim; a first Ctrl-C
    never breaks into a write. ``running``: what the jobs are (``describe_jobs``), said before the bar."""
    if not total:
        return
    from tqdm import tqdm

    if progress:  # the bar moves only as jobs finish, which may take minutes: say first what is running
        print(f"Running {total} jobs: {running}. The bar moves as each finishes.", file=sys.stderr)

    bar = tqdm(total=total, disable=not progress, unit="job", dynamic_ncols=True, file=sys.stderr)
    try:
        for job, record in records:
            with stop.deferred():
                stop.pause_point("record")
                store.append(record)
                queue.finished(job)
                if record["status"] == OK:  # a failed job keeps its checkpoint: a re-run continues from it
                    store.remove_checkpoint(job.key)
                summary.done += 1
                if record["status"] != OK:
                    summary.failures[record["status"]] += 1
                    summary.failed_records.append({k: record.get(k) for k in ("method", "dataset", "status",
                                                                              "error_message")})
                summary.stopped += bool((record.get("info") or {}).get("stopped_by_time_budget"))
                bar.update(1)
                bar.set_postfix(done=summary.done, failed=summary.failed, skipped=summary.skipped, refresh=False)
    finally:
        bar.close()
