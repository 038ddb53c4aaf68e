"""TabArena's published per-split results beside ours, and our methods ranked on TabArena's own board.

A suite's ``published:`` list may name a TabArena declaration (suites/published/tabarena-lite.yaml): where
TabArena's results file lies (``results``, relative to the declaration; a copy elsewhere through the variable
``results_env`` names), which of our registry models has which TabArena ``config_type`` as its counterpart
(``methods``), and TabArena's datasets with their OpenML task ids and rows (``datasets``). The suite says which
of its datasets is which of TabArena's (a ``datasets:`` mapping, or an OpenML task with TabArena's task id):
never by matching names.

Two uses, one declaration:

- **Beside ours** (tabbench/report/against_tabarena.py, ``AgainstTabArena``): per mapped dataset, TabArena's default
  and tuned number of each method's counterpart, converted to our metric (TabArena's ``metric_error`` is RMSE
  for regression, 1 - AUROC for binary tasks; multi-class is log loss, which our tables do not rank), and
  judged by the one 2-SE rule (tabbench/report/agreement.py) with an estimated standard error, since TabArena-Lite
  has one split (``estimated_se``).
- **On TabArena's board** (``board``): where the suite runs TabArena's own tasks on their own folds (``board:
  true``), our records join TabArena's rows on the same (dataset, split) and bencheval, TabArena's evaluation
  engine, computes Elo over both as TabArena computes it (``TABARENA_EVALUATOR``, ``TABARENA_ELO``).

Nothing here copies TabArena's numbers into the project; where the file is absent the leaderboard says so in one
line (``Comparison.missing``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from tabbench.errors import did_you_mean
from tabbench.published import PublishedError, kind

KEYS = {"name", "note", "results", "results_env", "leave_out_suites", "folds", "methods", "datasets"}
DATASET_KEYS = {"task_id", "rows", "positives"}
#: The columns of TabArena's results_per_split.csv that are read.
COLUMNS = ("dataset", "fold", "method", "metric_error", "metric", "problem_type", "imputed", "method_subtype",
           "config_type", "ta_suite")
#: TabArena's ``metric`` -> (our metric, our value from TabArena's ``metric_error``). Our primary metrics are
#: AUROC (binary) and RMSE (regression); multi-class is ranked by accuracy here and by log loss in TabArena,
#: so TabArena's multi-class numbers have no counterpart in our tables (the board uses our log loss instead).
TO_OURS = {"rmse": ("rmse", lambda error: error), "roc_auc": ("auroc", lambda error: 1.0 - error)}
#: Our record's column that gives TabArena's ``metric_error`` for each of its metrics (the board's join).
FROM_OURS = {"rmse": ("test_rmse", lambda value: value), "roc_auc": ("test_auroc", lambda value: 1.0 - value),
             "log_loss": ("test_log_loss", lambda value: value)}
#: The variants of a TabArena method shown beside ours (``method_subtype``).
SUBTYPES = ("default", "tuned")
#: How TabArena's leaderboard computes its board (tabarena.evaluation.leaderboard_reporter, LeaderboardReporter.eval):
#: bencheval's evaluator over (dataset, split) tasks of one metric and problem type, Elo anchored at the default
#: Random Forest, 200 bootstrap rounds of the datasets.
TABARENA_EVALUATOR = {"task_col": "dataset", "seed_column": "fold", "groupby_columns": ["metric", "problem_type"],
                      "columns_to_agg_extra": None}
TABARENA_ELO = {"calibration_framework": "RF (default)", "calibration_elo": 1000, "BOOTSTRAP_ROUNDS": 200}


@dataclass(frozen=True)
class TabArenaDataset:
    task_id: int
    rows: int
    positives: int | None = None  # a binary dataset's positive rows, where a single-split SE needs them


@dataclass(frozen=True)
class Declaration:
    """A TabArena declaration file (suites/published/tabarena-lite.yaml), read; see the module docstring."""

    name: str
    path: Path
    results: Path  # the declared results file, resolved against the declaration's folder
    results_env: str = ""  # a variable naming a copy elsewhere (it wins over ``results``)
    leave_out_suites: tuple = ()
    folds: int = 3
    methods: dict = field(default_factory=dict)  # our registry model -> TabArena's config_type
    datasets: dict = field(default_factory=dict)  # TabArena's dataset name -> TabArenaDataset
    note: str = ""

    def results_file(self) -> Path:
        """Where the results are read from: the variable ``results_env`` names, where set, else ``results``."""
        return Path(os.environ[self.results_env]) if os.environ.get(self.results_env) else self.results

    def by_task(self) -> dict:
        """OpenML task id -> TabArena's dataset name."""
        return {d.task_id: name for name, d in self.datasets.items()}


