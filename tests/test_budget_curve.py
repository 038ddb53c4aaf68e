"""Budget curves: the metrics a run recorded at shorter step budgets, as a table and a figure."""

import pandas as pd
import pytest

from tabbench.report.leaderboard import write_leaderboard
from tabbench.metrics import PRIMARY
from tabbench.report.budget import budget_figure, budget_table, versus_paper
from tabbench.store import Store, records_frame
from tests.conftest import need

need("matplotlib")


def _record(fold, curve, final):
    return {"key": f"npt-yacht-{fold}", "method": "npt", "model": "npt", "dataset": "yacht", "task": "regression",
            "fold": fold, "repeat": 0, "seed": 0, "trial": None, "status": "ok", "params": {}, "subset": None,
            "fit_seconds": 10.0, "predict_seconds": 0.1, "job_rss_bytes": 2**20, "info": {"steps": 1000},
            "metrics": {"val": {"mse": 1.0}, "test": {"rmse": final}},
            "budget_curve": [{"steps": s, "best_step": s, "val": {"mse": 1.0}, "test": {"rmse": v}} for s, v in curve]}


RECORDS = [_record(0, [(100, 9.0), (300, 5.0)], 2.0), _record(1, [(100, 7.0), (300, 3.0)], 4.0)]


def test_budget_table_averages_each_budget_over_folds_with_the_full_run_last():
    table = budget_table(records_frame(RECORDS), PRIMARY).set_index("steps")
    assert list(table.index) == [100, 300, 1000]
    assert list(table["mean"]) == [8.0, 4.0, 3.0]  # (9+7)/2, (5+3)/2, (2+4)/2
    assert table.loc[100, "se"] == pytest.approx(1.0)  # std 1.414 / sqrt(2)
    assert set(table["runs"]) == {2}


def test_versus_paper_judges_the_difference_against_two_combined_standard_errors():
    # band: 2 x sqrt(0.10^2 + 0.15^2) = 0.361
    assert versus_paper(1.6, 0.10, (1.27, 0.15)) == "+0.33 (within 2 combined SE)"  # 0.33 <= 0.361
    assert versus_paper(1.65, 0.10, (1.27, 0.15)) == "+0.38 (outside 2 combined SE)"  # 0.38 > 0.361
    # the published SE alone (0.30) would have called 0.33 outside: ours counts too
    assert versus_paper(0.99, 0.01, (0.997, None)) == "-0.007"  # no SE published: the difference only
    assert versus_paper(1.5, float("nan"), (1.27, 0.15)) == "+0.23"  # one run, no SE of ours: not judged
    assert versus_paper(3.0, 0.1, None) == ""


def test_the_report_draws_the_curves_next_to_the_published_number(tmp_path):
    store = Store(tmp_path / "suite")
    for record in RECORDS:
        store.append(record)
    published = tmp_path / "paper.yaml"
    published.write_text("name: the paper\nmetrics:\n  yacht:\n    npt: [1.27, 0.15]\nranks: {}\n")
    md = write_leaderboard(store.dir, published, report=True).read_text()
    # 4.0 - 1.27 = +2.73, outside 2 x sqrt(1.0^2 + 0.15^2) = 2.02; 3.0 at the full length: +1.73, within it
    assert "## Budget curves" in md and "| npt | yacht | 300 | 4.000 ± 1.000 | 2 | +2.73 (outside 2 combined SE) |" in md
    assert "| npt | yacht | 1,000 | 3.000 ± 1.000 | 2 | +1.73 (within 2 combined SE) |" in md
    assert (store.dir / "budget-curves.svg").exists() and (store.dir / "budget-curves.png").exists()
    svg = (store.dir / "budget-curves.svg").read_text()
    assert "1.27" in svg  # the published number's line is labelled
    csv = pd.read_csv(store.dir / "budget-curves.csv")
    assert list(csv["steps"]) == [100, 300, 1000]


def test_a_curve_of_fewer_folds_than_the_dataset_has_shows_its_fold_count(tmp_path):
    store = Store(tmp_path / "suite")
    for record in RECORDS:  # npt: folds 0-1
        store.append(record)
    for fold in range(5):  # another method ran five folds of yacht: the dataset has at least five
        store.append({**RECORDS[0], "key": f"knn-{fold}", "method": "knn", "model": "knn", "fold": fold,
                      "budget_curve": None, "info": {}})
    md = write_leaderboard(store.dir, report=True).read_text()
    assert "| npt | yacht | 300 | 4.000 ± 1.000 (2 of 5 folds) | 2 |  |" in md


def test_a_method_has_one_colour_in_every_panel():
    # "b" is the only method on boston and the second on yacht: matplotlib's cycle alone would colour
    # it differently in the two panels
    frames = []
    for method, dataset in (("a", "yacht"), ("b", "yacht"), ("b", "boston")):
        frame = budget_table(records_frame(RECORDS), PRIMARY)
        frames.append(frame.assign(method=method, dataset=dataset))
    fig = budget_figure(pd.concat(frames))
    colours = {}
    for ax in fig.axes:
        for container in ax.containers:
            method = container.get_label().split(" ")[0]
            colours.setdefault(method, set()).add(container.lines[0].get_color())
    assert colours.keys() == {"a", "b"} and all(len(c) == 1 for c in colours.values())
    assert colours["a"] != colours["b"]
