"""The ``tabbench`` command. Its commands are registered through the ``register_commands`` hook, the built-in ones
below (``register_commands``, this module being one of the core's plugins) as a plugin registers its own. Imports
stay inside the commands: ``--help`` and ``models`` load no torch, Ray or boosters."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tabbench.hookspecs import hookimpl


def _csv(text: str) -> tuple:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _data_args(p):
    p.add_argument("--cache", metavar="DIR", help="data cache directory (default: $TABBENCH_CACHE or the user cache dir)")
    p.add_argument("--mirror", metavar="DIR", action="append", default=[],
                   help="read-only folder searched for data files before any download (repeatable; also $TABBENCH_MIRROR)")


def _checkpoints_arg(parser) -> None:
    parser.add_argument("--checkpoints", metavar="DIR", default=os.environ.get("TABBENCH_CHECKPOINTS"),
                        help="keep unfinished jobs' training state in DIR/<suite> (default: $TABBENCH_CHECKPOINTS, "
                             "else the results folder's checkpoints/), e.g. a folder that outlives a fresh checkout")


def _plugin_arg(p):
    p.add_argument("--plugin", metavar="PATH", action="append", default=[], help="load a plugin file (repeatable)")


def _selection_args(p):
    """--models, --datasets, --folds: the same selection for `run` and `plan` (tabbench.run.expand.Selection)."""
    p.add_argument("--models", type=_csv, default=(), metavar="A,B", help="only these methods of the suite")
    p.add_argument("--datasets", type=_csv, default=(), metavar="X,Y", help="only these datasets of the suite")
    p.add_argument("--folds", type=lambda t: tuple(int(x) for x in _csv(t)), default=(), metavar="0,1",
                   help="only these folds of each dataset's split")


def _reference_arg(p):
    p.add_argument("--reference", default="results", metavar="DIR",
                   help="root of the published result folders a run is checked against (default: results/)")


def _run_parser(sub) -> None:
    from tabbench.run.executors import DEFAULT, load_executors  # the classes' modules, not the libraries (Ray)

    run = sub.add_parser("run", help="run a suite's jobs (resumes: finished jobs are skipped)")
    run.add_argument("suite", help="suite YAML file, e.g. suites/quickstart.yaml")
    # any registered name, a --plugin file's too: an unknown one is refused by the run, listing the known ones
    run.add_argument("--executor", metavar="NAME",
                     help=f"where the jobs run (default: {DEFAULT}; registered: {', '.join(sorted(load_executors()))}): "
                          "ray, as Ray tasks on a local Ray (loopback only) or the cluster of --address; local, one "
                          "at a time in this process's forked children, no Ray (same isolation, budgets and "
                          "records). docs/running.md compares them")
    where = run.add_mutually_exclusive_group()
    where.add_argument("--address", help="existing Ray cluster address, implies --executor ray (default: "
                                         "$RAY_ADDRESS, else a local Ray)")
    where.add_argument("--no-ray", action="store_true", help="the same as --executor local")
    run.add_argument("--results", metavar="DIR", help="results root the run writes to (default: runs/; "
                     "--results results adds jobs to the published folders, e.g. a new model's)")
    _reference_arg(run)
    _checkpoints_arg(run)
    _rerun_args(run)
    run.add_argument("--cpu", metavar="ID",
                     help="run only on the kind of CPU whose id is ID (its records' environment.hardware.id); on "
                          "another kind the run stops before any job. For a comparison resumed over several "
                          "sessions on machines that may differ: a time budget counts one kind of CPU's seconds")
    run.add_argument("--skip-refused", action="store_true",
                     help="run every job that can run when some datasets cannot be loaded or a model's pre-run "
                          "check refuses some jobs (else the run stops before any job); what is left out is said "
                          "before and after the run")
    _selection_args(run)
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    from tabbench.report.site import tables_only_argument  # light, as leaderboard_arguments

    tables_only_argument(run)
    _plugin_arg(run)
    _data_args(run)


def _rerun_args(parser) -> None:
    """Which jobs that have a record run again: `tabbench run`'s, and `tabbench plan`'s to plan that run."""
    parser.add_argument("--force", action="store_true", help="re-run jobs that already have a record (but those a "
                        "forced run with the same --rerun-reason ran: the same command resumes)")
    parser.add_argument("--force-only", metavar="WHICH", type=_csv, default=(),
                        help="with --force, only the jobs whose record is one of WHICH (comma-separated): "
                             "wall-stopped (a budget counted in wall seconds ended or killed it), other-cpu (it ran "
                             "on another kind of CPU), wall-clock (its budget counted wall seconds)")
    parser.add_argument("--retry-failed", action="store_true", help="re-run jobs whose record is a failure")
    parser.add_argument("--rerun-reason", metavar="TEXT",
                        help="why jobs with a record run again, kept in each re-run record's `rerun` field beside "
                             "the record it replaces (a results README's provenance block shows it); required with "
                             "--force")


def _leaderboard_parser(sub) -> None:
    board = sub.add_parser(
        "leaderboard", help="regenerate leaderboard tables, significance tests, figures and LaTeX from records",
        description="Rank the records of one or more result folders (run nothing): leaderboard.md and .csv, "
                    "Friedman / Nemenyi / Wilcoxon-Holm tests with critical-difference diagrams, the win-rate "
                    "matrix, the cost-against-quality scatter and leaderboard.tex. Several targets are ranked "
                    "together into RESULTS/NAME/, e.g. `tabbench leaderboard results/uci-small "
                    "results/uci-large-cpu --name uci-cpu --published suites/published/npt-paper.yaml`.")
    from tabbench.report.site import leaderboard_arguments  # light: the arguments a README's command uses too

    leaderboard_arguments(board)


def _report_parser(sub) -> None:
    report = sub.add_parser("report", help="regenerate every results folder's tables and HTML page from its records, "
                            "the index page and the answer atop results/README.md")
    report.add_argument("--results", default="results", metavar="DIR", help="results root (default: results/), "
                        "its folders' READMEs giving their commands; run from the checkout's root")


def _compare_parser(sub) -> None:
    compare = sub.add_parser("compare", help="compare two result folders per method and dataset; writes "
                                             "comparison.md and .csv into the first")
    compare.add_argument("ours", help="a suite's results folder, e.g. runs/quickstart")
    compare.add_argument("theirs", help="the folder to check it against, e.g. results/quickstart")


def _plan_parser(sub) -> None:
    plan = sub.add_parser("plan", help="jobs a run would do, those already done, resources and estimated hours; "
                                       "runs nothing")
    plan.add_argument("suite")
    plan.add_argument("--results", metavar="DIR", help="results root a run would write to (default: runs/)")
    _reference_arg(plan)
    plan.add_argument("--basis", metavar="DIR", action="append", default=[],
                      help="results folder or root whose records give the time estimates (repeatable; default: "
                           "the --results and --reference roots)")
    plan.add_argument("--gpus", type=int, default=0, metavar="N",
                      help="plan for N GPUs (default 0: device=auto resolves to cpu)")
    _rerun_args(plan)
    _selection_args(plan)
    _plugin_arg(plan)
    _data_args(plan)


def _probe_parser(sub) -> None:
    probe = sub.add_parser("probe", help="probes of fitted models (corruption: do predictions use other rows?)")
    probes = probe.add_subparsers(dest="probe", required=True, metavar="PROBE")
    corruption = probes.add_parser(
        "corruption", help="the NPT paper's corruption test (Table 2) for the selected jobs",
        description="Fit each selected job as `tabbench run` would (in this process), then for every test row "
                    "permute each column of the other rows independently and predict the row again; merge the "
                    "test metric before and after (accuracy, AUROC beside it for binary tasks, or RMSE) into "
                    "RESULTS/<suite>/probe-corruption/corruption.csv, a job probed again replacing its row, and "
                    "write corruption.md from it (docs/probe.md).")
    corruption.add_argument("suite", help="suite YAML file, e.g. suites/uci-small.yaml")
    corruption.add_argument("--results", default="runs", metavar="DIR",
                            help="results root the tables are written under (default: runs/)")
    corruption.add_argument("--batch-rows", type=int, default=None, metavar="N",
                            help="test rows whose corrupted contexts are built and predicted together (default 32)")
    corruption.add_argument("--test-rows", type=int, default=None, metavar="N",
                            help="probe a fixed random sample of N test rows of each job (drawn from its seed, fold "
                                 "and repeat; the same rows before and after), for large test parts (default: all)")
    _selection_args(corruption)
    _checkpoints_arg(corruption)
    _plugin_arg(corruption)
    _data_args(corruption)


def _archive_parser(sub) -> None:
    archive = sub.add_parser("archive", help="compress a results folder's live records.jsonl into its next "
                             "records[-N].jsonl.gz (safe while a run appends; readers see the same records)")
    archive.add_argument("folder", help="a suite's results folder, e.g. results/breadth")


def _models_parser(sub) -> None:
    models = sub.add_parser("models", help="list the registered models, or one model's parameters")
    models.add_argument("name", nargs="?", help="a model: print its parameters (type, choices or bounds, default)")
    _plugin_arg(models)


def _datasets_parser(sub) -> None:
    datasets = sub.add_parser("datasets", help="where each dataset of a suite comes from, its shape, task and splits")
    datasets.add_argument("suite")
    datasets.add_argument("--no-load", action="store_true", help="only say where the data is; do not parse it")
    datasets.add_argument("--json", action="store_true", help="print one JSON object per dataset")
    _data_args(datasets)


def _fetch_parser(sub) -> None:
    fetch = sub.add_parser("fetch", help="download everything a suite needs into the cache (for offline runs)")
    fetch.add_argument("suite")
    _data_args(fetch)


def _validate_parser(sub) -> None:
    validate = sub.add_parser("validate", help="check a suite and its models without running (reading only the data "
                              "of grouped and temporal splits, where it is here)")
    validate.add_argument("suite")
    _plugin_arg(validate)


def _schema_parser(sub) -> None:
    schema = sub.add_parser("schema", help="print the suite format as JSON Schema (suites/suite.schema.json)")
    schema.add_argument("--markdown", action="store_true", help="print the field reference of suites/README.md instead")


def build_parser(commands: dict | None = None) -> argparse.ArgumentParser:
    """The command line of ``commands`` (default: every registered one, ``tabbench.plugins.load_commands``)."""
    from tabbench.plugins import PluginError, load_commands

    parser = argparse.ArgumentParser(prog="tabbench", description="Benchmark NPT and tabular baselines, reproducibly.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in (load_commands() if commands is None else commands).items():
        command.parser(sub)
        if name not in sub.choices:
            raise PluginError(f"command {name!r}: its parser function {command.parser.__qualname__} adds no "
                              f"subcommand of that name (subparsers.add_parser({name!r}, ...))")
    return parser


def _check_rerun_reason(args) -> None:
    """--force replaces records that succeeded, for a reason only its user knows (a fixed model, budget points,
    another machine), so it must be given; --retry-failed's reason is the failure its records replace, so one is
    optional; without either nothing that has a record runs, and a reason would mark nothing."""
    from tabbench.errors import TabbenchError

    command = f"tabbench {args.command}"
    reason = (args.rerun_reason or "").strip()
    if args.force and not reason:
        raise TabbenchError(f"{command} --force replaces records that may have succeeded: say why with --rerun-reason "
                            "TEXT (e.g. --rerun-reason 'budget points added'); each re-run record keeps it")
    if args.rerun_reason is not None and not (args.force or args.retry_failed):
        raise TabbenchError(f"{command} --rerun-reason is for jobs run again: add --force or --retry-failed, or drop it")
    args.rerun_reason = reason or None
    if args.force_only:
        from tabbench.run.runner import FORCE_ONLY

        unknown = [name for name in args.force_only if name not in FORCE_ONLY]
        if unknown or not args.force:
            raise TabbenchError(f"{command} --force-only {','.join(args.force_only)}: "
                                + (f"{', '.join(unknown)} is not one of {', '.join(FORCE_ONLY)}" if unknown
                                   else "it limits --force: add --force (and --rerun-reason)"))


def cmd_run(args) -> int:
    from tabbench.report import report_installed
    from tabbench.data.cache import DataPaths
    from tabbench.run.runner import RunOptions, run_suite
    from tabbench.suite import load_suite

    _check_rerun_reason(args)
    suite = load_suite(args.suite, tuple(args.plugin))
    options = RunOptions(results=Path(args.results or RunOptions.results), executor=_executor_of(args),
                         address=args.address, force=args.force, rerun_reason=args.rerun_reason,
                         force_only=tuple(args.force_only or ()),
                         retry_failed=args.retry_failed, models=args.models, datasets=args.datasets, folds=args.folds,
                         plugin_files=tuple(args.plugin),
                         checkpoints=Path(args.checkpoints) if args.checkpoints else None,
                         data_paths=DataPaths.from_env(args.cache, args.mirror, base=suite.path.parent),
                         progress=not args.no_progress, report=not args.tables_only and report_installed(),
                         skip_refused=args.skip_refused, cpu=args.cpu)
    summary = run_suite(suite, options)
    failures = ", ".join(f"{n} {status}" for status, n in sorted(summary.failures.items())) or "none"
    elsewhere = f", {summary.elsewhere} ran in another run on the folder" if summary.elsewhere else ""
    print(f"{summary.planned} jobs: {summary.done} ran{elsewhere}, {summary.skipped} skipped (already done), "
          f"{summary.failed} failed ({failures}).")
    if summary.stopped:
        print(f"{summary.stopped} of them stopped at their time budget: they kept what they had trained by then, "
              "less on a busy or slower machine (records: info.stopped_by_time_budget).")
    if summary.failed:
        print("\n".join(["Failed:", *summary.failure_lines()]))
    print(f"Records:     {summary.results_dir / 'records' / 'records.jsonl'}")
    print(f"Leaderboard: {summary.results_dir / 'leaderboard.md'}")
    if summary.left_out:
        print("Not run (--skip-refused): " + "; ".join(summary.left_out) + ".")
    reference = suite.results_dir(args.reference)
    if (reference / "records").is_dir() and reference.resolve() != summary.results_dir.resolve():
        from tabbench.compare import write_comparison

        table, text, path = write_comparison(summary.results_dir, reference)
        print(f"\nReproduction check against the published {reference}:\n\n{text}Written: {path}")
    return 1 if summary.failed else 0


def _executor_of(args) -> str:
    """The executor's name from --executor and the flags it replaced: --no-ray is local, --address implies ray."""
    from tabbench.run.executors import DEFAULT, ExecutorError

    implied = "local" if args.no_ray else "ray" if args.address else None
    if implied and args.executor and args.executor != implied:
        flag = "--no-ray" if args.no_ray else "--address"
        raise ExecutorError(f"{flag} means --executor {implied}, not --executor {args.executor}: drop one of them")
    return args.executor or implied or DEFAULT


