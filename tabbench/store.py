"""The result store: one append-only JSON-lines file per suite, safe against crashes and concurrency.

Each record is written with a single ``write`` of one line under an exclusive ``flock`` and then
fsynced, so two runs appending to the same store never interleave, and a run killed mid-write leaves
at most a partial last line without a newline; readers ignore it and the next writer cuts it off
before appending. Records are never rewritten: a re-run (``--force``) appends, and readers keep the
newest record per job key.

Which record of a key is the newest (``newer``; one rule for one folder's files and for folders pooled,
tabbench/pooling.py): the one that finished last (``finished_at``, UTC ISO 8601, as every record is written);
where two finished in the same second, or a record has no ``finished_at``, the one read later (below). So a
batch of re-run records replaces the older ones whichever records file it is added as: a later archive, or an
earlier one while the old records still sit in the live file.

A published results folder keeps finished batches of records compressed (``tabbench archive DIR``,
``Store.archive``): the first as ``records.jsonl.gz``, later ones as ``records-2.jsonl.gz``,
``records-3.jsonl.gz``, ... (so each file of a repository stays small). Readers read the archives in that
order, then the live ``records.jsonl`` that later runs append to, so a resumed or extended run still skips
every archived job.

Beside the records, ``records/claims/`` holds which live run is running which job (tabbench/run/claims.py), so
that runs sharing the folder never run a job twice; the claims go with the records.
"""

from __future__ import annotations

import fcntl
import gzip
import json
import os
import sys
import zlib
from contextlib import contextmanager
from pathlib import Path

from tabbench.errors import TabbenchError
from tabbench.record_schema import parse_line

RECORDS_DIR = "records"
RECORDS_FILE = "records.jsonl"
ARCHIVE_FILE = "records.jsonl.gz"
#: Training state of unfinished jobs, one folder per job key (models that checkpoint: JobContext.checkpoint_dir,
#: tabbench/estimator.py).
CHECKPOINTS_DIR = "checkpoints"


class StoreError(TabbenchError):
    """A results folder cannot be written: said before anything is computed or changed."""


def unwritable(path: str | Path) -> str:
    """Why ``path``, a file or folder about to be written (existing or not), cannot be: '' where it can. Asks the
    file system (``os.access``, which a read-only mount refuses even to root) at ``path`` or the nearest folder
    that exists above it."""
    target = Path(os.path.abspath(path))
    probe = target
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe != target and not probe.is_dir():
        return f"{probe} is a file, not a folder"
    if os.access(probe, os.W_OK):
        return ""
    try:
        read_only = bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return f"{probe} is on a read-only file system" if read_only else f"{probe} is not writable (permission denied)"


