"""Leaderboard arithmetic, checked against the NPT paper's own tables."""

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tabbench.report.leaderboard import FirstComplete, rank_table, select_trials, write_leaderboard
from tabbench.published import load_published
from tabbench.store import Store

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "suites" / "published" / "npt-paper.yaml"
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


def test_a_method_with_no_record_on_a_dataset_takes_the_worst_rank_and_the_note_says_not_run(tmp_path):
    store = Store(tmp_path / "suite")
    for fold in range(2):
        store.append(_record("good", "d1", fold, None, 0.1, 0.9))
        store.append(_record("good", "d2", fold, None, 0.1, 0.8))
        store.append(_record("partial", "d1", fold, None, 0.1, 0.95))  # never ran d2
    md = write_leaderboard(store.dir).read_text()
    ranks = pd.read_csv(store.dir / "leaderboard.csv").query("table == 'test_auroc'").set_index(["method", "dataset"])
    assert ranks.loc[("partial", "d1"), "rank"] == 1 and ranks.loc[("partial", "d2"), "rank"] == 2
    assert "Worst rank imputed for: partial on d2 (not run)." in md


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
    # its mean is still shown, with its fold count, in the per-dataset table
    assert "| running | 0.990 ± 0.000 (2 of 10 folds) |" in md


def test_a_suite_declared_fold_count_makes_a_lone_method_with_a_slice_incomplete(tmp_path):
    # the only method on d1 ran 2 folds: the records alone cannot tell; the suite's declared k can
    store = Store(tmp_path / "suite")
    for fold in range(2):
        store.append(_record("slice", "d1", fold, None, 0.1, 0.9 + fold / 100))
        store.append(_record("slice", "d2", fold, None, 0.1, 0.9))
    md = write_leaderboard(store.dir, splits={"d1": 10}).read_text()
    assert "slice on d1 (2 of the dataset's 10 splits run)" in md
    assert "| slice | 0.905 ± 0.005 (2 of 10 folds) | 0.900 ± 0.000 |" in md
    assert "slice on d2" not in md  # no declaration: the records' own two folds are the dataset's


def test_declared_splits_reads_k_fold_and_holdout_declarations():
    from tabbench.data.types import DatasetConfig, SplitConfig
    from tabbench.report.leaderboard import declared_splits

    datasets = [DatasetConfig("a", "sklearn", split=SplitConfig(protocol="kfold", k=10)),
                DatasetConfig("b", "sklearn", split=SplitConfig(protocol="npt_code", k=10, folds=(0, 1))),
                DatasetConfig("c", "sklearn", split=SplitConfig(protocol="holdout")),
                DatasetConfig("d", "sklearn", split=SplitConfig(protocol="openml_task"))]
    assert declared_splits(datasets) == {"a": 10, "b": 2, "c": 1}


def test_first_complete_fills_each_dataset_with_the_first_listed_method_that_has_every_fold(tmp_path):
    store = Store(tmp_path / "suite")
    for fold in range(3):
        store.append(_record("reduced", "d1", fold, None, 0.1, 0.80))
        store.append(_record("reduced", "d2", fold, None, 0.1, 0.70))
        store.append(_record("paper", "d1", fold, None, 0.1, 0.95))  # complete on d1
        if fold < 2:
            store.append(_record("paper", "d2", fold, None, 0.1, 0.99))  # 2 of 3 folds on d2
        store.append(_record("other", "d1", fold, None, 0.1, 0.90))
        store.append(_record("other", "d2", fold, None, 0.1, 0.90))
    rule = FirstComplete.parse("best=tuned,paper,reduced")
    assert rule == FirstComplete("best", ("tuned", "paper"), "reduced")
    md = write_leaderboard(store.dir, first_complete=[rule]).read_text()
    csv = pd.read_csv(store.dir / "leaderboard.csv").query("table == 'test_auroc'").set_index(["method", "dataset"])
    assert csv.loc[("best", "d1"), "value"] == pytest.approx(0.95)  # paper, complete there
    assert csv.loc[("best", "d2"), "value"] == pytest.approx(0.70)  # paper incomplete: the fallback
    assert csv.loc[("reduced", "d1"), "value"] == pytest.approx(0.80)  # the fallback keeps its own row
    assert "paper" not in set(csv.index.get_level_values("method"))  # a listed method loses its own row
    assert "Here: d1: paper; d2: reduced." in md
    with pytest.raises(ValueError, match="NAME=M1"):
        FirstComplete.parse("best=only")