def cmd_compare(args) -> int:
    from tabbench.compare import FLAGGED, write_comparison

    for folder in (args.ours, args.theirs):
        if not (Path(folder) / "records").is_dir():
            print(f"tabbench: {folder} has no records/ folder; pass a suite's results folder, "
                  "e.g. runs/quickstart or results/quickstart", file=sys.stderr)
            return 2
    table, text, path = write_comparison(args.ours, args.theirs)
    print(f"{text}Written: {path} and comparison.csv")
    return 1 if (table["verdict"] == FLAGGED).any() else 0


def cmd_plan(args) -> int:
    from tabbench.run.expand import Selection
    from tabbench.plan import format_plan, plan_suite
    from tabbench.run.runner import Rerun, RunOptions

    _check_rerun_reason(args)
    suite, paths = _suite_and_paths(args, tuple(args.plugin))
    results = Path(args.results or RunOptions.results)
    plan = plan_suite(suite, paths, suite.results_dir(results), suite.results_dir(args.reference),
                      args.basis or _default_basis(suite, results, args.reference), args.gpus,
                      Selection(args.models, args.datasets, args.folds), tuple(args.plugin),
                      Rerun(args.force, args.retry_failed, args.rerun_reason, tuple(args.force_only)))
    print(format_plan(plan))
    return 0 if plan.rows else 1  # nothing could be planned: a script must not take that for success


