"""The device a plugin's fit runs on, whatever its library (the boosters', scikit-learn's, torch's): a model's
``device`` param (``Device``: auto, cpu or cuda), what ``auto`` means on this machine (``resolve_device``) and the
GPUs Ray gives one job (``gpus_for``).

It imports no torch and no boosting library: ``tabbench models`` imports every plugin module, and a CUDA device
is found by asking the driver (``libcuda``), unless torch is already loaded.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Literal

DEVICES = ("auto", "cpu", "cuda")
Device = Literal[DEVICES]  # a model's ``device`` param


@functools.lru_cache(maxsize=None)
def _cuda_device_count(visible: str | None) -> int:
    if visible is not None and visible.strip() in ("", "-1"):
        return 0
    if "torch" in sys.modules:  # already paid for: ask torch
        torch = sys.modules["torch"]
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    # Ask the driver directly, so that resolving "auto" does not import torch (seconds) on the driver.
    import ctypes

    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    count = ctypes.c_int(0)
    if libcuda.cuInit(0) != 0 or libcuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


def cuda_available() -> bool:
    """Whether this process can see a CUDA device (honours CUDA_VISIBLE_DEVICES, as Ray sets it)."""
    return _cuda_device_count(os.environ.get("CUDA_VISIBLE_DEVICES")) > 0


def resolve_device(device: str) -> str:
    """``auto`` becomes ``cuda`` where a CUDA device is visible, else ``cpu``; ``cuda`` without one is an error."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if device == "auto":
        return "cuda" if cuda_available() else "cpu"
    if device == "cuda" and not cuda_available():
        raise RuntimeError("device='cuda' was asked for, but no CUDA device is visible to this process "
                           "(no driver, or CUDA_VISIBLE_DEVICES hides it); use device='auto' or 'cpu'")
    return device


def gpus_for(params) -> int:
    """Ray GPUs for one job: 1 when the job will run on CUDA (``cuda``, or ``auto`` on a CUDA machine)."""
    device = params.get("device", "auto")
    if device == "cuda":
        return 1
    return 1 if device == "auto" and cuda_available() else 0