def is_declaration(raw) -> bool:
    """Whether a published file's parsed YAML is a TabArena declaration (it names a results file), not a
    publication's own numbers (tabbench/published.py)."""
    return isinstance(raw, dict) and "results" in raw


def names_declaration(path) -> bool:
    """Whether the file at ``path`` is a TabArena declaration (False where it cannot be read as YAML: the
    publication loader then says why)."""
    import yaml

    try:
        return is_declaration(yaml.safe_load(Path(path).read_text()))
    except (OSError, yaml.YAMLError):
        return False


def _fail(path, where: str, message: str):
    raise PublishedError(f"{path}: {where}: {message}")


def parse_declaration(raw: dict, path) -> Declaration:
    """A TabArena declaration from its parsed YAML; every mistake a PublishedError naming the file and field."""
    path = Path(path)
    unknown = set(raw) - KEYS
    if unknown:
        key = sorted(unknown)[0]
        _fail(path, key, "unknown field" + did_you_mean(key, KEYS))
    if not isinstance(raw.get("results"), str) or not raw["results"]:
        _fail(path, "results", "expected the path of TabArena's results_per_split.csv, relative to this file")
    folds = raw.get("folds", 3)
    if not isinstance(folds, int) or isinstance(folds, bool) or folds < 2:
        _fail(path, "folds", f"expected the folds of TabArena's cross-validation (an integer of at least 2), got {kind(folds)}")
    methods = raw.get("methods") or {}
    if not isinstance(methods, dict) or not all(isinstance(v, str) for v in methods.values()):
        _fail(path, "methods", f"expected a mapping of our model -> TabArena's config_type, got {kind(methods)}")
    datasets = {}
    for name, entry in (raw.get("datasets") or {}).items():
        where = f"datasets.{name}"
        if not isinstance(entry, dict) or set(entry) - DATASET_KEYS or not {"task_id", "rows"} <= set(entry):
            _fail(path, where, f"expected {{task_id: ..., rows: ...}} (and positives: for a binary dataset), got {kind(entry)}")
        for key in entry:
            if not isinstance(entry[key], int) or isinstance(entry[key], bool) or entry[key] < 1:
                _fail(path, f"{where}.{key}", f"expected a positive integer, got {kind(entry[key])}")
        datasets[str(name)] = TabArenaDataset(entry["task_id"], entry["rows"], entry.get("positives"))
    leave_out = raw.get("leave_out_suites") or []
    if not isinstance(leave_out, list):
        _fail(path, "leave_out_suites", f"expected a list of ta_suite names, got {kind(leave_out)}")
    return Declaration(str(raw.get("name") or path.stem), path, (path.parent / raw["results"]).resolve(),
                       str(raw.get("results_env") or ""), tuple(leave_out), folds,
                       {str(k): v for k, v in methods.items()}, datasets, str(raw.get("note") or "").strip())


def load_declaration(path) -> Declaration:
    import yaml

    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise PublishedError(f"{path}: cannot read the TabArena declaration: {exc.strerror or exc}") from exc
    if not is_declaration(raw):
        raise PublishedError(f"{path}: not a TabArena declaration (it names no results file)")
    return parse_declaration(raw, path)