def _default_basis(suite, results: Path, reference) -> list:
    """The folders whose records time a plan: the --results and --reference roots, and, for a suite in a
    checkout's suites/ run from elsewhere, that checkout's runs/ and results/ (else no basis is found)."""
    checkout = suite.path.resolve().parent.parent
    return list(dict.fromkeys([results, Path(reference)] + [checkout / name for name in ("runs", "results")
                                                             if (checkout / name).is_dir()]))


def cmd_probe(args) -> int:
    from tabbench.run.expand import Selection
    from tabbench.probe import BATCH_ROWS, probe_suite

    suite, paths = _suite_and_paths(args, tuple(args.plugin))
    table, out = probe_suite(suite, Selection(args.models, args.datasets, args.folds), Path(args.results), paths,
                             tuple(args.plugin), args.batch_rows or BATCH_ROWS, args.test_rows,
                             checkpoints=Path(args.checkpoints) if args.checkpoints else None)
    print(f"{len(table)} jobs probed, merged into {out / 'corruption.csv'}. Written: {out / 'corruption.md'}")
    return 0


def cmd_leaderboard(args) -> int:
    from tabbench.report.leaderboard import inputs, write_leaderboard

    try:
        given = inputs(args.targets, args.results, args.published, args.name, args.first_complete, args.tables_only,
                       args.across_devices, args.common_splits)
    except ValueError as exc:
        print(f"tabbench: {exc}", file=sys.stderr)
        return 2
    from tabbench.store import Store

    Store(given["suite_dir"]).check_writable("the leaderboard was not written (elsewhere: --name NAME --results DIR)",
                                             records=False)
    print(f"Leaderboard: {write_leaderboard(**given)}")
    return 0


