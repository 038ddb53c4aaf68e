"""The corruption probe (tabbench/probe.py, `tabbench probe corruption`): the permutation, the exact answer on a
table with duplicated rows, each model's ``predict_with_context``, the parametric control, the test-row sample,
the command (its rows merged by key, the paper's metric, the summary with the published change) and the published
file's corruption section.

Real tables: scikit-learn's diabetes (regression) and breast cancer (binary), which it ships."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from tabbench.data.splits import Split
from tabbench.run.execute import outputs, score
from tabbench.probe import Context, corrupted_outputs, job_context, permute_columns, probe, sample_test_rows
from tabbench.published import PublishedError, load_published
from tabbench.spec import BINARY, CATEGORICAL, NUMERIC, REGRESSION, Column, DatasetMeta
from tests.conftest import need, quick_params, registered_spec


def _table(name: str):
    """(meta, X, y) of a scikit-learn table, one column made categorical (to check its dtype survives)."""
    from sklearn import datasets

    bunch = getattr(datasets, f"load_{name}")(as_frame=True)
    X = bunch.data.astype(np.float64)
    task = REGRESSION if name == "diabetes" else BINARY
    y = bunch.target.to_numpy().astype(np.float64 if task == REGRESSION else np.int64)
    columns = [Column(c, NUMERIC) for c in X.columns]
    if name == "diabetes":  # sex: two levels
        levels = sorted(X["sex"].unique())
        X["sex"] = pd.Categorical.from_codes(np.searchsorted(levels, X["sex"]), [str(v) for v in levels])
        columns[list(X.columns).index("sex")] = Column("sex", CATEGORICAL, tuple(str(v) for v in levels))
    classes = () if task == REGRESSION else ("0", "1")
    return DatasetMeta(name, task, "target", tuple(columns), classes), X, y


def _split(n: int, seed: int = 0, n_test: int = 60, n_val: int = 40) -> Split:
    order = np.random.default_rng(seed).permutation(n)
    return Split(0, 0, np.sort(order[n_test + n_val:]), np.sort(order[n_test:n_test + n_val]), np.sort(order[:n_test]),
                 "test")


def _job(transductive=False):
    return SimpleNamespace(seed=0, fold=0, repeat=0, transductive=transductive)


def _fitted(name, meta, X, y, split, unlabelled=False, **params):
    """A fitted model; ``unlabelled``: fit also gets the test rows' features (a transductive fit)."""
    spec = registered_spec(name)  # skipped where the model's package is missing
    estimator = spec.factory(meta, 0, **{**spec.default_params, **params})
    args = (X.iloc[split.train], y[split.train], X.iloc[split.val], y[split.val])
    estimator.fit(*args, X_unlabelled=X.iloc[split.test]) if unlabelled else estimator.fit(*args)
    return spec, estimator


def test_permutation_keeps_every_column_multiset_and_moves_the_rows():
    meta, X, y = _table("diabetes")
    X["row"] = np.arange(len(X), dtype=np.float64)  # unique values: where each row went
    rng = np.random.default_rng(0)
    labelled = np.arange(len(y)) < 300  # the last rows' targets unseen (NaN), as a transductive table's
    targets = np.where(labelled, y, np.nan)
    Xp, yp = permute_columns(X, targets, rng, target_rows=labelled)
    for name in X.columns:
        assert Xp[name].dtype == X[name].dtype, name
        assert sorted(Xp[name].astype(str)) == sorted(X[name].astype(str)), f"{name}'s values changed"
        moved = np.mean(Xp[name].astype(str).to_numpy() != X[name].astype(str).to_numpy())
        assert moved > (0.95 if name == "row" else 0.3), f"{name}: only {moved:.0%} of the rows moved"
    assert np.isnan(yp[~labelled]).all(), "an unseen target moved into the table"
    assert sorted(yp[labelled]) == sorted(y[labelled]) and np.mean(yp[labelled] != y[labelled]) > 0.9
    # each column has its own permutation: the rows are not merely reordered together
    assert not np.array_equal(np.argsort(Xp["row"].to_numpy()), np.argsort(Xp["bmi"].to_numpy()))
    assert np.corrcoef(Xp["bmi"], Xp["s5"])[0, 1] < 0.2 < np.corrcoef(X["bmi"], X["s5"])[0, 1]


