"""Cost against quality: is a method's rank worth its time and memory?

Per method: its mean rank over every dataset (the leaderboard's ranks pooled over metric families),
the fit time one result costs (the fit seconds of all its tuning trials summed per dataset, fold and
seed, averaged per dataset, then the geometric mean over datasets, so that no single large dataset
decides), and the largest peak memory of one job (host resident memory above the worker's baseline;
GPU memory allocated when CUDA was used). The Pareto front holds the methods that no other method
beats on both rank and cost.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MIB = 1024**2


def cost_table(runs: pd.DataFrame, mean_rank: pd.Series) -> pd.DataFrame:
    """Rows = methods (best rank first): mean_rank, fit_seconds, rss_mib, gpu_mib (NaN without CUDA)."""
    keys = ["method", "dataset", "repeat", "fold", "seed"]
    per_result = runs.groupby(keys, dropna=False)["fit_seconds"].sum(min_count=1)
    per_dataset = per_result.groupby(["method", "dataset"]).mean()
    fit = np.exp(np.log(per_dataset.clip(lower=1e-6)).groupby("method").mean())
    ok = runs[runs["status"] == "ok"]
    rss = ok.groupby("method")["job_rss_bytes"].max() / MIB
    gpu_column = ok["peak_gpu_allocated_bytes"] if "peak_gpu_allocated_bytes" in ok else pd.Series(np.nan, ok.index)
    gpu = gpu_column.groupby(ok["method"]).max() / MIB
    table = pd.DataFrame({"mean_rank": mean_rank, "fit_seconds": fit, "rss_mib": rss, "gpu_mib": gpu})
    return table.loc[mean_rank.sort_values().index]


def pareto_front(rank: pd.Series, cost: pd.Series) -> pd.Series:
    """True for each method that no other method matches or beats on both, and beats on one (lower is better)."""
    rank, cost = rank.astype(float), cost.astype(float)
    front = {}
    for m in rank.index:
        if np.isnan(cost[m]):
            front[m] = False
            continue
        dominated = (rank <= rank[m]) & (cost <= cost[m]) & ((rank < rank[m]) | (cost < cost[m]))
        front[m] = not dominated.drop(m).any()
    return pd.Series(front)
