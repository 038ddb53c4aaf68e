"""What tests/test_readme_numbers.py reads beside the records: the numbers results READMEs may state that are not
results (inputs of a protocol, measurements cited from the document that holds them), and the claims whose
numbers prose works out beyond the tables, each computed here from the records (CLAIMS).

An input is what was asked, not what came out: a budget, a fold count, a configuration's size, a dataset's rows, a
step count a suite sets. Declare it for the README that states it, with the reason; never a result.
"""

from __future__ import annotations

import re
from functools import cache, cached_property
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"


class Folder:
    """A results folder's tables and records, read once, for the claims below."""

    def __init__(self, name: str):
        self.path = RESULTS / name

    @cached_property
    def board(self) -> pd.DataFrame:
        return pd.read_csv(self.path / "leaderboard.csv")

    @cached_property
    def records(self) -> pd.DataFrame:
        from tabbench.pooling import pooled_records

        return pooled_records([self.path])

    def other(self, name: str) -> "Folder":
        return folder(name)

    def jobs(self, methods, status: str | None = None) -> int:
        runs = self.records[self.records["method"].isin(methods.split())]
        return int((runs["status"] == status).sum()) if status else len(runs)

    def carried_from(self, name: str) -> int:
        """How many of the records have a job key of another folder's records (carried over from it)."""
        return int(self.records["key"].isin(set(folder(name).records["key"])).sum())

    @cached_property
    def selected(self) -> pd.DataFrame:
        from tabbench.report.leaderboard import select_trials

        return select_trials(self.records)

    def folds(self, method: str, dataset: str, folds=None, without=None) -> pd.Series:
        """The method's test metric on the dataset per fold (its selected trial), on ``folds`` or ``without`` one."""
        from tabbench.metrics import PRIMARY

        runs = self.selected[(self.selected["method"] == method) & (self.selected["dataset"] == dataset)]
        values = runs.set_index("fold")[f"test_{PRIMARY[runs['task'].iloc[0]][0]}"].sort_index()
        values = values[values.index.isin(folds)] if folds is not None else values
        return values.drop(without) if without is not None else values

    def mean_se(self, *args, **kwargs) -> tuple:
        values = self.folds(*args, **kwargs)
        return float(values.mean()), float(values.std(ddof=1) / len(values) ** 0.5)

    def wall_minutes(self, methods: str) -> float:
        runs = self.records[self.records["method"].isin(methods.split())]
        return float(runs["wall_seconds"].sum() / 60)

    def hours(self, method: str, datasets: str) -> float:
        """The wall hours of a method's jobs on the datasets."""
        runs = self.records[(self.records["method"] == method) & self.records["dataset"].isin(datasets.split())]
        return float(runs["wall_seconds"].sum() / 3600)

    def cpu_minutes(self, methods: str, top: bool = False) -> float:
        """The fit and predict minutes of the methods' jobs; ``top``: the largest of any one method's."""
        runs = self.records[self.records["method"].isin(methods.split())]
        minutes = (runs["fit_seconds"] + runs["predict_seconds"]).groupby(runs["method"]).sum() / 60
        return float(minutes.max() if top else minutes.sum())


#: Inputs every README may state.
EVERYWHERE = [
    ("2", "the 2-SE rule of every table, and the 2-core machines the records name"),
    ("95", "the 95% interval of an Elo"),
    ("0.05", "the significance level α of every test"),
    ("1000 1,000", "Random Forest's Elo anchor (TabArena's); per 1,000 rows"),
]