def test_knn_predicts_a_duplicated_row_from_its_copy_until_the_other_rows_are_corrupted():
    """The exact answer: 1-NN predicts each test row that also sits among the training rows as that copy's
    target, exactly; with the other rows corrupted the copy is gone, and so is the exact match."""
    meta, X, y = _table("diabetes")
    split = _split(len(y))
    duplicated = split.test[:30]
    split = Split(0, 0, np.concatenate([split.train, duplicated]), split.val, split.test, "dup")
    spec, knn = _fitted("knn", meta, X, y, split, n_neighbors=1)
    X_dup = X.iloc[duplicated]
    assert np.array_equal(knn.predict(X_dup), y[duplicated])
    context = Context(X.iloc[split.train], y[split.train].astype(np.float64))
    after = corrupted_outputs(knn, X_dup, context, np.random.default_rng(0))
    assert np.mean(after != y[duplicated]) >= 0.9, "the corrupted rows still hold the duplicates"
    # the whole test split: RMSE grows, every row of the duplicated ones changes
    result = probe(knn, spec, _job(), meta, X, y, split)
    assert result["metric"] == "rmse" and result["change"] > 0 and result["before"] < result["after"]
    assert result["rows_changed"] >= 0.9 * len(split.test)


@pytest.mark.parametrize("name", ["random_forest", "mlp"])
def test_a_parametric_model_changes_by_exactly_zero(name):
    meta, X, y = _table("breast_cancer")
    split = _split(len(y))
    spec, model = _fitted(name, meta, X, y, split, **quick_params(name))
    assert not spec.uses_other_rows
    result = probe(model, spec, _job(), meta, X, y, split)
    assert result["change"] == 0.0 and result["before"] == result["after"] and result["rows_changed"] == 0


def _tiled(X_rows, y_rows, n: int):
    return pd.concat([X_rows] * n, ignore_index=True), np.tile(np.asarray(y_rows, dtype=np.float64), n)


@pytest.mark.parametrize("name,params,min_drop", [
    ("knn", {}, 0.1), ("modernnca", {"max_epochs": 8, "patience": 3}, 0.1),
    # TabR adds the retrieved context to the row's own encoding, which alone still ranks the classes
    ("tabr", quick_params("tabr"), 0.02),
])
def test_context_of_the_training_rows_reproduces_predict(name, params, min_drop):
    """predict_with_context given the rows fit gave predicts as predict does; corrupted rows change that."""
    need("pytabkit" if name == "tabr" else "torch")
    meta, X, y = _table("breast_cancer")
    split = _split(len(y))
    spec, model = _fitted(name, meta, X, y, split, **params)
    assert spec.uses_other_rows
    X_test = X.iloc[split.test[:8]]
    context_X, context_y = _tiled(X.iloc[split.train], y[split.train], len(X_test))
    np.testing.assert_allclose(model.predict_with_context(X_test, context_X, context_y), model.predict_proba(X_test),
                               rtol=1e-5, atol=1e-6)
    result = probe(model, spec, _job(), meta, X, y, split)
    # k-NN's probabilities are fractions of 5 neighbours: a corrupted row may land on the same fraction
    assert result["rows_changed"] >= 0.7 * len(split.test), f"{result['rows_changed']} rows changed"
    assert result["auroc_after"] < result["auroc_before"] - min_drop, result


