"""What one fit of each post-NPT model (TabM, RealMLP, TabR, ModernNCA) costs on Concrete fold 0 (or
Boston's or Yacht's, ``--dataset``), with its defaults, beside the NPT and CatBoost fits already recorded for
Concrete's.

Concrete and its fold 0 are suites/uci-small.yaml's (the paper's protocol split, ``npt_code``: 0.7 /
0.2 / 0.1 train / val / test), loaded through tabbench's own data layer from the offline mirror. Each
model is built with its defaults on the CPU and one torch thread (``device: cpu``, ``n_jobs: 1``) and
fitted once (training split, early stopping on the validation split); the figure is the CPU seconds
of this process (and any child process) during ``fit`` (getrusage: on a machine shared with other jobs, wall time
measures their load too), with the wall seconds and the test RMSE beside it.

The NPT and CatBoost rows are read from the committed records (results/uci-small/records: the
``fit_seconds`` of Concrete fold 0, wall seconds of a one-CPU job; NPT at the suite's reduced budget,
CatBoost for each of its trials), not re-run.

    OMP_NUM_THREADS=1 python benchmarks/modern_fit_cost.py --mirror ../shared/datasets [--models tabm,realmlp]
        [--set amp=false]   # parameters over the defaults, e.g. TabM in fp32
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("tabm", "realmlp", "tabr", "modernnca")


def fold0(mirrors, name="concrete"):
    from tabbench.data.cache import DataPaths
    from tabbench.run.runner import load_data
    from tabbench.suite import load_suite

    suite = load_suite(ROOT / "suites" / "uci-small.yaml")
    paths = DataPaths.from_env(mirrors=mirrors, base=suite.path.parent)
    _, dataset, splits = load_data(suite, paths, only=(name,))[name]
    split, = [s for s in splits if s.fold == 0]
    return dataset, split


def cpu_seconds() -> float:
    """CPU seconds of this process and of any child processes it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def recorded(folder: Path):
    """(method, params, fit_seconds) of the NPT and CatBoost records of Concrete fold 0."""
    out = []
    for path in sorted((folder / "records").glob("*.jsonl.gz")):
        with gzip.open(path, "rt") as lines:
            for line in lines:
                r = json.loads(line)
                if r["dataset"] == "concrete" and r["fold"] == 0 and r["model"] in ("npt", "catboost"):
                    out.append((r["method"], r["params"], r["fit_seconds"]))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", action="append", default=[], help="offline dataset folder (../shared/datasets)")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--dataset", default="concrete", choices=("concrete", "boston", "yacht"),
                        help="a regression set of suites/uci-small.yaml (default concrete)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a parameter over the defaults (YAML value), for every model listed")
    args = parser.parse_args()
    import yaml

    overrides = {key: yaml.safe_load(value) for key, value in (item.split("=", 1) for item in args.set)}

    from tabbench.plugins import load_models

    models = load_models()
    dataset, split = fold0(args.mirror, args.dataset)
    X, y = dataset.X, dataset.y
    from tabbench.measure import fingerprint, hardware_label

    print(f"machine: {hardware_label(fingerprint())}")
    print(f"{args.dataset} fold 0: {len(split.train)} train / {len(split.val)} val / {len(split.test)} test rows"
          + (f"; over the defaults: {overrides}" if overrides else ""))
    print(f"{'model':<12} {'fit CPU s':>10} {'fit wall s':>11} {'test RMSE':>10}  info")
    for name in args.models.split(","):
        spec = models[name].spec
        model = spec.build(dataset.meta, 0, {"device": "cpu", "n_jobs": 1, **overrides})
        cpu, wall = cpu_seconds(), time.perf_counter()
        model.fit(X.iloc[split.train], y[split.train], X.iloc[split.val], y[split.val])
        cpu, wall = cpu_seconds() - cpu, time.perf_counter() - wall
        rmse = float(np.sqrt(np.mean((model.predict(X.iloc[split.test]) - y[split.test]) ** 2)))
        info = {k: v for k, v in (getattr(model, "info_", {}) or {}).items() if k in ("epochs", "best_epoch", "amp")}
        print(f"{name:<12} {cpu:>10.1f} {wall:>11.1f} {rmse:>10.2f}  {info}", flush=True)
    if args.dataset != "concrete":
        return
    print("\nrecorded in results/uci-small (fit_seconds, wall, one CPU):")
    for method, params, seconds in recorded(ROOT / "results" / "uci-small"):
        size = {k: params[k] for k in ("steps", "e", "n_layers", "n_estimators", "max_depth") if k in params}
        print(f"{method:<12} {seconds:>10.1f}  {size}")


if __name__ == "__main__":
    main()
