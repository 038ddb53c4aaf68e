"""Throughput of many cheap jobs on a multi-node Ray cluster against one node: what scheduling over a cluster
costs per job.

Runs the same suite (k-NN on scikit-learn's wine data, 5 folds x N/5 seeds: N jobs of a few tens of
milliseconds, so that the harness's own cost dominates) twice, each as a user runs it, `tabbench run` in a
fresh process:
  single   tabbench run on the local Ray this machine starts (loopback, one node, every core)
  cluster  tabbench run --address on a cluster of --hosts hosts in network namespaces, 1 CPU each
           (tests/netns_cluster.py: the test hosts of tests/test_cluster.py; needs root)

and prints, for each, the command's wall time, the span of its jobs (first start to last finish, from the
records), jobs per second over that span, and the per-job overhead: the CPU slots' time per job
(slots x span / jobs) less the job's own wall time in its forked child (the records' wall_seconds).

    python benchmarks/cluster_throughput.py [--jobs 2000] [--hosts 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.netns_cluster


def _suite(folder: Path, jobs: int) -> Path:
    path = folder / "throughput.yaml"
    path.write_text(yaml.safe_dump({
        "name": "throughput", "seeds": list(range(max(1, jobs // 5))),
        "datasets": [{"name": "wine", "source": "sklearn", "id": "wine", "split": {"protocol": "kfold", "k": 5}}],
        "models": {"knn": {}}}))
    return path


def _run(cmd, env, results: Path) -> dict:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    from tabbench.store import Store

    records = Store(results / "throughput").records()
    assert len({r["key"] for r in records}) == len(records), "a job recorded twice"
    assert all(r["status"] == "ok" for r in records)
    start = min(datetime.fromisoformat(r["started_at"]) for r in records)
    end = max(datetime.fromisoformat(r["finished_at"]) for r in records)
    return {"wall": wall, "span": (end - start).total_seconds(), "jobs": len(records),
            "in_job": statistics.mean(r["wall_seconds"] for r in records),
            "nodes": len({r["node"] for r in records})}


def _line(name: str, slots: int, m: dict) -> str:
    rate = m["jobs"] / m["span"]
    overhead = slots * m["span"] / m["jobs"] - m["in_job"]
    return (f"  {name:8} {m['jobs']} jobs on {m['nodes']} node(s), {slots} CPU slots: command {m['wall']:6.1f} s, "
            f"jobs {m['span']:6.1f} s, {rate:6.2f} jobs/s, per job {m['in_job'] * 1000:5.0f} ms in the job + "
            f"{overhead * 1000:5.0f} ms overhead")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--hosts", type=int, default=3)
    args = parser.parse_args()
    from tabbench.measure import fingerprint, hardware_label
    from tests.netns_cluster import NamespacesRefused, namespace_cluster

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        suite = _suite(tmp, args.jobs)
        cli = [sys.executable, "-m", "tabbench.cli", "run", str(suite), "--no-progress"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        load = os.getloadavg()[0]
        single = _run([*cli, "--results", str(tmp / "single")], env, tmp / "single")
        out.append(_line("single", os.cpu_count(), single))
        try:
            with namespace_cluster(args.hosts) as cluster:
                cmd = cluster.on(0, *cli, "--results", str(tmp / "cluster"), "--address", cluster.address)
                out.append(_line("cluster", args.hosts, _run(cmd, cluster.env, tmp / "cluster")))
        except NamespacesRefused as exc:
            out.append(f"  cluster  not run: {exc}")
        load = max(load, os.getloadavg()[0])
    print(f"machine: {hardware_label(fingerprint())}")
    print(f"load average (1 min) up to {load:.1f} while it ran, on {os.cpu_count()} cores")
    print("\n".join(out))


if __name__ == "__main__":
    main()