def read_results(decl: Declaration):
    """(TabArena's rows as a DataFrame, '') or (None, the one line a leaderboard says instead). The rows are
    TabArena's board: those of ``leave_out_suites`` are left out."""
    import pandas as pd

    file = decl.results_file()
    where = f"set {decl.results_env} to a copy's path" if decl.results_env else "put a copy there"
    if not file.is_file():
        return None, (f"{decl.name}: its results file {file} is absent, so no TabArena number is shown ({where}; "
                      f"{decl.path.name} says where the file comes from).")
    frame = pd.read_csv(file)
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise PublishedError(f"{file}: not TabArena's results_per_split.csv: no column(s) {', '.join(missing)}")
    frame = frame[~frame["ta_suite"].isin(decl.leave_out_suites)]
    frame = frame.assign(imputed=frame["imputed"].fillna(False).astype(bool))
    return frame.reset_index(drop=True), ""


@dataclass
class Comparison:
    """One suite's use of a TabArena declaration: which of its datasets are which of TabArena's, the share of
    each one's rows our split tests on, whether its records may join TabArena's board, and TabArena's rows (None
    where the file is absent: ``missing`` says so)."""

    decl: Declaration
    datasets: dict  # our dataset -> TabArena's
    test_shares: dict  # our dataset -> the share of its rows one of our test parts holds (None: not known)
    board: bool = False
    rows: object = None  # pandas DataFrame, or None
    missing: str = ""

    def counterparts(self, dataset: str, model: str) -> dict:
        """{subtype: (value in our metric, our metric)} of our ``model``'s counterpart on our ``dataset`` ({}
        where it has none, the dataset is not TabArena's, or TabArena scores it by a metric we do not rank).
        An imputed TabArena number (a failure TabArena filled in) is not the method's, so it is left out."""
        config = self.decl.methods.get(model)
        theirs = self.datasets.get(dataset)
        if self.rows is None or config is None or theirs is None:
            return {}
        rows = self.rows[(self.rows["dataset"] == theirs) & (self.rows["fold"] == 0)
                         & (self.rows["config_type"] == config) & ~self.rows["imputed"]]
        out = {}
        for _, row in rows.iterrows():
            if row["method_subtype"] in SUBTYPES and row["metric"] in TO_OURS:
                metric, convert = TO_OURS[row["metric"]]
                out[row["method_subtype"]] = (convert(float(row["metric_error"])), metric)
        return out


def test_share(split, decl: Declaration, task_id=None) -> float | None:
    """The share of a dataset's rows one test part of our ``split`` (a SplitConfig) holds: 1/k for k folds, the
    holdout's test fraction, TabArena's own 1/folds for an OpenML task of TabArena's; None where the split does
    not say (a fixed test set, another OpenML task)."""
    if split.protocol in ("kfold", "npt_code"):
        return 1.0 / split.k
    if split.protocol == "holdout":
        return split.test_fraction
    if split.protocol == "openml_task" and task_id in decl.by_task():
        return 1.0 / decl.folds
    return None


# --- the standard error a comparison with one published split can have ---------------------------------------

@dataclass(frozen=True)
class Estimate:
    """The standard errors two means are judged by: ours, TabArena's single split, and how they were had."""

    ours: float | None
    theirs: float | None
    how: str  # "spread" (our folds' spread, scaled to TabArena's test size) or "sampling" (test rows alone)
    test_rows: tuple = ()  # (ours, TabArena's) test rows the estimate assumed


def hanley_mcneil(auroc: float, positives: float, negatives: float) -> float:
    """The standard error of an AUROC measured on ``positives`` and ``negatives`` test rows (Hanley and McNeil,
    Radiology 1982, their equation 2). Written here: scikit-learn and scipy give the AUROC, not its error."""
    q1, q2 = auroc / (2 - auroc), 2 * auroc**2 / (1 + auroc)
    variance = (auroc * (1 - auroc) + (positives - 1) * (q1 - auroc**2)
                + (negatives - 1) * (q2 - auroc**2)) / (positives * negatives)
    return math.sqrt(max(variance, 0.0))


