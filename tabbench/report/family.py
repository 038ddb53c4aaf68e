"""Per metric family (AUROC, accuracy, RMSE), the results every section of a leaderboard reads: a typed table of
each method's mean test metric and its standard error per dataset, the ranks, and which results are partial.

Ranking follows the NPT paper: within a dataset, methods are ranked by their test metric averaged
over folds and seeds (ties share the better rank; equal counts of a count metric tie exactly,
tabbench.metrics.settle_ties); a method with no complete result on a dataset
takes the worst rank (the number of methods in the table); the table reports the mean rank over
datasets +- its standard error (sample std / sqrt(#datasets)).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tabbench.metrics import PRIMARY, settle_ties
from tabbench.report.format import Cell

RUN_KEYS = ["method", "dataset", "fold", "repeat", "seed"]  # one run: its selected trial is one row
TASK_TITLES = {"binary": "AUROC (binary)", "multiclass": "Accuracy (multi-class)", "regression": "RMSE (regression)"}


def rank_table(scores: pd.DataFrame, higher_is_better: bool) -> pd.DataFrame:
    """Ranks per dataset and mean rank +- standard error per method.

    ``scores``: rows = methods, columns = datasets, NaN = missing or failed. Returns the rank per
    dataset plus ``mean_rank`` and ``se`` columns, sorted by mean rank.
    """
    worst = len(scores.index)
    ranks = scores.rank(axis=0, method="min", ascending=not higher_is_better).fillna(worst)
    out = ranks.copy()
    out["mean_rank"] = ranks.mean(axis=1)
    n = ranks.shape[1]
    out["se"] = ranks.std(axis=1, ddof=1) / math.sqrt(n) if n > 1 else np.nan
    return out.sort_values(["mean_rank", "se"])


@dataclass
class FamilyResults:
    """One metric family's results. ``mean``, ``se``: methods x datasets, NaN where the method has no complete
    result; ``ranks``: rank_table's (the rank per dataset, ``mean_rank``, ``se``; best first); ``incomplete``:
    (method, dataset, why) for every imputed worst rank (a failed, unscored or partial result, or "not run": no
    record at all); ``partial``: (method, dataset) -> (mean, se, splits run, splits the dataset has) for the methods
    that ran fewer of a dataset's splits than it has, none failed."""

    task: str
    metric: str
    higher: bool  # whether a larger metric is better
    mean: pd.DataFrame
    se: pd.DataFrame
    incomplete: list = field(default_factory=list)
    partial: dict = field(default_factory=dict)
    devices: dict = field(default_factory=dict)  # (method, dataset) -> "GPU" where the records pool devices

    @property
    def ranks(self) -> pd.DataFrame:
        """Computed from ``mean`` whenever asked, so that a table edited (a test's, a pooled one's) ranks anew."""
        return rank_table(self.mean, self.higher)

    @property
    def datasets(self) -> list:
        return list(self.mean.columns)

    @property
    def title(self) -> str:
        return TASK_TITLES[self.task]

    def cell(self, method: str, dataset: str, digits: int = 3, bold: bool = False) -> Cell:
        """A method's mean ± SE on a dataset, with its fold count where it ran fewer folds than the dataset has."""
        device = self.devices.get((method, dataset))
        if (method, dataset) in self.partial:
            value, value_se, ran, of = self.partial[(method, dataset)]
            return Cell(value, value_se, ran, of, digits, device=device)
        return Cell(self.mean.loc[method, dataset], self.se.loc[method, dataset], digits=digits, bold=bold,
                    device=device)

    def best(self) -> pd.Series:
        """dataset -> the best complete mean there."""
        return self.mean.max() if self.higher else self.mean.min()


def declared_splits(datasets) -> dict:
    """dataset -> the number of splits a suite's dataset declarations (DatasetConfig) say it has: k (or the
    folds listed) for k-fold protocols, 1 for a holdout or fixed test set; an OpenML task's own splits are
    not known without the task, so it is left to the records."""
    out = {}
    for cfg in datasets:
        split = cfg.split
        if split.protocol in ("kfold", "npt_code"):
            out[cfg.name] = len(split.folds) if split.folds is not None else split.k
        elif split.protocol in ("holdout", "fixed"):
            out[cfg.name] = 1
    return out