def test_tabr_candidates_are_preprocessed_as_fit_did_and_restored_afterwards():
    """TabR (pytabkit): the training rows through TabR._candidates are the candidate tensors fit stored, exactly
    (quantile-transformed numbers, recoded binary columns, the standardised target); given them as context the
    regression predictions are predict's; the corrupted context changes every row; afterwards, also after a call
    that fails while its context is in place, predict reads the training rows again."""
    need("pytabkit")
    import torch

    meta, X, y = _table("diabetes")  # numeric columns, a two-level categorical (binary for TabR), a real target
    split = _split(len(y))
    spec, tabr = _fitted("tabr", meta, X, y, split, **quick_params("tabr"))
    lightning = tabr._interface().model
    training = lightning.dataset
    stored = training.data
    rebuilt = tabr._candidates(X.iloc[split.train], y[split.train].astype(np.float64))
    assert sorted(rebuilt) == sorted(stored) == ["X_bin", "X_num", "Y"]
    for key, tensor in stored.items():
        assert rebuilt[key].dtype == tensor.dtype and torch.equal(rebuilt[key], tensor), key
    assert abs(float(stored["Y"].mean())) < 1e-4 < float(stored["Y"].std()), "the stored target is standardised"

    X_test = X.iloc[split.test]
    before = tabr.predict(X_test)
    context_X, context_y = _tiled(X.iloc[split.train], y[split.train], 8)
    np.testing.assert_allclose(tabr.predict_with_context(X_test.iloc[:8], context_X, context_y), before[:8],
                               rtol=1e-5, atol=1e-6 * np.std(y))
    result = probe(tabr, spec, _job(), meta, X, y, split)
    assert result["rows_changed"] == len(split.test) and result["n_other"] == len(split.train)
    assert lightning.dataset is training and np.array_equal(tabr.predict(X_test), before)

    with pytest.raises(KeyError):  # fails inside the replacement: the query rows lack a column
        tabr.predict_with_context(X_test.iloc[:2].drop(columns="bmi"), *_tiled(X.iloc[split.train], y[split.train], 2))
    assert lightning.dataset is training and len(lightning.train_indices) == len(split.train)
    assert np.array_equal(tabr.predict(X_test), before)


NPT_SMALL = {"e": 16, "n_layers": 2, "n_heads": 4, "steps": 30, "lambda_init": 0.5, "amp": False, "eval_every": 10}


@pytest.mark.parametrize("transductive,eval_batch_size", [(False, None), (True, None), (False, 100)])
def test_npt_context_reproduces_predict_and_corruption_changes_it(transductive, eval_batch_size):
    """NPT: its table handed back through predict_with_context (row k the query; a transductive table's
    other unlabelled rows with their targets unseen) predicts row k as predict does, also where the table is
    evaluated in chunks (eval_batch_size); the corrupted table changes every prediction."""
    need("torch")
    meta, X, y = _table("diabetes")
    split = _split(len(y), n_test=12)
    spec, npt = _fitted("npt", meta, X, y, split, transductive, transductive=transductive,
                        eval_batch_size=eval_batch_size, **NPT_SMALL)
    job = _job(transductive)
    context = job_context(job, X, y, split)
    for k in range(3):
        X_other, y_other = context.others(k)
        row = X.iloc[split.test[k:k + 1]]
        np.testing.assert_allclose(npt.predict_with_context(row, X_other, y_other), npt.predict(row),
                                   rtol=1e-4, atol=1e-3 * np.std(y))
    result = probe(npt, spec, job, meta, X, y, split)
    assert result["rows_changed"] == len(split.test)
    assert result["n_other"] == (len(y) - 1 if transductive else len(split.train))