def residual_kurtosis(rmse: float, mae: float | None) -> float:
    """The kurtosis of test residuals whose RMSE and MAE a record holds, read off the generalised normal
    distribution with the same RMSE / MAE ratio (scipy.stats.gennorm: 3 for normal residuals, 6 for Laplace ones,
    more for heavier tails, as a price's are); 3 where the MAE is not known. A record holds no residuals, and
    these two moments are what it has of their tails."""
    from scipy.optimize import brentq
    from scipy.special import gammaln

    if not mae or not rmse or rmse / mae <= 1.1548:  # at or below the uniform distribution's 2 / sqrt(3)
        return 3.0 if not mae else 1.8

    def ratio(beta):  # RMSE / MAE of gennorm(beta), minus the records' (decreasing in beta)
        return math.exp(0.5 * (gammaln(3 / beta) + gammaln(1 / beta)) - gammaln(2 / beta)) - rmse / mae

    beta = brentq(ratio, 0.05, 100.0) if ratio(0.05) > 0 else 0.05
    return math.exp(gammaln(5 / beta) + gammaln(1 / beta) - 2 * gammaln(3 / beta))


def sampling_se(metric: str, value: float, rows: float, positive_share: float | None,
                kurtosis: float = 3.0) -> float | None:
    """The standard error of one split's metric from its test rows alone: for RMSE the delta method's
    RMSE * sqrt((kurtosis - 1) / 4n) (RMSE / sqrt(2n) for normal residuals; ``residual_kurtosis`` reads the tails
    off a record), Hanley and McNeil's for AUROC (needs the positive share); None where it cannot be had."""
    if metric == "rmse":
        return value * math.sqrt((kurtosis - 1) / (4 * rows))
    if metric == "auroc" and positive_share:
        return hanley_mcneil(value, rows * positive_share, rows * (1 - positive_share))
    return None


def estimated_se(metric: str, ours: float, ours_se: float | None, n_runs: int, theirs: float,
                 share: float | None, dataset: TabArenaDataset, folds: int, ours_mae: float | None = None
                 ) -> Estimate | None:
    """The standard errors of our mean (over ``n_runs`` splits and seeds, ``ours_se`` as our tables give it) and
    of TabArena's one split, or None where neither estimate is possible.

    - Ours over two or more splits: TabArena's SE is the spread of our splits (``ours_se * sqrt(n_runs)``, one
      split's standard deviation) scaled to TabArena's test size, ``sqrt(our test rows / TabArena's)``: both
      sides' splits come from the same table, so the rows' ratio is the ratio of the test shares.
    - Ours over one split: no spread to scale; both SEs from the test rows alone (``sampling_se``, the residuals'
      tails read off our RMSE and MAE, ``ours_mae``, for both sides), which leaves out what a different training
      part would change: a lower bound on each.
    """
    theirs_rows = dataset.rows / folds
    if share is None:
        return None
    ours_rows = dataset.rows * share
    if n_runs >= 2 and ours_se is not None and math.isfinite(ours_se):
        spread = ours_se * math.sqrt(n_runs)
        return Estimate(ours_se, spread * math.sqrt(ours_rows / theirs_rows), "spread", (ours_rows, theirs_rows))
    positive_share = dataset.positives / dataset.rows if dataset.positives else None
    tails = residual_kurtosis(ours, ours_mae) if metric == "rmse" else 3.0
    mine = sampling_se(metric, ours, ours_rows, positive_share, tails)
    other = sampling_se(metric, theirs, theirs_rows, positive_share, tails)
    if mine is None or other is None:
        return None
    return Estimate(mine, other, "sampling", (ours_rows, theirs_rows))


# --- our methods on TabArena's board --------------------------------------------------------------------------

