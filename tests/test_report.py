"""The report beside the leaderboard: several result folders in one table, significance tests,
win rates and LaTeX, checked against numbers worked out by hand or by scipy."""

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tabbench.pooling import PoolingError, pooled_records
from tabbench.report.leaderboard import rank_table, select_trials, write_leaderboard
from tabbench.report.significance import friedman
from tabbench.report.winrate import fold_results, win_rates
from tabbench.store import Store

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
PUBLISHED = ROOT / "suites" / "published" / "npt-paper.yaml"
# the four small UCI sets (results/uci-small-kfold, formerly results/uci-small) and the five large ones
SMALL = next((RESULTS / n for n in ("uci-small-kfold", "uci-small") if (RESULTS / n / "records").is_dir()), None)
LARGE = RESULTS / "uci-large-cpu"
needs_uci = pytest.mark.skipif(SMALL is None or not (LARGE / "records").is_dir(), reason="published uci results absent")


def record(method, dataset, fold, value, task="binary", seed=0, status="ok", finished="2026-01-01T00:00:00+00:00"):
    metric = {"binary": "auroc", "regression": "rmse"}[task]
    return {"key": f"{method}-{dataset}-{fold}-{seed}", "method": method, "model": method, "dataset": dataset,
            "task": task, "fold": fold, "repeat": 0, "seed": seed, "trial": None, "status": status, "params": {},
            "subset": None, "dataset_fingerprint": f"fp-{dataset}", "fit_seconds": 1.0, "predict_seconds": 0.1,
            "job_rss_bytes": 2**20, "finished_at": finished, "metrics": {"test": {metric: value}}}


def test_friedman_statistic_on_a_hand_made_table_equals_scipys_and_the_hand_count():
    from scipy.stats import friedmanchisquare

    scores = pd.DataFrame({"d1": [0.9, 0.8, 0.7], "d2": [0.8, 0.9, 0.7], "d3": [0.85, 0.8, 0.75],
                           "d4": [0.7, 0.6, 0.65]}, index=["a", "b", "c"])
    # ranks per dataset (1 = best): a 1,2,1,1 = 5; b 2,1,2,3 = 8; c 3,3,3,2 = 11
    # chi2 = 12 / (N k (k + 1)) * sum R_j^2 - 3 N (k + 1) = 12 / 48 * (25 + 64 + 121) - 48 = 4.5
    ranks = rank_table(scores, higher_is_better=True)[["d1", "d2", "d3", "d4"]]
    statistic, p = friedman(ranks)
    assert statistic == pytest.approx(4.5)
    scipy_result = friedmanchisquare(*scores.to_numpy())  # scipy on the raw scores, not our ranks
    assert statistic == pytest.approx(scipy_result.statistic)
    assert p == pytest.approx(scipy_result.pvalue)


def test_win_rate_matrix_on_a_tiny_record_set_equals_the_hand_count(tmp_path):
    store = Store(tmp_path)
    for r in [record("a", "d1", 0, 0.9), record("b", "d1", 0, 0.8), record("c", "d1", 0, 0.9),
              record("a", "d1", 1, 0.7), record("b", "d1", 1, 0.8), record("c", "d1", 1, None, status="error"),
              # regression, lower is better, two seeds averaged: a 2.0, b 1.0, c 3.0
              record("a", "d2", 0, 1.0, "regression", 0), record("a", "d2", 0, 3.0, "regression", 1),
              record("b", "d2", 0, 1.0, "regression", 0), record("b", "d2", 0, 1.0, "regression", 1),
              record("c", "d2", 0, 3.0, "regression", 0), record("c", "d2", 0, 3.0, "regression", 1)]:
        store.append(r)
    share, counted = win_rates(fold_results(select_trials(store.frame())))
    # (d1, 0): a beats b, a ties c, c beats b; (d1, 1): b beats a, c failed so a and b beat it;
    # (d2, 0): b beats a beats c
    expected = pd.DataFrame([[np.nan, 1 / 3, 2.5 / 3], [2 / 3, np.nan, 2 / 3], [0.5 / 3, 1 / 3, np.nan]],
                            index=["a", "b", "c"], columns=["a", "b", "c"])
    pd.testing.assert_frame_equal(share, expected)
    assert counted.loc["a", "c"] == 3