def test_the_command_writes_its_table(tmp_path):
    """`tabbench probe corruption` end to end on a real suite: k-NN gets worse, the forest is the control."""
    from tabbench.cli import main

    suite = tmp_path / "tiny.yaml"
    suite.write_text("name: tiny\nseeds: [0]\ndatasets:\n  - name: diabetes\n    source: sklearn\n    id: diabetes\n"
                     "    split: {protocol: kfold, k: 5, seed: 42, val_fraction: 0.125}\n"
                     "models:\n  knn: {}\n  random_forest:\n    params: {n_estimators: 20}\n")
    assert main(["probe", "corruption", str(suite), "--folds", "0", "--results", str(tmp_path / "runs")]) == 0
    out = tmp_path / "runs" / "tiny" / "probe-corruption"
    table = pd.read_csv(out / "corruption.csv").set_index("method")
    assert sorted(table.index) == ["knn", "random_forest"] and set(table["metric"]) == {"rmse"}
    assert table.loc["knn", "change"] > 0 and table.loc["knn", "rows_changed"] > 0
    assert table.loc["random_forest", "change"] == 0 and table.loc["random_forest", "rows_changed"] == 0
    assert "| knn | knn | diabetes | 0 |" in (out / "corruption.md").read_text()
    assert main(["probe", "corruption", str(suite), "--models", "nope", "--results", str(tmp_path / "runs")]) == 2


def test_reading_other_rows_is_declared_once_by_the_estimator_as_the_committed_tables_record_it():
    """One declaration of the capability, the estimator's ``predict_with_context``: a spec cannot declare it
    beside it (ModelSpec has no such field), a model gains it by implementing the method and is then probed
    through it, and every model of the committed probe tables reads as those tables recorded it."""
    from tabbench.spec import ModelSpec
    from tests.conftest import ROOT, registry
    from tests.plugins_for_tests import Prior

    class OthersMean(Prior):
        """The training mean, read from the other rows at predict time (regression)."""

        def predict_with_context(self, X, context_X, context_y):
            return context_y.reshape(len(X), -1).mean(axis=1)

    with pytest.raises(TypeError, match="uses_other_rows"):
        ModelSpec(name="reads_rows", factory=Prior, uses_other_rows=True)
    assert not ModelSpec(name="prior", factory=Prior).uses_other_rows
    spec = ModelSpec(name="others_mean", factory=OthersMean)
    assert spec.uses_other_rows
    meta, X, y = _table("diabetes")
    split = _split(len(y))
    model = OthersMean(meta, 0).fit(X.iloc[split.train], y[split.train])
    result = probe(model, spec, _job(), meta, X, y, split)
    # handed the other rows (a permuted target keeps its mean), not predicted unchanged as the control is
    assert result["note"] == "" and result["after"] == pytest.approx(result["before"])
    tables = sorted(ROOT.glob("results/*/probe-corruption/corruption.csv"))
    assert tables, "no committed probe table to compare with"
    for path in tables:
        for model_name, flags in pd.read_csv(path).groupby("model")["uses_other_rows"].unique().items():
            assert list(flags) == [registry()[model_name].spec.uses_other_rows], (path, model_name)


def test_a_test_row_sample_is_reproducible_and_probes_exactly_that_many_rows():
    """--test-rows: N of the test rows, the same N for the same seed, fold and repeat (other ones for another
    fold), the metric before scored on those rows, the full size recorded beside them; a transductive table
    keeps all its rows, the sampled test rows each leaving out its own."""
    meta, X, y = _table("breast_cancer")
    split = _split(len(y), n_test=120)
    sample = sample_test_rows(120, 25, _job())
    assert len(sample) == len(set(sample)) == 25 and np.array_equal(sample, np.sort(sample)) and sample.max() < 120
    assert np.array_equal(sample, sample_test_rows(120, 25, _job()))
    assert not np.array_equal(sample, sample_test_rows(120, 25, SimpleNamespace(seed=0, fold=1, repeat=0)))
    assert np.array_equal(sample_test_rows(120, 500, _job()), np.arange(120)) and len(sample_test_rows(120, None, _job())) == 120

    spec, knn = _fitted("knn", meta, X, y, split)
    first, again = (probe(knn, spec, _job(), meta, X, y, split, test_rows=25) for _ in range(2))
    assert first["n_test"] == 25 and first["n_test_total"] == 120 and first["rows_changed"] <= 25
    rows = split.test[sample]
    assert first["before"] == score(meta, y[rows], outputs(knn, meta, X.iloc[rows]))["accuracy"]
    same = ["before", "after", "auroc_before", "auroc_after", "rows_changed", "n_test"]
    assert [first[k] for k in same] == [again[k] for k in same]

    context = job_context(_job(transductive=True), X, y, split).of_test_rows(sample)
    for k in (0, 24):
        X_other, _ = context.others(k)
        assert len(X_other) == len(y) - 1 and X.index[rows[k]] not in X_other.index


