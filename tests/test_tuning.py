"""Tuning: every trial is a job with its own record; the leaderboard uses the best validation score."""

import gzip
import itertools
import json

import pandas as pd

from tabbench.expand import trial_configs
from tabbench.plugins import load_models
from tabbench.runner import RunOptions, run_suite
from tabbench.store import Store, load_records
from tabbench.suite import parse_suite

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


def test_random_search_selects_the_best_validation_config_and_resume_skips_trials(tmp_path, ray_session):
    suite = parse_suite(SUITE, tmp_path / "tuned.yaml")
    options = RunOptions(results=tmp_path / "results", progress=False)
    first = run_suite(suite, options)
    assert first.done == 8  # 4 trials x 2 folds, each its own job
    frame = load_records(tmp_path / "results" / "tuned")
    assert sorted(frame["trial"].unique()) == [0, 1, 2, 3]
    selected = pd.read_csv(tmp_path / "results" / "tuned" / "selected_params.csv")
    for fold, trials in frame.groupby("fold"):
        best = trials.loc[trials["val_log_loss"].idxmin()]
        chosen = selected[selected["fold"] == fold].iloc[0]
        assert chosen["trial"] == best["trial"]
        assert json.loads(chosen["params"]) == best["params"]  # the full configuration, as JSON
    board = pd.read_csv(tmp_path / "results" / "tuned" / "leaderboard.csv")
    reported = board[(board.table == "test_accuracy")]["value"].iloc[0]
    best_rows = frame.loc[frame.groupby("fold")["val_log_loss"].idxmin()]
    assert reported == best_rows["test_accuracy"].mean()  # the selected trials' test metric, not the best test
    # a published folder keeps its records gzipped: a re-run reads them and skips every archived job
    records_dir = tmp_path / "results" / "tuned" / "records"
    with open(records_dir / "records.jsonl", "rb") as src, gzip.open(records_dir / "records.jsonl.gz", "wb") as dst:
        dst.write(src.read())
    (records_dir / "records.jsonl").unlink()
    again = run_suite(suite, options)
    assert (again.done, again.skipped) == (0, 8)
    assert len(Store(tmp_path / "results" / "tuned").records()) == 8
    assert pd.read_csv(tmp_path / "results" / "tuned" / "leaderboard.csv").equals(board)