def test_a_dataset_name_with_two_fingerprints_is_an_error_naming_both_folders():
    quickstart = RESULTS / "quickstart"
    if SMALL is None or not (quickstart / "records").is_dir():
        pytest.skip("published results absent")
    # scikit-learn's breast_cancer (quickstart) and the UCI original (uci-small) are different tables
    with pytest.raises(PoolingError, match=rf"'breast_cancer' is different data in {quickstart} .* and in {SMALL}"):
        pooled_records([quickstart, SMALL])


def test_the_same_job_key_in_two_folders_keeps_the_newest_record(tmp_path):
    Store(tmp_path / "new").append(record("a", "d1", 0, 0.9, finished="2026-02-01T00:00:00+00:00"))
    Store(tmp_path / "old").append(record("a", "d1", 0, 0.5, finished="2026-01-01T00:00:00+00:00"))
    for order in (["new", "old"], ["old", "new"]):
        frame = pooled_records([tmp_path / name for name in order])
        assert len(frame) == 1
        assert frame.iloc[0]["test_auroc"] == 0.9 and frame.iloc[0]["source"] == str(tmp_path / "new")



def test_one_method_name_with_two_configurations_on_a_dataset_is_an_error_naming_the_difference(tmp_path):
    short = {**record("npt", "d1", 0, 3.0, "regression"), "params": {"steps": 300, "e": 32}}
    long = {**record("npt", "d1", 1, 2.0, "regression"), "params": {"steps": 10000, "e": 32}}
    Store(tmp_path / "short").append(short)
    Store(tmp_path / "long").append(long)
    with pytest.raises(PoolingError, match=r"method 'npt' on dataset 'd1' is a different configuration in .*short and "
                                          r"in .*long \(params steps 300 against 10000\); .*another name"):
        pooled_records([tmp_path / "short", tmp_path / "long"])
    # the same configuration in both folders (other folds) pools, and so does one name on different datasets
    Store(tmp_path / "more").append({**short, "key": "other", "fold": 2})
    Store(tmp_path / "other").append({**long, "key": "elsewhere", "dataset": "d2", "dataset_fingerprint": "fp-d2"})
    assert len(pooled_records([tmp_path / "short", tmp_path / "more", tmp_path / "other"])) == 3
    # run params (NPT's threads and checkpoint interval) say how a job ran, not what it computed: they may differ;
    # the planner records the params as the job's key sees them, run params at their defaults (key_params)
    ran = {**record("npt", "d1", 3, 2.5, "regression"), "key": "ran", "params": {"steps": 10000, "e": 32, "cpus": 1},
           "key_params": {"steps": 10000, "e": 32, "cpus": 1}}
    Store(tmp_path / "ran").append(ran)
    Store(tmp_path / "ran-again").append({**ran, "key": "again", "fold": 4, "params": {**ran["params"], "cpus": 2}})
    assert len(pooled_records([tmp_path / "ran", tmp_path / "ran-again"])) == 2
    Store(tmp_path / "longer").append({**ran, "key": "longer", "params": {**ran["params"], "steps": 20000},
                                       "key_params": {**ran["key_params"], "steps": 20000}})
    with pytest.raises(PoolingError, match=r"\(params steps 10000 against 20000\)"):
        pooled_records([tmp_path / "ran", tmp_path / "longer"])


def test_methods_of_one_model_are_told_apart_by_the_parameters_they_differ_in(tmp_path):
    store = Store(tmp_path)
    for fold in (0, 1):
        for dataset, steps in (("d1", 2000), ("d2", 10000)):
            # key_params as the planner records them: the run param cpus at its default
            store.append({**record("npt-long", dataset, fold, 1.0, "regression"), "model": "npt",
                          "params": {"steps": steps, "e": 32, "lr": 1e-3, "cpus": 2},
                          "key_params": {"steps": steps, "e": 32, "lr": 1e-3, "cpus": 1}})
            store.append({**record("npt", dataset, fold, 2.0, "regression"), "model": "npt",
                          "params": {"steps": 300, "e": 32, "lr": 1e-3, "cpus": 1},
                          "key_params": {"steps": 300, "e": 32, "lr": 1e-3, "cpus": 1}})
        store.append({**record("knn", "d1", fold, 3.0, "regression"), "params": {"k": 5}})
        store.append({**record("npt-default", "d1", fold, 2.5, "regression"), "model": "npt",
                      "params": {"e": 32, "lr": 1e-3, "cpus": 1}, "key_params": {"e": 32, "lr": 1e-3, "cpus": 1}})
    md = write_leaderboard(tmp_path).read_text()
    section = md[md.index("## Methods of one model"):md.index("## RMSE")]
    assert "| npt-default | npt | steps at its default |" in section  # a param its key params leave out
    # e and lr are the same in both, cpus a run param, knn one method of its model: none is listed
    assert "| npt-long | npt | steps 2000 (d1), 10000 (d2) |" in section
    assert "| npt | npt | steps 300 |" in section
    assert "knn" not in section and " e " not in section and "lr" not in section and "cpus" not in section