#: Per README (its folder's name; "results" for results/README.md): (numbers, why they are inputs).
INPUTS: dict[str, list] = {
    "results": [
        ("720 207", "Concrete fold 0's training and validation rows (suites/uci-small.yaml's split)"),
        ("32 3 512 16 4 300 10,000 8", "the configurations fitted: TabM's k and blocks, NPT's e, layers and steps, "
                                      "CatBoost's eight uci-small trials"),
    ],
    "image-reduced": [
        ("16 14 2 420 900 80% 10 8", "the suites: jobs (14 baseline and NPT-budget jobs, 2 of image-reduced-npt), budgets, "
                                     "the training's share, classes, layers and heads"),
        ("4,375 625 10,000 5,000 500 7,499 834 1,667 42 255 784 3,072", "the offline copies: rows of each split, the "
                                                                         "holdout's seed, pixel range and columns"),
        ("49 4 64 3 512 256 0.15 1.0 16 1e-3", "NPT's patches, layers, batches, masking, e and learning rate (the suites)"),
        ("60,000 12.5% 70,000 45,000 500,000 1,000,000 24 2080", "the paper's image protocol, steps and GPUs (suites/image.yaml)"),
        ("0.10 2.30", "chance accuracy on ten classes, and ln 10"),
        ("2021", "the paper's year"),
    ],
    "uci-small": [
        ("500 48 264 64 207", "the protocols: TabArena's k-NN space (k up to 500; 48 draws of its 264 distinct "
                              "models), its 64 RealMLP networks a configuration, our 207 validation rows"),
        ("28 365", "Concrete's data: the ages, in days, of most rows and of the oldest"),
    ],
    "npt-budget-meta": [
        ("13 150 2 5 512", "the suite: its tables and budget; the machine's cores; the compiled optimiser's threshold "
                           "(5 million parameters) and the rows steps auto timed in the code that ran it"),
    ],
    "uci-higgs-npt-gpu": [
        ("64 8 300 500,000 7,500 3,750 4,096 6 875", "the suite: NPT's Higgs configuration, its steps, the subset's "
                                                     "rows, its minibatches, the batch size, the validation interval "
                                                     "and validation rows (suites/uci-higgs-npt-gpu.yaml)"),
        ("19.18 24 2080 5 22 4 11 1.3", "the paper's Higgs run (../shared/docs/npt-reference.md): its peak GPU memory, "
                                        "GPUs, days and hours, CPUs, and its table's millions of rows and of validation rows"),
    ],
    "uci-small-npt-tuned": [
        ("320 16 10,000 20,000 32 10 8", "the suite: its jobs, the two folds' jobs, the variants' steps and e"),
        ("62 31", "Yacht's validation and test rows a fold"),
        ("1 4.5 6.0 5.0 6.5 5.5 2.0", "the variants' places on the two folds (from the table's test RMSE)"),
        ("5", "minutes between checkpoints"),
    ],
    "uci-small-kfold": [
        ("500", "TabArena's k-NN search space: k up to 500"),
        ("16 4 8 300 1.3 32 128 2,000 10,000 168", "NPT's configurations here and in the paper (e, layers, heads, "
                                                  "steps, parameters in millions)"),
        ("24 48 11,340 40 6 30", "the tuning: the paper's grid sizes, the draws and TabNet's epochs and patience"),
        ("7-33 7 33", "the paper's steps over the reduced budget's 300 (2,000 / 300 to 10,000 / 300)"),
        ("1,024 400", "pytorch-tabnet's default batch and the training sets' rows"),
        ("10 9 15 14", "folds, methods, Yacht's Froude levels and rows per level"),
    ],
    "uci-large-cpu": [
        ("24 50 256 10,000 1,000 20 16 150", "the protocols: the paper's 24-48-point grids; the suite's caps (the "
                                             "boosters' 1,000 and now 10,000 trees, RealMLP's 50 of its 256 epochs, "
                                             "the MLP's 50, TabM's 20) and TabM's patience 16; the epochs an uncapped "
                                             "early stop may end between (50 to 150)"),
        ("7,000 500 11,000,000 500,000 48,842 14 299,285 42 1,000,000 18,488 15,120 581,012 5 55 3",
         "the datasets as run and as the paper ran them: rows, columns, classes, subsets (docs/datasets.md)"),
        ("16 4 512 600 64-128 64 128 8 1,800 4,096 30", "NPT's budget here and the paper's configurations "
                                                      "(suites/uci-large-cpu.yaml, the paper's Table 8)"),
        ("45 13", "the suite's jobs and methods"),
    ],
    "uci-small-yacht-froude": [
        ("15.1 14 15 216 20 480", "Yacht's target spread and Froude levels, its rows per level and training rows, "
                                  "LightGBM's min_child_samples, the one-hot LightGBM jobs (the suite)"),
        ("2,720 320 3,040 10 8", "the suite's jobs and records, folds and draws"),
    ],
    "uci-small-npt-paper": [
        ("8 2,000 10,000 32 128 100 300 1,000 5,000 16 4", "the suite's configurations: layers, heads, steps, e, "
                                                         "the budget curve's steps; uci-small's e 16 and 4 layers"),
        ("1,000 2,000 4,000 2% 10% 35% 50%", "the paper's lambda schedule: the target's loss weight at a step"),
        ("3,000 5,000", "steps of the run: the last 3,000 (from 7,000), the last 5,000"),
        ("57 21 36", "Breast Cancer's test rows per fold, and their (malignant, benign) split"),
        ("-52% 20% +0", "the paper's Table 2: NPT's change under the corruption (suites/published/npt-paper.yaml)"),
        ("10 9 11 6.3 6.9", "counts of folds and methods, and the thresholds the README reads them by"),
        ("5 30 122", "the machine's load average beside folds 6-7, and the step folds 4-5 resumed from"),
    ],
    "uci-small-npt-paper-gpu": [
        ("141 16 9.0", "the lent machine: an H200's memory, the host's cores (each record names them)"),
        ("470 5", "a session's time limit and its processes sharing the GPU (benchmarks/gpu/session.sh)"),
        ("8 2,000 10,000 32 128 10 6", "the suite's configurations and the folds run of ten"),
    ],
    "breadth": [
        ("707 5,000", "mlc_churn's table: its positives and rows (the data, an input of the SE formula)"),
        ("38 14 10 13 80 1,040 1,120", "the suite: its datasets, per family, its models (14 methods), splits and jobs (suites/breadth.yaml)"),
        ("536 53,940 5 86 1,236 6", "the datasets' rows and columns (docs/datasets.md)"),
        ("2,500 20% 12.5% 0-2 3", "the suite's split rule: 5-fold CV with folds 0-2 below 2,500 rows, else a holdout"),
        ("450 80%", "the time budget of a job and the training's share of it (suites/breadth.yaml)"),
        ("500 300", "the step thresholds the README's analysis splits NPT's datasets at"),
        ("2,000 20,000", "the paper's step counts on its small datasets"),
        ("26", "the suite header's first estimate of the CPU-hours (suites/breadth.yaml)"),
    ],
}

