"""The runner on a real local Ray: end to end, resume, --force, and failures that do not stop a run."""

import re
import subprocess
import sys
import textwrap
from importlib.util import find_spec

import pandas as pd
import pytest
import yaml

from tabbench.data.cache import DataPaths
from tabbench.run.runner import RunError, RunOptions, run_suite
from tabbench.store import Store, load_records
from tabbench.suite import load_suite, parse_suite
from tests.conftest import ROOT, require_ray, skip_unless_models_run
from tests.plugins_for_tests import PLUGIN_FILE

SMALL = {
    "name": "small",
    "datasets": [
        {"name": "iris", "source": "sklearn", "id": "iris", "split": {"protocol": "kfold", "k": 3}},
        {"name": "diabetes", "source": "sklearn", "id": "diabetes", "split": {"protocol": "holdout"}},
    ],
    "models": {"knn": {}, "knn_k15": {"model": "knn", "params": {"n_neighbors": 15}}},
}

def _run(tmp_path, raw=SMALL, **kw):
    suite = parse_suite(raw, tmp_path / "small.yaml")
    return run_suite(suite, RunOptions(results=tmp_path / "results", progress=False, **kw))


def test_resume_runs_no_job_twice_and_force_reruns_all(tmp_path, ray_session):
    first = _run(tmp_path)
    assert (first.planned, first.done, first.skipped, first.failed) == (8, 8, 0, 0)
    store = Store(tmp_path / "results" / "small")
    assert len(store.records()) == 8
    second = _run(tmp_path)
    assert (second.done, second.skipped) == (0, 8)
    assert len(store.records()) == 8  # nothing appended
    forced = _run(tmp_path, force=True, rerun_reason="a fixed model")
    assert (forced.done, forced.skipped) == (8, 0)
    assert len(store.records()) == 16 and len(store.latest()) == 8  # newest record per key wins
    first, again = store.records()[:8], {r["key"]: r for r in store.records()[8:]}
    assert all("rerun" not in r for r in first)  # each re-run names its reason and the record it replaced
    assert [again[r["key"]]["rerun"] for r in first] == [
        {"reason": "a fixed model", "replaces": {"finished_at": r["finished_at"], "status": "ok"}} for r in first]
    resumed = _run(tmp_path, force=True, rerun_reason="a fixed model")  # the same forced command, again
    assert (resumed.done, resumed.skipped) == (0, 8) and len(store.records()) == 16
    wider = {**SMALL, "datasets": SMALL["datasets"] + [{"name": "wine", "source": "sklearn", "id": "wine",
                                                        "split": {"protocol": "holdout"}}]}
    new = _run(tmp_path, wider, force=True, rerun_reason="budget points")  # another reason: all, new jobs too
    assert (new.done, new.skipped) == (10, 0)
    firsts = [r for r in store.records()[16:] if r["dataset"] == "wine"]
    assert [r["rerun"] for r in firsts] == [{"reason": "budget points", "replaces": None}] * 2
    assert _run(tmp_path, wider, force=True, rerun_reason="budget points").skipped == 10


def test_force_only_reruns_the_jobs_whose_record_a_wall_clock_or_another_cpu_made(tmp_path, ray_session, capsys):
    """``--force --force-only``: of the 4 k-NN jobs run here (cpu clock, this CPU), none is re-run until their
    newest records say otherwise, a cpu-clock job its budget stopped neither; then a record that a wall-clock
    budget stopped, one from another kind of CPU and one counted on the wall clock (as the published folders'
    older records are) bring exactly their three jobs back, each only for the names that take it. A run says,
    before its jobs, how many of the folder's results of its methods came from another kind of CPU, and which."""
    _run(tmp_path, models=("knn",))
    store = Store(tmp_path / "results" / "small")
    stopped, other, wall, fourth = store.records()
    store.append({**fourth, "info": {**fourth["info"], "stopped_by_time_budget": True}})
    everything = ("wall-stopped", "other-cpu", "wall-clock")
    assert _run(tmp_path, models=("knn",), force=True, rerun_reason="r", force_only=everything).done == 0
    hardware = other["environment"]["hardware"]
    store.append({k: v for k, v in stopped.items() if k != "clock"} | {
        "info": {**stopped["info"], "stopped_by_time_budget": True}})
    store.append({**other, "environment": {**other["environment"], "hardware": {
        **hardware, "cpu": {**hardware["cpu"], "model_name": "another CPU"}}}})
    store.append({k: v for k, v in wall.items() if k != "clock"})
    assert "another kind of CPU" not in capsys.readouterr().err
    assert _run(tmp_path, models=("knn",), force=True, rerun_reason="s", force_only=("other-cpu",)).done == 1
    said = capsys.readouterr().err
    assert "1 of this folder's results of the methods run here came from another kind of CPU" in said
    assert ": another (1)." in said and "--force-only other-cpu" in said
    assert _run(tmp_path, models=("knn",), force=True, rerun_reason="t", force_only=("wall-stopped",)).done == 1
    assert _run(tmp_path, models=("knn",), force=True, rerun_reason="u", force_only=everything).done == 1
    assert {r["key"] for r in store.records()[-3:]} == {stopped["key"], other["key"], wall["key"]}
    capsys.readouterr()
    _run(tmp_path, models=("knn_k15",))
    assert "another kind of CPU" not in capsys.readouterr().err  # knn's results are not knn_k15's


