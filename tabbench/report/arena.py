"""TabArena's aggregates beside the mean ranks: Elo, improvability and win rate, computed by bencheval.

bencheval is TabArena's own evaluation engine (the ``report`` extra); nothing here re-implements its
statistics. This module turns the leaderboard's per-family tables (``family.summarise``: the test
metric per method and dataset, averaged over folds and seeds, NaN where the method has no complete
result) into the one frame bencheval reads, and its answer into the notes and LaTeX cells that the leaderboard's
``Arena`` section (tabbench.report.sections) shows.

- Error per (method, dataset), lower is better, as bencheval wants it: 1 - AUROC (binary), 1 - accuracy
  (multi-class; TabArena scores multi-class by log-loss, our tables by accuracy) and RMSE (regression).
- Every dataset in one pool, as TabArena pools its tasks across problem types: each aggregate compares
  methods only within a dataset (who beats whom, the best error on it), so the families' scales never
  meet. A dataset then weighs the same whatever its family.
- Failures count as the rank tables count them: a method without a complete result on a dataset
  takes an infinite error there, so it loses to every method with a result and ties with every other
  without one (the worst rank), and its improvability there is 1. A method absent from a whole family
  is treated so on that family's datasets, as the pooled ranks do. (TabArena instead imputes a failure
  with the default Random Forest's result; here the aggregates agree with the rank tables.) A dataset
  where no method has a result compares nothing and is left out.
- Elo: bencheval's Bradley-Terry fit on the datasets' pairwise outcomes (a tie is half a win), 400
  points for 10:1 odds, moved so that ``random_forest`` is at 1000 (TabArena anchors its default Random
  Forest there); with no ``random_forest`` the ratings are unanchored, averaging 1000. The 95% interval
  holds the 2.5th-97.5th percentiles over 200 bootstrap resamples of the datasets (TabArena's count;
  bencheval's fixed seed, so a leaderboard regenerates byte for byte).
- The interval is shown from ``MIN_INTERVAL_DATASETS`` (6) datasets up. Below that, resampling a handful of
  datasets often draws one or two of them many times, a method then wins or loses every comparison of the
  resample, and its Elo there is bounded only by bencheval's ridge penalty: the interval's ends are the penalty's,
  not the data's. Measured on breadth's records (benchmarks/elo_interval_width.py: random subsets of n of its 38
  datasets, 13 methods): the median width is 11,460 points at 3 datasets, 1,094 at 4 and 705 at 5, where 23% and
  12% of the intervals are wider than 2,000 points; at 6 it is 485, nine in ten under 800 (two steps of 10:1
  odds), and it narrows smoothly from there (130 at 38). Below the minimum the Elo is shown without an
  interval, and the note says that it orders the methods on these datasets and separates none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

ANCHOR = "random_forest"  # TabArena anchors Elo at its default Random Forest
ANCHOR_ELO = 1000
BOOTSTRAP_ROUNDS = 200  # TabArena's leaderboards use 200 resamples
MIN_INTERVAL_DATASETS = 6  # fewer: the bootstrap interval's ends are bencheval's ridge penalty's (above)
FAMILY_ERROR = {"auroc": "1 - AUROC", "accuracy": "1 - accuracy", "rmse": "RMSE"}


@dataclass
class Aggregates:
    """bencheval's answer for one leaderboard. ``table`` (None when it cannot be computed, ``reason``
    says why): per method, best Elo first, ``elo``, ``elo_low``, ``elo_high`` (NaN with one dataset),
    ``improvability``, ``win_rate`` and the leaderboard's ``mean_rank`` over all datasets."""

    table: pd.DataFrame | None
    datasets: dict  # metric -> the datasets of that family the aggregates rest on
    anchor: str | None = None
    anchor_tuned: tuple = (0, 0)  # (datasets where the anchor was tuned, datasets it ran on)
    imputed: list = field(default_factory=list)  # (method, dataset) pairs without a complete result
    left_out: list = field(default_factory=list)  # datasets where no method has a result
    reason: str | None = None
    version: str = ""

    @property
    def n_datasets(self) -> int:
        return sum(len(d) for d in self.datasets.values())