def dataset_splits(frame: pd.DataFrame, declared=None) -> dict:
    """dataset -> the number of splits (fold, repeat) it has: what its suite declares where the leaderboard
    is made from a suite (``declared``), and never fewer than any method in the table ran on it.

    The records do not hold a split's fold count, so a leaderboard made from result folders learns it from
    the methods that ran the dataset whole: a method short of the most any method ran is incomplete. (A
    folder whose every method ran a slice cannot see the slice; name its suite, or pool it with a folder that
    ran the dataset whole, as results/uci-small-paper-budget does.)"""
    declared = declared or {}
    return {dataset: max(len(set(zip(runs["fold"], runs["repeat"]))), declared.get(dataset, 0))
            for dataset, runs in frame.groupby("dataset")}


def incomplete(runs: pd.DataFrame, values: pd.Series, n_splits: int, metric: str) -> str:
    """Why a method's runs on a dataset are not a complete result ('' when they are)."""
    failed = int((runs["status"] != "ok").sum())  # any failure status: error, invalid, timeout, ...
    if failed:
        return f"{failed} of {len(runs)} runs failed"
    unscored = int(values.isna().sum())
    if unscored:
        return f"{unscored} of {len(runs)} runs have no test {metric}"
    ran = len(set(zip(runs["fold"], runs["repeat"])))
    return f"{ran} of the dataset's {n_splits} splits run" if ran < n_splits else ""


def summarise(frame: pd.DataFrame, declared=None) -> dict[str, FamilyResults]:
    """task -> its FamilyResults over ``frame`` (one selected trial per run); ``declared``: dataset_splits'.
    Where the records ran on more than one device (tabbench.pooling's ``across_devices``), every mean that rests
    on a GPU's records is labelled so."""
    from tabbench.pooling import record_devices

    devices = record_devices(frame) if len(frame) else None
    mixed = devices is not None and devices.nunique() > 1
    out = {}
    for task, (metric, higher) in PRIMARY.items():
        part = frame[frame["task"] == task]
        if part.empty:
            continue
        column = f"test_{metric}"
        methods, datasets = sorted(part["method"].unique()), sorted(part["dataset"].unique())
        mean = pd.DataFrame(np.nan, index=methods, columns=datasets)
        se = mean.copy()
        family = FamilyResults(task, metric, higher, mean, se)
        splits = dataset_splits(part, declared)
        groups = dict(list(part.groupby(["method", "dataset"])))
        for method, dataset in itertools.product(methods, datasets):
            runs = groups.get((method, dataset))
            if runs is None:  # a method of the family with no record on this dataset
                family.incomplete.append((method, dataset, "not run"))
                continue
            values = runs[column] if column in runs else pd.Series(np.nan, index=runs.index)
            if mixed and (devices[runs.index] == "gpu").all():
                family.devices[(method, dataset)] = "GPU"
            why = incomplete(runs, values, splits[dataset], metric)
            value_se = values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1 else np.nan
            if why:
                family.incomplete.append((method, dataset, why))
                if why.endswith("splits run"):
                    ran = len(set(zip(runs["fold"], runs["repeat"])))
                    family.partial[(method, dataset)] = (values.mean(), value_se, ran, splits[dataset])
                continue
            mean.loc[method, dataset] = values.mean()
            se.loc[method, dataset] = value_se
        for dataset in datasets:  # equal counts tie exactly (metrics.TIE_TOLERANCE)
            mean[dataset] = settle_ties(mean[dataset], metric)
        out[task] = family
    return out


def pooled_ranks(tables: dict) -> pd.DataFrame:
    """Every dataset's ranks in one table (methods x datasets): each family's ranks, a method absent
    from a family at the worst rank over all methods."""
    methods = sorted({m for t in tables.values() for m in t.mean.index})
    parts = [rank_table(t.mean.reindex(methods), t.higher).drop(columns=["mean_rank", "se"]) for t in tables.values()]
    return pd.concat(parts, axis=1).loc[methods]


def place(values: pd.Series, method: str, lower_is_better: bool = True) -> int:
    """``method``'s place among the methods by ``values`` (a mean rank, an Elo; methods as the index): 1 + the
    methods strictly better, so that ties share the better place, as the rank tables rank."""
    better = values < values[method] if lower_is_better else values > values[method]
    return int(better.sum()) + 1