def test_cpu_refuses_to_run_on_another_kind_of_cpu_and_runs_on_its_own(tmp_path, ray_session):
    """``--cpu ID``: on a machine whose kind of CPU is not ID's the run stops before any job, naming this machine's
    CPU and its id; with this machine's own id it runs, and its records carry that id."""
    from tabbench.measure import cpu_id, fingerprint

    here = cpu_id(fingerprint())
    with pytest.raises(RunError, match=rf"--cpu 000000000000: this machine's CPU is another kind, .*\(its --cpu id "
                                       rf"{here}\), so no job ran"):
        _run(tmp_path, models=("knn",), cpu="000000000000")
    store = Store(tmp_path / "results" / "small")
    assert not store.records()
    assert _run(tmp_path, models=("knn",), cpu=here).done == 4
    assert {r["environment"]["hardware"]["id"] for r in store.records()} == {here}


def test_filters_restrict_models_and_datasets(tmp_path, ray_session):
    summary = _run(tmp_path, models=("knn_k15",), datasets=("iris",), folds=(0, 2))
    frame = load_records(tmp_path / "results" / "small")
    assert summary.done == 2 and set(frame["method"]) == {"knn_k15"} and set(frame["dataset"]) == {"iris"}
    assert sorted(frame["fold"]) == [0, 2]


def test_a_failing_model_is_recorded_and_the_run_completes(tmp_path, ray_session):
    raw = {**SMALL, "models": {"knn": {}, "flaky": {}}}
    summary = _run(tmp_path, raw, plugin_files=(PLUGIN_FILE,))
    assert summary.done == 8 and summary.failures == {"error": 1}
    frame = load_records(tmp_path / "results" / "small")
    failed = frame[frame["status"] != "ok"].iloc[0]
    assert (failed["method"], failed["dataset"], failed["error_type"]) == ("flaky", "diabetes", "builtins.ValueError")
    assert "cannot regress diabetes" in failed["traceback"]
    # its frames are named from their import roots, never by this machine's folders
    assert 'File "tabbench/run/execute.py"' in failed["traceback"] and 'File "/' not in failed["traceback"]
    assert (frame[frame["method"] == "knn"]["status"] == "ok").all()
    board = (tmp_path / "results" / "small" / "leaderboard.md").read_text()
    assert "flaky on diabetes (1 of 1 runs failed)" in board

    # a job's checkpoint goes when its record is ok; a failed job keeps its checkpoint to continue from,
    # in the suite folder's checkpoints/ or under a root of their own (--checkpoints)
    for root in (None, tmp_path / "scratch"):
        store = Store(tmp_path / "results" / "small", root)
        for key in frame["key"]:
            (store.checkpoint_dir(key) / "state").mkdir(parents=True)
        _run(tmp_path, raw, plugin_files=(PLUGIN_FILE,), force=True, checkpoints=root)
        kept = {key for key in frame["key"] if store.checkpoint_dir(key).exists()}
        assert kept == {failed["key"]}
    assert (tmp_path / "scratch" / "small" / failed["key"] / "state").is_dir()


def test_records_carry_fingerprints_metrics_costs_and_environment(tmp_path, ray_session):
    _run(tmp_path, models=("knn",), datasets=("diabetes",))
    (record,) = Store(tmp_path / "results" / "small").records()
    assert len(record["dataset_fingerprint"]) == 16 and len(record["split_fingerprint"]) == 16
    assert record["metrics"]["test"]["rmse"] > 0 and record["metrics"]["val"]["mse"] > 0
    assert record["fit_seconds"] > 0 and record["predict_seconds"] > 0
    assert 0 <= record["job_rss_bytes"] <= record["peak_rss_bytes"]
    assert record["environment"]["packages"]["scikit-learn"] and record["environment"]["packages"]["tabbench-harness"]
    assert record["environment"]["hardware"]["cpu"]["model_name"] and record["environment"]["hardware"]["id"]
    assert record["params"] == {"n_neighbors": 5, "weights": "uniform", "p": 2, "scaler": "standard"}


