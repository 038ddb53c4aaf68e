"""Provenance from the records (issue 60): machines, clocks, dates and re-runs per method; what a comparison of times
says when its records mix machines or clocks; how many splits a stable ranking needs (bencheval's estimate).

The facts checked are breadth's committed records, the ones the hand-written README had wrong: 50 TabNet jobs were
re-run (not 74), and the wa_churn job killed at the budget ran on the Xeon (the records finished around it say so;
the README said the EPYC)."""

import math
import statistics
from itertools import combinations
from pathlib import Path
from types import SimpleNamespace

import pytest

from tabbench.report.section import Context
from tabbench.store import Store
from tests.conftest import need

ROOT = Path(__file__).resolve().parents[1]
BREADTH = ROOT / "results" / "breadth"


def _folder_context(folder: Path) -> SimpleNamespace:
    """What the provenance block reads of a leaderboard's Context: its folders, the newest record per key, names."""
    return SimpleNamespace(sources=[folder], records=Store(folder).frame(), show={})


def _row(block: list, method: str) -> str:
    return next(row for line in block for row in line.split("\n") if row.startswith(f"| {method} |"))


def test_breadths_provenance_counts_its_reruns_and_machines_from_the_records():
    from tabbench.report.provenance import provenance_block

    block = provenance_block(_folder_context(BREADTH))
    tabnet = _row(block, "tabnet")
    assert "| 50 (reason not recorded), replacing 49 ok on Intel Xeon 46, AMD EPYC 3; 1 timeout on Intel Xeon " \
           "(inferred" in tabnet
    assert "Intel Xeon 74, AMD EPYC 6" in tabnet and "| 80 |" in tabnet
    assert "80 (reason not recorded), replacing 80 ok on AMD EPYC 79, Intel Xeon 1; trained a median 0.65 times " \
           "the steps" in _row(block, "npt")
    assert "| none |" in _row(block, "npt-budget")
    assert any(line.startswith("- **Intel Xeon**: Intel(R) Xeon(R)") and "amx_bf16" in line for line in block)


def test_a_rerun_names_its_reason_and_the_record_it_replaced(tmp_path):
    """A re-run record written by `tabbench run --force --rerun-reason` (tabbench.run.runner.rerun_marked) shows
    its reason beside what it replaced; one without the field says the reason was not recorded."""
    from tabbench.report.provenance import provenance_block
    from tabbench.run.runner import rerun_marked

    old = [r for r in Store(BREADTH).records() if r["method"] == "knn"][:3]
    store = Store(tmp_path / "breadth")
    for record in old:
        store.append(record)
    job = SimpleNamespace(key=old[0]["key"])
    again = {**old[0], "finished_at": "2030-01-01T00:00:00+00:00"}
    (_, marked), = rerun_marked([(job, again)], {r["key"]: r for r in old}, "budget points added")
    assert marked["rerun"] == {"reason": "budget points added",
                               "replaces": {"finished_at": old[0]["finished_at"], "status": "ok"}}
    store.append(marked)
    moved = {**old[1]["metrics"], "test": {m: v * 1.001 for m, v in old[1]["metrics"]["test"].items()}}
    store.append({**old[1], "metrics": moved, "finished_at": "2030-01-02T00:00:00+00:00"})  # from before the field
    row = _row(provenance_block(_folder_context(store.dir)), "knn")
    assert "| 2 (1 budget points added; 1 reason not recorded), replacing 2 ok on Intel Xeon; the same test " \
           "metrics on 1 of 2 |" in row
    assert "to 2030-01-02 |" in row


def test_force_without_a_reason_or_with_an_unknown_force_only_is_refused_before_anything_runs(capsys):
    from tabbench.cli import main

    assert main(["run", "suites/quickstart.yaml", "--force"]) != 0
    err = capsys.readouterr().err
    assert "--force replaces records that may have succeeded: say why with --rerun-reason TEXT" in err
    assert main(["run", "suites/quickstart.yaml", "--rerun-reason", "x"]) != 0
    assert "--rerun-reason is for jobs run again" in capsys.readouterr().err
    assert main(["run", "suites/quickstart.yaml", "--force-only", "wall-stopped"]) != 0
    assert "it limits --force: add --force" in capsys.readouterr().err
    assert main(["run", "suites/quickstart.yaml", "--force", "--rerun-reason", "x", "--force-only", "slow"]) != 0
    assert "slow is not one of wall-stopped, other-cpu, wall-clock" in capsys.readouterr().err


