"""The corruption probe's Markdown (corruption.md, written from the whole of corruption.csv by tabbench/probe.py):
a summary per method and dataset in the NPT paper's Table 2 convention, the paper's published change beside
NPT's rows, then every probed fold.

The paper's convention (``paper_change``) is a change in performance, negative where it got worse: for
classification the change in test accuracy in percentage points, for regression the relative change in RMSE in
percent with the sign of a change in performance. The per-fold table keeps the raw ``change`` (after - before)
and ``relative_change`` ((after - before) / before) of the CSV.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tabbench.report.format import MISSING, markdown_table, markdown_text, mean_se

#: The unit of the paper's change per metric, as its cells print it.
UNIT = {"accuracy": " points", "rmse": "%"}

CONVENTION = ("change: the change in test performance after the corruption, in the NPT paper's Table 2 convention "
              "(negative: worse): for classification, binary included, the change in test accuracy in percentage "
              "points (after - before); for regression the relative change in RMSE in percent, signed as a change "
              "in performance, 100 (before - after) / before, so -52% means the RMSE grew by 52%.")


def paper_change(table: pd.DataFrame) -> pd.Series:
    """Each row's change in the paper's convention (see the module docstring); NaN where not probed."""
    accuracy = 100 * table["change"].astype(float)
    rmse = -100 * table["relative_change"].astype(float)
    return pd.Series(np.where(table["metric"] == "rmse", rmse, accuracy), index=table.index)


def _cell(value, metric: str, se=None) -> str:
    text = mean_se(value, se, 2 if metric == "accuracy" else 1)
    return text if text == MISSING else text + UNIT[metric]


def summary(table: pd.DataFrame, published=None) -> tuple[list, list]:
    """(header, rows) of the summary: per method and dataset the folds probed, the mean change over them ±
    standard error (the paper's convention), the rows changed of those probed, and for the model the published
    numbers are for (``published.corruption_model``) the change ``published`` reports for the dataset (a column
    only where there is a published file)."""
    header = ["method", "dataset", "metric", "folds probed", "change (mean ± SE)", "rows changed"]
    if published is not None:
        header.append(f"published {published.corruption_label} change")
    rows = []
    for (method, dataset), group in table.groupby(["method", "dataset"], sort=True):
        metric = group["metric"].iloc[0]
        probed = group[group["rows_changed"].notna()]
        change = paper_change(probed)
        se = change.std(ddof=1) / np.sqrt(len(change)) if len(change) > 1 else None
        total = f"{int(probed['rows_changed'].sum())} of {int(probed['n_test'].sum())}" if len(probed) else MISSING
        row = [method, dataset, metric, len(probed), _cell(change.mean() if len(change) else None, metric, se), total]
        if published is not None:
            paper = (published.corruption.get(dataset) if (group["model"] == published.corruption_model).all()
                     else None)
            row.append(MISSING if paper is None else f"{paper:+g}{UNIT[metric]}")
        rows.append(row)
    return header, rows


def folds(table: pd.DataFrame) -> tuple[list, list]:
    """(header, rows) of the table of every probed fold, as corruption.csv holds it."""
    shown = table.drop(columns=["uses_other_rows", "fit_seconds"]).astype(object)
    shown["note"] = shown["note"].fillna("")
    absent = shown.isna()
    for name in ("before", "after", "change", "auroc_before", "auroc_after"):
        shown[name] = shown[name].map(lambda v: f"{v:.4f}")
    shown["relative_change"] = shown["relative_change"].map(lambda v: f"{100 * v:+.1f}%")
    shown["rows_changed"] = shown["rows_changed"].map(lambda v: v if pd.isna(v) else int(v))
    shown["probe_seconds"] = shown["probe_seconds"].map(lambda v: f"{v:.1f}")
    shown = shown.mask(absent, MISSING)
    return list(shown.columns), shown.values.tolist()


def markdown(table: pd.DataFrame, suite_name: str, published=None) -> str:
    """corruption.md: what it measures, the summary, then every fold."""
    sampled = table["n_test"] < table["n_test_total"]
    intro = (f"# Corruption probe: {suite_name}\n\nThe test metric before and after every column of the other "
             "rows is permuted independently for each test row (NPT paper, Table 2): accuracy for classification "
             "(binary included; AUROC, the leaderboards' binary metric, beside it), RMSE for regression. A model "
             "that reads no other rows changes by exactly zero (the control). See docs/probe.md.\n\n")
    header, rows = summary(table, published)
    notes = [CONVENTION + " Mean over the folds probed ± standard error (none for one fold); rows changed: test "
             "rows whose prediction changed, of those probed."]
    if published is not None:
        notes.append(f"Published: {markdown_text(published.name)}, for {published.corruption_label} (model "
                     f"{published.corruption_model}) rows; its models, budgets and data "
                     "differ from this suite's (see the suite's header).")
    fold_header, fold_rows = folds(table)
    fold_note = ("`n_test`: the test rows probed, of `n_test_total` in the test part"
                 + (" (where fewer, a fixed random sample drawn with `--test-rows`)" if sampled.any() else "")
                 + "; `rows_changed`: of those probed; `change`: after - before; `relative_change`: that over "
                 "before.")
    return (intro + "## Summary\n\n" + markdown_table(header, rows) + "\n\n" + "\n\n".join(notes)
            + "\n\n## Every fold\n\n" + markdown_table(fold_header, fold_rows) + "\n\n" + fold_note + "\n")
