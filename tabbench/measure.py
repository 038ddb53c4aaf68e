"""What a job costs (peak resident memory, peak GPU memory) and where it ran (the hardware fingerprint)."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
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


def private_kib(pid: int | str = "self") -> int | None:
    """The memory only this process holds, in KiB (Private_Clean + Private_Dirty of /proc/<pid>/smaps_rollup):
    a forked child's pages still shared copy-on-write with its parent are not counted. Falls back to VmRSS
    where smaps_rollup is absent; None where there is no /proc."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            return sum(int(line.split()[1]) for line in fh if line.startswith(("Private_Clean:", "Private_Dirty:")))
    except OSError:
        return proc_status_kib("VmRSS", pid)


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


#: /proc/cpuinfo flags that change which kernels torch and oneDNN run (x86: the AVX2 / AVX-512 builds,
#: bf16 and fp16 vector and matrix units, VNNI; Arm: SVE and the bf16 / int8 matrix extensions).
KERNEL_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16", "avx512_fp16",
                "avx512_vnni", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16",
                "asimd", "sve", "sve2", "bf16", "i8mm")
#: The fingerprint's fields that name the hardware a result was computed on; its ``id`` hashes them.
#: Core counts and memory size are left out: two machines of one CPU model with more cores compute the same.
#: Flags a one-line label leaves out to stay short (the record keeps them): FMA comes with AVX2 on every
#: CPU torch supports, and the other three with AVX-512 F on every server CPU since 2017.
_IMPLIED = ("fma", "avx512bw", "avx512vl", "avx512dq")
_IDENTITY = ("vendor", "model_name", "family", "model", "stepping", "kernel_flags")


def parse_cpuinfo(text: str) -> dict:
    """The first processor's entry of /proc/cpuinfo text: vendor, model name, family / model / stepping
    (Arm: implementer / part / variant, revision) and the ``KERNEL_FLAGS`` it has; absent fields are None."""
    first = {}
    for line in text.splitlines():
        if not line.strip():
            if first:
                break
            continue
        name, _, value = line.partition(":")
        first.setdefault(name.strip(), value.strip())
    flags = set((first.get("flags") or first.get("Features") or "").split())

    def number(*names):
        for name in names:
            try:
                return int(first[name], 0)  # decimal on x86, hexadecimal (0xd0c) on Arm
            except (KeyError, ValueError):
                continue
        return None

    return {"vendor": first.get("vendor_id") or first.get("CPU implementer"),
            "model_name": first.get("model name") or first.get("Processor") or platform.processor() or None,
            "family": number("cpu family", "CPU architecture"), "model": number("model", "CPU part"),
            "stepping": number("stepping", "CPU variant"),
            "kernel_flags": [f for f in KERNEL_FLAGS if f in flags]}


@lru_cache(maxsize=1)
def _cpu() -> dict:
    import psutil

    try:
        with open("/proc/cpuinfo") as fh:
            cpu = parse_cpuinfo(fh.read())
    except OSError:  # not Linux: what the platform module knows
        cpu = {"vendor": None, "model_name": platform.processor() or platform.machine(), "family": None,
               "model": None, "stepping": None, "kernel_flags": []}
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {**cpu, "physical_cores": psutil.cpu_count(logical=False), "logical_cpus": psutil.cpu_count(),
            "usable_cpus": usable, "memory_bytes": psutil.virtual_memory().total}


def _gpu(cuda) -> dict:
    """The current CUDA device: name, memory, compute capability, the CUDA torch was built for and the
    NVIDIA driver's version (from /proc/driver/nvidia/version, where the kernel module publishes it)."""
    props = cuda.get_device_properties(cuda.current_device())
    driver = None
    try:
        with open("/proc/driver/nvidia/version") as fh:
            found = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]+)", fh.read())
            driver = found.group(1) if found else None
    except OSError:
        pass
    torch = sys.modules["torch"]
    return {"name": props.name, "memory_bytes": int(props.total_memory),
            "capability": f"{props.major}.{props.minor}", "cuda": torch.version.cuda, "driver": driver,
            "count": cuda.device_count()}


def fingerprint() -> dict:
    """The hardware this process computes on, read from /proc/cpuinfo, psutil and (only where the process
    has imported torch; this never imports it) torch: the CPU (vendor, model name, family / model /
    stepping, ``KERNEL_FLAGS`` present), cores, memory, torch's threads and CPU kernel level, and, once the
    process has initialised CUDA, the GPU. ``id`` is a short hash of the CPU's identity and the GPU's name
    and capability: two results with one ``id`` were computed on the same kind of hardware."""
    cpu = dict(_cpu())
    torch = sys.modules.get("torch")
    if torch is not None:
        cpu["torch_threads"] = torch.get_num_threads()
        capability = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
        cpu["torch_cpu_capability"] = capability() if capability else None
    cuda = _cuda()
    gpu = _gpu(cuda) if cuda is not None else None
    identity = [cpu[k] for k in _IDENTITY] + ([gpu["name"], gpu["capability"]] if gpu else [])
    return {"id": _short_hash(identity), "cpu": cpu, "gpu": gpu,
            "torch": torch.__version__ if torch is not None else None}


