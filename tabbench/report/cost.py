"""Cost against quality: is a method's rank worth its time and memory?

Per method: its mean rank over every dataset (the leaderboard's ranks pooled over metric families),
the time one result costs (the seconds of all its tuning trials summed per dataset, fold and seed,
averaged per dataset, then the geometric mean over datasets, so that no single large dataset decides; each
trial's seconds on its budget's clock, ``tabbench.clock.spent_seconds``: the fit's wall seconds, or under the
``cpu`` clock the job's CPU seconds, which a paused worker or a busy machine does not move), and the largest
peak memory of one job (host resident memory above the worker's baseline; GPU memory allocated when CUDA was
used). The Pareto front holds the methods that no other method beats on both rank and cost.

Under a time budget (the suite's ``budget.time_s``), per method: how many of its jobs the budget ended, by
the training clock (a result, from the best epoch or iteration reached) or by the kill (a timeout, no
result), how many of its results trained work planned before training in more CPU seconds than the budget
(the cpu clock allows PLANNED_OVERRUN times it for planned work: tabbench/clock.py), and for NPT the training
steps run (``steps: auto`` sizes them to the budget).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tabbench.clock import CPU, WALL, spent_seconds

MIB = 1024**2


def spent(runs: pd.DataFrame, wall_field: str = "fit_seconds") -> pd.Series:
    """Per row of ``runs`` (``tabbench.store.records_frame``), ``tabbench.clock.spent_seconds``; NaN where a
    record has none."""
    columns = [c for c in ("clock", "cpu_seconds", wall_field) if c in runs]
    return pd.Series([spent_seconds(r, wall_field) for r in runs[columns].to_dict("records")], index=runs.index,
                     dtype=float)


def spent_label(runs: pd.DataFrame, wall_field: str = "fit_seconds") -> str:
    """What ``spent(runs, wall_field)`` is, in the words a table's note uses."""
    clocks = {c if isinstance(c, str) else WALL for c in (runs["clock"].unique() if "clock" in runs else ())}
    wall = "wall seconds of the fit" if wall_field == "fit_seconds" else "wall seconds of the job"
    if clocks == {CPU}:
        return "CPU seconds of the job's process (its fit, predictions and scoring: the `cpu` clock its budget counted)"
    if CPU in clocks:
        return (f"seconds on each record's budget clock: the job's CPU seconds for `cpu`-clock records, {wall} "
                "for the others")
    return wall


def cost_table(runs: pd.DataFrame, mean_rank: pd.Series) -> pd.DataFrame:
    """Rows = methods (best rank first): mean_rank, seconds (a result's, ``spent``), rss_mib, gpu_mib (NaN
    without CUDA)."""
    keys = ["method", "dataset", "repeat", "fold", "seed"]
    per_result = runs.assign(seconds=spent(runs)).groupby(keys, dropna=False)["seconds"].sum(min_count=1)
    per_dataset = per_result.groupby(["method", "dataset"]).mean()
    seconds = np.exp(np.log(per_dataset.clip(lower=1e-6)).groupby("method").mean())
    ok = runs[runs["status"] == "ok"]
    rss = ok.groupby("method")["job_rss_bytes"].max() / MIB
    gpu_column = ok["peak_gpu_allocated_bytes"] if "peak_gpu_allocated_bytes" in ok else pd.Series(np.nan, ok.index)
    gpu = gpu_column.groupby(ok["method"]).max() / MIB
    table = pd.DataFrame({"mean_rank": mean_rank, "seconds": seconds, "rss_mib": rss, "gpu_mib": gpu})
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


def budget_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Rows = methods with budgeted jobs: jobs, stopped (ok records whose fit the training clock ended), killed
    (timeouts), past (ok records of planned work, their CPU limit raised, ``cpu_limit_s``, that spent more CPU
    seconds than the budget: tabbench/clock.py's PLANNED_OVERRUN) with the most one spent as a multiple of its
    budget (``past_most``), and the median and range of the steps run where records carry ``steps_run`` (NPT).
    Empty when no job ran under a budget."""
    if "time_budget_s" not in runs:
        return pd.DataFrame()
    budgeted = runs[runs["time_budget_s"].notna()]
    info = budgeted["info"] if "info" in budgeted else pd.Series([None] * len(budgeted), budgeted.index)
    info = info.map(lambda i: i if isinstance(i, dict) else {})
    rows = {}
    for method, part in budgeted.groupby("method"):
        ok = part["status"] == "ok"
        raised = part["cpu_limit_s"].notna() if "cpu_limit_s" in part else pd.Series(False, part.index)
        over = (part["cpu_seconds"] / part["time_budget_s"])[ok & raised] if "cpu_seconds" in part else pd.Series()
        over = over[over > 1]
        steps = pd.Series([info[i].get("steps_run") for i in part.index], dtype=float).dropna()
        rows[method] = {"jobs": len(part),
                        "stopped": int(sum(bool(info[i].get("stopped_by_time_budget")) for i in part.index[ok])),
                        "killed": int((part["status"] == "timeout").sum()),
                        "past": len(over), "past_most": over.max() if len(over) else np.nan,
                        "steps_median": steps.median() if len(steps) else np.nan,
                        "steps_min": steps.min() if len(steps) else np.nan,
                        "steps_max": steps.max() if len(steps) else np.nan}
    return pd.DataFrame.from_dict(rows, orient="index")