#: Per README: {document: "numbers"} cited from it (a benchmark's figure, with its machine and command there).
CITED: dict[str, dict] = {
    "results": {"benchmarks/README.md": "1.3 4.54 5.9 5.01 92.4 5.04 135.9 3.62 59.8 0.1 1.1"},
    "uci-small-npt-paper-gpu": {"benchmarks/README.md": "2.5 4.2 34 13 40 10 26 11 1.8 100% 15-26%"},
}


@cache
def folder(name: str) -> Folder:
    """The one Folder of a name: each folder's records are read once for every claim of every README."""
    return Folder(name)


#: Per README: {where it comes from, as the README names it: "numbers"} measured outside tabbench, with no record
#: here (the authors' code run for issue 11). The README must name the source beside them; they are the one kind of
#: number the records cannot check, so keep this list short.
EXTERNAL: dict[str, dict] = {
    "uci-small": {"issue 11": "13.38 0.78 4.87 0.48 8.66 0.25"},
    # the capped Protein records issue 48 replaced (removed from records.jsonl; git history keeps them), and the
    # re-run's wall minutes as that run measured them
    "uci-large-cpu": {"git history": "3.685 48 3.650 996 999 3.78 18.5 22.6 17"},
    "image-reduced": {"Table 2": "0.4 1.2"},
    "uci-small-npt-tuned": {"Table 13": "3.60 0.54 5.20 0.47 2.70 0.52 1.20 0.53 2.80 0.66 4.10 0.74 5.30 0.83 "
                                         "3.10 0.69"},
}