@pytest.fixture(scope="module")
def uci_cpu(tmp_path_factory):
    """The committed uci-cpu report, regenerated from the published records into a temporary folder."""
    if SMALL is None or not (LARGE / "records").is_dir():
        pytest.skip("published uci results absent")
    out = tmp_path_factory.mktemp("results") / "uci-cpu"
    write_leaderboard(out, PUBLISHED, sources=[SMALL, LARGE], report=True)
    return out


def diagram_ranks(svg: Path) -> dict:
    """method -> the mean rank printed beside it in a critical-difference diagram (text kept as text)."""
    out = {}
    for text in re.findall(r"<text[^>]*>([^<]+)</text>", svg.read_text()):
        left, right = re.fullmatch(r"(\S+) \((\d+\.\d\d)\)", text), re.fullmatch(r"\((\d+\.\d\d)\) (\S+)", text)
        if left:
            out[left[1]] = float(left[2])
        elif right:
            out[right[2]] = float(right[1])
    return out


@needs_uci
@pytest.mark.parametrize("family", ["auroc", "rmse", "all"])
def test_critical_difference_diagrams_show_the_leaderboards_mean_ranks(uci_cpu, family):
    csv = pd.read_csv(uci_cpu / "leaderboard.csv")
    ranks = csv[csv.table == f"rank_{family}"].set_index("method")["value"].round(2).to_dict()
    drawn = diagram_ranks(uci_cpu / f"cd-nemenyi-{family}.svg")
    assert drawn == ranks and len(drawn) >= 9  # every method the family ranks (the paper's nine at least), drawn
    assert (uci_cpu / f"cd-nemenyi-{family}.png").stat().st_size > 0


@needs_uci
def test_too_few_datasets_are_said_not_drawn(uci_cpu):
    from tabbench.report.significance import nemenyi_cd

    md = (uci_cpu / "leaderboard.md").read_text()
    # two multi-class datasets: Nemenyi's critical difference (8.49 for the paper's 9 methods) exceeds the
    # largest possible gap (k - 1) for any number of methods
    csv = pd.read_csv(uci_cpu / "leaderboard.csv")
    k = len(csv[csv.table == "rank_accuracy"])  # the methods ranked on the two
    assert k >= 9 and nemenyi_cd(2, k) > k - 1
    assert (f"No critical-difference diagram: Nemenyi's critical difference with 2 datasets is {nemenyi_cd(2, k):.2f} "
            f"ranks, more than the largest possible gap ({k - 1})") in md
    assert not (uci_cpu / "cd-nemenyi-accuracy.svg").exists()
    assert "No Wilcoxon-Holm diagram" in md and not list(uci_cpu.glob("cd-wilcoxon-*"))
    win = pd.read_csv(uci_cpu / "win-rate.csv", index_col="method")
    # no method failed here, so each pair's shares add up to one (a tie is half a win each way)
    assert np.allclose((win + win.T).stack().dropna(), 1.0, atol=2e-4)


def tabulars(tex: str):
    """(column spec, rows) of every tabular: rows are the lines ending in \\\\ ."""
    for spec, body in re.findall(r"\\begin\{tabular\}\{(\w+)\}(.*?)\\end\{tabular\}", tex, re.S):
        yield spec, [line.strip() for line in body.splitlines() if line.strip().endswith(r"\\")]


def cells(row: str) -> int:
    parts = re.split(r"(?<!\\)&", row[: -2])
    return sum(int(m[1]) if (m := re.match(r"\s*\\multicolumn\{(\d+)\}", p)) else 1 for p in parts)


