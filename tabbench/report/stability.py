"""How many splits a stable ranking needs, per dataset: bencheval's estimate from per-split results.

bencheval (TabArena's engine, pinned in the ``report`` extra) has this estimate: ``BenchmarkEvaluator.
rank_datasets_by_fold_similarity`` ranks the methods on each split of a dataset, takes the fold agreement ρ (the
mean Spearman correlation of those rankings between every two splits) and extrapolates by Spearman-Brown
(``estimate_folds_for_stable_ordering``) the reliability of the ranking averaged over k splits,
Rel(k) = kρ / (1 + (k - 1)ρ), and the fewest splits that bring it to a target (0.9, its default: the ranking
averaged over the splits would correlate 0.9 with one over infinitely many). bencheval 0.1.0's
``rank_datasets_by_fold_similarity`` fails under pandas 3 (it writes into a read-only array), so its three steps
are taken here: bencheval's per-split ranks (``compute_results_per_task``), its fold agreement as it defines it
(``fold_agreement``), bencheval's extrapolation. Here it reads the leaderboard's selected runs:

- a split is one (repeat, fold) of a dataset; a method's error there is its primary test metric averaged over
  seeds (1 - AUROC, 1 - accuracy, RMSE), infinite where the run failed (the worst rank, as the tables count it);
- only the splits on which every method of the leaderboard has a record count (a split some method has not run
  yet would rank the others alone), and the note says how many were left out;
- a dataset with one counted split has no estimate of its own (nothing to correlate); the line after the table
  says what the median agreement of the datasets with several splits would ask of it, an extrapolation across
  datasets, named as one;
- beside it, Kendall's tau between the methods' rankings on every two splits of one dataset (``split_taus``), over
  all datasets: how far another split of the same table alone reorders the methods, the scale for a change of
  order between two conditions with one split each (a study of split regimes).
"""

from __future__ import annotations

import math
import statistics

TARGET = 0.9  # bencheval's default target reliability


def split_errors(selected):
    """(one row per method, dataset and split with ``metric_error``, over the splits every method has a record on;
    the number of (dataset, split) pairs left out because some method has none). ``selected``: a records frame."""
    import numpy as np
    import pandas as pd

    from tabbench.metrics import PRIMARY

    rows = []
    for task, (metric, higher) in PRIMARY.items():
        part = selected[selected["task"] == task]
        column = f"test_{metric}"
        if part.empty or column not in part:
            continue
        value = part[column].where(part["status"] == "ok")
        error = (1 - value) if higher else value
        rows.append(part[["method", "dataset", "repeat", "fold"]].assign(metric_error=error.fillna(np.inf)))
    if not rows:
        return pd.DataFrame(columns=["method", "dataset", "split", "metric_error"]), 0
    frame = pd.concat(rows)
    frame["split"] = frame["repeat"].astype(str) + "/" + frame["fold"].astype(str)
    frame = frame.groupby(["method", "dataset", "split"], as_index=False)["metric_error"].mean()
    methods = frame["method"].nunique()
    complete = frame.groupby(["dataset", "split"])["method"].transform("nunique") == methods
    left_out = frame.loc[~complete, ["dataset", "split"]].drop_duplicates()
    return frame[complete], len(left_out)


def estimate(selected):
    """(per dataset, a DataFrame: splits, fold agreement, reliability at its splits, splits needed for ``TARGET``;
    or None; the splits left out; why there is no estimate, else None)."""
    import pandas as pd

    try:
        from bencheval.evaluator import BenchmarkEvaluator
    except ImportError:
        return None, 0, "It needs bencheval, in the report extra: pip install 'tabbench-harness[report]'."
    errors, left_out = split_errors(selected)
    if errors.empty or errors["method"].nunique() < 3:
        return None, left_out, "It ranks methods within a split; this leaderboard has too few with a result there."
    evaluator = BenchmarkEvaluator(task_col="dataset", columns_to_agg_extra=None, seed_column="split")
    per_task = evaluator.compute_results_per_task(errors, include_seed_col=True)  # bencheval's per-split ranks
    rows = {}
    for dataset, part in per_task.groupby("dataset"):
        ranks = part.pivot(index="split", columns="method", values="rank")
        rho, reliability, needed = float("nan"), float("nan"), float("nan")
        taus = split_taus(ranks)
        if len(ranks) > 1:
            rho = fold_agreement(ranks)
            if not math.isnan(rho):
                found = BenchmarkEvaluator.estimate_folds_for_stable_ordering(rho, len(ranks),
                                                                              target_reliability=TARGET)
                reliability, needed = found["rel_at_num_folds"], found["k_required"]
        rows[dataset] = {"splits": len(ranks), "agreement": rho, "reliability": reliability, "needed": needed,
                         "taus": taus}
    return pd.DataFrame.from_dict(rows, orient="index").sort_index(), left_out, None


