"""Claims: which run holds which job, so that concurrent runs on one results folder share the work.

Two ``tabbench run`` of one suite into one folder (two terminals, array jobs of a batch scheduler, two slices
that overlap) would otherwise each run every pending job. Before a job runs, its run claims it: a symbolic link
``records/claims/<job key>`` whose target names the owner (``host:pid:start``, the process's start time guarding
against a reused pid). Creating a link that exists fails atomically, on a local disk as on NFS, so of two runs
exactly one gets the job; the other runs something else and, once it has nothing left, waits for the jobs others
hold: each ends with a record (seen in the store, the job is done) or with its owner dead, when the claim is taken
over and the job run here. The owner drops the claim after the job's record is written.

An owner is dead when, on this host, its pid is gone (or belongs to a later process); on another host, when its
heartbeat (``claims/owners/<owner>``, touched every ``HEARTBEAT_S`` by a live run) has not moved for ``LEASE_S``,
measured against our own heartbeat's time stamp so that both clocks are the file server's. Claims live beside the
records and go with them; a run sweeps the claims of dead owners when it starts.
"""

from __future__ import annotations

import fcntl
import os
import socket
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

CLAIMS_DIR = "claims"
OWNERS_DIR = "owners"
LOCK_FILE = ".lock"
#: How often a live run touches its heartbeat, and how long another host's silent owner counts as alive.
HEARTBEAT_S, LEASE_S = 10.0, 120.0
#: How long a run with nothing to take waits before it looks again at the jobs others hold.
POLL_S = 0.5


def _stat(pid: int) -> list:
    """The fields of /proc/<pid>/stat after the command name (state first), [] where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), '0' where it cannot be read."""
    fields = _stat(pid)
    return fields[19].decode() if len(fields) > 19 else "0"