@needs_uci
def test_leaderboard_tex_has_balanced_braces_consistent_columns_and_the_best_rank_in_bold(uci_cpu, tmp_path):
    tex = (uci_cpu / "leaderboard.tex").read_text()
    unescaped = re.sub(r"\\[{}]", "", tex)
    depth = 0
    for char in unescaped:
        depth += {"{": 1, "}": -1}.get(char, 0)
        assert depth >= 0
    assert depth == 0
    open_environments = []
    for kind, name in re.findall(r"\\(begin|end)\{(\w+)\}", tex):
        if kind == "begin":
            open_environments.append(name)
        else:
            assert open_environments.pop() == name
    assert not open_environments
    found = list(tabulars(tex))
    assert len(found) == 5  # Table 1, TabArena's aggregates and one per metric family
    for spec, rows in found:
        assert rows and all(cells(row) == len(spec) for row in rows), spec
    csv = pd.read_csv(uci_cpu / "leaderboard.csv")
    best = csv[csv.table == "rank_rmse"].sort_values("value").iloc[0]
    assert f"\\mathbf{{{best.value:.2f} \\pm {best.se:.2f}}}" in tex
    engine = next((shutil.which(e) for e in ("pdflatex", "lualatex", "xelatex") if shutil.which(e)), None)
    if engine:  # compile only where a TeX engine is installed
        (tmp_path / "doc.tex").write_text(textwrap.dedent(rf"""
            \documentclass{{article}}\usepackage{{booktabs}}\begin{{document}}
            \input{{{uci_cpu / 'leaderboard.tex'}}}\end{{document}}"""))
        subprocess.run([engine, "-interaction=nonstopmode", "-halt-on-error", "doc.tex"], cwd=tmp_path, check=True,
                       capture_output=True)


def test_leaderboard_over_several_folders_needs_a_name_and_writes_results_name(tmp_path):
    sources = [RESULTS / "quickstart", LARGE]
    if not all((s / "records").is_dir() for s in sources):
        pytest.skip("published results absent")
    command = [sys.executable, "-m", "tabbench.cli", "leaderboard", *map(str, sources), "--results", str(tmp_path)]
    unnamed = subprocess.run(command + ["--tables-only"], capture_output=True, text=True)
    assert unnamed.returncode == 2 and "add --name NAME" in unnamed.stderr
    named = subprocess.run(command + ["--name", "both", "--tables-only"], capture_output=True, text=True, check=True)
    assert f"Leaderboard: {tmp_path / 'both' / 'leaderboard.md'}" in named.stdout
    csv = pd.read_csv(tmp_path / "both" / "leaderboard.csv")
    assert {"wine", "digits", "higgs", "protein"} <= set(csv.dataset.dropna())  # the union of both folders


