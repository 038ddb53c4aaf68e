"""Tuning: every trial is a job with its own record; the leaderboard uses the best validation score."""

import itertools
import json
import random

import pandas as pd
import pytest

from tabbench.cli import main
from tabbench.suite.trials import trial_configs
from tabbench.plugins import load_models
from tabbench.report.leaderboard import write_leaderboard
from tabbench.run.runner import RunOptions, run_suite
from tabbench.store import Store, load_records
from tabbench.suite import SuiteError, check_models, parse_suite

SUITE = {
    "name": "tuned",
    "datasets": [{"name": "wine", "source": "sklearn", "id": "wine", "split": {"protocol": "kfold", "k": 3, "folds": [0, 1]}}],
    "models": {"knn": {"tuning": "random", "n_trials": 4, "tuning_seed": 3,
                       "search_space": {"n_neighbors": [1, 3, 10, 40], "weights": ["uniform", "distance"]}}},
}


def test_grid_covers_the_whole_space_and_random_samples_distinct_configs():
    spec = load_models()["gradient_boosting"].spec
    grid = parse_suite({**SUITE, "models": {"gradient_boosting": {"tuning": "grid"}}}, "s.yaml").models[0]
    configs = [params for _, params in trial_configs(grid, spec)]
    assert len(configs) == 48  # the paper's grid: 4 learning rates x 3 depths x 4 ensemble sizes
    expected = set(itertools.product([1e-3, 1e-2, 0.1, 0.3], [3, 5, 10], [50, 100, 500, 1000]))
    assert {(c["learning_rate"], c["max_depth"], c["n_estimators"]) for c in configs} == expected
    entry = parse_suite(SUITE, "s.yaml").models[0]
    sampled = trial_configs(entry, load_models()["knn"].spec)
    assert len(sampled) == 4 and len({tuple(sorted(p.items())) for _, p in sampled}) == 4
    assert sampled == trial_configs(entry, load_models()["knn"].spec)  # the sample is seeded
    # the same sample as drawn from the whole grid's list, so a random search keeps its trials and job keys
    space = entry.search_space
    names = sorted(space)
    grid = [dict(zip(names, values)) for values in itertools.product(*(space[n] for n in names))]
    assert [p for _, p in sampled] == random.Random(entry.tuning_seed).sample(grid, entry.n_trials)
    tabm = parse_suite({**SUITE, "models": {"tabm": {"tuning": "random", "n_trials": 30, "tuning_seed": 7}}},
                       "s.yaml").models[0]
    space = load_models()["tabm"].spec.search_space
    names = sorted(space)
    grid = [dict(zip(names, values)) for values in itertools.product(*(space[n] for n in names))]
    assert [p for _, p in trial_configs(tabm, load_models()["tabm"].spec)] == random.Random(7).sample(grid, 30)


