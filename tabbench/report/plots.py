"""The report's figures, each written as SVG and PNG: critical-difference diagrams (drawn by
scikit-posthocs), the win-rate heatmap and the cost-against-quality scatter (matplotlib).

Figures are reproducible byte for byte: no date in the SVG, fixed element ids, text kept as text.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "tabbench", "svg.fonttype": "none", "font.size": 9})
    return plt


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

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(mean_ranks) + 1.2))
    drawn = sp.critical_difference_diagram(mean_ranks, pvalues, ax=ax, cd=cd, label_fmt_left="{label} ({rank:.2f})",
                                           label_fmt_right="({rank:.2f}) {label}")
    for line in (line for lines in drawn["crossbars"] for line in lines):  # a bar's points come in set order:
        x, y = line.get_data()  # sort them so that the files do not change between runs
        line.set_data(sorted(x), y)
    ax.set_title(title, pad=24)
    return fig


def win_rate_heatmap(share: pd.DataFrame, n_folds: int):
    plt = _pyplot()
    order = share.mean(axis=1).sort_values(ascending=False).index
    share = share.loc[order, order]
    fig, ax = plt.subplots(figsize=(0.6 * len(order) + 2.5, 0.5 * len(order) + 2.5))
    fig.subplots_adjust(left=0.22, bottom=0.24, right=0.98, top=0.92)
    image = ax.imshow(share.to_numpy(dtype=float), cmap="RdBu", vmin=0, vmax=1)
    for i in range(len(order)):
        for j in range(len(order)):
            if i != j:
                ax.text(j, i, f"{share.iat[i, j]:.2f}", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(order)), order, rotation=45, ha="right")
    ax.set_yticks(range(len(order)), order)
    ax.set_xlabel("column method")
    ax.set_ylabel("row method")
    ax.set_title(f"Share of {n_folds} (dataset, fold) pairs where the row beats the column")
    fig.colorbar(image, ax=ax, shrink=0.8)
    return fig


def cost_scatter(table: pd.DataFrame, fronts: dict):
    """Mean rank against each cost column in ``fronts`` (column -> (axis label, Pareto mask)), log x."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(fronts), figsize=(4.8 * len(fronts), 4.2), squeeze=False)
    fig.subplots_adjust(left=0.08, right=0.97, bottom=0.13, top=0.88, wspace=0.3)
    for ax, (column, (label, front)) in zip(axes[0], fronts.items()):
        data = table[[column, "mean_rank"]].dropna()
        ax.scatter(data[column], data["mean_rank"], color="tab:blue", zorder=3)
        on = data[front.reindex(data.index, fill_value=False)].sort_values(column)
        ax.step(on[column], on["mean_rank"], where="post", color="tab:red", zorder=2, label="Pareto front")
        ax.scatter(on[column], on["mean_rank"], facecolors="none", edgecolors="tab:red", s=120, zorder=4)
        for method, row in data.iterrows():
            ax.annotate(method, (row[column], row["mean_rank"]), xytext=(4, 4), textcoords="offset points",
                        fontsize=7)
        # a cost of 0 (a job's peak memory not above what its process held before it) has no place on a log axis
        positive = bool((data[column] > 0).all())
        if data[column].nunique() == 1 and positive:  # one cost (one method): a log axis needs a range around it
            ax.set_xlim(data[column].iloc[0] / 3, data[column].iloc[0] * 3)
        ax.set_xscale("log" if positive else "linear")
        ax.set_xlabel(label)
        ax.set_ylabel("mean rank over all datasets (lower is better)")
        ax.invert_yaxis()
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize=7)
    fig.suptitle("Cost against quality: one point per method")
    return fig