SUITE = """name: tiny
seeds: [0]
published: paper.yaml
datasets:
  - {name: diabetes, source: sklearn, id: diabetes, split: {protocol: kfold, k: 5, seed: 42, val_fraction: 0.125}}
  - {name: breast_cancer, source: sklearn, id: breast_cancer,
     split: {protocol: kfold, k: 5, seed: 42, val_fraction: 0.125}}
models:
  knn: {}
  random_forest:
    params: {n_estimators: 20}
  npt:
    params: {e: 16, n_layers: 2, n_heads: 4, steps: 10, lambda_init: 0.5, amp: false, eval_every: 5}
"""


def _probe_command(tmp_path, *args) -> pd.DataFrame:
    from tabbench.cli import main

    assert main(["probe", "corruption", str(tmp_path / "tiny.yaml"), "--results", str(tmp_path / "runs"), *args]) == 0
    return pd.read_csv(tmp_path / "runs" / "tiny" / "probe-corruption" / "corruption.csv")


@pytest.fixture
def tiny_suite(tmp_path):
    (tmp_path / "tiny.yaml").write_text(SUITE)
    (tmp_path / "paper.yaml").write_text("name: the paper\ncorruption_model: npt\ncorruption_label: NPT\ncorruption: {diabetes: -20, breast_cancer: 0.0}\n")
    return tmp_path


def test_each_command_merges_its_rows_into_the_table_replacing_a_job_probed_again(tiny_suite):
    """knn on a 20-row sample, then the forest, then knn on all rows of two folds: three rows, knn's fold 0 now
    on all its test rows; the Markdown is made from all of them."""
    first = _probe_command(tiny_suite, "--models", "knn", "--datasets", "diabetes", "--folds", "0", "--test-rows", "20")
    assert len(first) == 1 and first.loc[0, "n_test"] == 20 and first.loc[0, "n_test_total"] > 80
    second = _probe_command(tiny_suite, "--models", "random_forest", "--datasets", "diabetes", "--folds", "0")
    assert sorted(second["method"]) == ["knn", "random_forest"]
    pd.testing.assert_series_equal(second.set_index("method").loc["knn"], first.set_index("method").loc["knn"])
    third = _probe_command(tiny_suite, "--models", "knn", "--datasets", "diabetes", "--folds", "0,1")
    assert sorted(zip(third["method"], third["fold"])) == [("knn", 0), ("knn", 1), ("random_forest", 0)]
    assert (third["n_test"] == third["n_test_total"]).all(), "knn's fold 0 kept its 20-row sample"
    assert third["rows_changed"].dtype.kind == "i"
    text = (tiny_suite / "runs" / "tiny" / "probe-corruption" / "corruption.md").read_text()
    assert "| knn | knn | diabetes | 1 |" in text and "| random_forest | random_forest | diabetes | 0 |" in text


