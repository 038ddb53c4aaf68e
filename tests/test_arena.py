"""TabArena's aggregates in the leaderboard (tabbench.report.arena): Elo, improvability and win rate from
bencheval, on the records of a published results folder. The assertions are behaviours (the anchor, the
interval, a method that wins everything, a method that fails everywhere), not numbers copied from a run."""

import copy
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tabbench.report.leaderboard import pooled_ranks, select_trials, summarise, write_leaderboard
from tabbench.report import arena
from tabbench.report import latex
from tabbench.report.section import Context
from tabbench.report.sections import Arena
from tabbench.pooling import pooled_records
from tests.conftest import need

need("bencheval")

# the quickstart run: eight methods at fixed parameters, random_forest among them, four datasets of
# all three metric families
QUICKSTART = Path(__file__).resolve().parents[1] / "results" / "quickstart"
pytestmark = pytest.mark.skipif(not (QUICKSTART / "records").is_dir(), reason="published quickstart results absent")


@pytest.fixture(scope="module")
def selected():
    return select_trials(pooled_records([QUICKSTART]))


@pytest.fixture(scope="module")
def tables(selected):
    return summarise(selected)


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    out = tmp_path_factory.mktemp("quickstart")
    write_leaderboard(out, sources=[QUICKSTART])
    return out


def run(tables, selected):
    return arena.aggregates(tables, selected, pooled_ranks(tables).mean(axis=1))


def shown(result) -> tuple[list, list]:
    """The Arena section's Markdown and CSV rows over ``result``, the part of the Context it reads."""
    empty = pd.DataFrame()
    ctx = Context(out_dir=Path("quickstart"), sources=[], records=empty, all_runs=empty, selected=empty, tables={},
                  labels={}, show={}, aggregates=result)
    return Arena().markdown(ctx), Arena().csv_rows(ctx)


def test_the_section_is_beside_the_mean_ranks_and_says_how_many_datasets_it_rests_on(board):
    md = (board / "leaderboard.md").read_text()
    section = md.split("## TabArena's aggregates")[1].split("\n## ")[0]
    csv = pd.read_csv(board / "leaderboard.csv")
    datasets = csv.loc[csv.table.str.startswith("test_"), "dataset"].unique()
    methods = set(csv.loc[csv.table == "rank_all", "method"])
    assert md.index("## Table 1") < md.index("## TabArena's aggregates") < md.index("## AUROC")
    assert f"over all {len(datasets)} datasets" in section
    shown = {row.split(" | ")[0].strip("| ") for row in section.splitlines() if re.match(r"\| [a-z]", row)}
    assert shown - {"method"} == methods
    for table in ("elo", "improvability", "win_rate"):
        assert set(csv.loc[csv.table == table, "method"]) == methods, table
    # four datasets: fewer than the bootstrap needs to bound an Elo, so no interval, and the note says why
    assert not csv.table.isin(["elo_low", "elo_high"]).any() and "No 95% interval" in section


def test_random_forest_is_anchored_at_exactly_1000(board):
    csv = pd.read_csv(board / "leaderboard.csv")
    elo = csv[csv.table == "elo"].set_index("method")["value"]
    assert elo["random_forest"] == 1000.0
    assert elo.nunique() > 1  # the others are rated, not all put at the anchor
    assert "| random_forest | 1000 |" in (board / "leaderboard.md").read_text()


@pytest.fixture(scope="module")
def breadth():
    """breadth's 38 datasets and 13 methods: enough datasets to take subsets on either side of the minimum."""
    folder = QUICKSTART.parent / "breadth"
    if not (folder / "records").is_dir():
        pytest.skip("published breadth results absent")
    return select_trials(pooled_records([folder]))


def test_the_95_percent_interval_is_shown_from_the_minimum_of_datasets_and_holds_each_elo(breadth):
    datasets = sorted(breadth["dataset"].unique())
    at = breadth[breadth["dataset"].isin(datasets[:arena.MIN_INTERVAL_DATASETS])]
    result = run(summarise(at), at)
    t = result.table
    assert result.n_datasets == arena.MIN_INTERVAL_DATASETS
    assert t[["elo_low", "elo_high"]].notna().all().all()
    assert (t.elo_low <= t.elo).all() and (t.elo <= t.elo_high).all()
    assert (t.elo_high - t.elo_low > 0).all()  # the datasets resample into different ratings
    assert len(shown(result)[1]) == 5 * len(t)


