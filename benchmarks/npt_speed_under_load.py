"""Does NPT's measured speed depend on what the machine is doing? The slowdown ``steps: "auto"`` sizes a fit by
(plugins/tabbench_plugins/npt/speed.py), measured by the fit that meets a shape first, alone on its core and beside
a busy loop on that core, with and without the reference pass that scales it.

For each table (``suites/breadth.yaml``'s, fold 0 of its split) and each trial, alternating alone and beside the
loop: a fresh process pinned to one core fits ``npt-budget``'s params (``size: budget``, ``steps: auto``) under a
job context of ``--budget`` CPU seconds, with a data cache whose speed book holds only the machine's reference
pass (measured once, alone, at the start), so that the fit measures its shape. Its record's ``info`` gives the
slowdown it sized by (scaled by the reference: what the rule uses) and ``speed_load`` (how much slower the
reference ran than stored); their product is the slowdown the fit measured unscaled (what the rule used before).
Printed per table and condition: the median of each, the rung and steps taken, and the ratio beside-the-loop to
alone: 1 is a speed the load does not move.

    python benchmarks/npt_speed_under_load.py --datasets swiss_labor,wells,titanic --trials 3 --budget 15
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "suites" / "breadth.yaml"

CHILD = """
import json, sys, time
from pathlib import Path
import numpy as np
from tabbench.clock import ask_long_slice
from tabbench.data.cache import DataPaths
from tabbench.data.dataset import load_dataset
from tabbench.data.splits import make_splits
from tabbench.estimator import JobContext
from tabbench.run.isolation import steady_allocator
from tabbench.suite import load_suite
import torch
from tabbench_plugins.npt import NPT

name, budget, data, cache = sys.argv[1], float(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
ask_long_slice(); steady_allocator(); torch.set_num_threads(1)
cfg = {d.name: d for d in load_suite(Path(sys.argv[5])).datasets}[name]
ds = load_dataset(cfg, DataPaths(cache=cache / "data", mirrors=(data,), base=Path(sys.argv[6])))
sp = make_splits(ds, ds.split or cfg.split)[0]
X, y = ds.X, np.asarray(ds.y)
model = NPT(ds.meta, 0, size="budget", steps="auto", device="cpu", cpus=1)
context = JobContext(time_budget_s=budget, started=time.process_time(), cpus=1, clock="cpu",
                     predict_rows=len(sp.test) + len(sp.val))
model.fit(X.iloc[sp.train], y[sp.train], X.iloc[sp.val], y[sp.val], context=context)
info = model.info_
print(json.dumps({k: info.get(k) for k in ("size_rung", "steps", "slowdown_vs_cost_model", "speed_load", "speed")}))
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="swiss_labor,wells,titanic", help="of suites/breadth.yaml's")
    ap.add_argument("--trials", type=int, default=3, help="per table and condition")
    ap.add_argument("--budget", type=float, default=15.0, help="CPU seconds of each fit's job context")
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("TABBENCH_MIRROR", ROOT.parent / "shared" /
                                                                     "datasets")),
                    help="mirror folder (default: $TABBENCH_MIRROR, else ../shared/datasets from the project root)")
    args = ap.parse_args(argv)

    from tabbench.measure import fingerprint, hardware_label

    core = min(os.sched_getaffinity(0))

    def pinned():
        os.sched_setaffinity(0, {core})

    work = Path(tempfile.mkdtemp(prefix="npt-speed-load-"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins"),
                                                        os.environ.get("PYTHONPATH", "")])}
    seed_cache = work / "seed"

    def fit(name: str, hog: bool, cache: Path) -> dict:
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=pinned) if hog else None
        try:
            out = subprocess.run([sys.executable, "-c", CHILD, name, str(args.budget), str(args.data.resolve()),
                                  str(cache), str(SUITE), str(ROOT)], preexec_fn=pinned, capture_output=True,
                                 text=True, env={**env, "TABBENCH_CACHE": str(cache)}, cwd=ROOT)
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
        if out.returncode:
            raise SystemExit(out.stderr[-3000:])
        return json.loads(out.stdout.strip().splitlines()[-1])

    names = args.datasets.split(",")
    fit(names[0], False, seed_cache)  # the machine's reference pass, measured once, alone (and one shape)
    book = next((seed_cache / "npt-speed").glob("*.json"))
    reference = {k: v for k, v in json.loads(book.read_text()).items() if '"pass": "reference pass"' in k}
    print(f"machine: {hardware_label(fingerprint())}; core {core}; budget {args.budget:g} CPU-s; reference pass "
          f"{next(iter(reference.values()))['seconds'] * 1e3:.1f} ms")
    print("| table | condition | rung, steps | slowdown scaled (median, each) | unscaled | load |\n"
          "|---|---|---|---|---|---|")
    for name in names:
        seen = {False: [], True: []}
        for trial in range(args.trials):
            for hog in (False, True):
                cache = work / f"{name}-{trial}-{int(hog)}"
                (cache / "npt-speed").mkdir(parents=True)
                (cache / "npt-speed" / book.name).write_text(json.dumps(reference))
                seen[hog].append(fit(name, hog, cache))
                shutil.rmtree(cache)
        medians = {}
        for hog, runs in seen.items():
            scaled = [r["slowdown_vs_cost_model"] for r in runs]
            load = [r["speed_load"] for r in runs]
            raw = [s * ld for s, ld in zip(scaled, load)]
            medians[hog] = statistics.median(scaled), statistics.median(raw)
            taken = sorted({f"{r['size_rung']} {r['steps']}" for r in runs})
            print(f"| {name} | {'beside a busy loop' if hog else 'alone'} | {'; '.join(taken)} | "
                  f"{medians[hog][0]:.2f} ({' '.join(f'{s:.2f}' for s in scaled)}) | {medians[hog][1]:.2f} "
                  f"({' '.join(f'{s:.2f}' for s in raw)}) | {' '.join(f'{x:.2f}' for x in load)} |", flush=True)
        print(f"| {name} | beside / alone | | {medians[True][0] / medians[False][0]:.2f}x | "
              f"{medians[True][1] / medians[False][1]:.2f}x | |", flush=True)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