def errors(tables: dict) -> tuple[pd.DataFrame, list, list]:
    """bencheval's input from ``family.summarise``'s tables: one row per (method, dataset) with
    ``metric_error`` (lower is better, inf where the method has no complete result), the imputed
    pairs, and the datasets left out because no method has a result there."""
    methods = sorted({m for t in tables.values() for m in t.mean.index})
    rows, imputed, left_out = [], [], []
    for t in tables.values():
        mean = t.mean.reindex(methods)
        for dataset in mean.columns:
            scores = mean[dataset]
            if scores.isna().all():
                left_out.append(dataset)
                continue
            error = 1 - scores if t.higher else scores
            imputed += [(m, dataset) for m in error.index[error.isna()]]
            rows += [(m, dataset, float(e)) for m, e in error.fillna(np.inf).items()]
    return pd.DataFrame(rows, columns=["method", "dataset", "metric_error"]), imputed, left_out


def aggregates(tables: dict, selected: pd.DataFrame, mean_rank: pd.Series) -> Aggregates:
    """Elo with its bootstrap interval, improvability and win rate per method, from bencheval.
    ``selected``: the leaderboard's selected trials (to say whether the anchor was tuned);
    ``mean_rank``: the leaderboard's mean rank over all datasets, shown beside them."""
    data, imputed, left_out = errors(tables)
    datasets = {t.metric: [d for d in t.datasets if d not in left_out] for t in tables.values()}
    out = Aggregates(None, {m: d for m, d in datasets.items() if d}, imputed=imputed, left_out=left_out)
    try:
        from importlib.metadata import version

        from bencheval.evaluator import BenchmarkEvaluator
    except ImportError:
        out.reason = "TabArena's aggregates need bencheval, in the report extra: pip install 'tabbench-harness[report]'."
        return out
    out.version = version("bencheval")
    methods = sorted(data["method"].unique())
    if len(methods) < 2 or data.empty:
        out.reason = (f"Elo, improvability and win rate compare methods; this leaderboard has "
                      f"{len(methods)} with a result ({', '.join(methods) or 'none'}).")
        return out
    out.anchor = ANCHOR if ANCHOR in methods else None
    if out.anchor is not None:
        runs = selected[selected["method"] == ANCHOR]
        tuned = runs.loc[runs["trial"].notna(), "dataset"] if "trial" in runs else []
        out.anchor_tuned = (len(set(tuned)), runs["dataset"].nunique())
    evaluator = BenchmarkEvaluator(task_col="dataset", columns_to_agg_extra=None)
    elo_kwargs = {"BOOTSTRAP_ROUNDS": BOOTSTRAP_ROUNDS}
    if out.anchor is not None:
        elo_kwargs |= {"calibration_framework": ANCHOR, "calibration_elo": ANCHOR_ELO}
    board = evaluator.leaderboard(data, metrics=["elo", "winrate", "improvability"], include_error=False,
                                  elo_kwargs=elo_kwargs, sort_by=None)
    # bencheval gives Elo and the interval's widths to 0.1 point; the interval's ends are kept so
    table = pd.DataFrame({"elo": board["elo"], "elo_low": (board["elo"] - board["elo-"]).round(1),
                          "elo_high": (board["elo"] + board["elo+"]).round(1), "improvability": board["improvability"],
                          "win_rate": board["winrate"], "mean_rank": mean_rank.reindex(board.index)})
    if out.n_datasets < MIN_INTERVAL_DATASETS:  # too few datasets for the bootstrap to bound the Elo (above)
        table[["elo_low", "elo_high"]] = np.nan
    # ties in Elo and mean rank by name: a sort that is not stable would order them by chance
    out.table = table.rename_axis("method").sort_values(["elo", "mean_rank", "method"], ascending=[False, True, True])
    return out


def _counts(agg: Aggregates) -> str:
    parts = [f"{len(d)} {metric}" for metric, d in agg.datasets.items()]
    return f"{agg.n_datasets} dataset{'s' if agg.n_datasets != 1 else ''} ({', '.join(parts)})"


