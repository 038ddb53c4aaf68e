"""The README block ``npt-at-budget`` (plugins/tabbench_plugins/npt_study/at_budget.py), on small results folders made of
results/breadth's real records: ten of its datasets (seven binary, one multi-class, two regression; 30 splits) and
five of its methods with ``npt``.

The ``npt-budget`` records are constructed, so that each test decides which splits they cover: TabM's real records
on the same splits, their budget points taken off, relabelled ``npt-budget`` (model npt), each carrying the ``info``
of npt's record on its split (its ``steps_run``) and a size rung (``info.size_rung``) named in turn from NPT's
ladder. Every metric is a real one; only the labels are constructed. The budget points are constructed as
tests/test_budget_rerun.py constructs them (no state before a job's fit ended, its final metrics from then on).

* until npt-budget covers every split npt has, the block gives the counts and nothing else;
* complete, its numbers are the leaderboard's (leaderboard.csv's Elo and mean ranks) and the significance tests'
  (Friedman and Nemenyi over all datasets, tabbench.report.significance);
* its head-to-head counts are what the records give, split by split;
* with budget points, its Elo at each point and where it is reached are elo_budget's.
"""

from __future__ import annotations

import copy
import re
import statistics

import pandas as pd
import pytest

from tabbench.metrics import PRIMARY
from tabbench.report.leaderboard import write
from tabbench.store import Store
from tests.conftest import ROOT, need
from tests.test_budget_rerun import without_points

need("bencheval")

BREADTH = ROOT / "results" / "breadth"
DATASETS = ("attrition", "cells", "credit_card", "hmda", "orange_juice", "titanic", "swiss_labor",  # binary
            "hawks",  # multi-class
            "babies", "biomass")  # regression
METHODS = ("npt", "catboost", "knn", "random_forest", "mlp", "realmlp")
RUNGS = ("e8-l2", "e16-l4", "e32-l4")

pytestmark = pytest.mark.skipif(not (BREADTH / "records").is_dir(), reason="results/breadth's records absent")


@pytest.fixture(scope="module")
def breadth():
    return [r for r in Store(BREADTH).latest().values() if r["dataset"] in DATASETS]


def split(record) -> tuple:
    return record["dataset"], record["repeat"], record["fold"]


def as_npt_budget(breadth) -> list:
    """TabM's records relabelled npt-budget, with npt's info on the same split and a size rung in turn."""
    npt = {split(r): r for r in breadth if r["method"] == "npt"}
    out = []
    for i, record in enumerate(sorted((r for r in breadth if r["method"] == "tabm"), key=split)):
        info = {**npt[split(record)]["info"], "size_rung": RUNGS[i % len(RUNGS)]}
        out.append({**copy.deepcopy(without_points(record)), "method": "npt-budget", "model": "npt",
                    "key": record["key"] + "-budget", "info": info})
    return out


def folder(tmp_path, records: list):
    store = Store(tmp_path / "breadth")
    for record in records:
        store.append(record)
    return write(store.dir)


def block(ctx) -> list:
    """The block's lines as a README holds them (a table's rows each a line)."""
    from tabbench_plugins.npt_study.blocks import BLOCKS as README_BLOCKS

    return "\n".join(README_BLOCKS["npt-at-budget"](ctx)).split("\n")


BUDGET_TABLE = "Elo (95% interval) at each budget point"


def rows(lines: list, first: str, budget: bool = False) -> list:
    """The cells of each Markdown table row whose first cell is ``first``: in the Elo against budget table
    (``budget``), else before it."""
    at = next((i for i, line in enumerate(lines) if line.startswith(BUDGET_TABLE)), len(lines))
    part = lines[at:] if budget else lines[:at]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in part if line.startswith(f"| {first} |")]


def row(lines: list, first: str, budget: bool = False) -> list:
    found = rows(lines, first, budget)
    assert len(found) == 1, (first, found)
    return found[0]


@pytest.fixture(scope="module")
def complete(breadth, tmp_path_factory):
    """Both NPTs on every split of DATASETS, no record carrying budget points."""
    budget = as_npt_budget(breadth)
    ctx = folder(tmp_path_factory.mktemp("complete"),
                 [without_points(r) for r in breadth if r["method"] in METHODS] + budget)
    return ctx, budget, block(ctx)


