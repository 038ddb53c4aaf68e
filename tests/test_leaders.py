"""Which pairs among the leaders are settled (tabbench.report.leaders): the leaders are the methods whose Elo interval
overlaps the first's; their pairs are Wilcoxon's signed-rank test over the datasets' ranks, Holm-corrected together.
Checked on breadth's committed tables (per-dataset ranks and Elo intervals, leaderboard.csv) and on small tables
built to separate what the test does and does not settle."""

from itertools import combinations
from pathlib import Path

import pandas as pd
import pytest

from tabbench.metrics import PRIMARY
from tabbench.report.arena import Aggregates
from tabbench.report.family import FamilyResults
from tabbench.report.section import Context

pytest.importorskip("statsmodels")

ROOT = Path(__file__).resolve().parents[1]
BREADTH = ROOT / "results" / "breadth"


def _context(tables: dict, elo: pd.DataFrame) -> Context:
    return Context(out_dir=BREADTH, sources=[], records=None, all_runs=None, selected=None, tables=tables, labels={},
                   show={}, aggregates=Aggregates(table=elo, datasets={}))


def _breadth() -> Context:
    """breadth's per-dataset means per family and its Elo table, read from its committed leaderboard.csv; the
    Context ranks them again (``Context.pooled``), and the ranks it gives are the committed ones."""
    board = pd.read_csv(BREADTH / "leaderboard.csv")
    tables = {}
    for task, (metric, higher) in PRIMARY.items():
        part = board[board["table"] == f"test_{metric}"]
        mean = part.pivot(index="method", columns="dataset", values="value")
        tables[task] = FamilyResults(task, metric, higher, mean, mean * float("nan"))
    elo = board[board["table"].isin(["elo", "elo_low", "elo_high"])].pivot(index="method", columns="table",
                                                                          values="value")
    ctx = _context(tables, elo.sort_values("elo", ascending=False))
    committed = board[board["table"].str.startswith("test_")].pivot(index="method", columns="dataset", values="rank")
    pd.testing.assert_frame_equal(ctx.pooled.sort_index(axis=1), committed.sort_index(axis=1), check_names=False)
    return ctx


def _ranked(ranks: pd.DataFrame) -> dict:
    """One regression family whose RMSEs are ``ranks`` themselves, so that its ranks are they."""
    return {"regression": FamilyResults("regression", "rmse", False, ranks, ranks * float("nan"))}


def test_the_leaders_are_the_methods_whose_elo_interval_overlaps_the_firsts_and_their_pairs_are_wilcoxon_holm():
    from scipy.stats import wilcoxon
    from statsmodels.stats.multitest import multipletests

    from tabbench.report.leaders import leader_pairs, leaders

    ctx = _breadth()
    elo = ctx.aggregates.table
    first = elo.index[0]
    overlapping = [m for m in elo.index if elo.loc[m, "elo_high"] >= elo.loc[first, "elo_low"]]
    assert leaders(ctx) == overlapping and len(overlapping) >= 3  # the first and more than one other
    assert all(elo.loc[m, "elo_high"] < elo.loc[first, "elo_low"] for m in elo.index if m not in overlapping)
    found = leader_pairs(ctx)
    assert [(p.method, p.other) for p in found] == list(combinations(overlapping, 2))
    gaps = [ctx.pooled.loc[o] - ctx.pooled.loc[m] for m, o in combinations(overlapping, 2)]
    raw = [wilcoxon(g.dropna().to_numpy()).pvalue for g in gaps]
    assert [p.p for p in found] == pytest.approx(list(multipletests(raw, method="holm")[1]))
    assert [p.ahead for p in found] == [int((g > 0).sum()) for g in gaps]
    assert [p.settled for p in found] == [p.p < 0.05 for p in found]


def test_the_sentence_names_the_settled_pairs_and_counts_the_open_ones():
    from tabbench.report.leaders import leaders_sentence

    datasets = [f"d{i}" for i in range(20)]
    # a ahead of c on every dataset; a and b alternate; b ahead of c on 15 of 20
    ranks = pd.DataFrame({d: {"a": 1.0 + (i % 2), "b": 2.0 - (i % 2) if i < 15 else 3.0, "c": 3.0 if i < 15 else 2.0}
                          for i, d in enumerate(datasets)})
    elo = pd.DataFrame({"elo": [1100, 1090, 1080, 900], "elo_low": [1050, 1040, 1030, 850],
                        "elo_high": [1150, 1140, 1130, 1000]}, index=["a", "b", "c", "z"])
    sentence = leaders_sentence(_context(_ranked(ranks), elo))
    assert sentence.startswith("The leaders: a and the methods whose Elo interval overlaps its own (b, c).")
    assert "settles a ahead of c; the other 2 of their 3 pairs are open." in sentence
    # one leader alone: nothing to test
    alone = elo.assign(elo_high=[1150, 1000, 1000, 1000])
    assert leaders_sentence(_context(_ranked(ranks), alone)) == (
        "a's Elo interval overlaps no other method's: by Elo it is ahead of every method.")
    # too few datasets for any pair to reach p < 0.05 after Holm's correction
    few = ranks[datasets[:4]]
    assert "No pair of them can be settled on 4 datasets" in leaders_sentence(_context(_ranked(few), elo))


def test_breadths_page_and_the_answer_say_which_pairs_among_the_leaders_are_settled():
    from tabbench.report.leaders import leaders_sentence

    sentence = leaders_sentence(_breadth())
    assert sentence in (BREADTH / "leaderboard.md").read_text()
    assert f"- **Which pairs among the leaders are settled** ([breadth](breadth/report.html)): {sentence}" in (
        ROOT / "results" / "README.md").read_text()