def test_random_search_selects_the_best_validation_config_and_resume_skips_trials(tmp_path, ray_session):
    suite = parse_suite(SUITE, tmp_path / "tuned.yaml")
    options = RunOptions(results=tmp_path / "results", progress=False)
    first = run_suite(suite, options)
    assert first.done == 8  # 4 trials x 2 folds, each its own job
    frame = load_records(tmp_path / "results" / "tuned")
    assert sorted(frame["trial"].unique()) == [0, 1, 2, 3]
    selected = pd.read_csv(tmp_path / "results" / "tuned" / "selected_params.csv")
    # per fold the lowest validation log-loss; a tie (1-NN and 3-NN with distance weights are both exact on some
    # folds) goes to the lower trial number, whatever order the trials' records finished in
    best_rows = frame.sort_values(["val_log_loss", "trial"]).groupby("fold").head(1)
    for fold, best in best_rows.set_index("fold").iterrows():
        chosen = selected[selected["fold"] == fold].iloc[0]
        assert chosen["trial"] == best["trial"]
        assert json.loads(chosen["params"]) == best["params"]  # the full configuration, as JSON
    assert set(frame["n_trials"]) == {4}  # each record says how many trials its split's search has
    assert "Search incomplete" not in (tmp_path / "results" / "tuned" / "leaderboard.md").read_text()
    # the same records less one trial of fold 1, as a run stopped part-way leaves them: the table names it
    partial = Store(tmp_path / "partial")
    for record in Store(tmp_path / "results" / "tuned").records():
        if (record["fold"], record["trial"]) != (1, 2):
            partial.append(record)
    md = write_leaderboard(partial.dir, report=False).read_text()
    assert "Search incomplete" in md and "knn on wine, fold 1 (3 of 4 trials)" in md
    assert "fold 0" not in md
    # records from before n_trials existed count among a split's trials when a later record declares them
    resumed = Store(tmp_path / "resumed")
    for record in Store(tmp_path / "results" / "tuned").records():
        if record["trial"] != 3:
            record = {k: v for k, v in record.items() if k != "n_trials"}
        resumed.append(record)
    assert "Search incomplete" not in write_leaderboard(resumed.dir, report=False).read_text()
    board = pd.read_csv(tmp_path / "results" / "tuned" / "leaderboard.csv")
    reported = board[(board.table == "test_accuracy")]["value"].iloc[0]
    assert reported == best_rows["test_accuracy"].mean()  # the selected trials' test metric, not the best test
    # a published folder archives its records (`tabbench archive`): a re-run reads them and skips every job
    folder = tmp_path / "results" / "tuned"
    records_dir = folder / "records"
    assert main(["archive", str(folder)]) == 0
    assert (records_dir / "records.jsonl").stat().st_size == 0 and (records_dir / "records.jsonl.gz").exists()
    again = run_suite(suite, options)
    assert (again.done, again.skipped) == (0, 8)
    assert len(Store(folder).records()) == 8
    assert pd.read_csv(folder / "leaderboard.csv").equals(board)
    # a second archive (a later batch), read after the first: its newer record of a job wins
    store = Store(folder)
    newer = {**store.records()[0], "fit_seconds": -1.0}
    store.append(newer)
    with open(store.path, "ab") as fh:
        fh.write(b'{"key": "cut off by a killed writer')
    assert store.archive() == records_dir / "records-2.jsonl.gz"
    assert store.archive() is None and store.path.stat().st_size == 0  # the partial line went nowhere
    assert len(store.records()) == 9 and store.latest()[newer["key"]]["fit_seconds"] == -1.0
    assert (run_suite(suite, options).done, len(store.records())) == (0, 9)


def test_a_splits_trials_are_consecutive_jobs_so_a_stopped_run_leaves_whole_searches(tmp_path):
    from tabbench.data.cache import DataPaths
    from tabbench.run.expand import expand
    from tabbench.run.runner import load_data

    suite = parse_suite(SUITE, tmp_path / "tuned.yaml")
    jobs = expand(suite, load_models(), load_data(suite, DataPaths(cache=tmp_path / "cache")))
    assert [(j.fold, j.trial) for j in jobs] == [(fold, trial) for fold in (0, 1) for trial in range(4)]
    assert {j.n_trials for j in jobs} == {4}


def test_archive_names_a_folder_without_records(tmp_path, capsys):
    assert main(["archive", str(tmp_path)]) == 2
    assert f"{tmp_path / 'records' / 'records.jsonl'}: no live records file" in capsys.readouterr().err


# --- named configurations (tuning: configs) ---------------------------------------------------------------

CONFIGS = {
    "name": "named",
    "datasets": [
        {"name": "wine", "source": "sklearn", "id": "wine", "split": {"protocol": "kfold", "k": 3, "folds": [0, 1]},
         "model_params": {"knn-configs": {"n_neighbors": 7, "p": 1}}},
        {"name": "iris", "source": "sklearn", "id": "iris", "split": {"protocol": "kfold", "k": 3, "folds": [0, 1]}}],
    "models": {"knn-configs": {"model": "knn", "params": {"weights": "distance"}, "tuning": "configs", "configs": {
        "base": None,
        "wide": {"params": {"n_neighbors": 30}},
        "narrow": {"params": {"n_neighbors": 1, "weights": "uniform"}, "datasets": {"iris": {"n_neighbors": 2}}}}}},
}


