"""Leaderboard arithmetic, checked against the NPT paper's own tables."""

import math

import numpy as np
import pandas as pd
import pytest

from tabbench.leaderboard import rank_table, select_trials, write_leaderboard
from tabbench.store import Store

# Paper Table 1 test AUROC (Higgs, Income, Kick, Breast Cancer), from ../shared/docs/npt-reference.md;
# k-NN has no Higgs result.
PAPER_AUROC = {
    "NPT": [0.892, 0.952, 0.770, 0.997],
    "CatBoost": [0.851, 0.956, 0.773, 0.992],
    "LightGBM": [0.843, 0.956, 0.776, 0.992],
    "XGBoost": [0.854, 0.946, 0.775, 0.989],
    "GB": [0.850, 0.955, 0.769, 0.987],
    "MLP": [0.867, 0.949, 0.739, 0.982],
    "RF": [0.847, 0.947, 0.759, 0.989],
    "TabNet": [0.857, 0.948, 0.745, 0.978],
    "k-NN": [np.nan, 0.932, 0.747, 0.980],
}


def test_paper_auroc_ranks_match_the_published_average_ranks():
    scores = pd.DataFrame(PAPER_AUROC, index=["Higgs", "Income", "Kick", "Breast Cancer"]).T
    table = rank_table(scores, higher_is_better=True)
    assert list(table.loc["NPT", ["Higgs", "Income", "Kick", "Breast Cancer"]]) == [1, 4, 4, 1]
    assert table.loc["NPT", "mean_rank"] == pytest.approx(2.50)
    assert table.loc["NPT", "se"] == pytest.approx(0.87, abs=0.005)
    # k-NN is missing on Higgs and takes the worst rank there (9 methods)
    assert table.loc["k-NN", "Higgs"] == 9
    assert table.loc["k-NN", "mean_rank"] == pytest.approx(8.25)
    assert table.loc["k-NN", "se"] == pytest.approx(0.48, abs=0.005)
    assert table.index[0] == "NPT"  # sorted best first


def test_lower_is_better_ranks_regression_errors_ascending():
    scores = pd.DataFrame({"a": [1.0, 5.0], "b": [2.0, 4.0]}, index=["d1", "d2"]).T
    table = rank_table(scores, higher_is_better=False)
    assert list(table.loc["a", ["d1", "d2"]]) == [1, 2]
    assert table.loc["a", "se"] == pytest.approx(np.std([1, 2], ddof=1) / math.sqrt(2))


def _record(method, dataset, fold, trial, val_loss, test_auroc, status="ok"):
    return {"key": f"{method}-{dataset}-{fold}-{trial}", "method": method, "model": method, "dataset": dataset,
            "task": "binary", "fold": fold, "repeat": 0, "seed": 0, "trial": trial, "status": status,
            "params": {"trial": trial}, "subset": None, "fit_seconds": 1.0, "predict_seconds": 0.1,
            "job_rss_bytes": 2**20, "metrics": {"val": {"log_loss": val_loss}, "test": {"auroc": test_auroc}}}


def test_tuning_selects_the_trial_with_the_best_validation_loss_not_the_best_test_score(tmp_path):
    store = Store(tmp_path)
    for record in [_record("m", "d", 0, 0, 0.30, 0.99), _record("m", "d", 0, 1, 0.10, 0.80),
                   _record("m", "d", 0, 2, 0.05, 0.70, status="error")]:
        store.append(record)
    chosen = select_trials(store.frame())
    assert len(chosen) == 1
    assert chosen.iloc[0]["trial"] == 1  # lowest val log-loss among successful trials


def test_write_leaderboard_imputes_worst_rank_for_failed_runs_and_says_so(tmp_path):
    store = Store(tmp_path / "suite")
    for fold in range(2):
        store.append(_record("good", "d1", fold, None, 0.1, 0.9))
        store.append(_record("good", "d2", fold, None, 0.1, 0.8))
        store.append(_record("flaky", "d1", fold, None, 0.1, 0.95))
        store.append(_record("flaky", "d2", fold, None, 0.1, 0.99 if fold == 0 else float("nan"),
                             status="ok" if fold == 0 else "error"))
    md = write_leaderboard(store.dir).read_text()
    csv = pd.read_csv(store.dir / "leaderboard.csv")
    ranks = csv[csv.table == "test_auroc"].set_index(["method", "dataset"])["rank"]
    assert ranks[("flaky", "d1")] == 1 and ranks[("flaky", "d2")] == 2  # failed fold -> worst rank (2)
    assert "flaky on d2 (1 of 2 runs failed)" in md
    assert "| flaky | 4 | error 1 |" in md  # the failure is counted in the cost table