def test_until_npt_budget_covers_every_split_of_npt_the_block_gives_only_the_counts(breadth, tmp_path):
    from tabbench.report.site import fill_blocks

    budget = as_npt_budget(breadth)
    kept = [r for r in budget if r["dataset"] not in ("cells", "babies")]  # two datasets not run yet
    npt_splits = {split(r) for r in breadth if r["method"] == "npt"}
    short = folder(tmp_path / "two-datasets-short", [r for r in breadth if r["method"] in METHODS] + kept)
    lines = block(short)
    assert lines == [f"npt-budget: {len({split(r) for r in kept})} of {len(npt_splits)} splits so far; the comparison "
                     "waits for the rest."]
    assert len({split(r) for r in kept}) < len(npt_splits) == 30
    # one split short is short; a split npt-budget ran where npt has none does not make up for one it lacks
    ctx = folder(tmp_path / "one-short", [r for r in breadth if r["method"] in METHODS] + budget[1:])
    assert block(ctx) == ["npt-budget: 29 of 30 splits so far; the comparison waits for the rest."]
    without = [r for r in breadth if r["method"] in METHODS and not (r["method"] == "npt" and r["dataset"] == "hmda")]
    ctx = folder(tmp_path / "elsewhere", without + [r for r in budget if r["dataset"] != "cells"])
    assert block(ctx) == ["npt-budget: 24 of 27 splits so far; the comparison waits for the rest."]
    # as a README's generated block: the same line between the markers, the README's text around it kept
    readme = short.out_dir / "README.md"
    readme.write_text("# x\n\nbefore\n<!-- tabbench report: npt-at-budget -->\nold\n"
                      "<!-- end of tabbench report: npt-at-budget -->\nafter\n")
    fill_blocks(readme, short)
    assert readme.read_text() == ("# x\n\nbefore\n<!-- tabbench report: npt-at-budget -->\n" + lines[0] + "\n"
                                  "<!-- end of tabbench report: npt-at-budget -->\nafter\n")


def test_a_folder_without_npt_is_an_error_naming_its_readme(breadth, tmp_path):
    from tabbench.report.site import SiteError

    ctx = folder(tmp_path, [r for r in breadth if r["method"] in ("knn", "mlp")])
    with pytest.raises(SiteError, match=re.escape(f"{ctx.out_dir / 'README.md'}: the npt-at-budget block compares")):
        block(ctx)


def test_complete_its_numbers_are_the_leaderboards_and_the_significance_tests(breadth, complete):
    from tabbench.report.significance import significance

    ctx, budget, lines = complete
    assert lines[0] == "npt-budget: 30 of 30 splits, every split npt has. Over all 10 datasets and 7 methods:"
    board = pd.read_csv(ctx.out_dir / "leaderboard.csv")
    elo, low, high, rank = (board[board["table"] == t].set_index("method")["value"]
                            for t in ("elo", "elo_low", "elo_high", "rank_all"))
    tests = significance("all", ctx.pooled, None)
    assert tests.friedman[1] < 0.05 and tests.cd is not None  # the case where Nemenyi's pairs are claimed
    mean = tests.mean_ranks
    for method in ("npt", "npt-budget"):
        cells = row(lines, method)
        assert cells[1] == f"{elo[method]:.0f} ({low[method]:.0f} to {high[method]:.0f})"
        assert cells[2] == f"{int((elo > elo[method]).sum()) + 1} of 7"
        assert cells[3] == f"{rank[method]:.2f}"
        assert cells[4] == f"{int((rank < rank[method]).sum()) + 1} of 7"
        ahead = [m for m in mean.index if mean[method] - mean[m] > tests.cd]
        behind = [m for m in mean.index if mean[m] - mean[method] > tests.cd]
        assert cells[5] == (", ".join(ahead) or "none") and cells[6] == (", ".join(behind) or "none")
        steps = [r["info"]["steps_run"] for r in (budget if method == "npt-budget" else
                                                  [r for r in breadth if r["method"] == "npt"])]
        assert cells[7] == f"{statistics.median(steps):,g}"
    assert any(row(lines, m)[c] != "none" for m in ("npt", "npt-budget") for c in (5, 6))  # some pair separated
    assert row(lines, "npt")[8] == "–"
    assert row(lines, "npt-budget")[8] == ", ".join(f"{rung} ×10" for rung in sorted(RUNGS))
    gap = abs(mean["npt"] - mean["npt-budget"])
    assert (f"mean ranks {mean['npt']:.2f} (npt) and {mean['npt-budget']:.2f} (npt-budget), {gap:.2f} apart; "
            f"critical difference {tests.cd:.2f}: {'separated' if gap > tests.cd else 'not separated'}.") in \
        "\n".join(lines)


