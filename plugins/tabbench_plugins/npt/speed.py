"""NPT's speed on this machine: a per-machine calibration of the cost model, measured once and kept.

``steps: "auto"`` and ``size: "budget"`` size a fit from the cost model's seconds (cost.py) times how much slower
than it a training pass runs here (the *slowdown*). A fit used to time that pass at its start, under whatever load
the machine had at that moment: beside another busy process one credit_card fold measured itself 6.3 times slower
than its siblings and took another size. Now the pass is timed in CPU seconds of the job's own process (another
process on the core takes wall time from it, not CPU time), the least of ``TIMED_PASSES`` after a warm-up, once
per kind of machine (tabbench.measure.fingerprint's ``id``), torch version and threads, device and the pass's
shape (the model's size, the table's columns, the rows timed); it is kept in ``SpeedBook``'s folder (the data
cache's ``npt-speed/``), and every later fit of that shape on that kind of machine, and ``tabbench plan``, read the
same number: the same job takes the same size and steps alone or beside a CPU hog. Each record says which
(``info.speed``: the slowdown, whether this fit measured or read it, the machine's id).

Which rows are timed: a probe of PROBE_ROWS rows, then a whole batch, or else TIMED_ROWS rows, where the probe
says ``TIMED_PASSES + 1`` such passes cost at most TIMING_SHARE of the job's training time (each scaled by the cost
model to a whole batch): a whole batch of a large model takes tens of seconds. A lookup tries those rows in the
same order. Delete the folder (or set $TABBENCH_CACHE elsewhere) to measure again, say after a BIOS or kernel
change that the fingerprint does not see.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path

from tabbench_plugins.npt.cost import estimate_cpu_seconds, pass_seconds_at

PROBE_ROWS, TIMED_ROWS, TIMING_SHARE = 64, 512, 0.1
#: Passes timed after one warm-up pass (which pays one-off allocations); the least is kept.
TIMED_PASSES = 2
#: The params that change what a training pass computes or how, besides the table's shape (they are in the key).
SHAPE_PARAMS = ("e", "n_layers", "n_heads", "residual", "attention", "checkpointing", "amp", "n_patches", "cpus",
                "device")


@functools.lru_cache(maxsize=1)
def _machine() -> str:
    """This machine's kind (tabbench.measure.fingerprint's ``id``), read once a process."""
    from tabbench.measure import fingerprint

    return fingerprint()["id"]


@functools.lru_cache(maxsize=1)
def _torch_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return None


class SpeedBook:
    """The calibrations measured on this kind of machine: one JSON file per machine ``id`` in ``folder`` (default:
    the data cache's ``npt-speed/``: --cache, $TABBENCH_CACHE or the user cache dir), pass shape -> slowdown."""

    def __init__(self, folder: Path | None = None):
        from tabbench.data.cache import DataPaths

        self.folder = Path(folder) if folder is not None else DataPaths.from_env().cache / "npt-speed"
        self.machine = _machine()
        self.path = self.folder / f"{self.machine}.json"

    # --- keys ----------------------------------------------------------------------------------------------

    @staticmethod
    def rows_to_time(batch_rows: int) -> list[int]:
        """The rows a fit may time, in the order it prefers them: a whole batch, TIMED_ROWS, the probe's."""
        return list(dict.fromkeys([batch_rows, min(batch_rows, TIMED_ROWS), min(batch_rows, PROBE_ROWS)]))

    def key(self, meta, sizes, params, rows: int) -> str:
        """The pass shape a calibration holds for: the params of SHAPE_PARAMS, the table's columns and the rows
        timed, with torch's version and device (the machine is the file)."""
        est = estimate_cpu_seconds(meta, sizes, {**params, "steps": 0})
        device = params.get("device", "cpu")
        shape = {**{k: params.get(k) for k in SHAPE_PARAMS}, "device": "cpu" if device == "auto" else device,
                 "columns": est["d"], "rows": int(rows), "torch": _torch_version()}
        return json.dumps(shape, sort_keys=True)

    # --- reading and writing --------------------------------------------------------------------------------

    def _read(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def lookup(self, meta, sizes, params) -> float | None:
        """The stored slowdown for a pass at ``params`` on this table shape, or None where none is stored."""
        book = self._read()
        if not book:
            return None
        rows = estimate_cpu_seconds(meta, sizes, {**params, "steps": 0})["rows"]
        for timed in self.rows_to_time(rows):
            entry = book.get(self.key(meta, sizes, params, timed))
            if entry is not None:
                return float(entry["slowdown"])
        return None

    def store(self, key: str, slowdown: float) -> None:
        """Add one calibration, under a lock so that jobs measuring at once on the same machine both keep theirs;
        written whole and renamed into place, so a reader never sees half a file. A folder that cannot be written
        (a read-only cache) keeps nothing: the fit goes on with what it measured."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(self.folder / f"{self.machine}.lock", "a") as lock:
                with _locked(lock):
                    book = self._read()
                    book[key] = {"slowdown": slowdown,
                                 "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
                    partial = self.path.with_suffix(f".{os.getpid()}.part")
                    partial.write_text(json.dumps(book, indent=1, sort_keys=True))
                    os.replace(partial, self.path)
        except OSError:
            pass


@contextlib.contextmanager
def _locked(handle):
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock (a lost update only means a later fit measures again)
        yield
        return
    fcntl.flock(handle, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)


def timed_pass_seconds(table, model, torch, rows: int) -> float:
    """Seconds of one training pass (forward and backward) of ``model`` over the ``table``'s first ``rows`` rows
    under the table's autocast: CPU seconds of this process on the CPU, wall seconds with the device synchronised
    on CUDA; one warm-up pass, then the least of TIMED_PASSES. The weights, their gradients, every random generator
    and the train/eval mode are left as they were."""
    from tabbench_plugins.npt.training import entry_losses

    xb, mb = table.x[:rows], table.m[:rows]
    cuda = table.device.type == "cuda"
    clock = time.perf_counter if cuda else time.process_time
    mode, best = model.training, float("inf")
    with torch.random.fork_rng(devices=[table.device.index or 0] if cuda else []):
        model.train()
        for attempt in range(TIMED_PASSES + 1):
            start = clock()
            with table.autocast():
                out = model(xb, mb)
            entry_losses(out, xb, table.cards, table.n_patches, table.patch_dim).mean().backward()
            if cuda:
                torch.cuda.synchronize(table.device)
            if attempt:
                best = min(best, clock() - start)
    for p in model.parameters():
        p.grad = None
    model.train(mode)
    return best


def calibrated_slowdown(book: SpeedBook, table, model, torch, meta, sizes, params, left_s: float | None):
    """(slowdown, "stored" or "measured") for a training pass at ``params`` over this fit's ``table``: the book's,
    else measured here (``timed_pass_seconds`` against the cost model's seconds for the same rows, the rows chosen
    as the module docstring says, ``left_s``: the training time left) and stored. On a GPU the pass is timed each
    fit and never stored: the book is the CPU's (its jobs count CPU time; a GPU job counts wall time)."""
    on_cpu = table.device.type == "cpu"
    stored = book.lookup(meta, sizes, params) if on_cpu else None
    if stored is not None:
        return stored, "stored"
    est = estimate_cpu_seconds(meta, sizes, {**params, "steps": 0})
    cores = 1.0 if table.device.type == "cpu" else max(1.0, float(params["cpus"]))  # CPU seconds: every thread's

    def slowdown(rows):
        return timed_pass_seconds(table, model, torch, rows) / (pass_seconds_at(est, params, rows) / cores)

    probe = min(est["rows"], PROBE_ROWS)
    timed, value = probe, slowdown(probe)
    for rows in SpeedBook.rows_to_time(est["rows"])[:2]:
        cost = (TIMED_PASSES + 1) * value * pass_seconds_at(est, params, rows) / cores
        if rows > probe and (left_s is None or cost < TIMING_SHARE * left_s):
            timed, value = rows, slowdown(rows)
            break
    if on_cpu:
        book.store(book.key(meta, sizes, params, timed), value)
    return value, "measured"