def cmd_report(args) -> int:
    from tabbench.report.site import write_site

    print(f"Report: {write_site(Path(args.results))}")
    return 0


def cmd_models(args) -> int:
    from tabbench.plugins import load_models
    from tabbench.report.format import text_table

    models = load_models(tuple(args.plugin))
    if args.name is not None:
        return _model_params(models, args.name)
    rows = []
    for name, entry in sorted(models.items()):
        spec = entry.spec
        gpus = "gpu if device=cuda" if callable(spec.gpus) else (f"{spec.gpus:g} gpu" if spec.gpus else "")
        cpus = "cpus param" if callable(spec.cpus) else f"{spec.cpus:g} cpu"
        resources = ", ".join(x for x in (cpus, gpus) if x)
        rows.append((name, ",".join(sorted(spec.tasks)), resources, entry.source))
    print("\n".join(text_table(["model", "tasks", "resources", "from"], rows)))
    described = [(name, entry.spec.description) for name, entry in sorted(models.items()) if entry.spec.description]
    if described:
        print()
        print("\n".join(f"{name}: {text}" for name, text in described))
    from tabbench.plugins import BROKEN  # each said on stderr as it was left out

    return 1 if BROKEN else 0


def _model_params(models: dict, name: str) -> int:
    """One model's parameters, from its params class (tabbench/params.py)."""
    from tabbench.errors import TabbenchError
    from tabbench.params import describe
    from tabbench.report.format import text_table
    from tabbench.errors import did_you_mean

    if name not in models:
        raise TabbenchError(f"no model named {name!r}" + did_you_mean(name, models, "registered models"))
    spec = models[name].spec
    print(f"{name}: {spec.description}" if spec.description else name)
    print()
    print("\n".join(text_table(["param", "allowed", "default", "flag", "meaning"], describe(spec.params))))
    if spec.run_params:
        print("\nrun-only: says how a job runs, not what it computes; a job's key holds its default, so a re-run "
              "with another value finds the jobs done")
    return 0


