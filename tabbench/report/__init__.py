"""Reports made from stored records alone (no model registry, nothing re-run): the leaderboard
(``leaderboard``: a list of sections (``section``, ``sections``) over one context: rank tables from the typed
per-family results (``family``), and beside them significance tests, win rates, TabArena's Elo (``arena``), cost
against quality, budget curves, LaTeX (``latex``) and an HTML page (``html``)), written with one set of table and
number formats (``format``: its ``Cell`` writes every mean ± SE alike in Markdown, LaTeX and HTML). Records
pooled from several result folders come from ``tabbench.pooling``; the site over every results folder from
``site``. The built-in sections and README blocks are registered, and a run's leaderboard written, by the core's
report plugin (``plugin``), through the hooks a plugin's use.

The statistics come from scipy.stats, scikit-posthocs and bencheval, the figures from matplotlib (the
``report`` extra); they are imported only inside the functions that use them, so the core stays light.
"""

from contextlib import contextmanager


@contextmanager
def folder_locked(folder):
    """An exclusive ``flock`` on ``folder`` (made if absent) while the block runs: the one way two processes
    that regenerate the same folder's tables and figures (two runs of one suite ending together, two probes on
    two cores) take turns, so that neither reads a file the other is half-way through writing."""
    import fcntl
    import os
    from pathlib import Path

    Path(folder).mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def report_installed() -> bool:
    """Whether the ``report`` extra (the tests' and figures' libraries) is installed."""
    from importlib.util import find_spec

    return all(find_spec(name) for name in ("matplotlib", "scikit_posthocs", "bencheval"))