def notes(agg: Aggregates) -> list[str]:
    """The sentences under the table: what it rests on, the anchor, failures and separated methods."""
    t = agg.table
    families = ", ".join(FAMILY_ERROR[m] for m in agg.datasets)
    out = [f"Computed by bencheval {agg.version} (TabArena's evaluation engine) over all {_counts(agg)} "
           f"together, as TabArena pools its tasks: each method's error on a dataset ({families}) is compared "
           "only with the other methods' on that dataset, so the families' scales never meet."]
    if agg.anchor is None:
        out.append(f"Elo: Bradley-Terry over the datasets' pairwise outcomes (a tie half a win; 400 points for "
                   f"10:1 odds), unanchored: this leaderboard has no {ANCHOR}, so the ratings average 1000.")
    else:
        tuned, ran = agg.anchor_tuned
        how = ("run at fixed parameters" if not tuned else "tuned here, not TabArena's default configuration"
               if tuned == ran else f"tuned on {tuned} of its {ran} datasets, at fixed parameters on the others")
        out.append(f"Elo: Bradley-Terry over the datasets' pairwise outcomes (a tie half a win; 400 points for "
                   f"10:1 odds), anchored at {agg.anchor} = {ANCHOR_ELO} ({how}).")
    if agg.n_datasets < 2:
        out.append("With one dataset the bootstrap has nothing to resample: no interval.")
    elif agg.n_datasets < MIN_INTERVAL_DATASETS:
        out.append(f"No 95% interval: resampling {agg.n_datasets} datasets draws the same few again and again, and "
                   "a method that then wins or loses every comparison has an Elo bounded only by bencheval's ridge "
                   f"penalty, so the interval would show the penalty, not the data (it is shown from "
                   f"{MIN_INTERVAL_DATASETS} datasets; tabbench/report/arena.py says why). The Elo orders the "
                   "methods on these datasets and separates none of them.")
    else:
        out.append(f"95% interval: the 2.5th to 97.5th percentiles over {BOOTSTRAP_ROUNDS} bootstrap resamples "
                   f"of the {agg.n_datasets} datasets; with few datasets it is wide.")
    out.append("Improvability: the mean over datasets of 1 - (the best error on the dataset / the method's "
               "error), the share by which its error could still fall (0 = best everywhere). Win rate: the "
               "share of (dataset, other method) pairs it beats, a tie half. Mean rank: the leaderboard's, "
               "over all datasets.")
    failed = ("A method without a complete result on a dataset counts as the rank tables count it: an "
              "infinite error, so it loses to every method with a result there, ties with every other without "
              "one, and its improvability there is 1 (TabArena would impute the default Random Forest's result)")
    if agg.imputed:
        failed += ": " + "; ".join(f"{m} on {d}" for m, d in agg.imputed)
    out.append(failed + ".")
    if agg.left_out:
        out.append(f"Left out, no method has a result there: {', '.join(agg.left_out)}.")
    extreme = [m for m, r in t.iterrows() if r["win_rate"] in (0.0, 1.0)]
    if extreme:
        out.append(f"{', '.join(extreme)} won or lost every comparison, so the data put no bound on "
                   f"{'its' if len(extreme) == 1 else 'their'} Elo: the value comes from bencheval's small "
                   "ridge penalty and says only 'above' or 'below' every other method.")
    return out


def latex_parts(agg: Aggregates, method_name) -> tuple[str, list, list, list] | None:
    """(caption, header cells, rows, notes) for leaderboard.tex, best of each column in bold;
    ``method_name``: method -> its escaped LaTeX name; the notes are plain text, to be escaped."""
    if agg.table is None:
        return None
    t = agg.table
    best = {"elo": t["elo"].max(), "improvability": t["improvability"].min(), "win_rate": t["win_rate"].max(),
            "mean_rank": t["mean_rank"].min()}

    def cell(column, text):
        return lambda r: f"$\\mathbf{{{text(r)}}}$" if r[column] == best[column] else f"${text(r)}$"

    columns = [cell("elo", lambda r: f"{r['elo']:.0f}"),
               lambda r: "--" if math.isnan(r["elo_low"]) else f"${r['elo_low']:.0f}$ to ${r['elo_high']:.0f}$",
               cell("improvability", lambda r: f"{r['improvability']:.3f}"),
               cell("win_rate", lambda r: f"{r['win_rate']:.3f}"),
               cell("mean_rank", lambda r: f"{r['mean_rank']:.2f}")]
    rows = [[method_name(m)] + [c(r) for c in columns] for m, r in t.iterrows()]
    anchor = f"{agg.anchor} $= {ANCHOR_ELO}$" if agg.anchor else "unanchored, mean 1000"
    caption = (f"TabArena's aggregates over all {agg.n_datasets} datasets (bencheval): Elo ({anchor}) with its "
               "95\\% bootstrap interval, improvability and win rate (best in bold).")
    header = ["Method", "Elo", "95\\% interval", "Improvability", "Win rate", "Mean rank"]
    return caption, header, rows, notes(agg)[1:]
