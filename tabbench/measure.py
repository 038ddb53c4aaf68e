"""What a job costs (peak resident memory, peak GPU memory) and where it ran (environment fingerprint)."""

from __future__ import annotations

import os
import platform
import sys
from functools import lru_cache
from importlib import metadata

_CLEAR_REFS = "/proc/self/clear_refs"


def proc_status_kib(field: str, pid: int | str = "self") -> int | None:
    """A field of /proc/<pid>/status in KiB (VmRSS, VmHWM, ...), None where there is no /proc."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class PeakMemory:
    """Peak RSS of this process while a job runs, above the RSS it started from.

    On Linux the kernel's high-water mark (VmHWM) is reset at the start (writing 5 to
    /proc/self/clear_refs), so the peak is exact and belongs to this job, not to the worker's past.
    Elsewhere it falls back to ru_maxrss, which can only over-report.
    """

    def __enter__(self):
        self.exact = False
        try:
            with open(_CLEAR_REFS, "w") as fh:
                fh.write("5")
            self.exact = True
        except OSError:
            pass
        self.start_bytes = (proc_status_kib("VmRSS") or 0) * 1024
        self.gpu = _cuda()
        if self.gpu is not None:
            self.gpu.reset_peak_memory_stats()
        return self

    def __exit__(self, *exc):
        hwm = proc_status_kib("VmHWM") if self.exact else None
        if hwm is None:
            import resource

            hwm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self.peak_bytes = hwm * 1024
        self.gpu = self.gpu or _cuda()  # the job may have initialised CUDA itself
        if self.gpu is not None:
            self.gpu_allocated_bytes = int(self.gpu.max_memory_allocated())
            self.gpu_reserved_bytes = int(self.gpu.max_memory_reserved())
        else:
            self.gpu_allocated_bytes = self.gpu_reserved_bytes = None
        return False

    def record(self) -> dict:
        return {"peak_rss_bytes": self.peak_bytes, "job_rss_bytes": max(0, self.peak_bytes - self.start_bytes),
                "peak_gpu_allocated_bytes": self.gpu_allocated_bytes,
                "peak_gpu_reserved_bytes": self.gpu_reserved_bytes}


def _cuda():
    """torch.cuda if the job imported torch and CUDA is initialised; never imports torch itself."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return torch.cuda


@lru_cache(maxsize=1)
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


_PACKAGES = ("tabbench", "numpy", "pandas", "scikit-learn", "torch", "xgboost", "catboost", "lightgbm",
             "pytorch-tabnet", "ray")
_MODULES = {"scikit-learn": "sklearn", "pytorch-tabnet": "pytorch_tabnet"}


def environment() -> dict:
    """Hardware and the versions of the libraries this process has imported."""
    versions = {}
    for dist in _PACKAGES:
        if _MODULES.get(dist, dist) in sys.modules:
            try:
                versions[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                pass
    gpu = _cuda()
    return {
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "gpu": gpu.get_device_name() if gpu is not None else None,
        "python": platform.python_version(),
        "platform": f"{platform.system()}-{platform.machine()}",
        "packages": versions,
    }
