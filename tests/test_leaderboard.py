"""Leaderboard arithmetic, checked against the NPT paper's own tables."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tabbench.report.leaderboard import rank_table, select_trials, write_leaderboard
from tabbench.published import load_published
from tabbench.store import Store

PUBLISHED = Path(__file__).resolve().parents[1] / "suites" / "published" / "npt-paper.yaml"
TASKS = {"auroc": (["higgs", "income", "kick", "breast_cancer"], True), "accuracy": (["poker_hand", "forest_cover"], True),
         "rmse": (["protein", "concrete", "boston", "yacht"], False)}


def published_scores(metric):
    """The paper's test metrics (suites/published/npt-paper.yaml): rows = methods, columns = datasets."""
    paper = load_published(PUBLISHED)
    datasets, higher = TASKS[metric]
    methods = sorted(paper.ranks[metric])
    values = {d: {m: paper.metrics[d][m][0] if m in paper.metrics[d] else np.nan for m in methods} for d in datasets}
    return pd.DataFrame(values), higher, paper.ranks[metric]


def test_paper_auroc_ranks_match_the_published_average_ranks():
    scores, higher, _ = published_scores("auroc")
    table = rank_table(scores, higher_is_better=higher)
    assert list(table.loc["npt", ["higgs", "income", "kick", "breast_cancer"]]) == [1, 4, 4, 1]
    assert table.loc["npt", "mean_rank"] == pytest.approx(2.50)
    assert table.loc["npt", "se"] == pytest.approx(0.87, abs=0.005)
    # k-NN is missing on Higgs and takes the worst rank there (9 methods)
    assert table.loc["knn", "higgs"] == 9
    assert table.loc["knn", "mean_rank"] == pytest.approx(8.25)
    assert table.loc["knn", "se"] == pytest.approx(0.48, abs=0.005)
    assert table.index[0] == "npt"  # sorted best first


@pytest.mark.parametrize("metric", sorted(TASKS))
def test_published_ranks_follow_from_the_published_metrics(metric):
    """A transcription check of the published file: the ranks recomputed from its (rounded) metrics
    are the published ranks up to the ties that rounding to three digits created (LightGBM's AUROC ties
    CatBoost's on two datasets: 3.00 from the rounded numbers, 3.50 published)."""
    scores, higher, published = published_scores(metric)
    table = rank_table(scores, higher_is_better=higher)
    for method, (mean_rank, _) in published.items():
        assert abs(table.loc[method, "mean_rank"] - mean_rank) <= 0.5, method


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



def test_a_method_with_fewer_folds_than_another_on_a_dataset_takes_the_worst_rank_and_says_so(tmp_path):
    # two of ten folds of a long run are better than another method's ten: not yet a result for the dataset
    store = Store(tmp_path / "suite")
    for fold in range(10):
        store.append(_record("done", "d1", fold, None, 0.1, 0.9))
        if fold < 2:
            store.append(_record("running", "d1", fold, None, 0.1, 0.99))
    md = write_leaderboard(store.dir).read_text()
    ranks = pd.read_csv(store.dir / "leaderboard.csv").query("table == 'test_auroc'").set_index("method")["rank"]
    assert ranks["done"] == 1 and ranks["running"] == 2
    assert "running on d1 (2 of the dataset's 10 splits run)" in md

def test_published_numbers_are_printed_next_to_ours(tmp_path):
    store = Store(tmp_path / "suite")
    for fold, (a, b) in enumerate([(0.99, 0.97), (0.97, 0.96)]):
        store.append(_record("npt", "breast_cancer", fold, None, 0.1, a))
        store.append(_record("knn", "breast_cancer", fold, None, 0.1, b))
        store.append(_record("knn", "private", fold, None, 0.1, 0.5))  # a dataset the paper does not have
    md = write_leaderboard(store.dir, PUBLISHED).read_text()
    section = md[md.index("### Against NPT paper (Kossen et al. 2021) (test auroc)"):]
    assert "| npt | 1.50 ± 0.50 / 2.50 ± 0.87 | 0.980 ± 0.010 / 0.997 |" in section
    assert "| knn | 1.50 ± 0.50 / 8.25 ± 0.48 | 0.965 ± 0.005 / 0.98 |" in section
    assert "private" not in section.splitlines()[2]  # only datasets both have are compared
    csv = pd.read_csv(store.dir / "leaderboard.csv").set_index(["table", "method", "dataset"])
    assert csv.loc[("test_auroc", "knn", "breast_cancer"), "published"] == 0.980
    assert np.isnan(csv.loc[("test_auroc", "knn", "private"), "published"])
    assert "Against" not in write_leaderboard(store.dir).read_text()  # no published file, no comparison
