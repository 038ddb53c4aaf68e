"""What a run of a suite would do and cost, before it starts: ``tabbench plan SUITE``.

The jobs are expanded and selected exactly as ``tabbench run`` does it (same keys), from the suite, the
registry and the loaded datasets; nothing is started (no Ray, no fit). Per method and dataset:
jobs planned (configurations x splits x seeds), those whose record already exists in the results
folder a run would write to (and in the published folder of the same suite, when that is another
one), the Ray resources of one job, and an estimate of CPU and GPU hours for the jobs still to run:
the median job time (fit and evaluation, on its budget's clock: a ``cpu``-clock record's CPU seconds, which
a busy machine does not inflate, ``tabbench.clock.spent_seconds``) of successful records of the same
method on the same data (dataset fingerprint, hence the same shape; else the same dataset and subset under another
fingerprint) in the basis folders, times the job's CPUs and GPUs. The basis is stated per method and
dataset, 'rough' where its records ran other params. A method with no record on this table is timed by its
model's cost model where the model has one, else estimated from its records on the tables nearest in size
(rows x features, on a log scale; the basis records' tables measured from the suites that made them, never
downloaded), marked '~' in the table and named in its basis; 'no basis' where there are none. Jobs without a
basis that all have a time budget are bounded by it (a job is stopped at its budget), so a budgeted suite's
plan always says the most its unmeasured jobs can cost.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from tabbench.clock import CPU, clock_of, spent_seconds
from tabbench.run.expand import Selection
from tabbench.spec import SplitSizes
from tabbench.report.format import text_table
from tabbench.store import RECORDS_DIR, Store, key_params

if TYPE_CHECKING:
    from tabbench.run.runner import Rerun


@dataclass
class PlanRow:
    method: str
    dataset: str
    shape: str  # rows x features
    configs: int
    splits: int
    seeds: int
    planned: int
    done: int  # a record exists in the results folder a run writes to: the run skips the job
    published: int | None  # a record exists in the published folder (None: no published folder)
    resources: dict
    median_s: float | None = None
    basis_records: int = 0
    same_space: bool = True  # the basis ran the planned configurations (or a sample of them)
    basis: str = "no basis"
    cpu_hours: float | None = None
    gpu_hours: float | None = None
    ceiling: tuple | None = None  # (CPU h, GPU h) the pending jobs' time budgets allow; None: one has no budget
    similar: bool = False  # estimated from the method's records on other tables of similar size

    @property
    def pending(self) -> int:
        return self.planned - self.done


@dataclass
class Plan:
    suite: str
    results_dir: Path
    published_dir: Path | None
    rows: list = field(default_factory=list)
    unloaded: dict = field(default_factory=dict)  # dataset -> why it could not be loaded
    basis_dirs: tuple = ()
    gpus: int = 0
    refused: list = field(default_factory=list)  # the models' pre-run refusals (tabbench.run.runner.model_refusals)
    refused_jobs: int = 0  # the selected jobs those refusals cover: not planned, in no total
    refused_hours: float | None = None  # their CPU-hours by their models' cost models (None: a model has none)
    stand_ins: dict = field(default_factory=dict)  # dataset -> its subset or SUBSTITUTE label (PreparedSuite's)
    rerun: Rerun | None = None  # which jobs with a record the run does again (they count as not done)
    no_task: list = field(default_factory=list)  # methods with no job: no dataset of a task they support


def suite_folders(paths) -> list[Path]:
    """Each path is a suite's results folder (it has records/) or a root holding such folders."""
    out = []
    for path in map(Path, paths):
        if (path / RECORDS_DIR).is_dir():
            out.append(path)
        elif path.is_dir():
            out += sorted(p for p in path.iterdir() if (p / RECORDS_DIR).is_dir())
    once = {}  # a folder named twice (a relative and an absolute path to the same one) counts once
    for path in out:
        once.setdefault(path.resolve(), path)
    return list(once.values())