def _suite_and_paths(args, plugin_files=()):
    from tabbench.data.cache import DataPaths
    from tabbench.suite import load_suite

    suite = load_suite(args.suite, plugin_files)
    return suite, DataPaths.from_env(args.cache, args.mirror, base=suite.path.parent)


def _split_text(split: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in split.items())


def cmd_datasets(args) -> int:
    import json

    from tabbench.data.dataset import describe

    suite, paths = _suite_and_paths(args)
    failed = 0
    for cfg in suite.datasets:
        info = describe(cfg, paths, load=not args.no_load)
        failed += "error" in info
        if args.json:
            print(json.dumps(info, default=str))
            continue
        print(f"{info['name']}: {info['source']}")
        print(f"  location: {info['location']}" + (f" ({info['note']})" if info.get("note") else ""))
        if info.get("subset"):
            print(f"  subset:   {info['subset']}")
        if "rows" in info:
            print(f"  table:    {info['rows']} rows x {info['columns']} columns, task {info['task']}, "
                  f"target {info['target']!r}, fingerprint {info['fingerprint']}")
        print(f"  split:    {_split_text(info['split'])}")
        for s in info.get("splits", []):
            print(f"    fold {s['fold']} repeat {s['repeat']}: train {s['train']} / val {s['val']} / test {s['test']}"
                  f"  fingerprint {s['fingerprint']}")
        if "error" in info:
            print(f"  ERROR:    {info['error']}")
    return 1 if failed else 0


