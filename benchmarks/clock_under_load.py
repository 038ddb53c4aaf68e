"""Do breadth's jobs train the same beside a CPU hog as alone? tests/test_clock.py's question at a real job's size.

One of suites/breadth.yaml's datasets and split (``--dataset``; ``--fold`` of a k-fold, ``--repeat`` of a repeated
holdout: one job a method), the methods whose work the budget decides
(``--methods``: npt-budget, TabM and TabR by default, at breadth's params), under one budget per job (``--budget``
CPU seconds; breadth's 450 by default), run twice by ``tabbench run --executor local`` with every process pinned to
one core: first alone on it, then beside a busy loop on that core (``python -c "while True: pass"``). Both runs share
a fresh data cache, as two jobs of one machine do: the first measures (NPT's speed, each epoch model's epoch time),
the second reads what the first stored and plans from it. Printed per method, alone and beside the loop: NPT's rung
and steps (planned, run), an epoch model's epochs (planned, trained), the CPU and wall seconds, and the test
metric; the two runs agree when the budget's clock and the plans do what docs/running.md says.

    python benchmarks/clock_under_load.py --dataset attrition --budget 120
    python benchmarks/clock_under_load.py --dataset swiss_labor --methods npt-budget,tabm --budget 450 --core 1
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "suites" / "breadth.yaml"


def one_dataset_suite(dataset: str, methods: list[str], budget: float, name: str, repeat: int = 0) -> dict:
    """breadth's suite cut to ``dataset`` and ``methods`` (their params unchanged), at ``budget`` seconds a job; a
    holdout breadth repeats cut to its ``repeat`` (the same split, drawn with the seed + ``repeat``)."""
    raw = yaml.safe_load(SUITE.read_text())
    chosen = [d for d in raw["datasets"] if d["name"] == dataset]
    if not chosen:
        sys.exit(f"{SUITE}: no dataset {dataset!r}; one of: {', '.join(d['name'] for d in raw['datasets'])}")
    split = chosen[0]["split"]
    if "repeats" in split:
        if repeat not in split["repeats"]:
            sys.exit(f"{SUITE}: {dataset}'s holdout has the repeats {split['repeats']}, not {repeat}")
        split["repeats"] = [repeat]
    elif repeat:
        sys.exit(f"{SUITE}: {dataset}'s split has no repeats; leave --repeat out")
    unknown = sorted(set(methods) - set(raw["models"]))
    if unknown:
        sys.exit(f"{SUITE}: no method {', '.join(unknown)}; one of: {', '.join(raw['models'])}")
    return {"name": name, "seeds": raw["seeds"], "budget": {"time_s": budget}, "datasets": chosen,
            "models": {m: raw["models"][m] for m in methods}}


def run_on_one_core(suite: Path, root: Path, env: dict, core: int, hog: bool, extra: tuple = ()):
    """``tabbench run`` of ``suite`` into ``root`` with every process on ``core`` (and a busy loop there, with
    ``hog``), ``extra`` added to its arguments; the finished process, the records by method and the run's wall
    seconds. tests/test_clock.py runs its jobs with it too."""
    from tabbench.store import Store

    def pin():
        os.sched_setaffinity(0, {core})

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=pin) if hog else None
    start = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "tabbench.cli", "run", str(suite), "--executor", "local",
                               "--no-progress", "--tables-only", "--results", str(root), *extra],
                              preexec_fn=pin, capture_output=True, text=True, env=env, cwd=ROOT)
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    name = yaml.safe_load(suite.read_text())["name"]
    records = {r["method"]: r for r in Store(root / name).latest().values()} if (root / name).exists() else {}
    return done, records, time.monotonic() - start


def work(record: dict) -> str:
    """What the budget bought: NPT's rung and steps, an epoch model's epochs (planned where it planned)."""
    info = record.get("info") or {}
    if "steps" in info:
        return f"{info.get('size_rung', 'paper size')} {info.get('steps_run')} of {info.get('steps')} steps"
    plan = info.get("epoch_plan") or {}
    planned = f" of {plan['epochs']} planned" if plan.get("speed") == "stored" else f" ({plan.get('speed', 'no plan')})"
    return f"{info.get('epochs', info.get('n_iter', '?'))} epochs{planned}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="attrition", help="one of suites/breadth.yaml's")
    ap.add_argument("--fold", type=int, default=0, help="of a k-fold dataset")
    ap.add_argument("--repeat", type=int, default=0, help="of a holdout breadth repeats")
    ap.add_argument("--methods", default="npt-budget,tabm,tabr", help="of suites/breadth.yaml's")
    ap.add_argument("--budget", type=float, default=450.0, help="CPU seconds a job (breadth: 450)")
    ap.add_argument("--core", type=int, default=min(os.sched_getaffinity(0)))
    ap.add_argument("--mirror", type=Path, default=ROOT.parent / "shared" / "datasets",
                    help="the offline datasets folder (SOURCES.md there)")
    args = ap.parse_args(argv)

    from tabbench.measure import fingerprint, hardware_label
    from tabbench.metrics import PRIMARY

    methods = args.methods.split(",")
    with tempfile.TemporaryDirectory(prefix="clock-under-load-") as tmp:
        tmp = Path(tmp)
        env = {**os.environ, "TABBENCH_CACHE": str(tmp / "cache")}
        runs = {}
        for condition, hog in (("alone", False), ("beside a busy loop", True)):
            suite = tmp / f"{condition.split()[0]}.yaml"
            suite.write_text(yaml.safe_dump(one_dataset_suite(args.dataset, methods, args.budget,
                                                              f"clock-{condition.split()[0]}", args.repeat)))
            done, records, wall = run_on_one_core(suite, tmp / "runs", env, args.core, hog,
                                                  ("--folds", str(args.fold), "--mirror", str(args.mirror)))
            if done.returncode != 0:
                sys.exit(f"tabbench run failed ({condition}):\n{done.stderr[-3000:]}")
            runs[condition] = records
            print(f"  {condition}: {wall:.0f} s", file=sys.stderr, flush=True)

    print(f"machine: {hardware_label(fingerprint())}; core {args.core}")
    print(f"{args.dataset} fold {args.fold} repeat {args.repeat}, {args.budget:g} CPU-s a job; the second run reads "
          "what the first stored")
    print()
    print("| method | condition | what the budget bought | CPU s | wall s | test metric |")
    print("|---|---|---|---|---|---|")
    for method in methods:
        for condition, records in runs.items():
            r = records[method]
            metric = PRIMARY[r["task"]][0]
            value = ((r.get("metrics") or {}).get("test") or {}).get(metric)
            print(f"| {method} | {condition} | {work(r)} | {r['cpu_seconds']:.1f} | {r['wall_seconds']:.1f} | "
                  f"{metric} {value:.4f} |" if value is not None else f"| {method} | {condition} | {r['status']} |")


if __name__ == "__main__":
    main()