def _short_hash(values: list) -> str:
    return hashlib.sha256(json.dumps(values).encode()).hexdigest()[:12]


def cpu_id(hardware: dict | None) -> str | None:
    """The kind of CPU a fingerprint (``fingerprint()``, a record's ``environment.hardware``) names, as an id: the
    hash of its identifying fields, GPU left aside (its ``id`` where it has no GPU, as every CPU job's record has),
    what ``tabbench run --cpu`` takes; None where no CPU was recorded."""
    cpu = (hardware or {}).get("cpu")
    return _short_hash([cpu.get(k) for k in _IDENTITY]) if cpu else None


def short_name(hardware: dict) -> str:
    """A fingerprint's CPU model in a few words ("Intel Xeon", "AMD EPYC 9R14"), and its GPU's where it has one."""
    name = (hardware.get("cpu") or {}).get("model_name") or "unknown CPU"
    name = re.sub(r"\((?:R|TM)\)|\b(?:Processor|CPU)\b|\d+-Core", " ", name)
    name = " ".join(name.split())
    gpu = hardware.get("gpu")
    return f"{name} + {gpu['name']}" if gpu else name


def hardware_label(hardware: dict | None, torch: bool = True) -> str:
    """One line naming a fingerprint's hardware, e.g. "Intel(R) Xeon(R) Processor (GenuineIntel family 6
    model 167 stepping 1; avx512f avx512_bf16 amx_bf16), 2 cores, 23.5 GiB [id 1a2b3c4d5e6f]"; with
    ``torch``, also torch's version, threads and CPU kernel level where the process had imported torch."""
    if not hardware:
        return "hardware not recorded"
    cpu = hardware["cpu"]
    kind = " ".join(f"{name} {cpu[name]}" for name in ("family", "model", "stepping") if cpu.get(name) is not None)
    flags = [f for f in cpu.get("kernel_flags") or [] if f not in _IMPLIED]
    cores = cpu.get("physical_cores") or cpu.get("logical_cpus")
    text = (f"{cpu.get('model_name')} ({' '.join(x for x in (cpu.get('vendor'), kind) if x)}"
            f"{'; ' + ' '.join(flags) if flags else ''}), {cores} cores")
    if cpu.get("memory_bytes"):
        text += f", {cpu['memory_bytes'] / 2**30:.1f} GiB"
    if torch and cpu.get("torch_threads"):
        text += f"; torch {hardware.get('torch')}, {cpu['torch_threads']} threads, {cpu.get('torch_cpu_capability')}"
    gpu = hardware.get("gpu")
    if gpu:
        text += (f"; GPU {gpu['name']} ({gpu['memory_bytes'] / 2**30:.0f} GiB, sm {gpu['capability']}, "
                 f"CUDA {gpu['cuda']}, driver {gpu['driver']})")
    return f"{text} [id {hardware['id']}]"


_PACKAGES = ("tabbench-harness", "numpy", "pandas", "scikit-learn", "torch", "xgboost", "catboost", "lightgbm",
             "pytorch-tabnet", "ray")
_MODULES = {"tabbench-harness": "tabbench", "scikit-learn": "sklearn", "pytorch-tabnet": "pytorch_tabnet"}


def environment() -> dict:
    """Hardware and the versions of the libraries this process has imported."""
    versions = {}
    for dist in _PACKAGES:
        if _MODULES.get(dist, dist) in sys.modules:
            try:
                versions[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                pass
    return {
        "hardware": fingerprint(),
        "python": platform.python_version(),
        "platform": f"{platform.system()}-{platform.machine()}",
        "packages": versions,
    }


def repeat_key(environment: dict | None) -> tuple | None:
    """What decides whether a seeded torch job repeats to the last bit: the hardware (fingerprint id), the
    torch version, torch's threads and its CPU kernel level. None for a record made before the fingerprint
    was recorded."""
    hardware = (environment or {}).get("hardware") if isinstance(environment, dict) else None
    if not hardware:
        return None
    cpu = hardware.get("cpu") or {}
    return hardware.get("id"), hardware.get("torch"), cpu.get("torch_threads"), cpu.get("torch_cpu_capability")


def machines(environments, sources=None, methods=None) -> list[dict]:
    """The machines a set of records ran on: one entry per fingerprint id (None: not recorded), in order
    of first appearance, with its ``label``, the number of ``records``, the ``sources`` (result folders)
    they came from when ``sources`` (one per record) is given, and the records per method (``methods``, in
    order of first appearance) when ``methods`` (one per record) is. A record without an environment (a job
    that never ran: a crash or time-out recorded by its parent) is left out."""
    out: dict = {}
    for i, environment in enumerate(environments):
        if not isinstance(environment, dict):
            continue
        hardware = environment.get("hardware")
        hid = hardware.get("id") if hardware else None
        entry = out.setdefault(hid, {"id": hid, "label": hardware_label(hardware, torch=False), "records": 0,
                                     "sources": [], "methods": {}})
        entry["records"] += 1
        if sources is not None and sources[i] not in entry["sources"]:
            entry["sources"].append(sources[i])
        if methods is not None:
            entry["methods"][methods[i]] = entry["methods"].get(methods[i], 0) + 1
    return list(out.values())