def test_named_configs_are_trials_whose_params_layer_method_dataset_config_and_config_on_dataset(tmp_path):
    from tabbench.data.cache import DataPaths
    from tabbench.run.expand import expand
    from tabbench.run.runner import load_data

    suite = parse_suite(CONFIGS, tmp_path / "named.yaml")
    registry = load_models()
    jobs = expand(suite, registry, load_data(suite, DataPaths(cache=tmp_path / "cache")))
    assert len(jobs) == 3 * 2 * 2  # configs x datasets x folds: three named trials, not a product
    params = {(j.dataset, j.config): (j.trial, {k: j.params[k] for k in ("n_neighbors", "weights", "p")})
              for j in jobs}
    assert params == {  # method params < the dataset's model_params < the config's < the config's on that dataset
        ("wine", "base"): (0, {"n_neighbors": 7, "weights": "distance", "p": 1}),
        ("wine", "wide"): (1, {"n_neighbors": 30, "weights": "distance", "p": 1}),
        ("wine", "narrow"): (2, {"n_neighbors": 1, "weights": "uniform", "p": 1}),
        ("iris", "base"): (0, {"n_neighbors": 5, "weights": "distance", "p": 2}),
        ("iris", "wide"): (1, {"n_neighbors": 30, "weights": "distance", "p": 2}),
        ("iris", "narrow"): (2, {"n_neighbors": 2, "weights": "uniform", "p": 2})}
    assert len({j.key for j in jobs}) == len(jobs)


def test_named_configs_run_record_their_name_and_the_best_validation_config_is_selected_per_fold(tmp_path):
    suite = parse_suite(CONFIGS, tmp_path / "named.yaml")
    summary = run_suite(suite, RunOptions(results=tmp_path / "results", progress=False, executor="local"))
    assert summary.done == 12 and summary.failed == 0
    frame = load_records(tmp_path / "results" / "named")
    assert set(frame["config"]) == {"base", "wide", "narrow"}
    selected = pd.read_csv(tmp_path / "results" / "named" / "selected_params.csv")
    for (dataset, fold), trials in frame.groupby(["dataset", "fold"]):
        best = trials.sort_values(["val_log_loss", "trial"]).iloc[0]  # the baselines' rule: validation log-loss
        chosen = selected[(selected["dataset"] == dataset) & (selected["fold"] == fold)].iloc[0]
        assert chosen["trial"] == best["trial"]


@pytest.mark.parametrize("change, where, message", [
    ({"tuning": "grid"}, "models.knn-configs.tuning", "configs are run by tuning: configs, not tuning: grid"),
    ({"configs": None}, "models.knn-configs.configs", "tuning: configs needs configs"),
    ({"configs": {"a": {"parms": {}}}}, "models.knn-configs.configs.a.parms", "did you mean 'params'?"),
    ({"configs": {"a": {"datasets": {"wnie": {}}}}}, "models.knn-configs.configs.a.datasets.wnie",
     "no dataset 'wnie' in this suite; did you mean 'wine'?"),
    ({"search_space": {"n_neighbors": [1]}}, "models.knn-configs.search_space", "belongs to grid or random"),
])
def test_named_config_mistakes_name_the_field(change, where, message):
    method = {**CONFIGS["models"]["knn-configs"], **change}
    with pytest.raises(SuiteError) as err:
        parse_suite({**CONFIGS, "models": {"knn-configs": method}}, "s.yaml")
    assert f"s.yaml: {where}: " in str(err.value) and message in str(err.value), str(err.value)


def test_a_named_configs_param_is_checked_against_the_model_with_did_you_mean():
    method = {**CONFIGS["models"]["knn-configs"], "configs": {"a": {"datasets": {"iris": {"n_neighbour": 3}}}}}
    suite = parse_suite({**CONFIGS, "models": {"knn-configs": method}}, "s.yaml")
    with pytest.raises(SuiteError, match=r"models.knn-configs.configs.a.datasets.iris.n_neighbour: model 'knn' does "
                                         r"not accept a parameter 'n_neighbour'; did you mean 'n_neighbors'\?"):
        check_models(suite, load_models())