def fold_agreement(ranks) -> float:
    """bencheval's fold agreement of one dataset (``dataset_fold_similarity``): the mean Spearman correlation, over
    every two splits, of the methods' ranks there. ``ranks``: splits x methods. Computed here because bencheval
    0.1.0's own function writes into a pandas array that pandas 3 makes read-only (copy-on-write), and fails."""
    import numpy as np

    similarity = ranks.T.corr(method="spearman").to_numpy(copy=True)
    np.fill_diagonal(similarity, np.nan)
    return float(np.nanmean(similarity)) if np.isfinite(similarity).any() else float("nan")


def split_taus(ranks) -> list:
    """Kendall's tau (scipy's tau-b: ties counted) between the methods' ranks on every two splits of one dataset
    (``ranks``: splits x methods): how far another split of the same table alone reorders the methods."""
    from itertools import combinations

    from scipy.stats import kendalltau

    rows = ranks.to_numpy(dtype=float)
    taus = [kendalltau(a, b).statistic for a, b in combinations(rows, 2)
            if len(set(a)) > 1 and len(set(b)) > 1]
    return [float(t) for t in taus if not math.isnan(t)]


def dataset_taus(table) -> list:
    """Per dataset of ``estimate``'s table with two splits or more, the mean of ``split_taus`` over its pairs of
    splits: one value a table (its pairs share the table, so they are not independent of each other)."""
    return [sum(found) / len(found) for found in table["taus"] if found]


def estimated(ctx):
    """``estimate`` over ``ctx``'s selected runs, computed once per Context: the README block and the NPT study's
    answer both read it."""
    return ctx.once("split-stability estimate", lambda: estimate(ctx.selected))


def stability_block(ctx) -> list:
    """The README block ``split-stability``: per dataset, how many splits a stable ranking needs and whether the
    folder has them."""
    from tabbench.report.format import markdown_table

    table, left_out, reason = estimated(ctx)
    if table is None:
        return [f"No estimate of the splits a stable ranking needs. {reason}"]
    several = table[table["splits"] > 1]
    enough = several[several["splits"] >= several["needed"]]
    rows = [[ctx.labels.get(d, d), f"{int(r['splits'])}",
             "–" if math.isnan(r["agreement"]) else f"{r['agreement']:.2f}",
             "–" if math.isnan(r["reliability"]) else f"{r['reliability']:.2f}",
             "–" if math.isnan(r["needed"]) else f"{int(r['needed'])}",
             "no estimate (one split)" if r["splits"] < 2 else ("yes" if r["splits"] >= r["needed"] else "**no**")]
            for d, r in table.sort_values(["splits", "needed"], ascending=[True, False]).iterrows()]
    out = [markdown_table(["dataset", "splits", "fold agreement ρ", "reliability now", f"splits for {TARGET:g}",
                           "enough"], rows), ""]
    single = table[table["splits"] < 2]
    text = (f"Of {len(table)} datasets, {len(several)} have more than one split: {len(enough)} of them "
            f"{'has' if len(enough) == 1 else 'have'} the splits a stable ranking of the methods on it needs "
            f"(reliability {TARGET:g}), {len(several) - len(enough)} "
            f"{'does' if len(several) - len(enough) == 1 else 'do'} not.")
    if len(single):
        rho = several["agreement"].median() if len(several) else float("nan")
        if not math.isnan(rho) and rho > 0:
            k = math.ceil(TARGET * (1 - rho) / (rho * (1 - TARGET)))
            text += (f" {len(single)} have one split, with no estimate of their own; at the median agreement of "
                     f"the others (ρ = {rho:.2f}) a dataset would need {max(k, 1)} (an extrapolation across "
                     "datasets).")
        else:
            text += f" {len(single)} have one split, with no estimate of their own."
    taus = sorted(t for found in table["taus"] for t in found)
    if taus:
        means = dataset_taus(table)
        text += (f" Between two splits of one dataset the methods' rankings agree by Kendall's τ: a dataset's mean "
                 f"over its pairs of splits has a median of {statistics.median(means):.2f} over {len(means)} datasets "
                 f"(single pairs from {taus[0]:.2f} to {taus[-1]:.2f}, {len(taus)} of them): how far another split of "
                 "the same table alone reorders the methods, the scale against which to read a change of order "
                 "between two conditions that have one split each.")
    if left_out:
        text += (f" {left_out} (dataset, split) pairs that some method has not run yet are left out of the "
                 "estimate.")
    return out + [text, "", "Estimated as bencheval's `rank_datasets_by_fold_similarity` does: the methods are ranked on "
                  "each split by its primary test metric (a failed run last), ρ is the mean Spearman correlation of "
                  "those rankings between every two splits, and Spearman-Brown gives the reliability of the ranking "
                  f"averaged over k splits, kρ / (1 + (k - 1)ρ), and the fewest splits that reach {TARGET:g}; ρ at "
                  "or below 0 gives bencheval's cap (100). Only splits every method has a record on count. This is the "
                  "ranking of every method on one dataset, near-ties included; the leaderboard's ranking pools the "
                  "datasets, and its intervals and tests say what the pooled ranking separates. "
                  "Generated from the records by `tabbench report` (tabbench/report/stability.py)."]
