"""Does NPT's measured speed depend on what the machine is doing? The slowdown ``steps: "auto"`` sizes a fit by
(plugins/tabbench_plugins/npt/speed.py), measured by the fit that meets a shape first, alone on its core and beside
a busy loop on that core, with and without the reference pass that scales it.

For each table (``suites/breadth.yaml``'s, fold 0 of its split) and each trial, alternating alone and beside the
loop: a fresh process pinned to one core builds the table and the model a job at one rung of the budget ladder
builds (``--rung``) and measures that shape's slowdown as a job's sizing does (``calibrated_slowdown``, with
``--left`` training seconds left, which decides the rows timed), with a data cache whose speed book holds only the
machine's reference pass (measured once, alone, at the start). Printed per table and condition: the rows timed,
the median and each of the slowdown the rule sizes by (scaled by the reference), the unscaled one (scaled x load:
what the rule sized by before the reference) and the load (how much slower the reference ran than stored), and
the ratio beside-the-loop to alone: 1 is a speed the load does not move.

    python benchmarks/npt_speed_under_load.py --datasets attrition,wells,swiss_labor,titanic --trials 5
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
import json, sys
from pathlib import Path
import numpy as np
from tabbench.clock import ask_long_slice
from tabbench.data.cache import DataPaths
from tabbench.data.dataset import load_dataset
from tabbench.data.splits import make_splits
from tabbench.run.isolation import steady_allocator
from tabbench.spec import SplitSizes
from tabbench.suite import load_suite
import torch
from tabbench_plugins.npt import NPT
from tabbench_plugins.npt.cost import LADDER, SpeedBook
from tabbench_plugins.npt.speed import calibrated_slowdown

name, rung, left, data, cache = sys.argv[1], sys.argv[2], float(sys.argv[3]), Path(sys.argv[4]), Path(sys.argv[5])
ask_long_slice(); steady_allocator(); torch.set_num_threads(1)
cfg = {d.name: d for d in load_suite(Path(sys.argv[6])).datasets}[name]
ds = load_dataset(cfg, DataPaths(cache=cache / "data", mirrors=(data,), base=Path(sys.argv[7])))
sp = make_splits(ds, ds.split or cfg.split)[0]
X, y = ds.X, np.asarray(ds.y)
size = {r.name: r for r in LADDER}[rung].params
model = NPT(ds.meta, 0, **size, steps=1, device="cpu", cpus=1)  # builds the table and the model a job builds
model.fit(X.iloc[sp.train], y[sp.train], X.iloc[sp.val], y[sp.val])
sizes, book = SplitSizes(len(sp.train), len(sp.val), 0), SpeedBook()
params = dict(model.params)
slowdown, how = calibrated_slowdown(book, model.table_, model.model_, torch, ds.meta, sizes, params, left)
entry = book.entry(ds.meta, sizes, params)
print(json.dumps({"slowdown": slowdown, "load": entry["load"], "rows": json.loads(next(
    k for k, v in book.read().items() if v == entry))["rows"], "how": how}))
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="swiss_labor,wells,titanic", help="of suites/breadth.yaml's")
    ap.add_argument("--trials", type=int, default=3, help="per table and condition")
    ap.add_argument("--rung", default="e8-l2", help="of cost.LADDER: the size timed")
    ap.add_argument("--left", type=float, default=360.0,
                    help="the training seconds left when the job measures (a 450 s job's share: 360)")
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
            out = subprocess.run([sys.executable, "-c", CHILD, name, args.rung, str(args.left),
                                  str(args.data.resolve()), str(cache), str(SUITE), str(ROOT)], preexec_fn=pinned, capture_output=True,
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
    print(f"machine: {hardware_label(fingerprint())}; core {core}; rung {args.rung}, {args.left:g} s left; "
          f"reference pass {next(iter(reference.values()))['seconds'] * 1e3:.1f} ms")
    print("| table | condition | rows timed | slowdown scaled (median, each) | unscaled | load |\n"
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
            scaled = [r["slowdown"] for r in runs]
            load = [r["load"] for r in runs]
            raw = [s * ld for s, ld in zip(scaled, load)]
            medians[hog] = statistics.median(scaled), statistics.median(raw)
            taken = sorted({str(r["rows"]) for r in runs})
            print(f"| {name} | {'beside a busy loop' if hog else 'alone'} | {'; '.join(taken)} | "
                  f"{medians[hog][0]:.2f} ({' '.join(f'{s:.2f}' for s in scaled)}) | {medians[hog][1]:.2f} "
                  f"({' '.join(f'{s:.2f}' for s in raw)}) | {' '.join(f'{x:.2f}' for x in load)} |", flush=True)
        print(f"| {name} | beside / alone | | {medians[True][0] / medians[False][0]:.2f}x | "
              f"{medians[True][1] / medians[False][1]:.2f}x | |", flush=True)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
