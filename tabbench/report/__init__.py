"""What ``tabbench leaderboard`` adds to the rank tables: records pooled from several result folders,
significance tests, win rates, cost against quality, TabArena's Elo (arena.py), and LaTeX.

The statistics come from scipy.stats, scikit-posthocs and bencheval, the figures from matplotlib (the
``report`` extra); they are imported only inside the functions that use them, so the core stays light.
"""


def report_installed() -> bool:
    """Whether the ``report`` extra (the tests' and figures' libraries) is installed."""
    from importlib.util import find_spec

    return all(find_spec(name) for name in ("matplotlib", "scikit_posthocs", "bencheval"))
