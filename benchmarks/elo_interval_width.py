"""How wide TabArena's bootstrap Elo interval is on few datasets: the basis of the report's minimum.

The report prints an Elo's 95% bootstrap interval (tabbench.report.arena) only from ``MIN_INTERVAL_DATASETS``
datasets up. This script measures why: it draws random subsets of n datasets from one results folder's records
(default: breadth's 38 datasets, 13 methods), computes bencheval's Elo and interval on each subset as the
leaderboard does, and prints per n the median and the largest interval width over methods and subsets, and how
often an interval is unbounded in practice (wider than 2,000 points: a method that won or lost every comparison
of a resample, whose Elo only bencheval's ridge penalty bounds).

    python benchmarks/elo_interval_width.py [--folder results/breadth] [--draws 10] [--sizes 3,4,5,6,8,10,12,16,38]
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np


def widths(folder: str, sizes: list, draws: int) -> list:
    from tabbench.pooling import pooled_records
    from tabbench.report import arena
    from tabbench.report.family import pooled_ranks, summarise
    from tabbench.report.leaderboard import select_trials

    selected = select_trials(pooled_records([folder]))
    datasets = sorted(selected["dataset"].unique())
    rng = random.Random(0)
    out = []
    for n in sizes:
        w = []
        for _ in range(draws if n < len(datasets) else 1):
            part = selected[selected["dataset"].isin(rng.sample(datasets, n))]
            tables = summarise(part)
            agg = arena.aggregates(tables, part, pooled_ranks(tables).mean(axis=1))
            w += list((agg.table["elo_high"] - agg.table["elo_low"]).dropna())
        w = np.array(w)
        out.append((n, float(np.median(w)), float(np.percentile(w, 90)), float(w.max()), float((w > 2000).mean())))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", default="results/breadth")
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--sizes", default="3,4,5,6,7,8,10,12,16,38")
    args = parser.parse_args()
    from tabbench.measure import fingerprint, hardware_label

    start = time.perf_counter()
    rows = widths(args.folder, [int(s) for s in args.sizes.split(",")], args.draws)
    print(f"machine: {hardware_label(fingerprint())}")
    print(f"{args.folder}: {args.draws} random subsets of n datasets each; Elo 95% interval width (points) over "
          "methods and subsets")
    print("| datasets | median width | 90th percentile | widest | share wider than 2,000 |")
    print("|---|---|---|---|---|")
    for n, median, p90, widest, unbounded in rows:
        print(f"| {n} | {median:,.0f} | {p90:,.0f} | {widest:,.0f} | {unbounded:.0%} |")
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
