"""What ``tabbench leaderboard`` adds to the rank tables: records pooled from several result folders,
significance tests, win rates, cost against quality, and LaTeX.

The statistics come from scipy.stats and scikit-posthocs and the figures from matplotlib (the
``report`` extra); they are imported only inside the functions that use them, so the core stays light.
"""