def test_a_probe_keeps_the_rows_another_probe_stored_while_it_ran(tiny_suite, monkeypatch):
    """Two probes of one suite at once (disjoint --folds, one core each): each merges its rows into the table as
    it is when it writes, so neither drops the rows the other stored after it started."""
    import tabbench.probe as probe_module

    real, others = probe_module.probe, []

    def probe_while_another_command_runs(*args, **kwargs):
        if not others:  # the first job of the outer command; the inner command's own job runs the real probe
            others.append(None)
            others[0] = _probe_command(tiny_suite, "--models", "knn", "--datasets", "diabetes", "--folds", "1")
        return real(*args, **kwargs)

    monkeypatch.setattr(probe_module, "probe", probe_while_another_command_runs)
    table = _probe_command(tiny_suite, "--models", "knn", "--datasets", "diabetes", "--folds", "0")
    assert list(others[0]["fold"]) == [1]
    assert sorted(table["fold"]) == [0, 1], "the row the other probe stored while this one ran was dropped"


def test_a_table_the_probe_cannot_merge_into_stops_it_before_fitting(tiny_suite, capsys):
    csv = tiny_suite / "runs" / "tiny" / "probe-corruption" / "corruption.csv"
    csv.parent.mkdir(parents=True)
    csv.write_text("method,model,dataset,fold,repeat,seed,metric,before,after\nknn,knn,diabetes,0,0,0,rmse,50,60\n")
    err = _failing_command(tiny_suite, capsys, "--models", "knn", "--datasets", "diabetes", "--folds", "0")
    assert f"{csv}: no column(s) " in err and "n_test_total" in err and "move it aside" in err
    assert "--test-rows: expected a positive number" in _failing_command(tiny_suite, capsys, "--test-rows", "0")
    assert csv.read_text().count("\n") == 2, "the stored table was rewritten"


def _failing_command(tmp_path, capsys, *args) -> str:
    from tabbench.cli import main

    assert main(["probe", "corruption", str(tmp_path / "tiny.yaml"), "--results", str(tmp_path / "runs"), *args]) == 2
    return capsys.readouterr().err


def test_a_binary_dataset_reports_accuracy_with_the_auroc_beside_it(tiny_suite):
    table = _probe_command(tiny_suite, "--models", "knn", "--folds", "0").set_index("dataset")
    cancer, diabetes = table.loc["breast_cancer"], table.loc["diabetes"]
    assert cancer["metric"] == "accuracy" and diabetes["metric"] == "rmse"
    assert 0.5 < cancer["before"] <= 1 and cancer["before"] != cancer["auroc_before"]
    assert cancer["auroc_after"] < cancer["auroc_before"] and cancer["change"] == pytest.approx(cancer["after"] - cancer["before"], abs=1e-12)
    assert np.isnan(diabetes["auroc_before"]) and np.isnan(diabetes["auroc_after"])


def test_the_summary_sets_the_published_npt_change_beside_the_npt_rows(tiny_suite):
    """The summary's change is the paper's convention (RMSE up: negative percent), averaged over the folds with
    its standard error; the suite's published file's corruption change stands beside npt's rows only."""
    need("torch")
    from tabbench.report.format import mean_se

    _probe_command(tiny_suite, "--models", "npt", "--datasets", "diabetes", "--folds", "0", "--test-rows", "10")
    table = _probe_command(tiny_suite, "--models", "knn", "--datasets", "diabetes", "--folds", "0,1",
                           "--test-rows", "40")
    knn = table[table["method"] == "knn"]
    change = -100 * knn["relative_change"]
    assert change.mean() < 0, "k-NN's RMSE did not grow with its neighbours corrupted"
    text = (tiny_suite / "runs" / "tiny" / "probe-corruption" / "corruption.md").read_text()
    summary = text[text.index("## Summary"):text.index("## Every fold")]
    assert "published NPT change" in summary and "Published: the paper, for NPT" in summary
    knn_cell = mean_se(change.mean(), change.std(ddof=1) / np.sqrt(2), 1) + "%"
    assert f"| knn | diabetes | rmse | 2 | {knn_cell} | {knn['rows_changed'].sum()} of 80 | – |" in summary
    npt_row = next(line for line in summary.splitlines() if line.startswith("| npt | diabetes |"))
    assert npt_row.endswith("| -20% |")


