"""What a kind of machine measured once, kept for every later job on it: so that how much a job trains is decided
from a speed that does not depend on the load at the moment the job starts.

A ``MachineBook`` is one JSON file per kind of machine (tabbench.measure.fingerprint's ``id``) in a folder of the
data cache (--cache, $TABBENCH_CACHE or the user cache dir): key (a JSON text naming what was measured: a pass's
or an epoch's shape, with torch's version) -> entry (a dict, with ``measured_at``). Two books are kept this way:
NPT's speed calibration (tabbench_plugins/npt/cost.py ``SpeedBook``, folder ``npt-speed/``) and the epoch times
of the models whose time budget decides their epochs (``EPOCH_TIMES``, read and written by
tabbench.estimator's ``TrainingClock.plan_epochs``). Delete a folder to measure again, say after a BIOS or kernel
change that the fingerprint does not see.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from datetime import datetime, timezone
from pathlib import Path

#: The folder of the data cache that keeps the epoch times of clock-bound models.
EPOCH_TIMES = "epoch-times"


@functools.lru_cache(maxsize=1)
def machine_id() -> str:
    """This machine's kind (tabbench.measure.fingerprint's ``id``), read once a process."""
    from tabbench.measure import fingerprint

    return fingerprint()["id"]


@functools.lru_cache(maxsize=1)
def torch_version() -> str | None:
    """The installed torch's version (a key's part: a new torch may run a pass at another speed), None without."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return None


class MachineBook:
    """One book of measurements (``name``: its folder in the data cache, or ``folder`` itself) for this machine."""

    def __init__(self, name: str, folder: Path | None = None):
        from tabbench.data.cache import DataPaths

        self.folder = Path(folder) if folder is not None else DataPaths.from_env().cache / name
        self.machine = machine_id()
        self.path = self.folder / f"{self.machine}.json"

    def read(self) -> dict:
        """Every entry (key -> entry); empty where nothing was measured or the file cannot be read."""
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def get(self, key: str) -> dict | None:
        return self.read().get(key)

    def put(self, key: str, entry: dict) -> None:
        """Add one measurement, under a lock so that jobs measuring at once on the same machine both keep theirs;
        written whole and renamed into place, so a reader never sees half a file. A folder that cannot be written
        (a read-only cache) keeps nothing: the job goes on with what it measured."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(self.folder / f"{self.machine}.lock", "a") as lock:
                with _locked(lock):
                    book = self.read()
                    book[key] = {**entry, "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
                    partial = self.path.with_suffix(f".{os.getpid()}.part")
                    partial.write_text(json.dumps(book, indent=1, sort_keys=True))
                    os.replace(partial, self.path)
        except OSError:
            pass


@contextlib.contextmanager
def _locked(handle):
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock (a lost update only means a later job measures again)
        yield
        return
    fcntl.flock(handle, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
