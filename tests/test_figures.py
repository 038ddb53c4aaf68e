"""The report's figures as a reader sees them: what can be tested of it, on the records of published folders.

No figure where there is nothing to compare (one method), no axis beyond what its metric can take, the
critical difference's bar clear of the rank axis's labels, and the cost scatter's labels clear of one another and
of the frame (measured on the rendered figure). The rest is checked by eye at the size each is written."""

import re
from pathlib import Path

import pytest

from tabbench.metrics import PRIMARY
from tabbench.pooling import pooled_records
from tabbench.report.leaderboard import pooled_ranks, select_trials, summarise
from tests.conftest import need

need("matplotlib")
need("scikit_posthocs")

RESULTS = Path(__file__).resolve().parents[1] / "results"
QUICKSTART = RESULTS / "quickstart"  # eight methods on four datasets
GPU = RESULTS / "uci-small-npt-paper-gpu"  # one method (npt-paper) on four datasets, with budget curves


@pytest.fixture(scope="module")
def quickstart():
    return pooled_records([QUICKSTART])


@pytest.fixture(scope="module")
def one_method():
    return pooled_records([GPU])


def boxes(fig, artists):
    renderer = fig.canvas.get_renderer()
    return [a.get_window_extent(renderer) for a in artists]


def one_method_context(records, out_dir):
    from tabbench.report.leaderboard import make_context

    return make_context(out_dir, [GPU], records, report=True)


def test_a_one_method_table_draws_no_win_rate_figure_and_says_why(one_method, tmp_path):
    from tabbench.report.sections import WinRates

    assert one_method["method"].nunique() == 1
    ctx = one_method_context(one_method, tmp_path)
    md = WinRates().markdown(ctx)
    WinRates().write_files(ctx)
    assert "no pair to compare" in " ".join(md)
    assert not list(tmp_path.glob("win-rate.*"))


def test_a_one_method_table_draws_no_cost_figure_and_says_why(one_method, tmp_path):
    from tabbench.report.sections import CostAgainstQuality

    ctx = one_method_context(one_method, tmp_path)
    md = CostAgainstQuality().markdown(ctx)
    CostAgainstQuality().write_files(ctx)
    assert "No figure" in " ".join(md) and not list(tmp_path.glob("cost.*"))
    assert "\n| npt-paper " in "\n".join(md)  # the cost table stays (its name marked as the leaderboard shows it)


def test_a_metric_axis_stays_within_what_the_metric_can_take(one_method):
    """Breast Cancer's AUROC curve ends at 0.995 ± 0.002 under the paper's 0.997 ± 2 SE: matplotlib's margin
    alone would run the axis past 1."""
    from tabbench.report.budget import budget_figure, budget_table

    table = budget_table(select_trials(one_method), PRIMARY)
    fig = budget_figure(table)
    limits = {ax.get_title(): (ax.get_ylabel(), ax.get_ylim()) for ax in fig.axes if ax.get_visible()}
    assert limits["breast_cancer"][0] == "test auroc" and limits["breast_cancer"][1][1] <= 1.0
    auroc = table[table["dataset"] == "breast_cancer"]
    assert (auroc["mean"] + auroc["se"]).max() > 0.99  # the case: an error bar within a margin of 1
    for label, (low, _) in limits.values():
        assert low >= 0.0, label


def test_many_datasets_wrap_into_rows_of_four_panels():
    import pandas as pd

    from tabbench.report.budget import budget_figure

    table = pd.DataFrame([{"method": "npt", "model": "npt", "dataset": f"d{i:02}", "metric": "rmse", "steps": s,
                           "mean": 5.0 - s / 1000, "runs": 1, "se": float("nan")}
                          for i in range(9) for s in (100, 300)])
    fig = budget_figure(table)
    drawn = [ax for ax in fig.axes if ax.get_visible()]
    assert len(drawn) == 9 and fig.get_size_inches()[0] <= 4 * 3.6 + 0.01  # three rows of at most four