def test_peak_memory_is_the_jobs_own_not_the_workers_baseline(tmp_path, ray_session):
    raw = {**SMALL, "models": {"ballast": {}}}
    _run(tmp_path, raw, plugin_files=(PLUGIN_FILE,), datasets=("diabetes",))
    (record,) = Store(tmp_path / "results" / "small").records()
    mib = 2**20
    assert 140 * mib <= record["job_rss_bytes"] < 180 * mib  # the ballast, not the ~200 MiB Ray worker
    assert record["peak_rss_bytes"] > record["job_rss_bytes"] + 50 * mib  # the worker's own memory is excluded


#: The quickstart's fastest models (a few seconds of fitting for their 48 jobs): the CLI end to end on the README's
#: suite. CI runs the README's command itself, all eight models (.ci/run).
QUICK_MODELS = ("knn", "xgboost", "lightgbm")


def test_quickstart_end_to_end_through_the_cli(tmp_path):
    """`tabbench run suites/quickstart.yaml` on its own local Ray (three of its models), then `tabbench leaderboard`."""
    require_ray()
    skip_unless_models_run(load_suite(ROOT / "suites" / "quickstart.yaml"))
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "tabbench.cli", "run", str(ROOT / "suites" / "quickstart.yaml"),
           "--results", str(results), "--no-progress", "--models", ",".join(QUICK_MODELS)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"Leaderboard: {results / 'quickstart' / 'leaderboard.md'}" in out.stdout
    assert "Reproduction check against the published results/quickstart" in out.stdout  # the checkout's folder
    frame = load_records(results / "quickstart")
    assert len(frame) == len(QUICK_MODELS) * 16 and (frame["status"] == "ok").all()  # 16 jobs a model
    assert set(frame["dataset"]) == {"breast_cancer", "wine", "digits", "diabetes"}
    board = pd.read_csv(results / "quickstart" / "leaderboard.csv")
    # rank_all: every dataset's rank pooled (Table 1's order); TabArena's aggregates where bencheval is installed
    # (no Elo interval rows: four datasets are fewer than the bootstrap needs, tabbench.report.arena)
    arena = {"elo", "improvability", "win_rate"} if find_spec("bencheval") else set()
    assert set(board["table"]) == {"rank_auroc", "test_auroc", "rank_accuracy", "test_accuracy", "rank_rmse", "test_rmse",
                                   "rank_all"} | arena
    auroc = board[(board.table == "test_auroc")].set_index("method")["value"]
    assert len(auroc) == len(QUICK_MODELS) and (auroc > 0.97).all()  # every baseline is strong on breast cancer
    # the run writes the leaderboard `tabbench leaderboard` writes: with the report extra, its tests and figures
    full = (results / "quickstart" / "leaderboard.md").read_text()
    assert "## Pairwise win rates" in full and (results / "quickstart" / "win-rate.csv").exists()
    tables = subprocess.run(cmd + ["--tables-only"], capture_output=True, text=True, timeout=600)
    assert tables.returncode == 0 and f"0 ran, {len(frame)} skipped" in tables.stdout, tables.stderr[-3000:]
    assert "## Pairwise win rates" not in (results / "quickstart" / "leaderboard.md").read_text()
    (results / "quickstart" / "leaderboard.md").unlink()
    again = subprocess.run([sys.executable, "-m", "tabbench.cli", "leaderboard", str(results / "quickstart")],
                           capture_output=True, text=True, check=True)
    assert "leaderboard.md" in again.stdout and (results / "quickstart" / "leaderboard.md").read_text() == full


#: What differs between two runs of the same job: when and how long it ran, its memory, where it ran.
TIMING = {"started_at", "finished_at", "fit_seconds", "predict_seconds", "wall_seconds", "cpu_seconds", "peak_rss_bytes",
          "job_rss_bytes", "node"}

NO_RAY_RUN = textwrap.dedent('''
    import sys
    from tabbench.cli import main
    rc = main(sys.argv[1:])
    print("ray imported:", "ray" in sys.modules, [m for m in sys.modules if m.startswith("ray.")][:5])
    sys.exit(rc)
''')


def _comparable(record: dict) -> dict:
    out = {k: v for k, v in record.items() if k not in TIMING}
    out["environment"] = {**out["environment"], "packages": {
        k: v for k, v in out["environment"]["packages"].items() if k != "ray"}}
    return out