def _min_steps() -> int:
    """NPT's budget rule's threshold (tests/test_npt_budget_rule.py checks it is what the sweep's records select)."""
    from tabbench_plugins.npt.cost import MIN_STEPS

    return MIN_STEPS


def modern() -> str:
    """The models after NPT (the ``modern`` extra's, as their specs say), as ``Folder.jobs`` takes methods."""
    from tests.conftest import models_of_extra

    return " ".join(models_of_extra("modern"))


#: Per README: (pattern, function of the folder giving the pattern's numbers, in order). The pattern's groups are
#: the numbers as printed; each must equal the computed value at the digits printed.
PAPER = "npt catboost gradient_boosting xgboost lightgbm mlp random_forest tabnet knn"  # the paper's nine

def _higgs_gpu_plan() -> tuple:
    """`tabbench plan suites/uci.yaml --gpus 1 --models npt --datasets higgs` from the committed records: NPT's
    GPU-hours for the paper's Higgs protocol and the factor its Higgs record scales the cost model by."""
    from tabbench.data.cache import DataPaths
    from tabbench.plan import plan_suite
    from tabbench.run.expand import Selection
    from tabbench.suite import load_suite
    from tests.conftest import require_shared

    plan = plan_suite(load_suite(ROOT / "suites" / "uci.yaml"), DataPaths.from_env(mirrors=(require_shared(),)),
                      ROOT / "runs" / "uci", None, [RESULTS], gpus=1,
                      selection=Selection(models=("npt",), datasets=("higgs",)))
    (row,) = plan.rows
    return row.gpu_hours, float(re.search(r"scaled x([\d.]+)", row.basis)[1])