def test_the_critical_difference_bar_and_its_label_clear_the_rank_axis_labels(quickstart):
    from tabbench.report.plots import cd_diagram
    from tabbench.report.significance import significance

    tables = summarise(select_trials(quickstart))
    result = significance("all", pooled_ranks(tables), None)
    assert result.cd is not None
    fig = cd_diagram(result.mean_ranks, result.nemenyi, "test", result.cd)
    ax = fig.axes[0]
    fig.canvas.draw()
    ticks = [t for t in ax.get_xticklabels() if t.get_text()]
    cd_text = [t for t in ax.texts if "CD =" in t.get_text()]
    cd_bar = [line for line in ax.lines if len(line.get_xdata()) == 2 and line.get_linewidth() == 2
              and abs(line.get_xdata()[1] - line.get_xdata()[0] - result.cd) < 1e-9]
    assert len(cd_text) == 1 and len(cd_bar) == 1
    top_of_ticks = max(b.y1 for b in boxes(fig, ticks))
    for box in boxes(fig, cd_text + cd_bar):
        assert box.y0 > top_of_ticks  # above every tick label, not through them
    title = boxes(fig, [ax.title])[0]
    assert all(box.y1 < title.y0 for box in boxes(fig, cd_text + cd_bar))


def test_fourteen_methods_of_a_critical_difference_diagram_have_fourteen_colours():
    """breadth's fourteen methods: matplotlib's ten-colour cycle gave npt-budget TabR's red and npt CatBoost's blue."""
    import numpy as np
    import pandas as pd

    from tabbench.report.plots import cd_diagram

    names = [f"method {i:02}" for i in range(14)]
    ranks = pd.Series(np.linspace(2.0, 12.0, 14), index=names)
    fig = cd_diagram(ranks, pd.DataFrame(0.01, index=names, columns=names), "fourteen methods")
    colours = {t.get_text(): t.get_color() for t in fig.axes[0].texts}
    assert len(colours) == 14 and len(set(colours.values())) == 14


def test_the_cost_scatters_labels_overlap_neither_one_another_nor_the_frame(quickstart):
    """On the quickstart, where k-NN and Gradient Boosting share a rank and nearly a memory (their labels ran into
    'knngradient_boosting')."""
    from tabbench.report import cost
    from tabbench.report.plots import cost_scatter

    tables = summarise(select_trials(quickstart))
    table = cost.cost_table(quickstart, pooled_ranks(tables).mean(axis=1))
    fronts = {c: (c, cost.pareto_front(table["mean_rank"], table[c])) for c in ("seconds", "rss_mib")}
    fig = cost_scatter(table, fronts)
    fig.canvas.draw()
    for ax in fig.axes:
        labels = [t for t in ax.texts if t.get_text() in table.index]
        assert sorted(t.get_text() for t in labels) == sorted(table.index)
        frame = ax.get_window_extent()
        placed = boxes(fig, labels)
        for i, a in enumerate(placed):
            assert frame.x0 <= a.x0 and a.x1 <= frame.x1 and frame.y0 <= a.y0 and a.y1 <= frame.y1
            assert not any(a.overlaps(b) for b in placed[i + 1:]), labels[i].get_text()
        ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        assert len(ticks) <= 9 and all("times" not in t and "^" not in t for t in ticks)  # plain, not 1.1×10²


def test_a_figure_inlined_in_a_page_keeps_its_labels_and_loses_only_precision_it_cannot_show(tmp_path):
    """html.svg slims what the page inlines: coordinates (six decimals from matplotlib) to 0.1 px and the fallback
    font list to one family; a label's digits and a shading's opacity stay as drawn."""
    from tabbench.report.html import svg
    from tabbench.report.plots import _pyplot, save

    plt = _pyplot()
    fig, ax = plt.subplots()
    ax.plot([0.123456, 0.987654], [0.5, 0.25])
    ax.axhspan(0.2, 0.3, color="k", alpha=0.08)
    ax.set_title("catboost (4.03125)")
    svg_file = save(fig, tmp_path / "f")[0]
    inline = svg(svg_file)
    assert len(inline) < 0.8 * len(svg_file.read_text())
    assert "catboost (4.03125)" in inline and "opacity: 0.08" in inline
    assert not re.search(r"<[^>]*\.\d{5,}", inline)  # no coordinate beyond 0.1 px
    assert inline.count("font-family: 'DejaVu Sans', sans-serif") == inline.count("font-family")
