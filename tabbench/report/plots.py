"""The report's figures, each written as SVG and PNG: critical-difference diagrams (drawn by
scikit-posthocs), the win-rate heatmap and the cost-against-quality scatter (matplotlib).

Figures are reproducible byte for byte: no date in the SVG, fixed element ids, text kept as text. Each is
checked by eye at the size it is written: no label over another or over the frame, no tick label over a
bar, no axis beyond what its quantity can take (``metric_limits``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "tabbench", "svg.fonttype": "none", "font.size": 9})
    return plt


#: Twenty distinct colours dark enough for text on white: matplotlib's tab10, then the darkest shades of tab20b
#: and tab20c. A figure's methods, in name order, take them in turn, so the fourteen of breadth never share one.
METHOD_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
                  "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354",
                  "#756bb1", "#636363"]


def method_colours(methods) -> dict:
    """One colour per method, the same in every panel of a figure whichever methods a panel has: in name order
    from ``METHOD_COLOURS`` (a method past the twentieth repeats a colour; a figure that may have that many
    also varies its line style)."""
    return {m: METHOD_COLOURS[i % len(METHOD_COLOURS)] for i, m in enumerate(sorted(set(methods)))}


#: The range each metric can take: an axis showing it stops there (an AUROC axis never runs past 1).
METRIC_RANGE = {"auroc": (0.0, 1.0), "accuracy": (0.0, 1.0), "rmse": (0.0, None), "log_loss": (0.0, None)}


def metric_limits(ax, metric: str) -> None:
    """Clip ``ax``'s y axis to what ``metric`` can take (matplotlib's margins would run an AUROC of 0.997 with its
    error bar to 1.04); a point on the bound is then drawn on the frame, not cut."""
    low, high = METRIC_RANGE.get(metric, (None, None))
    bottom, top = ax.get_ylim()
    ax.set_ylim(bottom if low is None else max(bottom, low), top if high is None else min(top, high))


def log_or_linear(ax, values, which: str = "x") -> None:
    """A log scale where ``values`` (all positive) span at least a factor of ten, ticks at 1, 2 and 5 of each
    decade (1 and 3 over more than one and a half decades, 1 alone over more than two and a half) labelled as
    plain numbers; a linear scale otherwise (matplotlib's log axis over less than a decade labels its minor
    ticks as 1.1 x 10^2, 1.2 x 10^2, ... over one another)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    values = pd.Series(values, dtype=float).dropna()
    # a value of 0 or less (e.g. a job's peak memory not above what its process held before it) has no place on a
    # log axis
    if values.empty or (values <= 0).any() or values.max() < 10 * values.min():
        return
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    axis = ax.xaxis if which == "x" else ax.yaxis
    span = np.log10(values.max() / values.min())
    subs = (1.0, 2.0, 5.0) if span <= 1.5 else (1.0, 3.0) if span <= 2.5 else (1.0,)  # at most about 8 labels
    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def place_labels(ax, xy: list, texts: list, fontsize: float = 7, radius: float = 6, gap: float = 8) -> list:
    """Each text beside its point (data coordinates) at the first of eight positions around it (right, left,
    above, below, then the diagonals), then of the same further out with a thin line to the point, where it
    overlaps no label placed before, no point and no part of the frame; where none is free, the position that
    overlaps least. Called once the axes' limits are final;
    ``radius``: a marker's extent and ``gap``: the label's distance from the point's centre, in points.

    A fixed search, not adjustText's iterative repulsion: a dozen labels need no more, and the figures stay
    byte for byte reproducible without another dependency."""
    from matplotlib.text import Text

    renderer = ax.figure.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    scale = ax.figure.dpi / 72
    r = radius * scale  # a point's marker (a circled one's ring included), in pixels
    centres = [ax.transData.transform(p) for p in xy]
    taken = [(x - r, y - r, x + r, y + r) for x, y in centres]
    candidates = []
    for d in (gap, 2 * gap, 3.5 * gap):  # beside the point first, then further out, joined to it by a thin line
        candidates += [((d, 0), "left", "center"), ((-d, 0), "right", "center"), ((0, d), "center", "bottom"),
                       ((0, -d), "center", "top"), ((d, d * 0.7), "left", "bottom"), ((-d, d * 0.7), "right", "bottom"),
                       ((d, -d * 0.7), "left", "top"), ((-d, -d * 0.7), "right", "top")]

    def overlap(a, b):
        return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))

    placed = []
    for (x, y), point, text in sorted(zip(xy, centres, texts), key=lambda t: (t[1][1], t[1][0]), reverse=True):
        best = None
        for offset, ha, va in candidates:
            far = max(abs(offset[0]), abs(offset[1])) > gap
            label = ax.annotate(text, (x, y), xytext=offset, textcoords="offset points", ha=ha, va=va,
                                fontsize=fontsize, arrowprops=dict(arrowstyle="-", lw=0.5, color="0.5", shrinkA=0,
                                                                   shrinkB=radius) if far else None)
            label.update_positions(renderer)
            e = Text.get_window_extent(label, renderer)  # the text alone, not the line to its point
            box = (e.x0 - 1, e.y0 - 1, e.x1 + 1, e.y1 + 1)
            inside = (box[0] >= frame.x0 + 2 and box[2] <= frame.x1 - 2 and box[1] >= frame.y0 + 2
                      and box[3] <= frame.y1 - 2)
            own = (point[0] - r, point[1] - r, point[0] + r, point[1] + r)
            clash = sum(overlap(box, t) for t in taken if t != own) + (0 if inside else (e.width * e.height))
            if best is None or clash < best[0]:
                if best is not None:
                    best[1].remove()
                best = (clash, label, box)
            else:
                label.remove()
            if clash == 0:
                break
        taken.append(best[2])
        placed.append(best[1])
    return placed