def test_no_ray_runs_without_importing_ray_and_writes_the_records_a_ray_run_writes(tmp_path, ray_session):
    """`tabbench run --no-ray` (a machine without Ray): the same jobs, keys, metrics and params as on Ray."""
    suite = tmp_path / "small.yaml"
    suite.write_text(yaml.safe_dump(SMALL))
    with_ray = _run(tmp_path)
    out = subprocess.run([sys.executable, "-c", NO_RAY_RUN, "run", str(suite), "--no-ray", "--no-progress",
                          "--results", str(tmp_path / "no-ray"), "--tables-only"],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ray imported: False []" in out.stdout and "8 jobs: 8 ran, 0 skipped" in out.stdout
    ray_records = {r["key"]: _comparable(r) for r in Store(tmp_path / "results" / "small").records()}
    local = Store(tmp_path / "no-ray" / "small").records()
    assert with_ray.done == len(local) == 8
    assert {r["key"]: _comparable(r) for r in local} == ray_records
    assert all(r["node"] and r["wall_seconds"] > 0 for r in local)
    # --executor local is --no-ray's name since executors are chosen by name: the same executor, the same records
    again = subprocess.run([sys.executable, "-m", "tabbench.cli", "run", str(suite), "--executor", "local",
                            "--no-progress", "--results", str(tmp_path / "no-ray"), "--tables-only", "--folds", "0"],
                           capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert again.returncode == 0 and "4 jobs: 0 ran, 4 skipped" in again.stdout, again.stderr[-3000:]


def test_a_run_that_needs_ray_where_it_is_missing_says_how_to_run_without_it(tmp_path):
    """A machine without Ray (a GPU box set up for --no-ray): `tabbench run` stops with the fix, no traceback."""
    suite = tmp_path / "knn.yaml"
    suite.write_text("name: knn-only\ndatasets: [{name: wine, source: sklearn, id: wine, split: {protocol: holdout}}]\n"
                     "models: {knn: {model: knn}}\n")
    code = ("import sys; sys.modules['ray'] = None; from tabbench.cli import main; "
            f"sys.exit(main(['run', {str(suite)!r}, '--results', {str(tmp_path)!r}, '--no-progress']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr[-3000:]
    assert "Ray is not installed" in out.stderr and "tabbench run --no-ray" in out.stderr
    assert "Traceback" not in out.stderr


#: A suite a CPU cannot run whole: one dataset that cannot be loaded (its file is nowhere) and NPT at a size its
#: pre-run check refuses (hundreds of CPU-hours a job), beside k-NN, which can run on iris.
PARTLY_RUNNABLE = {
    "name": "partly",
    "datasets": [
        {"name": "iris", "source": "sklearn", "id": "iris", "split": {"protocol": "kfold", "k": 3}},
        {"name": "gone", "source": "url", "url": "file:///nonexistent/tabbench/gone.data", "task": "regression",
         "split": {"protocol": "holdout"}},
    ],
    "models": {"knn": {}, "npt": {"params": {"steps": 1000000, "e": 256, "n_layers": 16, "device": "cpu"}}},
}


def test_a_run_with_refused_jobs_or_unloadable_data_says_so_and_skip_refused_runs_the_rest(tmp_path, capsys):
    options = dict(executor="local", data_paths=DataPaths(cache=tmp_path / "cache"))
    with pytest.raises(RunError) as stopped:
        _run(tmp_path, PARTLY_RUNNABLE, **options)
    message = str(stopped.value)
    assert "dataset 'gone': could not download" in message and "models.npt on dataset 'iris'" in message
    summary = message.splitlines()[-2:]  # after every reason, what is left out and the option that runs the rest
    assert re.fullmatch(r"Not runnable: 1 dataset could not be loaded \(their jobs are not counted\): gone; npt "
                        r"refused by its model's pre-run check on iris; 3 refused jobs, about [\d,]+ CPU-hours by the "
                        r"models' cost models\.", summary[0]), summary[0]
    assert f"`tabbench run {tmp_path / 'small.yaml'} ... --skip-refused` runs every other job of the selection (3)" \
        in summary[1]
    assert not (tmp_path / "results" / "partly" / "records").exists()  # nothing ran

    ran = _run(tmp_path, PARTLY_RUNNABLE, skip_refused=True, **options)
    assert (ran.planned, ran.done, ran.failed) == (3, 3, 0)  # k-NN's 3 folds of iris, and nothing else
    assert ran.left_out[:2] == ["1 dataset could not be loaded (their jobs are not counted): gone",
                                "npt refused by its model's pre-run check on iris"]
    assert re.fullmatch(r"3 refused jobs, about [\d,]+ CPU-hours by the models' cost models", ran.left_out[2])
    assert "Not run (--skip-refused): 1 dataset could not be loaded (their jobs are not counted): gone; npt refused" \
        in capsys.readouterr().err
    records = load_records(tmp_path / "results" / "partly")
    assert set(zip(records["method"], records["dataset"])) == {("knn", "iris")}


def test_skip_refused_with_nothing_left_to_run_still_stops(tmp_path):
    only_refused = {**PARTLY_RUNNABLE, "models": {"npt": PARTLY_RUNNABLE["models"]["npt"]}}
    with pytest.raises(RunError, match=r"(?s)Not runnable: .*Nothing else is left to run\.$"):
        _run(tmp_path, only_refused, executor="local", skip_refused=True,
             data_paths=DataPaths(cache=tmp_path / "cache"))