def test_help_and_a_tables_only_leaderboard_import_no_plotting_or_statistics_library(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        from tabbench.cli import main
        try:
            main(["--help"])
        except SystemExit:
            pass
        drawing = ("matplotlib", "scikit_posthocs", "statsmodels", "seaborn")
        print("HELP", sorted(m for m in ("scipy",) + drawing if m in sys.modules))
        main(["leaderboard", {str(RESULTS / 'quickstart')!r}, "--name", "q", "--results", {str(tmp_path)!r},
              "--tables-only"])
        print("TABLES", sorted(m for m in drawing if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HELP []" in out and "TABLES []" in out


def test_a_published_pooled_leaderboard_regenerates_unchanged_without_the_model_registry(tmp_path):
    """What a report needs about a job (its key params, whether it is transductive or deterministic) is in
    its record: with the model registry refusing every call, results/uci-small-paper-budget (NPT under two method
    names, one with other run params) is regenerated from its two source folders as committed."""
    committed = RESULTS / "uci-small-paper-budget"
    sources = ["results/uci-small", "results/uci-small-npt-paper"]
    if not all((ROOT / s / "records").is_dir() for s in sources) or not (committed / "leaderboard.md").exists():
        pytest.skip("published results absent")
    from tests.conftest import require_report_extra
    from tests.test_regeneration import comparable

    require_report_extra()
    out = tmp_path / committed.name
    code = textwrap.dedent(f"""
        import tabbench.plugins

        def no_registry(*args, **kwargs):
            raise RuntimeError("the report asked for the model registry")

        tabbench.plugins.load_models = no_registry  # the report's own parts still load through the hooks
        from tabbench.report.leaderboard import write_leaderboard
        write_leaderboard({str(out)!r}, "suites/published/npt-paper.yaml", sources={sources!r}, report=True)
    """)
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True)
    for name in ("leaderboard.md", "leaderboard.csv", "budget-curves.csv", "selected_params.csv"):  # as
        # tests/test_regeneration.py compares them: all but the library versions and the Elo intervals' ends
        suffix = Path(name).suffix
        assert comparable((out / name).read_text(), suffix) == comparable((committed / name).read_text(), suffix), name


def test_one_method_from_folders_made_on_different_devices_pools_only_when_asked_and_its_gpu_cells_say_so(tmp_path):
    def on(device, fold, value, method="npt"):
        return {**record(method, "d1", fold, value, "regression"), "key": f"{method}-{device}-{fold}",
                "params": {"steps": 2000, "device": device}, "info": {"device": device}}

    for fold in (0, 1):  # the CPU afforded two folds, the GPU ran all three
        Store(tmp_path / "cpu").append(on("cpu", fold, 9.0))
        Store(tmp_path / "cpu").append(record("knn", "d1", fold, 5.0, "regression"))
    for fold in (0, 1, 2):
        Store(tmp_path / "gpu").append(on("cuda", fold, 3.0))
    Store(tmp_path / "cpu").append(record("knn", "d1", 2, 5.0, "regression"))
    folders = [tmp_path / "cpu", tmp_path / "gpu"]
    with pytest.raises(PoolingError, match=r"\(params device cpu against cuda\)"):
        pooled_records(folders)
    pooled = pooled_records(folders, across_devices=True)
    npt = pooled[pooled["method"] == "npt"]
    assert len(npt) == 3 and set(npt["source"]) == {str(tmp_path / "gpu")}  # one device's records, never a mean
    md = write_leaderboard(tmp_path / "both", sources=folders, across_devices=True).read_text()
    assert "| npt | 3.000 ± 0.000 (GPU) |" in md and "| knn | 5.000 ± 0.000 |" in md
    assert 'A mean marked "(GPU)" rests on records made on a GPU' in md
    # a folder of one device labels nothing
    assert "(GPU)" not in write_leaderboard(tmp_path / "gpu").read_text()


def test_a_regeneration_of_a_folder_waits_while_another_regenerates_it(tmp_path):
    """Two runs of one suite that end together each regenerate the folder's tables and figures; the second
    must not read a figure the first is half-way through writing (it once read an SVG without its <svg>)."""
    import threading

    from tabbench.report import folder_locked

    store = Store(tmp_path)
    for fold in (0, 1):
        store.append(record("knn", "d1", fold, 0.8))
        store.append(record("rf", "d1", fold, 0.9))
    with folder_locked(tmp_path):  # another process regenerating this folder
        second = threading.Thread(target=write_leaderboard, args=(tmp_path,))
        second.start()
        second.join(timeout=2)
        assert second.is_alive() and not (tmp_path / "leaderboard.md").exists()
    second.join(timeout=60)
    assert not second.is_alive() and "knn" in (tmp_path / "leaderboard.md").read_text()


def test_rendering_the_markdown_writes_no_file_and_the_files_step_writes_each_file_it_links(tmp_path):
    """A leaderboard's Markdown, every section with the report (its tests, figures and budget curves), is text: its
    folder stays empty. The files step (write_files) then writes every figure and CSV file the Markdown links, a
    figure as SVG and PNG, and nothing else. On the records results/uci-small-paper-budget pools (tuned methods,
    NPT's budget curves, critical-difference diagrams, win rates, the cost figure)."""
    from tabbench.report.leaderboard import make_context, render, write_files

    sources = [RESULTS / "uci-small", RESULTS / "uci-small-npt-paper"]
    if not all((s / "records").is_dir() for s in sources):
        pytest.skip("published uci-small records absent")
    ctx = make_context(tmp_path, sources, pooled_records(sources), report=True)
    parts = render(ctx)
    assert list(tmp_path.iterdir()) == []
    md = "\n".join(line for _, lines in parts for line in lines)
    linked = set(re.findall(r"\]\(([\w.-]+\.(?:svg|png))\)", md)) | set(re.findall(r"`([\w.-]+\.csv)`", md))
    linked |= {name.replace(".svg", ".png") for name in linked if name.endswith(".svg")}
    assert {"selected_params.csv", "budget-curves.csv", "budget-curves.svg", "win-rate.csv", "cost.png"} <= linked
    write_files(ctx, parts)
    assert {p.name for p in tmp_path.iterdir()} == linked