def test_published_numbers_are_printed_next_to_ours(tmp_path):
    store = Store(tmp_path / "suite")
    for fold, (a, b) in enumerate([(0.99, 0.97), (0.97, 0.96)]):
        store.append(_record("npt", "breast_cancer", fold, None, 0.1, a))
        store.append(_record("knn", "breast_cancer", fold, None, 0.1, b))
        store.append(_record("knn", "private", fold, None, 0.1, 0.5))  # a dataset the paper does not have
    md = write_leaderboard(store.dir, PUBLISHED).read_text()
    section = md[md.index("### Against NPT paper (Kossen et al. 2021) (test auroc)"):]
    assert "| npt | 1.50 ± 0.50 / 2.50 ± 0.87 | 0.980 ± 0.010 / 0.997 ± 0.001 |" in section  # paper Table 10
    assert "| knn | 1.50 ± 0.50 / 8.25 ± 0.48 | 0.965 ± 0.005 / 0.98 ± 0.005 |" in section
    assert "best of eight small-data variants" in section  # the file's note, under the table it concerns
    assert "private" not in section.splitlines()[2]  # only datasets both have are compared
    csv = pd.read_csv(store.dir / "leaderboard.csv").set_index(["table", "method", "dataset"])
    assert csv.loc[("test_auroc", "knn", "breast_cancer"), "published"] == 0.980
    assert csv.loc[("test_auroc", "knn", "breast_cancer"), "published_se"] == 0.005
    assert np.isnan(csv.loc[("test_auroc", "knn", "private"), "published"])
    assert "Against" not in write_leaderboard(store.dir).read_text()  # no published file, no comparison


def test_a_published_note_is_printed_only_under_tables_of_the_datasets_it_concerns(tmp_path):
    paper = tmp_path / "paper.yaml"
    paper.write_text("name: p\nnote: best of eight\nnote_datasets: [small]\n"
                     "metrics: {small: {m: [0.9, 0.01]}, large: {m: 0.8}}\nranks: {}\n")
    assert load_published(paper).note_for(["large"]) == "" and load_published(paper).note_for(["small"])
    store = Store(tmp_path / "suite")
    for fold in range(2):
        store.append(_record("m", "large", fold, None, 0.1, 0.8))
    section = write_leaderboard(store.dir, paper).read_text().split("### Against p (test auroc)")[1]
    assert "best of eight" not in section
    paper.write_text("name: p\nnote: [not, text]\nmetrics: {}\nranks: {}\n")
    with pytest.raises(ValueError, match="note: expected text"):
        load_published(paper)
    paper.write_text("name: p\nnotes: x\nmetrics: {}\nranks: {}\n")
    with pytest.raises(ValueError, match="1 unknown key on line 2; did you mean 'note'"):
        load_published(paper)


def test_agreement_is_two_combined_standard_errors_and_unjudged_without_one():
    from tabbench.report.agreement import band, within

    assert band(0.3, 0.4) == pytest.approx(1.0)  # 2 x sqrt(0.09 + 0.16)
    assert within(0.99, 0.3, 0.4) and not within(-1.01, 0.3, 0.4)
    assert within(0.1, None, 0.4) is None and within(0.1, float("nan"), 0.4) is None


QUICKSTART = Path(__file__).resolve().parents[1] / "results" / "quickstart"


def test_common_splits_rank_a_one_fold_run_only_where_every_method_ran_and_pooled_boards_go_to_runs(
        tmp_path, monkeypatch, capsys):
    """A folder that ran fold 0 of two of the quickstart's datasets (as the NPT quickstart does; here the
    published k-NN records of those splits under another name) pooled with the quickstart: --common-splits
    ranks every method on those splits only, and says so; --name writes under runs/, not the tracked results/."""
    from tabbench.cli import main

    latest = Store(QUICKSTART).latest().values()
    one_fold = [{**r, "method": "knn-again", "key": "again-" + r["key"]} for r in latest
                if r["method"] == "knn" and r["dataset"] in ("wine", "diabetes") and r["fold"] == 0]
    assert len(one_fold) == 2
    for record in one_fold:
        Store(tmp_path / "one-fold").append(record)
    monkeypatch.chdir(tmp_path)
    assert main(["leaderboard", str(QUICKSTART), str(tmp_path / "one-fold"), "--name", "pooled", "--tables-only",
                 "--common-splits"]) == 0
    board = tmp_path / "runs" / "pooled" / "leaderboard.md"
    assert f"Leaderboard: {board.relative_to(tmp_path)}" in capsys.readouterr().out
    assert not (tmp_path / "results").exists()
    text = board.read_text()
    assert ("Compared only where every method ran (--common-splits): 2 splits of 2 datasets; "
            f"{len(list(latest)) - 8 * 2:,} records of other splits left out, datasets breast_cancer, digits "
            "entirely.") in text
    assert "Worst rank imputed" not in text  # every method ran every split that is ranked
    table = pd.read_csv(board.with_suffix(".csv"))
    metrics = table[table["table"].str.startswith("test_")]
    assert sorted(set(metrics["dataset"])) == ["diabetes", "wine"] and len(set(metrics["method"])) == 9
    knn = metrics[metrics["method"].isin(["knn", "knn-again"])].pivot(index="dataset", columns="method", values="value")
    assert (knn["knn"] == knn["knn-again"]).all()  # the same records on the same splits: the same numbers