def _pid_alive(pid: int, start: str) -> bool:
    """A killed process its parent has not reaped yet (a zombie) is dead; so is a pid reused by a later one."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    fields = _stat(pid)
    if not fields:  # no /proc: the pid alone
        return True
    return fields[0] not in (b"Z", b"X") and start in ("0", fields[19].decode())


class Claims:
    """The claims of one results folder, as held by this process."""

    def __init__(self, records_dir: Path):
        self.dir = Path(records_dir) / CLAIMS_DIR
        self.owners = self.dir / OWNERS_DIR
        self.host = socket.gethostname()
        self.me = f"{self.host}:{os.getpid()}:{_start_time(os.getpid())}"
        self._alive: dict[str, bool] = {self.me: True}  # owner -> alive, as last looked at
        self._beat: threading.Thread | None = None
        self._stopped = threading.Event()
        self.enabled = True  # False where the file system has no symbolic links (``open``)

    # -- this run's heartbeat -------------------------------------------------------------------------------

    def open(self) -> None:
        """Start this run's heartbeat (its proof of life to runs on other hosts). On a file system without
        symbolic links (FAT, exFAT, SMB without Unix extensions) the run goes on unclaimed, and says so."""
        self.owners.mkdir(parents=True, exist_ok=True)
        probe = self.dir / f".probe.{os.getpid()}"
        try:
            probe.unlink(missing_ok=True)
            os.symlink(self.me, probe)
            probe.unlink()
        except OSError as exc:
            self.enabled = False
            print(f"tabbench: {self.dir} cannot hold claims (no symbolic links: {exc.strerror}); this run claims no "
                  "job, so another run on the same results folder would run its jobs again", file=sys.stderr)
            return
        self._touch()
        self._beat = threading.Thread(target=self._beating, name="tabbench-claims-heartbeat", daemon=True)
        self._beat.start()

    def close(self) -> None:
        """Stop the heartbeat and drop every claim this run still holds (an interrupted run's unfinished jobs
        are free at once for another run)."""
        self._stopped.set()
        if not self.enabled:
            return
        for key, owner in list(self._entries()):
            if owner == self.me:
                self.release(key)
        self.forget()
        self.sweep()  # what a run that died beside this one left
        # the folders stay: another run may be claiming in them right now
        (self.owners / self.me).unlink(missing_ok=True)

    def _touch(self) -> None:
        path = self.owners / self.me
        path.touch()
        os.utime(path)  # the file system's clock, for a file that already existed too

    def _beating(self) -> None:
        while not self._stopped.wait(HEARTBEAT_S):
            try:
                self._touch()
            except OSError:
                pass

    # -- claims -----------------------------------------------------------------------------------------------

    @contextmanager
    def _locked(self):
        """Serialises the rare changes of another owner's claim (a take-over, a sweep); taking a free job and
        dropping one's own need no lock."""
        fd = os.open(self.dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def take(self, key: str) -> bool:
        """Claim the job ``key`` for this run: True when it is ours now (free, or its owner dead), False while a
        live run holds it."""
        if not self.enabled:
            return True
        path = self.dir / key
        for _ in range(3):  # a claim dropped between our try and our look: try again
            try:
                os.symlink(self.me, path)
                return True
            except FileExistsError:
                owner = self.owner(key)
            if owner is None:
                continue
            if self.alive(owner):
                return owner == self.me
            with self._locked():  # take over from a dead owner, unless another run did first
                if self.owner(key) != owner:
                    continue
                spare = self.dir / f".{key}.{os.getpid()}"
                spare.unlink(missing_ok=True)
                os.symlink(self.me, spare)
                os.replace(spare, path)  # the claim never goes missing on the way: no third run slips in
                return True
        return False

    def release(self, key: str) -> None:
        """Drop this run's claim of ``key`` (after its record is written)."""
        if self.enabled and self.owner(key) == self.me:
            (self.dir / key).unlink(missing_ok=True)

    def owner(self, key: str) -> str | None:
        try:
            return os.readlink(self.dir / key)
        except (FileNotFoundError, OSError):
            return None

    def alive(self, owner: str) -> bool:
        """Whether the run ``owner`` (``host:pid:start``) still lives: by pid on this host, by heartbeat on
        another. Remembered until ``forget`` (each wait for others' jobs asks again)."""
        if owner in self._alive:
            return self._alive[owner]
        host, _, rest = owner.partition(":")
        pid, _, start = rest.partition(":")
        if host == self.host:
            alive = pid.isdigit() and _pid_alive(int(pid), start)
        else:
            try:
                self._touch()
                alive = (self.owners / self.me).stat().st_mtime - (self.owners / owner).stat().st_mtime < LEASE_S
            except OSError:
                alive = False
        self._alive[owner] = alive
        return alive

    def forget(self) -> None:
        self._alive = {self.me: True}

    def _entries(self):
        """(key, owner) of every claim in the folder."""
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return
        for name in names:
            if name != OWNERS_DIR and not name.startswith("."):
                owner = self.owner(name)
                if owner is not None:
                    yield name, owner

    def sweep(self) -> dict[str, str]:
        """Remove the claims of dead owners (and their heartbeats); return key -> owner of the claims other live
        runs hold."""
        held = {}
        if not self.enabled:
            return held
        for key, owner in list(self._entries()):
            if owner == self.me:
                continue
            if self.alive(owner):
                held[key] = owner
                continue
            with self._locked():
                if self.owner(key) == owner:
                    (self.dir / key).unlink(missing_ok=True)
        for name in os.listdir(self.owners) if self.owners.is_dir() else ():
            if name != self.me and not self.alive(name):
                (self.owners / name).unlink(missing_ok=True)
        return held


class JobQueue:
    """The pending jobs of a run, handed to its executor one claimed job at a time.

    ``take()`` gives the next job this run now holds, or None when none can be taken now (those left are held by
    other live runs; ``wait()`` then waits a little and looks again). A job whose record another run wrote since
    this run began is dropped, never run twice. ``done``: every job is this run's or recorded elsewhere. Iterating
    gives every job this run gets, waiting where needed: what a sequential executor wants. The runner calls
    ``finished(job)`` once the job's record is written.
    """

    def __init__(self, jobs: list, store, claims: Claims, mark: int, stop=None):
        """``mark``: where the store's live file ended when the run read which jobs are done (``Store.mark``)."""
        self.store, self.claims, self.mark, self.stop = store, claims, mark, stop
        self._todo = list(reversed(jobs))  # pop() takes them in the run's order
        self._elsewhere: list = []  # held by another live run when last looked at
        self._recorded: set = set()  # keys recorded since the mark
        self.recorded_elsewhere = 0

    @property
    def done(self) -> bool:
        return not self._todo and not self._elsewhere

    def _recorded_since_mark(self, key: str) -> bool:
        records, self.mark = self.store.records_after(self.mark)
        self._recorded.update(r["key"] for r in records)
        return key in self._recorded

    def take(self):
        while self._todo:
            job = self._todo.pop()
            if not self.claims.take(job.key):
                self._elsewhere.append(job)
            elif self._recorded_since_mark(job.key):  # its owner finished it and let go before we looked
                self.claims.release(job.key)
                self.recorded_elsewhere += 1
            else:
                return job
        return None

    def wait(self) -> None:
        """Wait a little, then put the jobs others held back in line: those free again or whose owner died are
        taken next, those recorded meanwhile are dropped."""
        deadline = time.monotonic() + POLL_S
        while time.monotonic() < deadline:
            if self.stop is not None:
                self.stop.check()
            time.sleep(0.05)
        self.claims.forget()
        self._todo.extend(reversed(self._elsewhere))
        self._elsewhere = []

    def __iter__(self):
        while not self.done:
            job = self.take()
            if job is not None:
                yield job
            elif not self.done:
                self.wait()

    def finished(self, job) -> None:
        self.claims.release(job.key)
