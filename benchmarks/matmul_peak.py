"""The CPU's matrix-product peak in fp32 and bf16: the roofline the NPT step's figures are read against.

A large square ``torch.matmul`` (default 4096 x 4096, 2 n^3 operations) timed on ``--threads`` threads:
the median of ``--repeat`` products after one warm-up, in GFLOP/s, with the hardware fingerprint and the
load average beside it (on a shared machine other processes take part of the cores: read the figures as
lower bounds).

    python benchmarks/matmul_peak.py --threads 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def peak(torch, n: int, dtype, repeat: int) -> tuple[float, list]:
    a = torch.randn(n, n).to(dtype)
    b = torch.randn(n, n).to(dtype)
    torch.matmul(a, b)  # warm-up: oneDNN picks and caches its kernel
    seconds = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        torch.matmul(a, b)
        seconds.append(time.perf_counter() - t0)
    return 2 * n**3 / statistics.median(seconds) / 1e9, seconds


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
    rows = []
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        gflops, seconds = peak(torch, args.size, dtype, args.repeat)
        rows.append((name, gflops, seconds))
    print(f"machine: {hardware_label(fingerprint())}")
    print(f"{args.size} x {args.size} matmul, {args.threads} threads, median of {args.repeat} after 1 warm-up; "
          f"load average (1 min) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    for name, gflops, seconds in rows:
        print(f"  {name}: {gflops:6.0f} GFLOP/s  (products {' '.join(f'{s * 1000:.0f}' for s in seconds)} ms)")


if __name__ == "__main__":
    main()