def _exact_mean_accuracy(runs, rows_per_fold) -> Fraction:
    """A method's mean test accuracy over folds as an exact fraction: each fold's rows right out of its rows."""
    fractions = []
    for fold, accuracy in zip(runs["fold"], runs["test_accuracy"]):
        right = accuracy * rows_per_fold[fold]
        assert right == pytest.approx(round(right), abs=1e-9), "not the fold size the records were scored on"
        fractions.append(Fraction(round(right), rows_per_fold[fold]))
    return sum(fractions) / len(fractions)


@pytest.mark.parametrize("folder, dataset, pair, rows_per_fold", [
    ("breadth", "beps", ("catboost", "modernnca"), {0: 305, 1: 305, 2: 305}),  # 623 of 915 right, each
    ("quickstart", "wine", ("catboost", "knn"), {0: 36, 1: 36, 2: 36, 3: 35, 4: 35}),  # 178 rows, 5-fold
])
def test_equal_counts_right_tie_exactly_in_ranks_elo_inputs_and_win_rates(folder, dataset, pair, rows_per_fold):
    from tabbench.report.arena import errors
    from tabbench.report.family import summarise
    from tabbench.report.winrate import fold_results

    selected = select_trials(Store(ROOT / "results" / folder).frame())
    runs = {m: selected[(selected["method"] == m) & (selected["dataset"] == dataset)] for m in pair}
    first, second = (_exact_mean_accuracy(runs[m], rows_per_fold) for m in pair)
    assert first == second  # the records' premise: the same rows right on average, as an exact fraction
    family = summarise(selected)["multiclass"]
    assert family.mean.loc[pair[0], dataset] == family.mean.loc[pair[1], dataset]
    ranks = family.ranks[dataset]
    assert ranks[pair[0]] == ranks[pair[1]] == 1 + (family.mean[dataset] > family.mean.loc[pair[0], dataset]).sum()
    data, _, _ = errors({"multiclass": family})
    error = data[data["dataset"] == dataset].set_index("method")["metric_error"]
    assert error[pair[0]] == error[pair[1]]  # bencheval's Elo sees one result
    folds = fold_results(selected).loc[dataset]
    for (a, b), right in zip(folds[list(pair)].itertuples(index=False), rows_per_fold.values()):
        assert (a == b) == (round(a * right) == round(b * right))  # a fold ties exactly where the counts do


def test_a_count_metric_settles_only_float_noise_and_other_metrics_are_compared_as_they_are():
    from tabbench.metrics import settle_ties

    # two folds of ten rows: 1 + 2 right and 3 + 0 right are the same count, apart by the floats' rounding
    noisy = pd.Series({"a": (1 / 10 + 2 / 10) / 2, "b": (3 / 10 + 0 / 10) / 2, "c": np.nan, "d": 0.5})
    assert noisy["a"] != noisy["b"]
    settled = settle_ties(noisy, "accuracy")
    assert settled["a"] == settled["b"] and math.isnan(settled["c"]) and settled["d"] == 0.5
    # the closest distinct results the tolerance keeps apart: ten folds of 100,000 and 100,001 rows, one row apart
    n, folds = 100_000, 10
    close = pd.Series({"x": 0.9, "y": 0.9 + 1 / (folds * n * (n + 1))})
    assert settle_ties(close, "auroc")["x"] != settle_ties(close, "auroc")["y"]
    assert settle_ties(noisy, "rmse").equals(noisy)


def test_a_place_is_one_more_than_the_methods_strictly_better_so_ties_share_the_better_place():
    from tabbench.report.family import place

    mean_rank = pd.Series({"a": 1.5, "b": 1.5, "c": 3.0})
    assert [place(mean_rank, m) for m in mean_rank.index] == [1, 1, 3]
    elo = pd.Series({"a": 900.0, "b": 1100.0, "c": 1100.0})
    assert [place(elo, m, lower_is_better=False) for m in elo.index] == [3, 1, 1]