CLAIMS: dict[str, list] = {
    "uci-higgs-npt-gpu": [
        (r"It plans the 500,000 steps at ([\d.]+) GPU-hours \(its cost model scaled x([\d.]+) by this record\)",
         lambda f: _higgs_gpu_plan()),
    ],
    "npt-budget-meta": [
        (r"the selected `MIN_STEPS` is ([\d,]*\d)", lambda f: (_min_steps(),)),
        (r"The result \(all ([\d,]+) jobs ok\)", lambda f: (f.jobs(" ".join(set(f.records["method"])), "ok"),)),
        (r"ranks last of the ([\d,]+) rungs on every one of the ([\d,]+) tables",
         lambda f: (f.records["method"].nunique(), f.records["dataset"].nunique())),
    ],
    "uci-small": [
        (r"and ([\d.]+) for Concrete's 80", lambda f: (f.hours("tabm", "concrete"),)),
        (r"([\d,]+) of the records were carried over from", lambda f: (f.carried_from("uci-small-kfold"),)),
        (r"\(([\d,]+) records, partly gzipped", lambda f: (len(f.records),)),
        (r"\(ten folds, 8 draws each, ([\d,]+) jobs, none failed\)", lambda f: (f.jobs(modern(), "ok"),)),
        (r"([\d.]+) CPU-hours for the 240 jobs on Breast Cancer, Boston and Yacht",
         lambda f: (f.hours("tabm", "breast_cancer boston yacht"),)),
    ],
    "uci-small-kfold": [
        (r"CPU time per method \(fit \+ predict, all jobs\): NPT (\d+) min, TabNet (\d+), MLP (\d+), XGBoost (\d+), "
         r"the rest under (\d+) each", lambda f: (*(f.cpu_minutes(m) for m in ("npt", "tabnet", "mlp", "xgboost")),
                                                  f.cpu_minutes(PAPER.replace("npt", "").replace("tabnet", "")
                                                                .replace(" mlp", "").replace("xgboost", ""), top=True) + 0.5)),
    ],
    "uci-small-npt-paper": [
        (r"without fold 6, the outlier at 3.32, the mean is ([\d.]+)",
         lambda f: (f.mean_se("npt-e32", "yacht", without=6)[0],)),
        (r"without fold 3 the mean is ([\d.]+) ± ([\d.]+)", lambda f: f.mean_se("npt-e32", "boston", without=3)),
        (r"nine folds at ([\d.]+) ± ([\d.]+) and that one", lambda f: f.mean_se("npt-e32", "boston", without=3)),
        (r"2.92 against npt-e32's ([\d.]+) on the same folds", lambda f: (f.folds("npt-e32", "boston", [0, 1]).mean(),)),
        (r"\(XGBoost ([\d.]+) on them against 3.46 over ten, MLP ([\d.]+) against",
         lambda f: [f.other("uci-small").folds(m, "boston", [0, 1]).mean() for m in ("xgboost", "mlp")]),
        (r"\(CatBoost ([\d.]+) against 4.44, XGBoost ([\d.]+) against 4.65, random forest ([\d.]+) against 5.63\), "
         r"the MLP 0.4 above \(([\d.]+) against 5.43\)",
         lambda f: [f.other("uci-small").folds(m, "concrete", [0, 1]).mean()
                    for m in ("catboost", "xgboost", "random_forest", "mlp")]),
        (r"\(`npt`, 300 steps\) has ([\d.]+) on the same folds",
         lambda f: (f.other("uci-small").folds("npt", "concrete", [0, 1]).mean(),)),
        (r"\(LightGBM ([\d.]+), CatBoost ([\d.]+), XGBoost ([\d.]+), gradient boosting ([\d.]+)\) and level with the "
         r"random forest \(([\d.]+)\), ahead of the MLP \(([\d.]+)\), TabNet \(([\d.]+)\), k-NN \(([\d.]+)\) and "
         r"the reduced budget \(([\d.]+)\)",
         lambda f: [f.other("uci-small").folds(m, "concrete", [0, 1]).mean() for m in
                    ("lightgbm", "catboost", "xgboost", "gradient_boosting", "random_forest", "mlp", "tabnet", "knn",
                     "npt")]),
        (r"first, ([\d.]+), ahead of the MLP \(([\d.]+)\), LightGBM and CatBoost \(([\d.]+) each\), TabNet ([\d.]+), "
         r"k-NN ([\d.]+); the reduced budget is last \(([\d.]+)\)",
         lambda f: [f.folds("npt-paper", "breast_cancer", range(6)).mean()]
         + [f.other("uci-small").folds(m, "breast_cancer", range(6)).mean() for m in ("mlp", "lightgbm")]
         + [f.other("uci-small").folds(m, "breast_cancer", range(6)).mean() for m in ("tabnet", "knn", "npt")]),
        (r"LightGBM and CatBoost \(([\d.]+) each\)",
         lambda f: (f.other("uci-small").folds("catboost", "breast_cancer", range(6)).mean(),)),
    ],
    "image-reduced": [
        (r"(\d+) minutes of job wall time for image-reduced.yaml's 14 jobs \(one process\), (\d+) minutes for "
         r"image-reduced-npt.yaml's two: about (\d+) minutes",
         lambda f: (f.wall_minutes("knn random_forest xgboost lightgbm catboost mlp npt-cpu-budget"),
                    f.wall_minutes("npt-cpu-900s"), f.wall_minutes(" ".join(f.records["method"].unique())))),
    ],
    "uci-cpu": [
        (r"uci-large-cpu's five datasets \((\d+) jobs\) and uci-small's four \(ten folds each, ([\d,]+) jobs\), "
         r"none failed",
         lambda f: (f.other("uci-large-cpu").jobs(modern(), "ok"), f.other("uci-small").jobs(modern(), "ok"))),
    ],
}


def declared(name: str) -> set:
    return {v.rstrip("%") for values, _ in EVERYWHERE + INPUTS.get(name, []) for v in values.split()}


def cited(name: str) -> set:
    return {v for values in (*CITED.get(name, {}).values(), *EXTERNAL.get(name, {}).values()) for v in values.split()}
