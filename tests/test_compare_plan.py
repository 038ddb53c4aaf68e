"""`tabbench run`'s default folder and reproduction check, `tabbench compare` on real runs, and
`tabbench plan`'s counts against a hand count."""

import re
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from tabbench.cli import main
from tabbench.store import load_records
from tests.conftest import ROOT, need

#: 2 datasets x 3 folds; knn tuned over 2 configurations, a small MLP (a seeded neural model), and k-NN
#: with k = 1 under the name "knn" for the changed-model check.
SUITE = {
    "name": "small",
    "seeds": [0],
    "datasets": [
        {"name": "wine", "source": "sklearn", "id": "wine", "split": {"protocol": "kfold", "k": 3, "seed": 1}},
        {"name": "diabetes", "source": "sklearn", "id": "diabetes", "split": {"protocol": "kfold", "k": 3}},
    ],
    "models": {
        "knn": {"tuning": "grid", "search_space": {"n_neighbors": [3, 9]}},
        "mlp": {"params": {"max_epochs": 5, "hidden_size": 16}},
    },
}


def _write(tmp_path, raw, name="small.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw))
    return path


def _tabbench(*args, cwd=ROOT):
    out = subprocess.run([sys.executable, "-m", "tabbench.cli", *map(str, args), "--no-progress"] if args[0] == "run"
                         else [sys.executable, "-m", "tabbench.cli", *map(str, args)],
                         capture_output=True, text=True, timeout=600, cwd=cwd)
    return out


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """The same suite run twice through the CLI: first with the default results folder (runs/ under the
    working directory), then into another folder with the first as the published reference. Without Ray and
    without figures (``--no-ray --tables-only``): what these tests read is the records and the tables, and
    the Ray executor and the figures have tests of their own (test_runner.py, test_executors.py)."""
    tmp = tmp_path_factory.mktemp("runs")
    suite = _write(tmp, SUITE)
    first = _tabbench("run", suite, "--no-ray", "--tables-only", cwd=tmp)
    assert first.returncode == 0, first.stderr[-3000:]
    second = _tabbench("run", suite, "--no-ray", "--tables-only", "--results", tmp / "second", "--reference",
                       tmp / "runs", cwd=tmp)
    assert second.returncode == 0, second.stderr[-3000:]
    return tmp, suite, first, second


def test_run_writes_to_runs_and_ends_with_the_reproduction_check(two_runs):
    tmp, _, first, second = two_runs
    assert len(load_records(tmp / "runs" / "small")) == 2 * 3 * 2 + 2 * 3  # knn 2 configs, mlp 1; 3 folds each
    assert "Reproduction check" not in first.stdout  # no reference folder for this suite yet
    assert f"Reproduction check against the published {tmp / 'runs' / 'small'}" in second.stdout
    table = pd.read_csv(tmp / "second" / "small" / "comparison.csv").set_index(["method", "dataset"])
    assert len(table) == 4 and (table["runs"] == 3).all()
    # the same machine and seeds: k-NN is identical, the MLP too (one torch thread) or within its band
    assert (table.loc["knn", "verdict"] == "identical").all()
    assert table.loc["mlp", "verdict"].isin(["identical", "within band"]).all()
    assert "4 method x dataset cells: " in second.stdout


def test_compare_prints_and_writes_the_means_of_both_folders(two_runs, capsys):
    tmp = two_runs[0]
    ours, theirs = tmp / "second" / "small", tmp / "runs" / "small"
    assert main(["compare", str(ours), str(theirs)]) == 0
    printed = capsys.readouterr().out
    table = pd.read_csv(ours / "comparison.csv").set_index(["method", "dataset"])
    assert (ours / "comparison.md").read_text() in printed
    board = pd.read_csv(theirs / "leaderboard.csv")
    for (method, dataset), row in table.iterrows():
        metric = row["metric"]
        published = board[(board.table == f"test_{metric}") & (board.method == method) & (board.dataset == dataset)]
        assert row["theirs"] == pytest.approx(published["value"].item(), rel=1e-12)  # the leaderboard's mean
        assert row["difference"] == pytest.approx(row["ours"] - row["theirs"], abs=1e-12)


def test_records_say_what_reports_need_of_the_model_and_compare_reads_only_them(two_runs):
    tmp = two_runs[0]
    frame = load_records(tmp / "runs" / "small")
    # written when the jobs were planned: the specs' deterministic flags, and the params as the key sees them
    assert frame.loc[frame.model == "knn", "deterministic"].tolist() == [True] * 12
    assert frame.loc[frame.model == "mlp", "deterministic"].tolist() == [False] * 6
    # neither model has run params; k-NN's scaler came after the first records, so a key leaves it out at its
    # first value (param(added_as=...))
    assert frame["key_params"].tolist() == [{k: v for k, v in p.items() if k != "scaler"} for p in frame["params"]]
    # compare tells deterministic from seeded models by the records alone: the registry cannot be imported
    code = ("import sys; sys.modules['tabbench.plugins'] = None; from tabbench.compare import compare; "
            "t = compare(sys.argv[1], sys.argv[2]); print(sorted(set(zip(t.method, t.kind))))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp / "second" / "small"), str(tmp / "runs" / "small")],
                         capture_output=True, text=True, check=True).stdout
    # both folders were made here: the MLP is a seeded model held to an exact repeat (same hardware fingerprint)
    assert out.strip() == "[('knn', 'deterministic'), ('mlp', 'seeded, same hardware')]"


def test_compare_flags_a_deterministic_model_that_changed(two_runs, tmp_path, capsys):
    tmp = two_runs[0]
    changed = {**SUITE, "models": {"knn": {"params": {"n_neighbors": 1}}}}  # same method name, other model
    # in-process (--no-ray): the run writes the records a Ray run writes (tests/test_runner.py), and compare reads
    # only them; a Ray start would double the test's time
    out = _tabbench("run", _write(tmp_path, changed), "--results", tmp_path / "changed",
                    "--reference", tmp_path / "none", "--no-ray", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert main(["compare", str(tmp_path / "changed" / "small"), str(tmp / "runs" / "small")]) == 1
    table = pd.read_csv(tmp_path / "changed" / "small" / "comparison.csv").set_index(["method", "dataset"])
    assert list(table.index) == [("knn", "diabetes"), ("knn", "wine")]
    assert (table["verdict"] == "FLAGGED").all()
    assert table["note"].str.contains("3 run\\(s\\) selected another configuration").all()
    assert "FLAGGED" in capsys.readouterr().out


def test_compare_names_a_folder_without_records(tmp_path, capsys):
    assert main(["compare", str(tmp_path), str(tmp_path)]) == 2
    assert f"{tmp_path} has no records/ folder" in capsys.readouterr().err


def test_plan_counts_jobs_done_and_published_by_hand(two_runs):
    from tabbench.data.cache import DataPaths
    from tabbench.plan import plan_suite
    from tabbench.suite import load_suite

    tmp = two_runs[0]
    # seeds 0 and 1, and a third configuration of knn: seed 0's first two configurations ran
    bigger = {**SUITE, "seeds": [0, 1], "models": {**SUITE["models"],
                                                  "knn": {"tuning": "grid", "search_space": {"n_neighbors": [3, 9, 15]}}}}
    suite = load_suite(_write(tmp, bigger, "bigger.yaml"))
    plan = plan_suite(suite, DataPaths(cache=tmp / "cache"), tmp / "runs" / "small", tmp / "second" / "small",
                      [tmp / "runs"])
    rows = {(r.method, r.dataset): r for r in plan.rows}
    assert set(rows) == {(m, d) for m in ("knn", "mlp") for d in ("wine", "diabetes")}
    for dataset in ("wine", "diabetes"):
        knn, mlp = rows[("knn", dataset)], rows[("mlp", dataset)]
        # hand count: knn 3 configs x 3 folds x 2 seeds = 18, of which 2 x 3 x 1 = 6 ran; mlp 1 x 3 x 2 = 6, 3 ran
        assert (knn.configs, knn.splits, knn.seeds, knn.planned, knn.done, knn.published) == (3, 3, 2, 18, 6, 6)
        assert (mlp.configs, mlp.splits, mlp.seeds, mlp.planned, mlp.done, mlp.published) == (1, 3, 2, 6, 3, 3)
        assert knn.resources == {"num_cpus": 1, "num_gpus": 0}
        # the estimate: median job seconds of the 6 (3) records of runs/small, x the 12 (3) pending jobs x 1 cpu;
        # they ran under the cpu clock, so their seconds are the job's CPU seconds, not its wall seconds
        records = load_records(tmp / "runs" / "small")
        assert set(records["clock"]) == {"cpu"}
        for row in (knn, mlp):
            seconds = records[(records.method == row.method) & (records.dataset == dataset)]["cpu_seconds"]
            assert row.basis_records == len(seconds) and row.median_s == pytest.approx(seconds.median())
            assert row.cpu_hours == pytest.approx(row.pending * seconds.median() / 3600) and row.gpu_hours == 0
        assert "2 of 3 planned configurations" in knn.basis and "same configurations" in mlp.basis


def test_plan_prints_without_starting_ray_and_says_where_there_is_no_basis(two_runs):
    tmp = two_runs[0]
    code = ("import sys; from tabbench.cli import main; rc = main(sys.argv[1:]); "
            "assert 'ray' not in sys.modules, 'plan imported ray'; sys.exit(rc)")
    out = subprocess.run([sys.executable, "-c", code, "plan", str(tmp / "small.yaml"), "--basis", str(tmp / "none")],
                         capture_output=True, text=True, timeout=300, cwd=tmp)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "18 jobs planned, 18 already done in runs/small (a run there would run 0)." in out.stdout
    assert "knn: nothing to run" in out.stdout and "GPUs: 0 assumed" in out.stdout
    again = subprocess.run([sys.executable, "-c", code, "plan", str(tmp / "small.yaml"), "--results", str(tmp / "new"),
                            "--basis", str(tmp / "none")], capture_output=True, text=True, timeout=300, cwd=tmp)
    assert "no basis for 6 jobs (wine, diabetes)" in again.stdout and "No basis: 18 jobs" in again.stdout


def test_plan_selects_jobs_as_run_does_folds_included(tmp_path, capsys):
    """`tabbench plan --models/--datasets/--folds`: the jobs `tabbench run` with the same options would run."""
    from tabbench.data.cache import DataPaths
    from tabbench.run.expand import Selection
    from tabbench.plan import plan_suite
    from tabbench.run.runner import RunError
    from tabbench.suite import load_suite

    suite = load_suite(_write(tmp_path, SUITE))
    paths = DataPaths(cache=tmp_path / "cache")
    plan = plan_suite(suite, paths, tmp_path / "runs" / "small", None, [],
                      selection=Selection(models=("knn",), datasets=("wine",), folds=(0, 2)))
    ((key, row),) = {(r.method, r.dataset): r for r in plan.rows}.items()
    assert key == ("knn", "wine") and (row.planned, row.configs, row.splits) == (4, 2, 2)  # 2 configs x 2 folds
    with pytest.raises(RunError, match=r"--models names \['knm'\], not in .*small.yaml; its models: knn, mlp"):
        plan_suite(suite, paths, tmp_path / "runs" / "small", None, [], selection=Selection(models=("knm",)))
    assert main(["plan", str(tmp_path / "small.yaml"), "--results", str(tmp_path / "runs"), "--cache",
                 str(tmp_path / "cache"), "--folds", "1", "--datasets", "diabetes"]) == 0
    out = capsys.readouterr().out
    assert "3 jobs planned" in out and "wine" not in out  # knn 2 configs + mlp 1, fold 1 of diabetes only


def _in_process(capsys, *argv) -> tuple[int, str, str]:
    """`tabbench ARGV` in this process (no interpreter to start: seconds less than ``_tabbench``): its exit code,
    stdout and stderr."""
    code = main([*map(str, argv), *(["--no-progress"] if argv[0] == "run" else [])])
    out = capsys.readouterr()
    return code, out.out, out.err


def _planned_done(capsys, suite, results, *extra) -> tuple:
    code, out, _ = _in_process(capsys, "plan", suite, "--results", results, "--cache", results / "cache", *extra)
    assert code == 0
    return re.search(r"(\d+) jobs planned, (\d+) already done", out).groups()


def test_plan_with_force_counts_the_jobs_the_same_forced_run_then_runs(two_runs, tmp_path, capsys):
    """`tabbench plan --force --rerun-reason R` (and --force-only): a job counts as done when the forced run for
    R already ran it, and the jobs it leaves are those `tabbench run` with the same options runs next."""
    import shutil

    shutil.copytree(two_runs[0] / "runs", tmp_path / "runs")
    suite, runs = _write(tmp_path, SUITE), tmp_path / "runs"
    forced = ["--force", "--rerun-reason", "R"]
    run = ["run", suite, "--no-ray", "--tables-only", "--results", runs, *forced, "--models", "knn", "--datasets", "wine"]
    assert _planned_done(capsys, suite, runs, *forced) == ("18", "0")  # every job has a record; none ran for R
    assert _in_process(capsys, *run, "--folds", "0")[0] == 0
    assert _planned_done(capsys, suite, runs, *forced) == ("18", "2")  # knn's 2 configurations on wine's fold 0
    assert _planned_done(capsys, suite, runs, *forced, "--models", "knn", "--datasets", "wine") == ("6", "2")
    code, out, _ = _in_process(capsys, *run)
    assert code == 0 and "6 jobs: 4 ran" in out, out  # the 6 - 2 the plan left
    assert _planned_done(capsys, suite, runs, *forced, "--force-only", "wall-clock") == ("18", "18")  # cpu clock
    code, _, err = _in_process(capsys, "plan", suite, "--results", runs, "--force")
    assert code == 2 and "tabbench plan --force replaces records" in err


def test_plan_and_run_with_retry_failed_take_the_failed_jobs_only(tmp_path, capsys):
    """A job whose record failed (a model that exits mid-fit: tests/plugins_for_tests.py) counts as done for
    `tabbench plan` and `run`, and as not done with --retry-failed, which runs it again."""
    from tests.plugins_for_tests import PLUGIN_FILE

    raw = {**SUITE, "datasets": SUITE["datasets"][1:],  # diabetes: misbehaving is a regression model
           "models": {"knn": {}, "exits": {"model": "misbehaving", "params": {"how": "exit"}}}}
    suite, runs, plugin = _write(tmp_path, raw), tmp_path / "runs", ["--plugin", PLUGIN_FILE]
    run = ["run", suite, "--no-ray", "--tables-only", "--results", runs, *plugin]
    code, out, _ = _in_process(capsys, *run)
    assert "6 jobs: 6 ran" in out and "3 failed (3 crash)" in out, out
    assert (load_records(runs / "small").groupby("method")["status"].agg(set).to_dict()
            == {"knn": {"ok"}, "exits": {"crash"}})
    assert _planned_done(capsys, suite, runs, *plugin) == ("6", "6")
    assert _planned_done(capsys, suite, runs, *plugin, "--retry-failed") == ("6", "3")
    code, out, _ = _in_process(capsys, *run, "--retry-failed")
    assert "6 jobs: 3 ran, 3 skipped (already done), 3 failed (3 crash)" in out, out  # the crashed 3 again


def test_a_method_whose_model_supports_none_of_the_datasets_tasks_is_named_by_run_and_plan(tmp_path, capsys):
    """A model passes over a dataset of a task it does not support; a method left with no job at all (a
    regression model in a suite of classification tables) is named, not dropped in silence."""
    from tests.plugins_for_tests import PLUGIN_FILE

    raw = {**SUITE, "datasets": SUITE["datasets"][:1], "models": {"knn": {}, "exits": {"model": "misbehaving"}}}
    suite, runs, plugin = _write(tmp_path, raw), tmp_path / "runs", ["--plugin", PLUGIN_FILE]
    said = "exits has no job: its model misbehaving supports regression, and the selected datasets are multiclass."
    code, out, err = _in_process(capsys, "run", suite, "--no-ray", "--tables-only", "--results", runs, *plugin)
    assert code == 0 and "3 jobs: 3 ran" in out and f"Not run: {said}" in err, err
    _, out, _ = _in_process(capsys, "plan", suite, "--results", runs, "--cache", runs / "cache", *plugin)
    assert f"Not planned: {said}" in out
    _, out, _ = _in_process(capsys, "plan", suite, "--results", runs, "--cache", runs / "cache", "--models", "knn",
                            *plugin)
    assert "has no job" not in out  # a method left out by --models is not named


def test_plan_estimates_a_method_without_records_by_its_models_cost_model(tmp_path, monkeypatch):
    """No record of `npt-long` yet: the plan takes NPT's cost model (ModelSpec.estimate) for each pending job,
    scaled by how the records of `npt-short` (the same model, the same size, on the same data) compare with
    what the model estimates for them; with a GPU planned, the cost model's GPU rates, unscaled."""
    need("torch")
    from tabbench.data.cache import DataPaths
    from tabbench.plan import format_plan, plan_suite
    from tabbench.plugins import load_models
    from tabbench.run.runner import RunOptions, run_suite
    from tabbench.spec import SplitSizes
    from tabbench.suite import load_suite

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the record must be a CPU one, on a GPU machine too
    size = {"e": 8, "n_layers": 2, "n_heads": 2, "eval_every": 5, "device": "auto"}
    raw = {"name": "npt-costs", "seeds": [0], "budget": {"time_s": 60},
           "datasets": [{"name": "wine", "source": "sklearn", "id": "wine", "split": {"protocol": "kfold", "k": 3}}],
           "models": {"npt-short": {"model": "npt", "params": {**size, "steps": 10}}}}
    paths = DataPaths(cache=tmp_path / "cache")
    run_suite(load_suite(_write(tmp_path, raw, "short.yaml")),
              RunOptions(results=tmp_path / "runs", progress=False, executor="local", folds=(0,)))
    raw["models"]["npt-long"] = {"model": "npt", "params": {**size, "steps": 40}}
    raw["models"]["npt-auto"] = {"model": "npt", "params": {**size, "steps": "auto"}}
    suite = load_suite(_write(tmp_path, raw, "both.yaml"))
    spec = load_models()["npt"].spec
    records = load_records(tmp_path / "runs" / "npt-costs")
    (short,) = records.to_dict("records")

    plan = plan_suite(suite, paths, tmp_path / "runs" / "npt-costs", None, [tmp_path / "runs"])
    row = {r.method: r for r in plan.rows}["npt-long"]
    _, dataset, splits = __import__("tabbench.run.runner", fromlist=["load_data"]).load_data(suite, paths, ("wine",))["wine"]
    sizes = [SplitSizes(len(s.train), len(s.val), len(s.test)) for s in splits]
    long_params = {**spec.default_params, **size, "steps": 40, "device": "cpu"}
    own = sizes[[s.fold for s in splits].index(short["fold"])]  # the record against the split it ran on
    assert short["clock"] == "cpu"  # its seconds are the job's CPU seconds, which another process does not move
    factor = short["cpu_seconds"] / spec.estimate(dataset.meta, own, {**spec.default_params, **spec.added_params,
                                                                     **short["params"]})
    expected = sum(spec.estimate(dataset.meta, z, long_params) for z in sizes) * factor / 3600
    assert row.pending == 3 and row.cpu_hours == pytest.approx(expected) and row.gpu_hours == 0
    assert "cost model, scaled" in row.basis and "1 records of npt here (npt-short)" in row.basis
    line = next(x for x in format_plan(plan).splitlines() if x.startswith("npt-long"))
    assert f"{row.median_s:.2f} (cost model)" in line  # not "(0)" records
    # steps "auto" fills the budget's training share at whatever speed the fit measures: not scaled again, and
    # never more than the budget
    auto = {r.method: r for r in plan.rows}["npt-auto"]
    auto_params = {**long_params, "steps": "auto"}
    unscaled = [spec.estimate(dataset.meta, z, auto_params, 60.0) for z in sizes]
    assert factor != pytest.approx(1, abs=0.05) and 0 < max(unscaled) <= 60
    assert auto.cpu_hours == pytest.approx(sum(unscaled) / 3600)

    gpu_rows = {r.method: r for r in plan_suite(suite, paths, tmp_path / "runs" / "npt-costs", None,
                                                [tmp_path / "runs"], gpus=1).rows}
    on_gpu, short_on_gpu = gpu_rows["npt-long"], gpu_rows["npt-short"]
    gpu_params = {**long_params, "device": "cuda"}
    assert on_gpu.cpu_hours == 0 and "measured on an H100" in on_gpu.basis
    assert on_gpu.gpu_hours == pytest.approx(sum(spec.estimate(dataset.meta, z, gpu_params) for z in sizes) / 3600)
    # npt-short's own record ran on the CPU: no basis for its jobs on a GPU, which the cost model estimates
    assert short_on_gpu.basis_records == 0 and "cost model" in short_on_gpu.basis
    # steps "auto" on a GPU: the fit times its own steps there and trains for the budget's share, 80% of 60 s a job
    assert gpu_rows["npt-auto"].gpu_hours == pytest.approx(len(sizes) * 0.8 * 60 / 3600)

    # a record of the model on a GPU (npt-short's, as a GPU run would store it) calibrates the GPU estimate
    from tabbench.store import Store

    gpu_folder = tmp_path / "gpu-runs" / "npt-costs"
    # a GPU job's budget counts wall time (tabbench/clock.py): its record's seconds are its wall seconds
    gpu_record = {**short, "params": {**short["params"], "device": "cuda"}, "key": "gpu-" + short["key"], "clock": "wall"}
    Store(gpu_folder).append(gpu_record)
    calibrated = {r.method: r for r in plan_suite(suite, paths, tmp_path / "runs" / "npt-costs", None,
                                                  [tmp_path / "gpu-runs"], gpus=1).rows}["npt-long"]
    gpu_factor = short["wall_seconds"] / spec.estimate(dataset.meta, own, {**spec.default_params,
                                                                         **spec.added_params, **gpu_record["params"]})
    assert calibrated.gpu_hours == pytest.approx(on_gpu.gpu_hours * gpu_factor)
    assert "scaled" in calibrated.basis and "1 GPU records of npt here (npt-short)" in calibrated.basis


def test_plan_bounds_jobs_without_a_basis_by_their_time_budgets(tmp_path, capsys):
    """No records anywhere: nothing to estimate from, but a job is stopped at its budget, so the budgets cap
    what those jobs can cost (18 jobs x 60 s x 1 CPU = 0.3 CPU hours)."""
    raw = {**SUITE, "budget": {"time_s": 60}}
    assert main(["plan", str(_write(tmp_path, raw)), "--results", str(tmp_path / "runs"), "--cache",
                 str(tmp_path / "cache"), "--basis", str(tmp_path / "none")]) == 0
    out = capsys.readouterr().out
    assert "no basis for 12 jobs (wine, diabetes), at most 0.2 CPU h by their time budgets" in out  # knn: 2 configs
    assert "No basis: 18 jobs, not counted in any total; the time budgets of 18 of them cap those at 0.3 CPU hours" in out


def test_plan_totals_leave_out_the_refused_jobs_and_nothing_planned_exits_non_zero(tmp_path, capsys):
    """The refused jobs are listed, counted apart and in no total; a plan of nothing is a failure (exit 1)."""
    from tests.test_runner import PARTLY_RUNNABLE

    suite = _write(tmp_path, PARTLY_RUNNABLE, "partly.yaml")
    args = ["plan", str(suite), "--results", str(tmp_path / "runs"), "--cache", str(tmp_path / "cache"),
            "--basis", str(tmp_path / "none")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "3 jobs planned" in out and "npt:" not in out.split("Refused:")[0]  # k-NN's 3 folds only
    assert re.search(r"Refused: 3 jobs \(about [\d,]+ CPU-hours by the models' cost models\), not planned above and "
                     r"in no total; `tabbench run` stops before any job starts unless given --skip-refused, which runs "
                     r"the jobs planned above and leaves these out:", out)
    assert "Not planned: dataset 'gone' could not be loaded" in out and "tabbench fetch SUITE --cache DIR" in out
    assert main(args + ["--models", "npt"]) == 1
    assert "Nothing planned: no job of the selection can run" in capsys.readouterr().out

    # device auto: refused in a plan for a machine without a GPU (as this suite's CPU jobs), planned for one with
    auto = {**PARTLY_RUNNABLE, "name": "partly-auto",
            "models": {"npt": {"params": {**PARTLY_RUNNABLE["models"]["npt"]["params"], "device": "auto"}}}}
    args[1] = str(_write(tmp_path, auto, "partly-auto.yaml"))
    assert main(args) == 1 and "Refused: 3 jobs" in capsys.readouterr().out
    assert main(args + ["--gpus", "1"]) == 0
    out = capsys.readouterr().out
    assert "3 jobs planned" in out and "Refused" not in out and "npt: 0 CPU h" in out


def test_plan_outside_the_checkout_times_jobs_from_the_suites_checkout(tmp_path, monkeypatch, capsys):
    """Run from another folder (no runs/ or results/ there), plan still finds the published records beside
    the suite: the checkout's results/ is part of the default basis."""
    monkeypatch.chdir(tmp_path)
    assert main(["plan", str(ROOT / "suites" / "quickstart.yaml"), "--models", "knn", "--datasets", "wine",
                 "--cache", str(tmp_path / "cache")]) == 0
    out = capsys.readouterr().out
    # the basis line names the folders it timed from: the checkout's results/ (and its runs/ where a run left one)
    basis = next(line for line in out.splitlines() if line.strip().startswith(("wine:", "basis for every")))
    folders = basis.split(": ", 1)[1].split(": same configurations")[0].split(", ")
    assert str(ROOT / "results" / "quickstart") in folders and "no basis" not in out, out


def test_plan_counts_a_basis_folder_named_twice_once(tmp_path, monkeypatch):
    # the default basis names results/ as given and as the checkout's: relative and absolute paths to one folder
    from tabbench.plan import suite_folders

    for name in ("a", "b"):
        (tmp_path / "results" / name / "records").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    folders = suite_folders(["results", tmp_path / "results", "results/a"])
    assert [p.name for p in folders] == ["a", "b"]


def test_a_run_cut_short_by_its_time_budget_says_so_in_the_check_and_the_console(tmp_path):
    """A busy machine, as a budget too short for the job: the quickstart's Gradient Boosting on digits (about 6 s
    of fit in the published record) under a 2 s budget stops at its budget, keeps fewer trees and is FLAGGED
    against the published folder; the cell's note, the comparison's counts and the run's summary say why."""
    raw = yaml.safe_load((ROOT / "suites" / "quickstart.yaml").read_text())
    raw["budget"] = {"time_s": 2}
    suite = _write(tmp_path, raw, "quickstart.yaml")
    out = _tabbench("run", suite, "--models", "gradient_boosting", "--datasets", "digits", "--no-ray", "--tables-only",
                    "--results", tmp_path / "runs", "--reference", ROOT / "results", cwd=tmp_path)
    record = load_records(tmp_path / "runs" / "quickstart").iloc[0]
    assert record["status"] == "ok" and record["info"]["stopped_by_time_budget"], out.stderr[-2000:]
    assert "1 of them stopped at their time budget" in out.stdout
    table = pd.read_csv(tmp_path / "runs" / "quickstart" / "comparison.csv").set_index(["method", "dataset"])
    cell = table.loc[("gradient_boosting", "digits")]
    assert cell["verdict"] == "FLAGGED" and "stopped by their time budget (1 of 1 in ours)" in cell["note"]
    assert ("1 cell(s) hold runs stopped by their time budget (gradient_boosting/digits; 1 of them FLAGGED)"
            in out.stdout)
    assert "Traceback" not in out.stdout + out.stderr


@pytest.mark.real_data(path="uci")
def test_the_readmes_cost_of_the_uci_suite_is_what_its_plan_says_with_stand_ins_and_refusals_marked(capsys):
    """The README's numbers for `tabbench run suites/uci.yaml --skip-refused` on the mirror (Kick needs OpenML:
    left out here as offline) come from the plan over the published records, which marks every stand-in and says
    what the refused jobs would cost."""
    from tests.conftest import require_shared

    mirror = require_shared("uci").parent
    stated = re.search(r"leaves out NPT's (\d+) refused jobs and Kick\s+and runs the other ([\d,]+) jobs, about "
                       r"(\d+) CPU-hours by `tabbench plan`", (ROOT / "README.md").read_text())
    assert stated, "README.md: the sentence on suites/uci.yaml's cost has changed; update this test with it"
    suite = yaml.safe_load((ROOT / "suites" / "uci.yaml").read_text())
    offline = ",".join(d["name"] for d in suite["datasets"] if d["name"] != "kick")
    assert main(["plan", str(ROOT / "suites" / "uci.yaml"), "--mirror", str(mirror), "--basis", str(ROOT / "results"),
                 "--datasets", offline]) == 0
    out = capsys.readouterr().out
    total = re.search(r"^Total with an estimate: ([\d.]+) CPU hours, 0 GPU hours \(([\d,]+) jobs\)", out, re.M)
    refused = re.search(r"^Refused: (\d+) jobs \(about [\d,]+ CPU-hours by the models' cost models\)", out, re.M)
    assert "No basis" not in out and total and refused, out[-3000:]
    assert stated.groups() == (refused[1], total[2], str(round(float(total[1]))))
    for dataset, mark in (("higgs", "subset"), ("poker_hand", "subset"), ("forest_cover", "subset"),
                          ("income", "SUBSTITUTE")):
        assert re.search(rf"^\S+\s+{dataset} \({mark}\)\s", out, re.M), dataset
        assert re.search(rf"^  {dataset}: {'SUBSTITUTE: ' if mark == 'SUBSTITUTE' else ''}\S", out, re.M), dataset


@pytest.mark.real_data(path="uci")
def test_the_uci_suites_stop_message_marks_its_stand_ins_and_says_what_skip_refused_leaves_out(tmp_path):
    from tests.conftest import require_shared

    mirror = require_shared("uci").parent
    out = _tabbench("run", ROOT / "suites" / "uci.yaml", "--mirror", mirror, "--datasets", "higgs,income,boston",
                    "--no-ray", "--results", tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert re.search(r"Not runnable: npt refused by its model's pre-run check on higgs, income; 2 refused jobs, "
                     r"about [\d,]+ CPU-hours by the models' cost models\.", out.stderr), out.stderr
    assert re.search(r"^  higgs: higgs-subset: ", out.stderr, re.M)
    assert re.search(r"^  income: SUBSTITUTE: UCI Adult", out.stderr, re.M)
    assert not re.search(r"^  boston: ", out.stderr, re.M)  # the whole original
    assert re.search(r"--skip-refused` runs every other job of the selection \([\d,]+\)", out.stderr)


def test_validate_says_it_did_not_load_the_data_and_plan_names_a_dataset_that_cannot_load(tmp_path, capsys):
    """`validate` checks fields and params only: for a suite whose data cannot load it says so and names the command
    that loads it, which then names the dataset."""
    from tests.test_runner import PARTLY_RUNNABLE

    suite = _write(tmp_path, {**PARTLY_RUNNABLE, "models": {"knn": {}}}, "partly.yaml")
    assert main(["validate", str(suite)]) == 0
    out = capsys.readouterr().out
    assert f"{suite}: valid" in out and "its data was not loaded" in out and f"`tabbench plan {suite}`" in out
    assert main(["plan", str(suite), "--results", str(tmp_path / "runs"), "--cache", str(tmp_path / "cache"),
                 "--basis", str(tmp_path / "none")]) == 0
    assert "Not planned: dataset 'gone' could not be loaded" in capsys.readouterr().out


def test_plan_estimates_a_new_table_from_the_methods_records_on_the_tables_nearest_in_size(tmp_path):
    """Iris (150 x 4) is in no published folder: k-NN and CatBoost, which have no cost model, are estimated from
    their published records on the tables nearest in rows x features, marked '~' and named; never from a table
    far larger (digits, 1,797 x 64) while nearer ones exist, and never downloading a table to measure it."""
    from tabbench.data.cache import DataPaths
    from tabbench.plan import SIMILAR_TABLES, format_plan, plan_suite
    from tabbench.report.cost import spent
    from tabbench.suite import load_suite

    raw = {"name": "iris-new", "seeds": [0],
           "datasets": [{"name": "iris", "source": "sklearn", "id": "iris", "split": {"protocol": "kfold", "k": 3}}],
           "models": {"knn": {}, "catboost": {}}}
    suite = load_suite(_write(tmp_path, raw, "iris.yaml"))
    paths = DataPaths(cache=tmp_path / "cache")
    plan = plan_suite(suite, paths, tmp_path / "runs" / "iris-new", None, [ROOT / "results"])
    text = format_plan(plan)
    assert "No basis" not in text and "~: no record of the method on this table" in text
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.csv*"))  # nothing fetched
    for row in plan.rows:
        assert row.similar and row.pending == 3, row
        named = re.findall(r"(\w+) \(([\d,]+) x (\d+)\)", row.basis.split("estimated from tables of similar size, ")[1])
        assert 0 < len(named) <= SIMILAR_TABLES and "digits" not in {name for name, _, _ in named}
        assert all(int(r.replace(",", "")) * int(c) < 1797 * 64 for _, r, c in named)
        folders = row.basis.split(": ")[0].split(", ")
        records = pd.concat([load_records(folder) for folder in folders])
        used = records[(records["method"] == row.method) & records["dataset"].isin([n for n, _, _ in named])
                       & (records["status"] == "ok")]
        # each record's seconds on its budget's clock (a cpu-clock record's CPU seconds, over the job's one CPU)
        assert row.basis_records == len(used) and row.median_s == pytest.approx(spent(used, "wall_seconds").median())
        assert row.cpu_hours == pytest.approx(3 * row.median_s / 3600)
        assert re.search(rf"^{row.method}\s+iris\s.*~{row.median_s:.2f} \({row.basis_records}\)", text, re.M)
