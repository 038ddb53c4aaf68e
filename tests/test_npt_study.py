"""The NPT study apart from the harness (tabbench_plugins.npt_study): the report layer names none of NPT's methods
or this project's folders, and the study's pairwise verdict says which of NPT's pairs are settled."""

import ast

import pandas as pd
import pytest

from tests.conftest import ROOT, need

REPORT = ROOT / "tabbench" / "report"


def test_the_report_layer_names_no_npt_method_and_no_folder_of_this_project():
    """No string in tabbench/report/'s code (docstrings and help texts aside) is one of NPT's method names or a
    folder the study answers from: a second study needs no edit of the core."""
    from tabbench_plugins.npt_study.answer import ANSWER

    names = {"npt", "npt-budget", "npt-paper"} | {folder for folder, _ in ANSWER}
    found = []
    for path in sorted(REPORT.glob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                      and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                if node.value in names or any(f"/{n}/" in node.value or node.value.startswith(f"{n}/") for n in names):
                    found.append(f"{path.name}:{node.lineno}: {node.value!r}")
    assert found == [], found


class _Context:
    """What the verdict reads of a leaderboard's Context: its per-dataset ranks, names shown, models."""

    def __init__(self, ranks: pd.DataFrame, models: dict):
        self.pooled, self.show, self._models = ranks, {}, models

    def model_of(self, method):
        return self._models.get(method, method)


def test_a_pair_is_settled_only_where_wilcoxon_holm_says_so_over_the_datasets():
    """On 20 datasets an NPT row ahead of one method everywhere is settled ahead of it; one that alternates with
    another is not settled against it; the sentence names both."""
    from tabbench_plugins.npt_study.verdict import pairs, standing

    datasets = [f"d{i}" for i in range(20)]
    ranks = pd.DataFrame({d: {"npt-budget": 1.0 + (i % 2), "boost": 2.0 - (i % 2), "knn": 3.0}
                          for i, d in enumerate(datasets)})
    ctx = _Context(ranks, {"npt-budget": "npt"})
    found = {(p.method, p.other): p for p in pairs(ctx)}
    assert found[("npt-budget", "knn")].settled and found[("npt-budget", "knn")].ahead == 20
    assert not found[("npt-budget", "boost")].settled
    assert standing({}, "npt-budget", list(found.values())) == (
        "settled ahead of knn; not settled against boost")
    with pytest.raises(KeyError):
        found[("boost", "knn")]  # only NPT's pairs are tested (and corrected for)


def test_the_answer_says_how_settled_breadths_splits_leave_it_as_its_readme_block_does(tmp_path):
    """Breadth as published (17 holdout datasets with one split): the answer counts them. The same records without
    those datasets (every one left has three folds or more): the answer gives the count of datasets with the splits a stable
    ranking needs that the README's split-stability block gives, not a count of single splits."""
    import re

    need("bencheval")
    from tabbench.pooling import pooled_records
    from tabbench.report.leaderboard import select_trials
    from tabbench.report.section import Context
    from tabbench.report.stability import stability_block
    from tabbench_plugins.npt_study.answer import how_settled

    def context(selected):
        return Context(out_dir=tmp_path, sources=[], records=selected, all_runs=selected, selected=selected, tables={},
                       labels={}, show={})

    selected = select_trials(pooled_records([ROOT / "results" / "breadth"], False))
    splits = selected.groupby("dataset")[["repeat", "fold"]].nunique().prod(axis=1)
    single = sorted(splits[splits == 1].index)
    assert len(single) == 17 and "wa_churn" in single
    assert how_settled(context(selected)).startswith(
        f"- **How settled**: 17 of breadth's {len(splits)} datasets have one split each")

    several = selected[~selected["dataset"].isin(single)]
    sentence = how_settled(context(several))
    block = " ".join(stability_block(context(several)))
    enough = re.search(r"have more than one split: (\d+) of them", block).group(1)
    assert f"each of breadth's {len(splits) - 17} datasets has {splits.drop(single).min()} splits or more" in sentence
    assert f"{enough} of the {len(splits) - 17} it could estimate have the splits" in sentence
    assert "one split each" not in sentence


def test_the_answer_names_the_worst_ranks_it_imputed_for_failed_or_missing_results():
    """Breadth as published: npt failed on caravan, so npt's sentence counts one worst rank of its own and
    npt-budget's one of another method's. A method with no record on a dataset at all (TabR's wells records
    dropped) is imputed the worst rank there too, and said to be not run; with every result complete the answer
    adds nothing."""
    from types import SimpleNamespace

    from tabbench.pooling import pooled_records
    from tabbench.report.family import summarise
    from tabbench.report.leaderboard import select_trials
    from tabbench_plugins.npt_study.answer import imputed_text

    selected = select_trials(pooled_records([ROOT / "results" / "breadth"], False))

    def text(frame, method):
        return imputed_text(SimpleNamespace(tables=summarise(frame), show={}), method)

    assert text(selected, "npt") == (" Worst ranks imputed for a failed or missing result: 1 of its own (caravan: 1 "
                                     "of 1 runs failed); none of the other methods'.")
    assert text(selected, "npt-budget").endswith("none of its own; 1 of the other methods' (npt 1).")
    dropped = selected[~((selected["method"] == "tabr") & (selected["dataset"] == "wells"))]
    assert text(dropped, "npt-budget").endswith("none of its own; 2 of the other methods' (npt 1, tabr 1).")
    assert "(wells: not run)" in text(dropped[dropped["method"] != "npt"], "tabr")
    complete = selected[~selected["dataset"].isin(["caravan", "wells"])]
    assert text(complete, "npt") == ""


def test_the_regimes_sentence_reads_the_regimes_taus_against_those_of_two_random_splits():
    """matching-splits' per-table taus (its leaderboard.csv) against breadth's between two splits of one table
    (stability.split_taus, a table's mean): the sentence gives both medians and Mann-Whitney's p as scipy computes
    them, and says the regime reorders more than re-splitting only where the test tells the two apart."""
    import statistics

    from scipy.stats import mannwhitneyu

    from tabbench.pooling import pooled_records
    from tabbench.report.leaderboard import select_trials
    from tabbench.report.stability import estimate
    from tabbench_plugins.npt_study.answer import scale_sentence

    need("bencheval")
    csv = pd.read_csv(ROOT / "results" / "matching-splits" / "leaderboard.csv")
    regime = csv.loc[(csv["table"] == "regime_tau") & csv["dataset"].notna(), "value"].tolist()  # per table
    table = estimate(select_trials(pooled_records([ROOT / "results" / "breadth"], False)))[0]
    resplit = [sum(found) / len(found) for found in table["taus"] if found]  # a table's mean over its pairs
    assert len(regime) == 14 and len(resplit) == 21  # breadth's datasets of three folds
    sentence = scale_sentence(regime, resplit)
    p = mannwhitneyu(regime, resplit, alternative="two-sided").pvalue
    assert f"a median of {statistics.median(regime):.2f} (14 tables)" in sentence
    assert f"a median of {statistics.median(resplit):.2f} (a table's mean over its pairs of splits, 21 tables" \
        in sentence
    assert f"(Mann-Whitney p = {p:.2g}," in sentence
    assert ("not told apart" in sentence) == (p >= 0.05)
    assert "reorders the methods more than" in scale_sentence([t - 1 for t in resplit], resplit)


def test_the_steps_block_correlates_npts_rank_with_the_median_steps_its_records_give(tmp_path):
    """Breadth as published: per family, Spearman's ρ between npt's leaderboard rank on a dataset and the median of
    its runs' ``info.steps_run`` there, read from the records apart from the block; caravan's failed run counts as no
    step; the datasets past 500 steps and under 300 are those the records say, with their mean ranks."""
    from scipy.stats import spearmanr

    from tabbench.pooling import pooled_records
    from tabbench.report.leaderboard import make_context
    from tabbench.store import Store
    from tabbench_plugins.npt_study.steps import block

    breadth = ROOT / "results" / "breadth"
    ctx = make_context(tmp_path, [breadth], pooled_records([breadth], False))
    latest = [r for r in Store(breadth).latest().values() if r["method"] == "npt"]
    steps = {}
    for r in latest:
        steps.setdefault(r["dataset"], []).append(0 if r["status"] != "ok" else r["info"]["steps_run"])
    median = pd.Series({d: float(pd.Series(s).median()) for d, s in steps.items()})
    assert median["caravan"] == 0
    text = "\n".join(block(ctx))
    ranks = ctx.pooled.loc["npt"]
    for t in ctx.tables.values():
        rho, p = spearmanr(ranks[t.datasets], median[t.datasets])
        assert f"{rho:.2f} (p = {p:.2g}, {len(t.datasets)} datasets)" in text
    many, few = median[median >= 500].index, median[median < 300].index
    assert (f"On the {len(many)} datasets where it trained 500 steps or more its mean rank is "
            f"{ranks[many].mean():.1f} of {len(ctx.pooled)}") in text
    assert f"on the {len(few)} datasets where it trained fewer than 300, {ranks[few].mean():.1f} (last on " in text
    assert "caravan" in text.split("(last on ")[1].split(")")[0]
