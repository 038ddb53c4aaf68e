"""How much time the harness adds per job, on top of the model's own work.

Runs the same N cheap jobs (k-NN on scikit-learn's wine data, 5-fold x seeds) four ways and prints
milliseconds per job:
  direct    tabbench.run.execute.execute in this process: the model's fit + predict + metrics
  isolated  tabbench.run.isolation.execute_isolated: the same in a forked child with enforced limits
  claims    what claiming adds to each job of a run (tabbench.run.claims.JobQueue: claim it, look for records
            other runs wrote meanwhile, drop the claim once its record is written)
  local     tabbench run --executor local: the isolated jobs one at a time, with the run's bookkeeping
            (claims, store, leaderboard), no Ray
  ray       tabbench run on a local Ray (startup and shutdown timed separately)

    python benchmarks/harness_overhead.py [--jobs 100]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100)
    args = parser.parse_args()
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

    from tabbench.data.cache import DataPaths
    from tabbench.run.execute import execute
    from tabbench.run.expand import expand
    from tabbench.run.isolation import execute_isolated
    from tabbench.plugins import load_models
    from tabbench.run.claims import Claims, JobQueue
    from tabbench.run.runner import RunOptions, load_data, run_suite
    from tabbench.store import Store
    from tabbench.suite import parse_suite

    seeds = max(1, args.jobs // 5)
    raw = {"name": "overhead", "seeds": list(range(seeds)),
           "datasets": [{"name": "wine", "source": "sklearn", "id": "wine", "split": {"protocol": "kfold", "k": 5}}],
           "models": {"knn": {}}}
    with tempfile.TemporaryDirectory() as tmp:
        suite = parse_suite(raw, Path(tmp) / "overhead.yaml")
        registry = load_models()
        paths = DataPaths(cache=Path(tmp) / "cache")
        loaded = load_data(suite, paths)
        jobs = expand(suite, registry, loaded)
        _, dataset, splits = loaded["wine"]
        by_fold = {s.fold: s for s in splits}
        factory = registry["knn"].spec.factory
        execute(jobs[0], factory, dataset.meta, dataset.X, dataset.y, by_fold[0])  # warm imports

        timings = {}
        records = {}
        for name, fn in (("direct", execute), ("isolated", execute_isolated)):
            t0 = time.perf_counter()
            for job in jobs:
                record = fn(job, factory, dataset.meta, dataset.X, dataset.y, by_fold[job.fold])
                assert record["status"] == "ok", record
                records[job.key] = record
            timings[name] = (time.perf_counter() - t0) / len(jobs) * 1000

        store = Store(Path(tmp) / "claimed")
        claims = Claims(store.path.parent)
        claims.open()
        queue, spent = JobQueue(jobs, store, claims, store.mark()), 0.0
        while True:
            t0 = time.perf_counter()
            job = queue.take()
            spent += time.perf_counter() - t0
            if job is None:
                break
            store.append(records[job.key])  # the store's own cost, as before claims: not counted
            t0 = time.perf_counter()
            queue.finished(job)
            spent += time.perf_counter() - t0
        claims.close()
        timings["claims"] = spent / len(jobs) * 1000

        t0 = time.perf_counter()
        summary = run_suite(suite, RunOptions(results=Path(tmp) / "local", executor="local", progress=False,
                                              data_paths=paths))
        timings["local"] = (time.perf_counter() - t0) / len(jobs) * 1000
        assert summary.done == len(jobs) and summary.failed == 0

        import ray

        t0 = time.perf_counter()
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        startup = time.perf_counter() - t0
        run_suite(suite, RunOptions(results=Path(tmp) / "warm", progress=False, data_paths=paths))  # warm workers
        t0 = time.perf_counter()
        summary = run_suite(suite, RunOptions(results=Path(tmp) / "results", progress=False, data_paths=paths))
        wall = time.perf_counter() - t0
        ray.shutdown()
        assert summary.done == len(jobs) and summary.failed == 0
        cpus = os.cpu_count()
        timings["ray"] = wall / len(jobs) * 1000

    from tabbench.measure import fingerprint, hardware_label

    print(f"machine: {hardware_label(fingerprint())}")
    print(f"{len(jobs)} k-NN jobs on wine, {cpus} CPUs")
    print(f"  direct   (model only, 1 process)       {timings['direct']:7.1f} ms/job")
    print(f"  isolated (forked child per job)        {timings['isolated']:7.1f} ms/job   "
          f"x{timings['isolated'] / timings['direct']:.2f} of direct")
    print(f"  claims   (claim, look for others' records, drop; per job) {timings['claims']:7.2f} ms/job")
    print(f"  local    (tabbench run --executor local, incl. leaderboard) {timings['local']:7.1f} ms/job   "
          f"x{timings['local'] / timings['direct']:.2f} of direct")
    print(f"  ray      (tabbench run, {cpus} workers, incl. leaderboard)"
          f" {timings['ray']:7.1f} ms/job wall   x{timings['ray'] / timings['direct']:.2f} of direct")
    print(f"  ray startup (once per run)             {startup * 1000:7.0f} ms")


if __name__ == "__main__":
    main()