def our_rows(selected, comparison: Comparison):
    """Our selected records as TabArena's rows: per (method, TabArena dataset, split) the error TabArena's metric
    for the dataset gives (1 - AUROC, RMSE, log loss), averaged over seeds; split = folds x repeat + fold, as
    TabArena numbers its splits. Failed or unscored records give no row."""
    import pandas as pd

    theirs = comparison.rows
    metric_of = theirs.groupby("dataset")[["metric", "problem_type"]].first()
    out = []
    for (method, dataset, fold, repeat), runs in selected.groupby(["method", "dataset", "fold", "repeat"]):
        name = comparison.datasets.get(dataset)
        if name not in metric_of.index:
            continue
        metric, problem_type = metric_of.loc[name]
        column, convert = FROM_OURS[metric]
        ok = runs[runs["status"] == "ok"]
        values = ok[column].dropna() if column in ok else []
        if len(values) == 0 or len(values) < len(runs):
            continue
        out.append({"method": method, "dataset": name, "fold": int(repeat) * comparison.decl.folds + int(fold),
                    "metric_error": float(convert(values.mean())), "metric": metric, "problem_type": problem_type})
    return pd.DataFrame(out, columns=["method", "dataset", "fold", "metric_error", "metric", "problem_type"])


@dataclass
class Board:
    """Our methods among TabArena's on the tasks our records cover: ``table`` per method (best Elo first):
    ``elo``, ``elo_low``, ``elo_high``, ``rank`` (bencheval's mean rank), ``win_rate`` and ``ours``."""

    table: object  # pandas DataFrame; None where none of our records is on a split TabArena published
    tasks: list  # the (dataset, split) pairs ranked
    imputed: list  # (our method, dataset, split) filled with TabArena's default Random Forest, as TabArena does
    version: str = ""


def board(ours, theirs) -> Board:
    """TabArena's rows (``theirs``: its board, e.g. Comparison.rows) and ``ours`` (``our_rows``) ranked together by
    bencheval as TabArena ranks its board, on the (dataset, split) tasks where one of our methods has a result and
    TabArena has published its own (our records of other splits are left out).
    Where another of ours has none there, TabArena's default Random Forest's error fills it (TabArena's rule for a
    failure) and ``imputed`` says so."""
    from importlib.metadata import version

    import pandas as pd
    from bencheval.evaluator import BenchmarkEvaluator

    columns = ["method", "dataset", "fold", "metric_error", "metric", "problem_type"]
    published = set(zip(theirs["dataset"], theirs["fold"]))  # TabArena-Lite: split 0 of each dataset alone
    tasks = sorted(set(zip(ours["dataset"], ours["fold"])) & published)
    ours = ours[[t in set(tasks) for t in zip(ours["dataset"], ours["fold"])]]
    if not tasks:
        return Board(None, [], [])
    theirs = theirs[[t in set(tasks) for t in zip(theirs["dataset"], theirs["fold"])]][columns]
    anchor = TABARENA_ELO["calibration_framework"]
    filled, imputed = [], []
    for method in sorted(ours["method"].unique()):
        have = set(zip(*[ours.loc[ours["method"] == method, c] for c in ("dataset", "fold")]))
        for dataset, fold in tasks:
            if (dataset, fold) not in have:
                rf = theirs[(theirs["method"] == anchor) & (theirs["dataset"] == dataset) & (theirs["fold"] == fold)]
                filled.append(rf.assign(method=method))
                imputed.append((method, dataset, fold))
    data = pd.concat([theirs, ours[columns], *filled], ignore_index=True)
    evaluator = BenchmarkEvaluator(**TABARENA_EVALUATOR)
    lb = evaluator.leaderboard(data, metrics=["elo", "winrate"], elo_kwargs=dict(TABARENA_ELO), sort_by=None)
    table = pd.DataFrame({"elo": lb["elo"], "elo_low": (lb["elo"] - lb["elo-"]).round(1),
                          "elo_high": (lb["elo"] + lb["elo+"]).round(1), "rank": lb["rank"], "win_rate": lb["winrate"]})
    table["ours"] = table.index.isin(set(ours["method"]))
    table = table.rename_axis("method").sort_values(["elo", "rank"], ascending=[False, True])
    return Board(table, tasks, imputed, version("bencheval"))
