"""Budget curves: the metrics a run recorded at shorter step budgets, as a table and a figure."""

import pandas as pd
import pytest

from tabbench.report.leaderboard import write_leaderboard
from tabbench.metrics import PRIMARY
from tabbench.report.budget import budget_figure, budget_table, versus_paper
from tabbench.store import Store, records_frame

pytest.importorskip("matplotlib")


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


def test_versus_paper_says_whether_the_mean_is_within_two_published_standard_errors():
    assert versus_paper(1.5, (1.27, 0.15)) == "+0.23 (within ± 2 SE)"  # 0.23 <= 0.30
    assert versus_paper(0.9, (1.27, 0.15)) == "-0.37 (outside ± 2 SE)"  # 0.37 > 0.30
    assert versus_paper(0.99, (0.997, None)) == "-0.007"  # no SE published: the difference only
    assert versus_paper(3.0, None) == ""


def test_the_report_draws_the_curves_next_to_the_published_number(tmp_path):
    store = Store(tmp_path / "suite")
    for record in RECORDS:
        store.append(record)
    published = tmp_path / "paper.yaml"
    published.write_text("name: the paper\nmetrics:\n  yacht:\n    npt: [1.27, 0.15]\nranks: {}\n")
    md = write_leaderboard(store.dir, published, report=True).read_text()
    # 4.0 - 1.27 = +2.73, outside 1.27 ± 0.30; 3.0 at the full length likewise
    assert "## Budget curves" in md and "| npt | yacht | 300 | 4.000 ± 1.000 | 2 | +2.73 (outside ± 2 SE) |" in md
    assert (store.dir / "budget-curves.svg").exists() and (store.dir / "budget-curves.png").exists()
    svg = (store.dir / "budget-curves.svg").read_text()
    assert "1.27" in svg  # the published number's line is labelled
    csv = pd.read_csv(store.dir / "budget-curves.csv")
    assert list(csv["steps"]) == [100, 300, 1000]


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