class Store:
    def __init__(self, suite_dir: str | Path, checkpoints: str | Path | None = None):
        """``checkpoints``: a root for the jobs' training state, which then lives in its folder named as the
        suite's (a scratch disk, or a folder that outlives a fresh checkout); by default the suite folder's
        checkpoints/."""
        self.dir = Path(suite_dir)
        self.path = self.dir / RECORDS_DIR / RECORDS_FILE
        self.checkpoints = Path(checkpoints) / self.dir.name if checkpoints else self.dir / CHECKPOINTS_DIR
        self.skipped: dict[Path, int] = {}  # damaged lines the last read of each records file skipped

    def check_writable(self, action: str, records: bool = True) -> None:
        """A StoreError, saying what would fail (``action``) and how to go on, unless the folder and its tables, and
        with ``records`` the records file and its folder, can all be written."""
        for path in (*(self.path, self.path.parent) * records, self.dir / "leaderboard.md", self.dir):
            problem = unwritable(path)
            if problem:
                raise StoreError(f"{problem}: {action}. Make {self.dir} writable (its owner, permissions or mount), "
                                 f"or work on a writable copy of it")

    def checkpoint_dir(self, key: str) -> Path:
        """Where the job ``key`` may keep its training state until its record is ``ok``."""
        return (self.checkpoints / key).resolve()

    def remove_checkpoint(self, key: str) -> None:
        import shutil

        shutil.rmtree(self.checkpoint_dir(key), ignore_errors=True)

    @contextmanager
    def _locked(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield fd
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def append(self, record: dict) -> None:
        line = (json.dumps(record, default=_jsonable, allow_nan=True) + "\n").encode()
        with self._locked() as fd:
            size = os.fstat(fd).st_size
            if size:  # cut off a partial line left by a writer that was killed mid-write
                os.lseek(fd, size - 1, os.SEEK_SET)
                if os.read(fd, 1) != b"\n":
                    with open(self.path, "rb") as fh:
                        data = fh.read()
                    os.ftruncate(fd, data.rfind(b"\n") + 1)
            os.write(fd, line)
            os.fsync(fd)

    def archives(self) -> list[Path]:
        """The compressed record files, oldest first: records.jsonl.gz, then records-2.jsonl.gz, ..."""
        found = (self.dir / RECORDS_DIR).glob("records*.jsonl.gz")
        return sorted(found, key=lambda p: (p.name != ARCHIVE_FILE, len(p.name), p.name))

    def archive(self) -> Path | None:
        """Move the live file's complete records into the next archive (``records.jsonl.gz``, then
        ``records-2.jsonl.gz``, ...) and empty the live file, under the writers' lock, so a run appending
        meanwhile waits and loses nothing. Returns the archive written, or None when there was nothing to move.
        A reader between the archive's rename and the truncation sees each moved record twice, which
        ``latest`` (newest per key) makes harmless."""
        with self._locked() as fd:
            with open(self.path, "rb") as fh:
                data = fh.read()
            data = data[: data.rfind(b"\n") + 1]  # a partial last line from a killed writer stays out
            if not data:
                return None
            taken = {p.name for p in self.archives()}
            names = (ARCHIVE_FILE if n == 1 else f"records-{n}.jsonl.gz" for n in range(1, len(taken) + 2))
            target = self.path.parent / next(n for n in names if n not in taken)
            partial = target.with_name(target.name + ".partial")
            with gzip.GzipFile(partial, "wb", mtime=0) as out:  # mtime 0: the same records give the same bytes
                out.write(data)
            os.replace(partial, target)
            os.ftruncate(fd, 0)
            os.fsync(fd)
            return target

    def records(self) -> list[dict]:
        """Every complete, well-formed record, newest last per key: the archives', then the live file's. A damaged
        line (tabbench/record_schema.py) or a cut-short archive is said on stderr, naming the file and line, and
        skipped; ``skipped`` counts them per file."""
        out = []
        for path in [*self.archives(), self.path]:
            if path.exists():
                out += self._read(path)
        return out

    def _read(self, path: Path) -> list[dict]:
        out, problems, cut = [], [], ""
        data = path.read_bytes()
        if path.suffix == ".gz":
            data, cut = _gunzip(data)
        lines = data.split(b"\n")
        if lines[-1] and not cut and path.suffix == ".gz":  # an archive is written whole: a partial line is damage
            problems.append((len(lines), "the line is cut short"))
        # the last piece: empty, or a partial line (from a killed writer in the live file, which the next cuts off)
        for number, raw in enumerate(lines[:-1], 1):
            record, problem = parse_line(raw)
            if problem:
                problems.append((number, problem))
            else:
                out.append(record)
        self.skipped[path] = len(problems)
        _say_damage(path, problems, cut, len(out))
        return out

    def mark(self) -> int:
        """Where the live file's complete records end now: ``records_after`` reads what is appended after."""
        try:
            with open(self.path, "rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                while size:  # back over a partial last line from a killed writer, which the next one cuts off
                    start = max(0, size - 65536)
                    fh.seek(start)
                    end = fh.read(size - start).rfind(b"\n")
                    if end >= 0:
                        return start + end + 1
                    size = start
                return 0
        except FileNotFoundError:
            return 0

    def records_after(self, mark: int) -> tuple[list[dict], int]:
        """The complete records appended to the live file after ``mark``, and the mark after them: how a run
        sees, cheaply, what runs beside it recorded. The live file shorter than ``mark`` was archived meanwhile:
        it is read from its start."""
        try:
            with open(self.path, "rb") as fh:
                if fh.seek(0, os.SEEK_END) < mark:
                    mark = 0
                fh.seek(mark)
                data = fh.read()
        except FileNotFoundError:
            return [], 0
        data = data[: data.rfind(b"\n") + 1]
        out = []
        for raw in data.splitlines():
            record, problem = parse_line(raw)
            if record is not None:
                out.append(record)
            else:
                _say_damage(self.path, [(None, problem)], "", None)
        return out, mark + len(data)

    def latest(self) -> dict[str, dict]:
        """The newest record per job key (``newer``)."""
        latest: dict[str, dict] = {}
        for record in self.records():
            old = latest.get(record["key"])
            if old is None or newer(record, old):
                latest[record["key"]] = record
        return latest

    def frame(self):
        """The newest record per key as a flat pandas DataFrame (metrics as ``test_auroc`` etc.)."""
        return records_frame(self.latest().values())


def _gunzip(data: bytes) -> tuple[bytes, str]:
    """(what decompresses, "" or what is wrong): a truncated or corrupt archive gives every line before the damage,
    where gzip.open would give none of the block it fails in."""
    out, step, start = [], 1 << 16, 0
    while start < len(data):
        member = zlib.decompressobj(wbits=31)  # one gzip member; archives have one, a concatenation several
        while start < len(data) and not member.eof:  # in steps, so that a corrupt block keeps what came before it
            try:
                out.append(member.decompress(data[start:start + step]))
            except zlib.error as exc:
                return b"".join(out), f"corrupt compressed data near byte {start}: {exc}"
            start = min(start + step, len(data))
        if not member.eof:
            return b"".join(out), "the compressed data ends early (truncated)"
        start -= len(member.unused_data)  # the next member starts where this one's data ended
    return b"".join(out), ""


#: What this process has already said about damaged records files (a command reads them more than once).
_SAID: set = set()


def _say_damage(path: Path, problems: list, cut: str, kept: int | None) -> None:
    """Say on stderr, once per process, which lines of ``path`` were skipped and why, and where it is cut short."""
    if not problems and not cut:
        return
    shown = "; ".join(f"line {n}: {why}" if n else why for n, why in problems[:5])
    more = f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
    lines = []
    if problems:
        lines.append(f"{path}: {len(problems)} damaged line{'s' * (len(problems) > 1)} skipped ({shown}{more}); "
                     "every other record is read. Fix or delete those lines; a re-run recomputes any job they held.")
    if cut:
        lines.append(f"{path}: {cut}: the {kept} records before the damage are read, any "
                     "after it are lost from this file. Restore the file (e.g. `git checkout -- FILE` for a published "
                     "folder) or move it aside and re-run the missing jobs.")
    for line in lines:
        if line not in _SAID:
            _SAID.add(line)
            print(f"tabbench: {line}", file=sys.stderr)


def newer(record: dict, than: dict) -> bool:
    """Whether ``record``, read after ``than`` (a record of the same job key), replaces it: it finished no
    earlier (``finished_at``; a record without one counts as the oldest, and ties go to the later read)."""
    return str(record.get("finished_at") or "") >= str(than.get("finished_at") or "")


def records_frame(records):
    """Records as a flat pandas DataFrame: one row per record, metrics as ``test_auroc`` etc."""
    import pandas as pd

    rows = []
    for record in records:
        row = {k: v for k, v in record.items() if k != "metrics"}
        for split, values in (record.get("metrics") or {}).items():
            for name, value in values.items():
                row[f"{split}_{name}"] = value
        rows.append(row)
    return pd.DataFrame(rows)


def key_params(record) -> dict:
    """A record's params as its job key saw them (``ModelSpec.key_params``: run params at their defaults),
    as the planner wrote them into the record; a record written before it did falls back to its params.
    ``record``: a dict, or a row of ``records_frame``."""
    params = record.get("key_params")
    return dict(params if isinstance(params, dict) else record.get("params") or {})


def _jsonable(value):
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def load_records(suite_dir: str | Path):
    """Records of a suite's results folder as a DataFrame: ``tabbench.store.load_records('results/uci')``."""
    return Store(suite_dir).frame()