def cmd_fetch(args) -> int:
    from tabbench.data.cache import DownloadError
    from tabbench.data.dataset import fetch

    suite, paths = _suite_and_paths(args)
    failed = 0
    for cfg in suite.datasets:
        try:
            info = fetch(cfg, paths)
        except DownloadError as exc:
            print(f"{cfg.name}: FAILED: {exc}")
            failed += 1
            continue
        extra = f" [subset: {info['subset']}]" if info.get("subset") else ""
        print(f"{cfg.name}: {info['status']}{extra}" + (f" ({info['note']})" if info.get("note") else ""))
        for path in info["files"]:
            digest = info["sha256"].get(path)
            print(f"  {path}" + (f"  sha256 {digest}" if digest else ""))
    print(f"Cache: {paths.cache}")
    return 1 if failed else 0


def cmd_validate(args) -> int:
    from tabbench.plugins import load_models
    from tabbench.suite import check_models, check_split_columns, load_suite

    suite = load_suite(args.suite, tuple(args.plugin))
    check_models(suite, load_models(tuple(args.plugin) + suite.plugins))
    check_split_columns(suite)  # grouped and temporal splits' columns, on the data that is here
    print(f"{args.suite}: valid ({len(suite.datasets)} datasets, {len(suite.models)} models, seeds {list(suite.seeds)})")
    print(f"Its fields and its models' parameters were checked; its data was not loaded. `tabbench plan {args.suite}` "
          f"loads every dataset and names any that cannot load; `tabbench datasets {args.suite}` says where each "
          "comes from.")
    return 0


def cmd_archive(args) -> int:
    from tabbench.errors import TabbenchError
    from tabbench.store import RECORDS_DIR, Store

    store = Store(args.folder)
    if not store.path.exists():
        raise TabbenchError(f"{store.path}: no live records file; name a suite's results folder (the one "
                            f"holding {RECORDS_DIR}/), e.g. results/breadth")
    store.check_writable("nothing was archived")
    written = store.archive()
    print(f"{store.path}: nothing to archive" if written is None else f"archived {store.path} into {written}")
    return 0


def cmd_schema(args) -> int:
    from tabbench.plugins import load_models
    from tabbench.suite import reference_markdown, schema_text

    print(reference_markdown() if args.markdown else schema_text(models=load_models()), end="")
    return 0


@hookimpl
def register_commands(register):
    """The built-in commands, each a _NAME_parser and a cmd_NAME function, in the order `tabbench --help` lists them."""
    from tabbench.plugins import Command

    for name, parser, run in (
            ("run", _run_parser, cmd_run), ("leaderboard", _leaderboard_parser, cmd_leaderboard),
            ("report", _report_parser, cmd_report), ("compare", _compare_parser, cmd_compare),
            ("plan", _plan_parser, cmd_plan), ("probe", _probe_parser, cmd_probe),
            ("archive", _archive_parser, cmd_archive), ("models", _models_parser, cmd_models),
            ("datasets", _datasets_parser, cmd_datasets), ("fetch", _fetch_parser, cmd_fetch),
            ("validate", _validate_parser, cmd_validate), ("schema", _schema_parser, cmd_schema)):
        register(Command(name, parser, run))


def main(argv=None) -> int:
    import signal

    # A shell starts a background job with SIGINT ignored; every command must still stop on Ctrl-C or kill -INT
    # (a run's or a probe's long fits most of all). run_suite then installs its own handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from tabbench.errors import TabbenchError
    from tabbench.plugins import load_commands

    try:
        commands = load_commands()  # the core's and the plugins' (an entry point that fails is an error here)
        args = build_parser(commands).parse_args(argv)
        return commands[args.command].run(args)
    except KeyboardInterrupt:
        return 130  # the runner has said what was kept and how to resume
    except TabbenchError as exc:  # bad input: its message names the file or field and the fix
        print(f"tabbench: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