def save(fig, stem: Path, crop: bool = False) -> list[Path]:
    """Write ``stem``.svg and ``stem``.png and close the figure; ``crop``: to what was drawn (for
    figures whose text reaches outside the axes)."""
    plt = _pyplot()
    bbox = fig.get_tightbbox(fig.canvas.get_renderer()).padded(0.1) if crop else None  # one pass for both
    paths = [stem.with_suffix(".svg"), stem.with_suffix(".png")]
    fig.savefig(paths[0], bbox_inches=bbox, metadata={"Date": None})
    fig.savefig(paths[1], bbox_inches=bbox, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return paths


def cd_diagram(mean_ranks: pd.Series, pvalues: pd.DataFrame, title: str, cd: float | None = None):
    """A critical-difference diagram: each method at its mean rank, bars joining methods whose p-value is
    at least 0.05. Labels read ``method (mean rank)``."""
    import scikit_posthocs as sp

    from matplotlib.transforms import offset_copy

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(mean_ranks) + 1.2))
    drawn = sp.critical_difference_diagram(mean_ranks, pvalues, ax=ax, label_fmt_left="{label} ({rank:.2f})",
                                           label_fmt_right="({rank:.2f}) {label}",
                                           color_palette=method_colours(mean_ranks.index))
    for line in (line for lines in drawn["crossbars"] for line in lines):  # a bar's points come in set order:
        x, y = line.get_data()  # sort them so that the files do not change between runs
        line.set_data(sorted(x), y)
    if cd is not None:  # scikit-posthocs draws it half a rank row above the axis, over the tick labels: ours
        above = offset_copy(ax.transData, fig=fig, y=24, units="points")  # clears them at any figure height
        start = float(mean_ranks.min())
        ax.plot([start, start + cd], [0, 0], color="k", lw=2, transform=above, clip_on=False)
        ax.plot([start, start], [0, 0], marker="|", ms=8, color="k", transform=above, clip_on=False)
        ax.plot([start + cd, start + cd], [0, 0], marker="|", ms=8, color="k", transform=above, clip_on=False)
        ax.text(start + cd, 0, f"  CD = {cd:.2f} ranks", ha="left", va="center", transform=above, clip_on=False)
    ax.set_title(title, pad=40 if cd is not None else 24)
    return fig


def win_rate_heatmap(share: pd.DataFrame, n_folds: int):
    """The pairwise win-rate matrix, best row first; at least two methods (one has no pair to show)."""
    if len(share) < 2:
        raise ValueError(f"a win-rate heatmap compares methods; got {len(share)}")
    plt = _pyplot()
    order = share.mean(axis=1).sort_values(ascending=False).index
    share = share.loc[order, order]
    fig, ax = plt.subplots(figsize=(max(0.6 * len(order) + 2.5, 5.5), 0.5 * len(order) + 2.5))
    fig.subplots_adjust(left=0.22, bottom=0.24, right=0.98, top=0.88)
    image = ax.imshow(share.to_numpy(dtype=float), cmap="RdBu", vmin=0, vmax=1)
    for i in range(len(order)):
        for j in range(len(order)):
            if i != j:
                value = share.iat[i, j]  # white on the darkest cells, where black would not read
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if abs(value - 0.5) > 0.3 else "black")
    ax.set_xticks(range(len(order)), order, rotation=45, ha="right")
    ax.set_yticks(range(len(order)), order)
    ax.set_xlabel("column method")
    ax.set_ylabel("row method")
    ax.set_title(f"Share of {n_folds} (dataset, fold) pairs\nwhere the row beats the column")
    fig.colorbar(image, ax=ax, shrink=0.8)
    return fig


def cost_scatter(table: pd.DataFrame, fronts: dict):
    """Mean rank against each cost column in ``fronts`` (column -> (axis label, Pareto mask)), log x where the
    costs span a factor of ten; only columns that at least two methods have (one point compares nothing)."""
    plt = _pyplot()
    fronts = {c: f for c, f in fronts.items() if table[c].notna().sum() >= 2}
    if not fronts:
        raise ValueError("a cost scatter compares methods; fewer than two have a cost")
    fig, axes = plt.subplots(1, len(fronts), figsize=(5.2 * len(fronts), 4.4), squeeze=False)
    fig.subplots_adjust(left=0.08 if len(fronts) > 1 else 0.14, right=0.97, bottom=0.13, top=0.88, wspace=0.3)
    for ax, (column, (label, front)) in zip(axes[0], fronts.items()):
        data = table[[column, "mean_rank"]].dropna()
        ax.scatter(data[column], data["mean_rank"], color="tab:blue", zorder=3)
        on = data[front.reindex(data.index, fill_value=False)].sort_values(column)
        ax.step(on[column], on["mean_rank"], where="post", color="tab:red", zorder=2)
        ax.scatter(on[column], on["mean_rank"], facecolors="none", edgecolors="tab:red", s=120, zorder=4)
        log_or_linear(ax, data[column])
        ax.margins(x=0.12, y=0.1)  # room for the labels of the points at the edges
        ax.set_xlabel(label)
        ax.set_ylabel("mean rank over all datasets (lower is better)")
        ax.invert_yaxis()
        ax.grid(True, alpha=0.3)
        ax.autoscale_view()
        ax.set_autoscale_on(False)
        place_labels(ax, list(zip(data[column], data["mean_rank"])), list(data.index))
    fig.suptitle("Cost against quality: one point per method; circled and joined in red: the Pareto front")
    return fig