def test_the_published_file_holds_the_papers_corruption_changes_and_rejects_a_malformed_section(tmp_path):
    paper = load_published(Path(__file__).resolve().parents[1] / "suites" / "published" / "npt-paper.yaml")
    assert paper.corruption["yacht"] == -52 and paper.corruption["poker_hand"] == -1.1
    assert paper.corruption["breast_cancer"] == 0.0 and len(paper.corruption) == 12
    bad = tmp_path / "paper.yaml"
    bad.write_text("name: p\ncorruption: {yacht: -52%}\n")
    with pytest.raises(PublishedError, match=rf"^{bad}: corruption.yacht: expected a number .*got text$"):
        load_published(bad)
    bad.write_text("name: p\ncorruption: [-52]\n")
    with pytest.raises(PublishedError, match=rf"^{bad}: corruption: expected a mapping"):
        load_published(bad)
    bad.write_text("name: p\ncorruption: {yacht: -52}\n")  # for which model's rows: the file must say
    with pytest.raises(PublishedError, match=rf"^{bad}: corruption_model: the corruption numbers need the registry model"):
        load_published(bad)
    assert (paper.corruption_model, paper.corruption_label) == ("npt", "NPT")


RESUMABLE_SUITE = """
name: tiny
datasets:
  - {name: breast_cancer, source: sklearn, id: breast_cancer,
     split: {protocol: kfold, k: 5, seed: 42, val_fraction: 0.125}}
models:
  knn: {}
  npt:
    params: {e: 16, n_layers: 2, n_heads: 4, steps: 30, lambda_init: 0.5, amp: false, eval_every: 10,
             checkpoint_minutes: 0}
"""


def test_a_probe_stopped_mid_fit_by_sigint_continues_its_fit_from_the_checkpoint(tmp_path, capsys):
    """The probe's fit keeps its training state where `tabbench run` keeps the job's: a probe started with SIGINT
    ignored (as a shell starts a background job) still stops on kill -INT once its fit has checkpointed, keeping
    the row of the job it probed before (k-NN's), and the next probe of the job continues that fit (it says from
    which step), writes its row beside k-NN's and removes the state."""
    import signal
    import subprocess
    import sys
    import time

    from tabbench_plugins.npt.checkpoints import CHECKPOINT_FILE

    (tmp_path / "tiny.yaml").write_text(RESUMABLE_SUITE)
    args = ["probe", "corruption", str(tmp_path / "tiny.yaml"), "--results", str(tmp_path / "runs"), "--folds", "0",
            "--test-rows", "5"]
    proc = subprocess.Popen([sys.executable, "-m", "tabbench.cli", *args], cwd=tmp_path,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    deadline = time.time() + 300
    while not list((tmp_path / "runs" / "tiny" / "checkpoints").glob(f"*/{CHECKPOINT_FILE}")) \
            and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) != 0, "the probe ended normally: its fit finished before it was interrupted"
    [state] = (tmp_path / "runs" / "tiny" / "checkpoints").glob(f"*/{CHECKPOINT_FILE}")
    kept = pd.read_csv(tmp_path / "runs" / "tiny" / "probe-corruption" / "corruption.csv")
    assert list(kept["method"]) == ["knn"], "the interrupted probe lost the job it had finished"

    capsys.readouterr()
    table = _probe_command(tmp_path, *args[3:], "--models", "npt")
    assert "npt on breast_cancer fold 0: fit resumed from its checkpoint at step" in capsys.readouterr().out
    assert list(table["method"]) == ["knn", "npt"] and (table["n_test"] == 5).all()
    pd.testing.assert_series_equal(table.iloc[0], kept.iloc[0])
    assert not state.parent.exists(), "the finished fit's training state was left behind"
