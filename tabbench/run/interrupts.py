"""Ctrl-C during a run: stop at the next safe point, keep every finished record, say how to resume.

Why the run installs a SIGINT handler of its own instead of relying on Python's KeyboardInterrupt:

- A shell starts a background job (``tabbench run ... &`` in a script, a test suite run in the
  background) with SIGINT ignored, and Python then installs no handler at all: Ctrl-C or
  ``kill -INT`` did nothing and the run went on to exit 0 (issue 14).
- A KeyboardInterrupt raised at an arbitrary point of the driver can land inside Ray (half way
  through ``ray.init`` or a task cancellation) or between receiving a finished job's result and
  writing its record, which would lose that record.

So the first SIGINT is always recorded in ``StopRequest.requested``. Inside ``deferred()`` (Ray
start, the job loop, Ray shutdown) it raises nothing: the run checks the request at its safe
points, at least once a second. Elsewhere (loading data, writing the leaderboard) it raises
KeyboardInterrupt at once. A second SIGINT always raises at once.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager

#: Test hook: with ``TABBENCH_PAUSE_AT=<phase>`` the driver writes ``tabbench: pausing at <phase>``
#: to stderr when it first reaches that phase and waits there (at most PAUSE_S) for SIGINT, so a
#: test can interrupt a run at a chosen phase. Phases: ``load``, ``ray-start``, ``record`` (a
#: finished job's result in hand, not yet written) and ``leaderboard``.
PAUSE_ENV = "TABBENCH_PAUSE_AT"
PAUSE_S = 120


class StopRequest:
    """The SIGINT handler of one run, installed while the ``with`` block runs (main thread only;
    elsewhere Python allows no handler and the request stays unset)."""

    def __init__(self):
        self.requested = False
        self._deferring = 0
        self._previous = None
        self._paused = set()

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _on_sigint(self, signum, frame):
        again, self.requested = self.requested, True
        if again or not self._deferring:
            raise KeyboardInterrupt
        # os.write, not print: the handler may run while the main thread is inside a print to stderr
        os.write(2, b"\ntabbench: stopping at the next safe point (Ctrl-C again to stop at once)\n")

    @contextmanager
    def deferred(self):
        """A block that a first SIGINT must not break into; the run calls ``check()`` inside and after it."""
        self._deferring += 1
        try:
            yield self
        finally:
            self._deferring -= 1

    def check(self) -> None:
        """Raise KeyboardInterrupt if a SIGINT has arrived (even one that Ray or a finaliser swallowed)."""
        if self.requested:
            raise KeyboardInterrupt

    def pause_point(self, phase: str) -> None:
        """The test hook described at PAUSE_ENV; does nothing unless that variable names ``phase``."""
        if os.environ.get(PAUSE_ENV) != phase or phase in self._paused:
            return
        self._paused.add(phase)
        os.write(2, f"tabbench: pausing at {phase}\n".encode())
        deadline = time.monotonic() + PAUSE_S
        while not self.requested and time.monotonic() < deadline:
            time.sleep(0.05)