def test_a_comparison_of_times_names_the_methods_whose_records_mix_machines():
    from tabbench.report.provenance import comparison_note

    runs = Store(BREADTH).frame()
    note = " ".join(comparison_note(runs[runs["method"].isin(["tabm", "tabnet", "knn"])], {}, [BREADTH]))
    assert "tabm (Intel Xeon 44, AMD EPYC 36)" in note and "tabnet (Intel Xeon 74, AMD EPYC 6)" in note
    assert "tabm took a median 1.39 times as long on Intel Xeon as on AMD EPYC (44 jobs)" in note
    one = runs[(runs["method"] == "npt-budget")]
    assert comparison_note(one, {}, [BREADTH]) == []  # one machine, one clock: nothing to say


def test_the_splits_a_stable_ranking_needs_follow_bencheval_from_per_split_ranks():
    need("bencheval")
    from scipy.stats import kendalltau, spearmanr

    from tabbench.pooling import pooled_records
    from tabbench.report.leaderboard import select_trials
    from tabbench.report.stability import TARGET, estimate, split_errors, stability_block

    selected = select_trials(pooled_records([BREADTH], False))
    table, _, reason = estimate(selected)
    assert reason is None
    errors, _ = split_errors(selected)
    # npt failed on caravan: the worst error there, so its worst rank
    assert errors.query("method == 'npt' and dataset == 'caravan'")["metric_error"].tolist() == [math.inf]
    single = table[table["splits"] == 1]
    assert single["needed"].isna().all() and "wa_churn" in single.index
    # the fold agreement is the mean Spearman correlation of the methods' ranks over every two splits
    part = errors[errors["dataset"] == "babies"].pivot(index="split", columns="method", values="metric_error")
    pairs = [spearmanr(part.loc[a], part.loc[b]).statistic for a, b in combinations(part.index, 2)]
    rho = table.loc["babies", "agreement"]
    assert rho == pytest.approx(sum(pairs) / len(pairs))
    k = table.loc["babies", "splits"]
    assert table.loc["babies", "reliability"] == pytest.approx(k * rho / (1 + (k - 1) * rho))
    assert table.loc["babies", "needed"] == math.ceil(TARGET * (1 - rho) / (rho * (1 - TARGET)))
    # and how far another split alone reorders the methods: Kendall's tau between every two splits' orders
    taus = [kendalltau(part.loc[a], part.loc[b]).statistic for a, b in combinations(part.index, 2)]
    assert table.loc["babies", "taus"] == pytest.approx(taus) and len(taus) == 3
    every = sorted(t for found in table["taus"] for t in found)
    ctx = Context(out_dir=BREADTH, sources=[BREADTH], records=selected, all_runs=selected, selected=selected, tables={},
                  labels={}, show={})
    block = " ".join(stability_block(ctx))
    means = [sum(found) / len(found) for found in table["taus"] if found]
    assert f"a median of {statistics.median(means):.2f} over {len(means)} datasets (single pairs from " \
           f"{every[0]:.2f} to {every[-1]:.2f}, {len(every)} of them)" in block


def test_the_wrong_handwritten_provenance_is_gone_and_the_blocks_stand_in_its_place():
    breadth = (BREADTH / "README.md").read_text()
    small = (ROOT / "results" / "uci-small" / "README.md").read_text()
    assert "74, 74 and 44" not in breadth and "killed at the budget on the EPYC" not in breadth
    assert "8,280" not in small and "(2-core AMD EPYC, one core, beside" not in small
    for text in (breadth, small):
        assert "<!-- tabbench report: provenance -->" in text
    assert "<!-- tabbench report: split-stability -->" in breadth
    assert "checks that no dataset fingerprint" not in (ROOT / "suites" / "npt-budget-meta.yaml").read_text()