def test_below_the_minimum_of_datasets_the_elo_has_no_interval_and_the_note_says_why(breadth):
    datasets = sorted(breadth["dataset"].unique())
    below = breadth[breadth["dataset"].isin(datasets[:arena.MIN_INTERVAL_DATASETS - 1])]
    result = run(summarise(below), below)
    assert result.table["elo"].notna().all() and result.table[["elo_low", "elo_high"]].isna().all().all()
    assert {r["table"] for r in shown(result)[1]} == {"elo", "improvability", "win_rate"}
    notes = " ".join(arena.notes(result))
    assert f"No 95% interval: resampling {arena.MIN_INTERVAL_DATASETS - 1} datasets" in notes
    assert f"| {result.table.index[0]} | {result.table['elo'].iloc[0]:.0f} | – |" in "\n".join(
        shown(result)[0])


def test_a_method_that_beats_all_others_on_every_dataset_has_win_rate_1_and_the_top_elo(tables, selected):
    champion = "tabnet"  # the weakest here: its results are replaced by ones better than every other method's
    tables = copy.deepcopy(tables)
    for t in tables.values():
        others = t.mean.drop(index=champion)
        best = others.max() if t.higher else others.min()
        assert not t.higher or (best < 1).all(), "a perfect score leaves no room to beat it"
        t.mean.loc[champion] = (best + 1) / 2 if t.higher else best / 2
    result = run(tables, selected)
    row = result.table.loc[champion]
    assert row.win_rate == 1.0 and row.improvability == 0.0
    assert result.table.index[0] == champion and row.elo > result.table.drop(index=champion).elo.max()
    assert champion in " ".join(arena.notes(result)).split("won or lost every comparison")[0]


def test_a_method_that_failed_everywhere_counts_at_the_worst_rank(tables, selected):
    failed = "mlp"  # the best here: failing everywhere must take it to the bottom
    tables = copy.deepcopy(tables)
    for t in tables.values():
        t.mean.loc[failed] = np.nan
    result = run(tables, selected)
    row = result.table.loc[failed]
    assert row.win_rate == 0.0 and row.improvability == 1.0
    assert result.table.index[-1] == failed and row.elo < result.table.drop(index=failed).elo.min()
    n = sum(len(t.datasets) for t in tables.values())
    assert sorted(result.imputed) == sorted((failed, d) for t in tables.values() for d in t.datasets)
    assert len(result.imputed) == n and f"{failed} on " in " ".join(arena.notes(result))


def test_without_random_forest_the_elo_is_unanchored_and_says_so(tables, selected):
    tables = copy.deepcopy(tables)
    for t in tables.values():
        t.mean = t.mean.drop(index="random_forest")
    result = run(tables, selected)
    assert result.anchor is None and "random_forest" not in result.table.index
    assert abs(result.table.elo.mean() - 1000) < 0.1  # bencheval centres unanchored ratings on 1000
    assert "unanchored" in " ".join(arena.notes(result))


def test_one_method_gets_a_sentence_instead_of_a_table(tables, selected):
    tables = copy.deepcopy(tables)
    for t in tables.values():
        t.mean = t.mean.loc[["knn"]]
    result = run(tables, selected)
    assert result.table is None and shown(result)[1] == []
    assert "compare methods" in " ".join(shown(result)[0])


def test_the_aggregates_regenerate_identically(tables, selected):
    pd.testing.assert_frame_equal(run(tables, selected).table, run(tables, selected).table)


def test_leaderboard_tex_has_the_aggregates_table_with_consistent_columns(tables, selected):
    result = run(tables, selected)
    labels = {d: d for t in tables.values() for d in t.datasets}
    ctx = Context(out_dir=Path("quickstart"), sources=[], records=selected, all_runs=selected, selected=selected,
                  tables=tables, labels=labels, show={m: m for m in result.table.index}, aggregates=result)
    tex = "\n".join(latex.arena(ctx))
    block = tex.split(r"\label{tab:quickstart-arena}")[1].split(r"\end{table}")[0]
    spec = re.search(r"\\begin\{tabular\}\{(\w+)\}", block)[1]
    rows = [line for line in block.splitlines() if line.strip().endswith(r"\\") and "&" in line]
    assert len(rows) == len(result.table) + 1  # header and one row per method
    assert all(len(re.split(r"(?<!\\)&", row)) == len(spec) for row in rows)
    assert re.search(r"^random\\_forest & \$(\\mathbf\{)?1000\}?\$", block, re.M)


def test_without_bencheval_the_section_says_what_to_install(tables, selected, monkeypatch):
    monkeypatch.setitem(sys.modules, "bencheval", None)  # as if the report extra were not installed
    monkeypatch.setitem(sys.modules, "bencheval.evaluator", None)
    result = run(tables, selected)
    assert result.table is None and shown(result)[1] == []
    assert "pip install 'tabbench-harness[report]'" in " ".join(shown(result)[0])
