"""What NPT's default configuration costs per training step on the CPU, against rows per batch.

The table is the offline Covertype copy (54 features + the target, 7 classes) as
suites/uci-large-cpu.yaml loads it; the model is ``npt`` with its defaults (e = 32, 8 layers, 8 heads,
bf16 autocast where the CPU has it) on one torch thread (the default ``cpus: 1``). Per row count n:
the first n training rows are the whole table (``batch_size: null``), and the time of one training
step is the difference between a fit of ``--steps + 1`` steps and a fit of 1 step, divided by
``--steps`` (so building the model and the first step's warm-up are not counted), in CPU seconds of
this process (``time.process_time``: on a machine shared with other jobs, wall time measures the
others' load too; CPU seconds still grow somewhat with contention, so the figures are upper bounds).
A first fit on 64 rows, not counted, does the imports and the fused optimiser's kernel compilation. No validation rows
are given, so no evaluation runs; an evaluation pass is timed separately (``predict_proba`` of n
rows with the n-row table as context: one forward pass over 2n rows).

    python benchmarks/npt_default_cost.py --mirror ../shared/datasets --rows 256,512,1024,2048

Prints a table with the operations per CPU-second each measurement reaches, counted as the plugin's
pre-run cost check counts them (``pass_flops``); ``CPU_FLOPS`` in plugins/tabbench_plugins/npt/cost.py is set from it.
"""

from __future__ import annotations

import argparse
import gc
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def covertype(mirrors):
    from tabbench.data.cache import DataPaths
    from tabbench.run.runner import load_data
    from tabbench.suite import load_suite

    suite = load_suite(ROOT / "suites" / "uci-large-cpu.yaml")
    paths = DataPaths.from_env(mirrors=mirrors, base=suite.path.parent)
    _, dataset, splits = load_data(suite, paths, only=("forest_cover",))["forest_cover"]
    return dataset, splits[0]


def fit_seconds(meta, X, y, steps, threads):
    import torch

    from tabbench_plugins.npt import NPT

    torch.set_num_threads(threads)
    model = NPT(meta, seed=0, steps=steps, batch_size=None, budgets=[])
    t0 = time.process_time()
    model.fit(X, y)
    return time.process_time() - t0, model  # a caller keeps at most one model alive (3+ GB at 161M params)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mirror", action="append", default=[], help="folder holding uci/covertype/...")
    ap.add_argument("--rows", default="256,512,1024,2048")
    ap.add_argument("--steps", type=int, default=2, help="timed steps per row count")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)

    from tabbench.measure import fingerprint, hardware_label

    dataset, split = covertype(args.mirror)
    X, y = dataset.X.iloc[split.train], dataset.y[split.train]
    sizes = [int(n) for n in args.rows.split(",")]
    fit_seconds(dataset.meta, X.iloc[:64], y[:64], 1, args.threads)  # imports, kernel compilation

    rows = []
    for n in sizes:
        one = fit_seconds(dataset.meta, X.iloc[:n], y[:n], 1, args.threads)[0]
        gc.collect()  # one model (weights, optimiser state) in memory at a time
        more, model = fit_seconds(dataset.meta, X.iloc[:n], y[:n], 1 + args.steps, args.threads)
        step = (more - one) / args.steps
        t0 = time.process_time()
        model.predict_proba(X.iloc[n:2 * n])
        evaluate = time.process_time() - t0
        rows.append((n, step, evaluate, model.info_["n_params"]))
        del model
        gc.collect()
        print(f"  {n} rows: {step:.2f} s/step, eval {evaluate:.2f} s", flush=True)

    from tabbench_plugins.npt.cost import CPU_FLOPS, UPDATE_SECONDS, pass_flops

    width, abd = (X.shape[1] + 1) * 32, 4  # the defaults: e = 32 per column (target included), 8 layers
    print(f"\nmachine: {hardware_label(fingerprint())}")
    print(f"{args.threads} thread(s); covertype {X.shape[1]} features, "
          f"{rows[0][3] / 1e6:.1f}M params; step = (fit of {args.steps + 1} steps - fit of 1) / {args.steps}, "
          f"CPU seconds; GFLOP/s as tabbench_plugins.npt.cost.pass_flops counts them (a step's LAMB update, "
          f"{UPDATE_SECONDS:g} s per parameter, subtracted)")
    print("| rows per batch | s per step | s per 1,000 rows | step GFLOP/s | eval pass, 2n rows (s) | eval GFLOP/s |")
    print("|---|---|---|---|---|---|")
    for n, step, evaluate, n_params in rows:
        train = pass_flops(n_params, n, width, abd, backward=True) / (step - UPDATE_SECONDS * n_params) / 1e9
        forward = pass_flops(n_params, 2 * n, width, abd) / evaluate / 1e9
        print(f"| {n} | {step:.2f} | {1000 * step / n:.2f} | {train:.0f} | {evaluate:.2f} | {forward:.0f} |")
    print(f"\nthe plugin's cost model assumes {CPU_FLOPS / 1e9:.0f} GFLOP/s (CPU_FLOPS)")


if __name__ == "__main__":
    main()
