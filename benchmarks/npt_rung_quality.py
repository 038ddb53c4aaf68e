"""Does NPT at the budget ladder's sizes train as well after a change that rounds differently? Validation metrics
of a fixed number of steps on the budget rule's meta-training tables, over seeds.

For each table (``suites/npt-budget-meta.yaml``'s, fold 0 of its split; never breadth's, and of the paper's UCI
sets only the training and validation parts, as there), each rung (``cost.LADDER``) and each seed: ``NPT.fit`` at
that rung's size for ``--steps`` steps (one thread, bf16 autocast where the CPU has it, LAMB not compiled, as a
budgeted job runs), the best validation checkpoint kept, then the validation rows predicted: RMSE in the target's
units (regression) or log-loss (classification). It measures whatever code is on the path: run it in two trees
(the commit before a change and after) and compare the means against the spread over seeds.

    python benchmarks/npt_rung_quality.py --datasets yacht,boston --rungs e8-l2,e32-l4 --seeds 0,1,2 --steps 200
    python benchmarks/npt_rung_quality.py --datasets yacht --rungs e8-l2 --compile    # the step compiled (compile)
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "suites" / "npt-budget-meta.yaml"


def main(argv=None):
    from tabbench_plugins.npt.cost import LADDER

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="yacht,boston", help="of suites/npt-budget-meta.yaml's")
    ap.add_argument("--rungs", default="e8-l2,e32-l4")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--compile", action="store_true", help="the training step compiled (param compile: true)")
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("TABBENCH_MIRROR", ROOT.parent / "shared" /
                                                                     "datasets")),
                    help="mirror folder (default: $TABBENCH_MIRROR, else ../shared/datasets from the project root)")
    args = ap.parse_args(argv)

    import torch
    from sklearn.metrics import log_loss

    from tabbench.data.cache import DataPaths
    from tabbench.data.dataset import load_dataset
    from tabbench.data.splits import make_splits
    from tabbench.measure import fingerprint, hardware_label
    from tabbench.run.isolation import steady_allocator
    from tabbench.suite import load_suite
    from tabbench_plugins.npt import NPT

    steady_allocator()
    torch.set_num_threads(1)
    ladder = {r.name: r for r in LADDER}
    configs = {d.name: d for d in load_suite(SUITE).datasets}
    unknown = sorted(set(args.datasets.split(",")) - set(configs)) + sorted(set(args.rungs.split(",")) - set(ladder))
    if unknown:
        ap.error(f"unknown {', '.join(unknown)}: datasets of {SUITE.name} ({', '.join(configs)}) and rungs of "
                 f"cost.LADDER ({', '.join(ladder)})")
    bf16 = torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    print(f"machine: {hardware_label(fingerprint())}")
    print(f"{args.steps} steps, 1 thread, amp {bf16}, compile {args.compile}; validation metric of the best "
          "validation checkpoint, per seed")
    print("| dataset | rung | metric | per seed | mean | sd | fit s (mean) |\n|---|---|---|---|---|---|---|")
    for name in args.datasets.split(","):
        cfg = configs[name]
        with tempfile.TemporaryDirectory() as cache:
            ds = load_dataset(cfg, DataPaths(cache=Path(cache), mirrors=(args.data.resolve(),), base=ROOT))
        sp = make_splits(ds, ds.split or cfg.split)[0]
        X, y = ds.X, np.asarray(ds.y)
        for rung in args.rungs.split(","):
            scores, seconds = [], []
            for seed in (int(s) for s in args.seeds.split(",")):
                model = NPT(ds.meta, seed, **ladder[rung].params, steps=args.steps, amp=bf16, cpus=1,
                            fused_optimizer=False, device="cpu", compile=args.compile)
                start = time.perf_counter()
                model.fit(X.iloc[sp.train], y[sp.train], X.iloc[sp.val], y[sp.val])
                seconds.append(time.perf_counter() - start)
                if ds.meta.is_classification:
                    proba = model.predict_proba(X.iloc[sp.val])
                    scores.append(log_loss(y[sp.val], proba, labels=range(proba.shape[1])))
                else:
                    scores.append(float(np.sqrt(np.mean((model.predict(X.iloc[sp.val]) - y[sp.val]) ** 2))))
            metric = "log-loss" if ds.meta.is_classification else "RMSE"
            print(f"| {name} | {rung} | {metric} | {' '.join(f'{s:.4f}' for s in scores)} | "
                  f"{statistics.mean(scores):.4f} | {statistics.stdev(scores) if len(scores) > 1 else 0:.4f} | "
                  f"{statistics.mean(seconds):.0f} |", flush=True)


if __name__ == "__main__":
    main()
