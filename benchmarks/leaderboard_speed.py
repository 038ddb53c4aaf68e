"""How long `tabbench leaderboard` takes over the uci-cpu folders, end to end and per phase.

Runs the command as a user would (a fresh `python -m tabbench.cli` per repetition, so imports count)
into a temporary results root, and prints the wall and CPU seconds of each repetition, their median,
and the machine's load average, then one in-process run split into phases (imports, reading
records, tables, tests and figures). --tables-only times the command without the report.

    python benchmarks/leaderboard_speed.py [--repeat 5] [--folders results/uci-small-kfold,results/uci-large-cpu]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = "suites/published/npt-paper.yaml"


def cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def end_to_end(folders: list, repeat: int, extra: list) -> list:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "tabbench.cli", "leaderboard", *folders, "--name", "bench",
                   "--results", tmp, "--published", PUBLISHED, *extra]
        for _ in range(repeat):
            wall, cpu = time.perf_counter(), cpu_children()
            subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
            out.append((time.perf_counter() - wall, cpu_children() - cpu))
    return out


def phases(folders: list) -> dict:
    """One in-process run, timed per phase (a fresh interpreter, so the imports are cold)."""
    code = f"""
import time, tempfile
from pathlib import Path
t = {{}}; s = time.perf_counter(); c = time.process_time()
import pandas, numpy
from tabbench import pooling
from tabbench.report import leaderboard
t['import core'] = (time.perf_counter() - s, time.process_time() - c); s = time.perf_counter(); c = time.process_time()
import scipy.stats, scikit_posthocs, matplotlib.pyplot
t['import scipy, scikit-posthocs, matplotlib'] = (time.perf_counter() - s, time.process_time() - c); s = time.perf_counter(); c = time.process_time()
records = pooling.pooled_records({folders!r})
t['read records'] = (time.perf_counter() - s, time.process_time() - c); s = time.perf_counter(); c = time.process_time()
with tempfile.TemporaryDirectory() as tmp:
    leaderboard.write_leaderboard(Path(tmp) / 'b', {PUBLISHED!r}, sources={folders!r})
    t['tables (records read again)'] = (time.perf_counter() - s, time.process_time() - c); s = time.perf_counter(); c = time.process_time()
    leaderboard.write_leaderboard(Path(tmp) / 'b', {PUBLISHED!r}, sources={folders!r}, report=True)
    t['tables + tests + figures + LaTeX'] = (time.perf_counter() - s, time.process_time() - c)
for k, v in t.items():
    print(f'{{k}}\\twall {{v[0]:.2f}}, CPU {{v[1]:.2f}}')
"""
    text = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return dict(line.split("\t") for line in text.strip().splitlines())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--folders", default="results/uci-small-kfold,results/uci-large-cpu")
    args = parser.parse_args()
    folders = [f for f in args.folders.split(",") if f]
    from tabbench.measure import fingerprint, hardware_label

    print(f"machine: {hardware_label(fingerprint())}")
    print(f"cpus: {os.cpu_count()}, load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"folders: {', '.join(folders)}")
    for label, extra in (("full report", []), ("--tables-only", ["--tables-only"])):
        runs = end_to_end(folders, args.repeat, extra)
        walls = [w for w, _ in runs]
        cpus = [c for _, c in runs]
        print(f"{label}: wall s {' '.join(f'{w:.2f}' for w in walls)} | median {statistics.median(walls):.2f}, "
              f"min {min(walls):.2f}; CPU s (user+sys) median {statistics.median(cpus):.2f}")
    print("phases of one in-process run (seconds):")
    for name, seconds in phases(folders).items():
        print(f"  {name}: {seconds}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
