"""Helpers the baseline plugins (boosters, mlp, tabnet) share: device choice, seen classes, threads.

Nothing here imports torch or a boosting library at module level: ``tabbench models`` imports every
plugin module, and listing models must stay fast.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys

import numpy as np

from tabbench.preprocess import full_proba

DEVICES = ("auto", "cpu", "cuda")


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


class SeenClasses:
    """The classes present in a training split, for libraries that insist on labels ``0 .. k-1``.

    ``encode`` maps class indices to positions among the seen classes; ``keep`` marks rows (of a
    validation split) whose class was seen; ``widen`` turns the library's probabilities over seen
    classes back into all ``n_classes`` columns (unseen classes get probability 0).
    """

    def __init__(self, y, n_classes: int):
        self.classes = np.unique(np.asarray(y, dtype=np.int64))
        self.n_classes = n_classes
        self._position = np.full(n_classes, -1, dtype=np.int64)
        self._position[self.classes] = np.arange(len(self.classes))

    def __len__(self) -> int:
        return len(self.classes)

    def keep(self, y) -> np.ndarray:
        return self._position[np.asarray(y, dtype=np.int64)] >= 0

    def encode(self, y) -> np.ndarray:
        return self._position[np.asarray(y, dtype=np.int64)]

    def widen(self, proba) -> np.ndarray:
        proba = np.asarray(proba, dtype=np.float64)
        proba = proba / proba.sum(axis=1, keepdims=True)
        return full_proba(proba, self.classes, self.n_classes)

    def constant(self, n_rows: int) -> np.ndarray:
        """Probabilities when the training split holds a single class."""
        return full_proba(np.ones((n_rows, 1)), self.classes, self.n_classes)


def validation(X_val, y_val, seen: SeenClasses | None):
    """The validation split as a library may use it for early stopping, or None when there is none.

    Rows whose class the training split lacks are dropped: a library cannot score them.
    """
    if X_val is None or y_val is None or len(y_val) == 0:
        return None
    if seen is None:
        return X_val, np.asarray(y_val, dtype=np.float64)
    keep = seen.keep(y_val)
    if not keep.any():
        return None
    return X_val[keep], seen.encode(np.asarray(y_val)[keep])


@contextlib.contextmanager
def torch_threads(n: int):
    """Run torch on ``n`` intra-op threads, then restore the previous setting."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(max(1, int(n)))
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def torch_seeded(seed: int, device: str):
    """Seed torch's global generators for a fit without disturbing the caller's random state."""
    import torch

    devices = [torch.cuda.current_device()] if device == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield
