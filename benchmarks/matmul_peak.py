"""The CPU's matrix-product peak in fp32 and bf16: the roofline the NPT step's figures are read against.

A large square ``torch.matmul`` (default 4096 x 4096, 2 n^3 operations) timed on ``--threads`` threads:
the median and the best of ``--repeat`` products after one warm-up, in GFLOP/s of wall time, with the
hardware fingerprint and the load average beside it. On a shared machine other processes take part of the
cores, so the wall figures are lower bounds; the third figure, operations per CPU-second of this process
times the threads, is what the threads would do with the cores to themselves (also a lower bound: a thread
waiting at a barrier still spends CPU time).

    python benchmarks/matmul_peak.py --threads 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def peak(torch, n: int, dtype, repeat: int, threads: int) -> dict:
    a = torch.randn(n, n).to(dtype)
    b = torch.randn(n, n).to(dtype)
    torch.matmul(a, b)  # warm-up: oneDNN picks and caches its kernel
    seconds, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        torch.matmul(a, b)
        seconds.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    flop = 2 * n**3 / 1e9
    return {"median": flop / statistics.median(seconds), "best": flop / min(seconds),
            "per_cpu": flop / statistics.median(cpu) * threads, "seconds": seconds}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--size", type=int, default=4096, help="rows = columns of both factors")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)

    import torch

    from tabbench.measure import fingerprint, hardware_label

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    rows = [(name, peak(torch, args.size, dtype, args.repeat, args.threads))
            for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))]
    print(f"machine: {hardware_label(fingerprint())}")
    print(f"{args.size} x {args.size} matmul, {args.threads} threads, median of {args.repeat} after 1 warm-up; "
          f"load average (1 min) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    print("GFLOP/s: median and best of wall time; per CPU-second x threads")
    for name, r in rows:
        print(f"  {name}: {r['median']:6.0f} {r['best']:6.0f} {r['per_cpu']:6.0f}  "
              f"(products {' '.join(f'{s * 1000:.0f}' for s in r['seconds'])} ms)")


if __name__ == "__main__":
    main()