def _basis_frame(folders) -> pd.DataFrame:
    columns = ["method", "model", "dataset", "subset", "dataset_fingerprint", "split", "params", "key_params", "seconds",
               "cpu_clock", "folder", "suite"]
    frames = []
    for folder in folders:
        records = [r for r in Store(folder).latest().values() if r.get("status") == "ok"]
        frames.append(pd.DataFrame({
            "method": [r["method"] for r in records], "model": [r.get("model", r["method"]) for r in records],
            "dataset": [r["dataset"] for r in records],
            "subset": [r.get("subset") or "" for r in records],
            "dataset_fingerprint": [r["dataset_fingerprint"] for r in records],
            "split": [(r.get("fold"), r.get("repeat") or 0) for r in records],
            "params": [json.dumps(r.get("params"), sort_keys=True, default=str) for r in records],
            # the configuration compared with the planned one: a param added later is left out at its first value
            "key_params": [json.dumps(key_params(r), sort_keys=True, default=str) for r in records],
            # the job's seconds on its budget's clock (tabbench.clock.spent_seconds): a busy machine's do not count
            "seconds": [spent_seconds(r, "wall_seconds" if "wall_seconds" in r else "fit_seconds") for r in records],
            "cpu_clock": [clock_of(r) == CPU for r in records],
            "folder": str(folder), "suite": [r.get("suite") for r in records]}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def _params_note(planned: set, basis: set) -> tuple[str, bool]:
    """How the basis's configurations relate to the planned ones, and whether they are the same space
    (all planned, or a sample of the planned grid) rather than other parameters."""
    if planned <= basis:
        return "same configurations", True
    if basis & planned:
        return f"{len(planned & basis)} of {len(planned)} planned configurations", True
    a, b = json.loads(next(iter(planned))), json.loads(next(iter(basis)))
    diff = [f"{k} {b.get(k)} -> {a.get(k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    return "other params (" + ", ".join(diff) + ")", False


def _method_records(row: PlanRow, job, basis: pd.DataFrame) -> pd.DataFrame:
    """The method's timed records in the basis; for a job on a GPU, those that ran on one (a CPU record says
    nothing of a GPU job's time)."""
    mine = basis[(basis["method"] == row.method) & basis["seconds"].notna()]
    if job.params.get("device") == "cuda":
        mine = mine[mine["params"].map(lambda p: json.loads(p).get("device") == "cuda").astype(bool)]
    return mine


def _planned_keys(jobs: list) -> set:
    return {json.dumps(j.key_params if j.key_params is not None else j.params, sort_keys=True, default=str)
            for j in jobs}


def _set_hours(row: PlanRow, match: pd.DataFrame) -> None:
    """The row's hours from the median job of its basis records ``match``: a ``cpu``-clock record's CPU seconds
    (every thread) shared over the CPUs a job reserves, as its threads are limited to them."""
    cores = max(1.0, float(row.resources.get("num_cpus") or 1))
    median_s = float(match["seconds"].where(~match["cpu_clock"], match["seconds"] / cores).median())
    row.median_s = median_s
    row.cpu_hours = row.pending * median_s * float(row.resources.get("num_cpus") or 0) / 3600
    row.gpu_hours = row.pending * median_s * float(row.resources.get("num_gpus") or 0) / 3600


def _estimate(row: PlanRow, jobs: list, basis: pd.DataFrame) -> None:
    """Median job seconds of the method's successful records on the same data (same fingerprint), else on
    the same dataset and subset with another fingerprint (another encoding or version of the same rows);
    for a job on a GPU, of records that ran on one."""
    job = jobs[0]
    mine = _method_records(row, job, basis)
    match, how = mine[mine["dataset_fingerprint"] == job.dataset_fingerprint], ""
    if match.empty:
        match = mine[(mine["dataset"] == job.dataset) & (mine["subset"] == (job.subset or ""))]
        how = "same dataset with another fingerprint (encoding or version); "
    if match.empty:
        return
    row.basis_records = len(match)
    note, row.same_space = _params_note(_planned_keys(jobs), set(match["key_params"]))
    row.basis = f"{', '.join(sorted(set(match['folder'])))}: {how}{note}"
    _set_hours(row, match)


#: How many tables nearest in size a method's records time it on a table it has no record of.
SIMILAR_TABLES = 3


def table_shapes(basis: pd.DataFrame, paths) -> dict:
    """dataset fingerprint -> (rows, features) of the basis records' tables, measured from the suites that made
    them (SUITE.yaml in the suites/ folder beside each basis folder's results root) where their data is here
    (bundled, cached or mirrored: never downloaded); a table whose suite is not found, does not load, or no
    longer gives the records' fingerprint is left out."""
    from tabbench.data.dataset import describe
    from tabbench.errors import TabbenchError
    from tabbench.suite import load_suite

    shapes: dict = {}
    suites: dict = {}
    for (folder, name), part in basis.groupby(["folder", "suite"]):
        path = (Path(folder).parent.parent / "suites" / f"{name}.yaml").resolve()
        if path not in suites:
            try:
                suites[path] = load_suite(path) if path.is_file() else None
            except (TabbenchError, OSError, ValueError):
                suites[path] = None
        if suites[path] is None:
            continue
        for cfg in suites[path].datasets:
            fingerprints = set(part.loc[part["dataset"] == cfg.name, "dataset_fingerprint"])
            if not fingerprints or fingerprints <= set(shapes):
                continue
            info = describe(cfg, replace(paths, base=path.parent))
            if info.get("fingerprint") in fingerprints:
                shapes[info["fingerprint"]] = (info["rows"], info["columns"] - 1)
    return shapes


def _similar_estimate(row: PlanRow, jobs: list, basis: pd.DataFrame, shapes: dict, shape: tuple) -> None:
    """No record of the method on this table and no cost model: the median job seconds of its records on the
    SIMILAR_TABLES tables nearest to this one in rows x features (log scale), those of the planned configurations
    where there are some; the row is marked as estimated (``similar``)."""
    mine = _method_records(row, jobs[0], basis)
    mine = mine[mine["dataset_fingerprint"].isin(shapes)]
    if mine.empty:
        return
    same = mine[mine["key_params"].isin(_planned_keys(jobs))]
    row.same_space = not same.empty
    mine = same if row.same_space else mine
    cells = math.log(max(shape[0] * shape[1], 1))
    distance = {fp: abs(math.log(max(shapes[fp][0] * shapes[fp][1], 1)) - cells)
                for fp in set(mine["dataset_fingerprint"])}
    nearest = sorted(distance, key=lambda fp: (distance[fp], fp))[:SIMILAR_TABLES]
    match = mine[mine["dataset_fingerprint"].isin(nearest)]
    tables = {fp: match.loc[match["dataset_fingerprint"] == fp, "dataset"].iloc[0] for fp in nearest}
    row.basis_records, row.similar = len(match), True
    row.basis = (f"{', '.join(sorted(set(match['folder'])))}: estimated from tables of similar size, "
                 + ", ".join(f"{tables[fp]} ({shapes[fp][0]:,} x {shapes[fp][1]})" for fp in nearest)
                 + ("" if row.same_space else " (other params)"))
    _set_hours(row, match)


#: Params that set a model's size: a cost model is calibrated on records of the planned size where there are some.
SIZE_PARAMS = ("e", "n_layers", "n_heads", "batch_size", "d_block", "n_blocks")


def _model_estimate(row: PlanRow, pending: list, basis: pd.DataFrame, spec, meta, sizes: dict, device: str) -> None:
    """No record of the method on this data: the model's own cost model (``ModelSpec.estimate``) for each job
    still to run, scaled by how the model's records on the same data and the same kind of device (other
    methods of the same model, e.g. another NPT configuration) compare with what it estimates for them: the
    median ratio of their seconds to their estimates, which carries this machine's (or GPU's) speed.
    ``pending``: the jobs still to run."""
    estimates = [spec.estimate(meta, sizes[(j.fold, j.repeat)], j.params, j.time_budget_s) for j in pending]
    how = "the model's cost model"
    job, on_gpu = pending[0], device == "cuda"
    same = basis[(basis["model"] == job.model) & (basis["dataset_fingerprint"] == job.dataset_fingerprint)
                 & basis["seconds"].notna()]
    same = same[same["params"].map(lambda p: (json.loads(p).get("device") == "cuda") == on_gpu).astype(bool)]
    largest = max(sizes.values(), key=lambda z: z.train)
    # each record against its own split's sizes (a split this plan does not select: the largest planned)
    recorded = [(spec.resolve(spec.added_params, json.loads(p)), t, m, sizes.get(split, largest))
                for p, t, m, split in zip(same["params"], same["seconds"], same["method"], same["split"])]
    recorded = [r for r in recorded if r[0].get("steps") != "auto"]
    # a model's overheads weigh differently at another size: prefer records of the planned jobs' size
    alike = [r for r in recorded if all(r[0].get(k) == job.params.get(k) for k in SIZE_PARAMS)]
    recorded = alike or recorded
    ratios = [t / spec.estimate(meta, size, p, None) for p, t, _, size in recorded]
    ratios = [r for r in ratios if r > 0 and r == r]
    if ratios:
        factor = float(pd.Series(ratios).median())
        # a job whose steps come from its budget (``steps: auto``) measures this machine's speed itself and
        # fills its budget's training share whatever the speed: the factor would count the speed twice
        estimates = [s if j.params.get("steps") == "auto" else s * factor for s, j in zip(estimates, pending)]
        how += (f", scaled x{factor:.2f} by {len(ratios)} {'GPU ' if on_gpu else ''}records of {job.model} here "
                f"({', '.join(sorted({r[2] for r in recorded}))}{'' if alike else ', of other sizes'})")
    elif on_gpu:
        how += " (GPU: rates measured on an H100, no GPU records)"
    else:
        how += " (uncalibrated: the reference CPU's rates)"
    # no job outlives its budget: the harness stops it there (as a timeout, if the model did not stop itself)
    seconds = sum(min(s, j.time_budget_s or s) for s, j in zip(estimates, pending))
    row.median_s = seconds / len(pending)
    row.same_space, row.basis = False, how
    hours = seconds / 3600
    row.cpu_hours = hours * float(row.resources.get("num_cpus") or 0) if device != "cuda" else 0.0
    row.gpu_hours = hours * float(row.resources.get("num_gpus") or 0)


def make_plan(prepared, results_dir: Path, published_dir: Path | None, basis_dirs=(), gpus: int = 0,
              paths=None, rerun=None) -> Plan:
    """The plan of a ``PreparedSuite``'s selected jobs (tabbench/run/runner.py), its unloaded datasets and its
    models' refusals listed beside them. ``paths``: where the basis records' tables are looked for, to estimate
    a method on a table it has no record of (None: no such estimate). ``rerun``: which jobs with a record the
    run would do again (a ``Rerun``, as ``tabbench run``'s --force, --force-only, --retry-failed and
    --rerun-reason; None: none); a job it would not run counts as done."""
    from tabbench.run.runner import Rerun

    rerun = rerun or Rerun()
    prepared = prepared.on_gpus(gpus > 0)  # a GPU's jobs are checked as a GPU runs them, whatever this machine has
    suite, registry, loaded = prepared.suite, prepared.registry, prepared.loaded
    jobs = prepared.jobs(gpu_available=gpus > 0)
    pending_keys = {j.key for j in rerun.pending(jobs, Store(results_dir).latest())}
    done = {j.key for j in jobs} - pending_keys
    same = published_dir is None or Path(published_dir).resolve() == Path(results_dir).resolve()
    published = None if same or not (Path(published_dir) / RECORDS_DIR).is_dir() else set(
        Store(published_dir).latest())
    folders = suite_folders(basis_dirs)
    basis = _basis_frame(folders)
    refused_jobs, refused_hours = prepared.refused_cost(gpus > 0)
    out = Plan(suite.name, Path(results_dir), None if published is None else Path(published_dir),
               unloaded=dict(prepared.unloaded), basis_dirs=tuple(map(str, folders)), gpus=gpus,
               refused=list(map(str, prepared.refusals)), refused_jobs=refused_jobs, refused_hours=refused_hours,
               stand_ins=prepared.stand_ins(), rerun=rerun, no_task=prepared.no_task())
    unestimated = []  # (row, its pending jobs, its table's shape): no record of the method here, no cost model
    groups: dict = {}
    for job in jobs:
        groups.setdefault((job.method, job.dataset), []).append(job)
    for (method, dataset), group in groups.items():
        X = loaded[dataset][1].X
        row = PlanRow(method, dataset, f"{X.shape[0]} x {X.shape[1]}", len({j.trial for j in group}),
                      len({(j.fold, j.repeat) for j in group}), len({j.seed for j in group}), len(group),
                      sum(j.key in done for j in group),
                      None if published is None else sum(j.key in published for j in group), group[0].resources)
        _estimate(row, group, basis)
        spec = registry[group[0].model].spec
        pending = [j for j in group if j.key not in done]
        if row.median_s is None and spec.estimate is not None and pending:
            sizes = {(s.fold, s.repeat): SplitSizes(len(s.train), len(s.val), len(s.test)) for s in loaded[dataset][2]}
            _model_estimate(row, pending, basis, spec, loaded[dataset][1].meta, sizes,
                            group[0].params.get("device", "cpu"))
        if row.median_s is None and pending:
            unestimated.append((row, pending, X.shape))
        if all(j.time_budget_s for j in pending):  # a job is stopped at its budget: the budgets bound the rest
            seconds = sum(j.time_budget_s for j in pending)
            row.ceiling = tuple(seconds * float(row.resources.get(k) or 0) / 3600 for k in ("num_cpus", "num_gpus"))
        out.rows.append(row)
    if unestimated and paths is not None:
        shapes = table_shapes(basis[basis["method"].isin({row.method for row, _, _ in unestimated})], paths)
        for row, pending, shape in unestimated:
            _similar_estimate(row, pending, basis, shapes, shape)
    return out


def _hours(value) -> str:
    return "–" if value is None else f"{value:.3g}"


def _resources(res: dict) -> str:
    return ", ".join(f"{float(res.get(k) or 0):g} {name}" for k, name in (("num_cpus", "cpu"), ("num_gpus", "gpu")))


def _done_means(rerun) -> str:
    if rerun is None or not (rerun.force or rerun.retry_failed):
        return "done: a record exists where the run writes"
    if not rerun.force:
        return "done: a record that did not fail exists where the run writes (--retry-failed)"
    only = f", and those whose record is none of {', '.join(rerun.only)} (--force-only)" if rerun.only else ""
    return f"done (--force): the jobs a forced run for the reason {rerun.reason!r} already ran{only}"


def format_plan(plan: Plan) -> str:
    has_published = plan.published_dir is not None
    header = ["method", "dataset", "rows x cols", "jobs (configs x splits x seeds)", "done"]
    header += ["published"] if has_published else []
    header += ["resources/job", "median s (records)", "cpu h", "gpu h"]
    rows = []
    for r in plan.rows:
        label = plan.stand_ins.get(r.dataset)
        mark = "" if not label else " (SUBSTITUTE)" if label.startswith("SUBSTITUTE") else " (subset)"
        cells = [r.method, r.dataset + mark, r.shape, f"{r.planned} = {r.configs} x {r.splits} x {r.seeds}", r.done]
        cells += [r.published] if has_published else []
        count = r.basis_records or "cost model"  # no record of the method: the model's cost model estimated it
        median = "–" if r.median_s is None else f"{'~' * r.similar}{r.median_s:.2f} ({count})"
        cells += [_resources(r.resources), median,
                  _hours(r.cpu_hours), _hours(r.gpu_hours)]
        rows.append(cells)
    planned, done = sum(r.planned for r in plan.rows), sum(r.done for r in plan.rows)
    lines = [f"Plan for suite {plan.suite}: nothing is run, no Ray is started.", ""] + text_table(header, rows) + [""]
    if plan.stand_ins:
        from tabbench.run.runner import stand_in_lines

        lines += [*stand_in_lines(plan.stand_ins), ""]
    lines.append(_done_means(plan.rerun) + "; cpu h and gpu h: for the jobs not done.")
    if any(r.similar for r in plan.rows):
        lines.append("~: no record of the method on this table; estimated from its records on the tables nearest in "
                     f"size (rows x features), {SIMILAR_TABLES} at most, named below.")
    lines.append(f"{planned:,} jobs planned, {done:,} already done in {plan.results_dir} "
                 f"(a run there would run {planned - done:,}).")
    if has_published:
        published = sum(r.published for r in plan.rows)
        lines.append(f"{published:,} of them have a published record in {plan.published_dir} "
                     f"(`--results {plan.published_dir.parent}` would run {planned - published:,}).")
    lines += ["", "Estimate per method for the jobs still to run (median job seconds of matching records x jobs x "
              "the job's CPUs / GPUs). 'rough': the records ran other params, so the time may be far off:"]
    for method in dict.fromkeys(r.method for r in plan.rows):
        part = [r for r in plan.rows if r.method == method and r.pending]
        if not part:
            lines.append(f"  {method}: nothing to run")
            continue
        known = [r for r in part if r.cpu_hours is not None]
        rough = [r.dataset for r in known if not r.same_space]
        similar = [r.dataset for r in known if r.similar]
        text = (f"  {method}: {_hours(sum(r.cpu_hours for r in known))} CPU h, "
                f"{_hours(sum(r.gpu_hours for r in known))} GPU h for {sum(r.pending for r in known):,} jobs")
        text += f" (rough for {', '.join(rough)})" if rough else ""
        text += f" (estimated from tables of similar size for {', '.join(similar)})" if similar else ""
        missing = [r for r in part if r.cpu_hours is None]
        if missing:
            text += (f"; no basis for {sum(r.pending for r in missing):,} jobs "
                     f"({', '.join(r.dataset for r in missing)})")
            if all(r.ceiling for r in missing):
                text += f", at most {_hours(sum(r.ceiling[0] for r in missing))} CPU h by their time budgets"
        lines.append(text)
        bases = {r.basis for r in known}
        if len(bases) == 1 and len(known) > 1:
            lines.append(f"      basis for every dataset: {bases.pop()}")
        else:
            lines += [f"      {r.dataset}: {r.basis}" for r in known]
    todo = [r for r in plan.rows if r.pending]
    for label, rows in (("from the planned configurations", [r for r in todo if r.cpu_hours is not None
                                                               and r.same_space and not r.similar]),
                        ("rough, from other params", [r for r in todo if r.cpu_hours is not None
                                                      and not r.same_space and not r.similar]),
                        ("estimated from tables of similar size", [r for r in todo if r.similar])):
        if rows:
            lines.append(f"Total {label}: {_hours(sum(r.cpu_hours for r in rows))} CPU hours, "
                         f"{_hours(sum(r.gpu_hours for r in rows))} GPU hours ({sum(r.pending for r in rows):,} jobs).")
    estimated = [r for r in todo if r.cpu_hours is not None]
    if estimated:
        lines.append(f"Total with an estimate: {_hours(sum(r.cpu_hours for r in estimated))} CPU hours, "
                     f"{_hours(sum(r.gpu_hours for r in estimated))} GPU hours "
                     f"({sum(r.pending for r in estimated):,} jobs).")
    unknown = [r for r in todo if r.cpu_hours is None]
    if unknown:
        line = f"No basis: {sum(r.pending for r in unknown):,} jobs, not counted in any total"
        bounded = [r for r in unknown if r.ceiling]
        if bounded:
            line += (f"; the time budgets of {sum(r.pending for r in bounded):,} of them cap those at "
                     f"{_hours(sum(r.ceiling[0] for r in bounded))} CPU hours, "
                     f"{_hours(sum(r.ceiling[1] for r in bounded))} GPU hours")
        lines.append(line + ".")
    lines.append("")
    lines.append(f"Basis folders: {', '.join(plan.basis_dirs) or 'none'}.")
    lines.append(f"GPUs: {plan.gpus} assumed (device: auto resolves to {'cuda' if plan.gpus else 'cpu'}); "
                 "pass --gpus N to plan for a machine with GPUs.")
    for name, why in plan.unloaded.items():
        lines.append(f"Not planned: dataset {name!r} could not be loaded: {why}")
    lines += [f"Not planned: {line}." for line in plan.no_task]
    if plan.refused:
        cost = "" if plan.refused_hours is None else (f" (about {plan.refused_hours:,.0f} CPU-hours by the models' "
                                                      "cost models)")
        lines += ["", f"Refused: {plan.refused_jobs:,} jobs{cost}, not planned above and in no total; `tabbench run` "
                      "stops before any job starts unless given --skip-refused, which runs the jobs planned above "
                      "and leaves these out:", *plan.refused]
    if not plan.rows:
        lines += ["", "Nothing planned: no job of the selection can run (see above)."]
    return "\n".join(lines)


def plan_suite(suite, paths, results_dir: Path, published_dir: Path | None, basis_dirs=(), gpus: int = 0,
               selection: Selection = Selection(), plugin_files=(), rerun=None) -> Plan:
    """Prepare the suite as ``tabbench run`` does (tabbench/run/runner.py: registry, the same --models,
    --datasets and --folds; a dataset that fails to load is listed, not fatal), then ``make_plan``."""
    from tabbench.run.runner import prepare_suite

    prepared = prepare_suite(suite, selection, paths, plugin_files)
    return make_plan(prepared, results_dir, published_dir, basis_dirs, gpus, paths, rerun)
