"""Fails when the environment it runs in holds NVIDIA wheels or a CUDA build of torch: the README's CPU route
(torch from PyTorch's CPU wheel index, then the `cpu` extra) must install none, and CI installs that way.

    python .ci/cpu_only.py    # lists the environment's size by distribution, exit 1 naming any CUDA part
"""

from __future__ import annotations

import importlib.metadata as metadata
import sys
from pathlib import Path


def size_mb(dist) -> float:
    files = dist.files or ()
    return sum((Path(dist.locate_file(f)).stat().st_size for f in files if Path(dist.locate_file(f)).is_file()),
               0) / 2**20


def main() -> int:
    dists = {d.metadata["Name"].lower(): d for d in metadata.distributions()}
    sizes = sorted(((size_mb(d), name, d.version) for name, d in dists.items()), reverse=True)
    print(f"{len(sizes)} distributions, {sum(s for s, _, _ in sizes):,.0f} MB; the largest:")
    for size, name, version in sizes[:8]:
        print(f"  {size:8,.0f} MB  {name} {version}")
    cuda = [f"{name} {d.version}" for name, d in sorted(dists.items()) if name.startswith("nvidia-")]
    if "torch" in dists:
        import torch

        if torch.version.cuda:
            cuda.append(f"torch {torch.__version__} (built for CUDA {torch.version.cuda})")
    if cuda:
        print(f"NOT CPU-only: {', '.join(cuda)}. Install torch from PyTorch's CPU wheel index first and the "
              "`cpu` extra (xgboost-cpu), as the README's CPU route says.", file=sys.stderr)
        return 1
    print("CPU-only: no NVIDIA wheel, no CUDA build of torch.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