def test_the_head_to_head_counts_are_the_records(breadth, complete):
    from tabbench_plugins.npt_study.at_budget import paired_test

    _, budget, lines = complete
    npt = {split(r): r for r in breadth if r["method"] == "npt"}
    counted = {"AUROC": [0, 0, 0], "Accuracy": [0, 0, 0], "RMSE": [0, 0, 0]}
    for record in budget:
        metric, higher = PRIMARY[record["task"]]
        ours, theirs = record["metrics"]["test"][metric], npt[split(record)]["metrics"]["test"][metric]
        title = {"auroc": "AUROC", "accuracy": "Accuracy", "rmse": "RMSE"}[metric]
        counted[title][0 if (ours > theirs if higher else ours < theirs) else 1 if ours != theirs else 2] += 1
    assert counted["AUROC"][0] and counted["AUROC"][1]  # both win somewhere: a count that can go wrong either way
    for title, (better, worse, equal) in counted.items():
        assert row(lines, title)[1:6] == [str(better + worse + equal), str(better), str(worse), str(equal), "0"]
    total = [sum(c[i] for c in counted.values()) for i in range(3)]
    assert row(lines, "All families")[1:5] == [str(sum(total)), *map(str, total)]
    # the paired test: the family's Wilcoxon signed-rank p over its datasets, where there are enough of them
    ctx = complete[0]
    n, p, _ = paired_test(ctx.tables["binary"])
    assert n == 7 and row(lines, "AUROC")[6] == f"p = {p:.3g} over 7 datasets"
    assert row(lines, "RMSE")[6] == "not run: 2 datasets, at least 6 needed to reject at α = 0.05"
    assert lines[-1] == "Elo against budget: the records carry no budget points yet."


def test_with_budget_points_the_elo_at_each_point_is_elo_budgets(breadth, tmp_path):
    from tabbench.report.elo_budget import elo_against_budget
    from tabbench.report.family import dataset_splits
    from tests.test_budget_rerun import POINTS, rerun

    records = [rerun(r) for r in [r for r in breadth if r["method"] in METHODS] + as_npt_budget(breadth)]
    ctx = folder(tmp_path / "all", records)
    lines = block(ctx)
    result = elo_against_budget(ctx.selected, dataset_splits(ctx.selected, ctx.splits))
    elo, low, high, reached = result.at("elo"), result.at("elo_low"), result.at("elo_high"), result.reached()
    for method in ("npt", "npt-budget"):
        cells = row(lines, method, budget=True)[1:]
        assert cells[:len(POINTS)] == [f"{elo.loc[method, p]:.0f} ({low.loc[method, p]:.0f} to "
                                       f"{high.loc[method, p]:.0f})" for p in POINTS]
        assert cells[len(POINTS):] == [f"{reached.loc[method, 'reached_at_s']:g} s",
                                       f"{reached.loc[method, 'change']:+.0f}",
                                       "yes" if reached.loc[method, "rising"] else "no"]
    # npt's fits all ran past 240 s: no state before its last point, its final Elo reached only there
    assert row(lines, "npt", budget=True)[-3] == "450 s"
    # npt's records as breadth held them before its re-runs, without points: it is left out of Elo against budget,
    # and said so
    old = [without_points(r) for r in breadth if r["method"] == "npt"]
    ctx = folder(tmp_path / "old-npt", old + [rerun(r) for r in as_npt_budget(breadth)])
    lines = block(ctx)
    assert lines[-1] == ("npt is left out of Elo against budget: 30 of its 30 runs carry no budget points and their "
                         "fits ran past a point, so their state there is unknown.")
    assert not [line for line in lines if line.startswith(BUDGET_TABLE)]  # npt-budget alone: nothing to rate it by
