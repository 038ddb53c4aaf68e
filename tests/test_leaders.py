"""Which pairs among the leaders are settled (tabbench.report.leaders): the leaders are the method first by mean rank
and those Nemenyi's critical difference does not separate from it; their pairs are Wilcoxon's signed-rank test over
the datasets' ranks, Holm-corrected together. Checked on breadth's committed tables (per-dataset means, ranked again,
leaderboard.csv) and on small tables built to separate what the test does and does not settle."""

from itertools import combinations
from pathlib import Path

import pandas as pd
import pytest

from tabbench.metrics import PRIMARY
from tabbench.report.family import FamilyResults
from tabbench.report.section import Context
from tests.conftest import need

need("statsmodels")

ROOT = Path(__file__).resolve().parents[1]
BREADTH = ROOT / "results" / "breadth"


def _context(tables: dict) -> Context:
    return Context(out_dir=BREADTH, sources=[], records=None, all_runs=None, selected=None, tables=tables, labels={},
                   show={})


def _breadth() -> Context:
    """breadth's per-dataset means per family, read from its committed leaderboard.csv; the Context ranks them again
    (``Context.pooled``), and the ranks it gives are the committed ones."""
    board = pd.read_csv(BREADTH / "leaderboard.csv")
    tables = {}
    for task, (metric, higher) in PRIMARY.items():
        part = board[board["table"] == f"test_{metric}"]
        mean = part.pivot(index="method", columns="dataset", values="value")
        tables[task] = FamilyResults(task, metric, higher, mean, mean * float("nan"))
    ctx = _context(tables)
    committed = board[board["table"].str.startswith("test_")].pivot(index="method", columns="dataset", values="rank")
    pd.testing.assert_frame_equal(ctx.pooled.sort_index(axis=1), committed.sort_index(axis=1), check_names=False)
    return ctx


def _ranked(ranks: pd.DataFrame) -> dict:
    """One regression family whose RMSEs are ``ranks`` themselves, so that its ranks are they."""
    return {"regression": FamilyResults("regression", "rmse", False, ranks, ranks * float("nan"))}


def test_the_leaders_are_those_nemenyi_does_not_separate_from_the_first_and_their_pairs_are_wilcoxon_holm():
    """breadth: the leaders are the methods whose mean rank over all datasets lies within Nemenyi's critical
    difference (Demšar's formula, computed here) of the best; their pairs are scipy's signed-rank test on the
    committed per-dataset ranks, Holm-corrected by statsmodels."""
    import math

    from scipy.stats import studentized_range, wilcoxon
    from statsmodels.stats.multitest import multipletests

    from tabbench.report.leaders import leader_pairs, leaders

    ctx = _breadth()
    ranks = ctx.pooled
    k, n = ranks.shape
    cd = studentized_range.ppf(0.95, k, math.inf) / math.sqrt(2) * math.sqrt(k * (k + 1) / (6 * n))
    mean = ranks.mean(axis=1).sort_values()
    expected = list(mean[mean - mean.iloc[0] <= cd].index)
    found_leaders, how = leaders(ctx)
    assert found_leaders == expected and 3 <= len(expected) < k
    assert f"({cd:.2f} ranks)" in how
    found = leader_pairs(ctx)
    assert [(p.method, p.other) for p in found] == list(combinations(expected, 2))
    gaps = [ranks.loc[o] - ranks.loc[m] for m, o in combinations(expected, 2)]
    raw = [wilcoxon(g.to_numpy()).pvalue for g in gaps]
    assert [p.p for p in found] == pytest.approx(list(multipletests(raw, method="holm")[1]))
    assert [p.ahead for p in found] == [int((g > 0).sum()) for g in gaps]
    assert [p.settled for p in found] == [p.p < 0.05 for p in found]


def test_the_sentence_names_the_settled_pairs_and_counts_the_open_ones():
    from tabbench.report.leaders import leaders_sentence

    datasets = [f"d{i}" for i in range(20)]
    # a and b alternate first and second, c third everywhere (1.5 ranks behind them, within the critical difference of
    # 1.69 for 6 methods on 20 datasets); x, y and z trail
    ranks = pd.DataFrame({d: {"a": 1.0 + (i % 2), "b": 2.0 - (i % 2), "c": 3.0, "x": 4.0, "y": 5.0, "z": 6.0}
                          for i, d in enumerate(datasets)})
    sentence = leaders_sentence(_context(_ranked(ranks)))
    assert sentence.startswith("The leaders: a, first by mean rank over the 20 datasets, and the methods within "
                               "Nemenyi's critical difference of it (1.69 ranks): b, c.")
    assert sentence.endswith("settles a ahead of c, b ahead of c; the other 1 of their 3 pairs are open.")
    # a, b and c alone: the critical difference for 3 methods (0.74 ranks) puts c apart; a and b lead, their pair open
    apart = leaders_sentence(_context(_ranked(ranks.loc[["a", "b", "c"]])))
    assert apart.startswith("The leaders: a, first by mean rank over the 20 datasets, and the methods within "
                            "Nemenyi's critical difference of it (0.74 ranks): b.")
    assert apart.endswith("settles none of their 1 pairs.")
    # too few datasets for any pair to reach p < 0.05 after Holm's correction
    few = ranks[datasets[:6]]
    assert "No pair of them can be settled on 6 datasets" in leaders_sentence(_context(_ranked(few)))


def test_breadths_page_and_the_answer_say_which_pairs_among_the_leaders_are_settled():
    from tabbench.report.leaders import leaders_sentence

    sentence = leaders_sentence(_breadth())
    assert sentence in (BREADTH / "leaderboard.md").read_text()
    assert f"- **Which pairs among the leaders are settled** ([breadth](breadth/report.html)): {sentence}" in (
        ROOT / "results" / "README.md").read_text()
