"""Budget curves: the test metric a run would have reached at shorter step budgets.

A model that keeps its best-so-far weights at step budgets (NPT: ``budgets``) records, per job, the
metrics those weights give (``budget_curve`` in the record). Here they become one table and one
figure per dataset, the run's full length as the last point and the published number of the method's
model as a line: what more steps would still buy. Whichever methods' records carry a curve are drawn;
nothing here names a model.
"""

from __future__ import annotations

import math

import pandas as pd

from tabbench.report.agreement import within
from tabbench.report.format import Cell, markdown_table, markdown_text
from tabbench.report.section import Context, Section


def budget_table(selected: pd.DataFrame, primary: dict) -> pd.DataFrame:
    """Rows (method, model, dataset, metric, steps, mean, runs, folds, se) of the primary test metric over
    folds and seeds (folds: the distinct (fold, repeat) splits among the runs), at every recorded budget and at the run's full length. Empty when no record has a curve."""
    if "budget_curve" not in selected:
        return pd.DataFrame()
    rows = []
    for _, r in selected[selected["status"] == "ok"].iterrows():
        curve = r["budget_curve"] if isinstance(r["budget_curve"], list) else []
        if not curve:
            continue
        metric = primary[r["task"]][0]
        info = r.get("info") if isinstance(r.get("info"), dict) else {}
        # the run's own point is where it ended: the steps it ran (fewer than planned when the clock stopped it)
        steps = info.get("steps_run", info.get("steps"))
        points = [(p["steps"], p["test"].get(metric)) for p in curve]
        if steps is not None:
            points.append((steps, r.get(f"test_{metric}")))
        rows += [{"method": r["method"], "model": r.get("model") or r["method"], "dataset": r["dataset"],
                  "metric": metric, "steps": s, "value": v, "split": (r["fold"], r["repeat"])}
                 for s, v in points if v is not None]
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame(rows)
    keys = ["method", "model", "dataset", "metric", "steps"]
    grouped = frame.groupby(keys)
    out = grouped["value"].agg(["mean", "std", "count"]).reset_index()
    out["folds"] = grouped["split"].nunique().to_numpy()
    out["se"] = out["std"] / out["count"].map(math.sqrt)
    return out.drop(columns="std").rename(columns={"count": "runs"})


def _paper(published, dataset: str, model: str):
    """The published (value, se or None) of ``model`` on the dataset, or None."""
    return published.metrics.get(dataset, {}).get(model) if published is not None else None


def versus_paper(mean: float, se: float, paper) -> str:
    """Our mean against the published number: the difference, and whether it lies within 2 combined
    standard errors (tabbench.report.agreement), where both sides have one."""
    if not paper:
        return ""
    value, paper_se = paper
    diff = f"{mean - value:+.3g}"
    if not paper_se or se is None or (isinstance(se, float) and math.isnan(se)):
        return diff
    return f"{diff} ({'within' if within(mean - value, se, paper_se) else 'outside'} 2 combined SE)"


def budget_figure(table: pd.DataFrame, published=None):
    """One panel per dataset, four to a row: mean ± SE test metric against steps (log axis where the steps span
    a factor of ten), the published number of each drawn method's model as a dashed line, the metric's axis
    within the range it can take."""
    from tabbench.report.plots import _pyplot, log_or_linear, method_colours, metric_limits

    plt = _pyplot()
    datasets = sorted(table["dataset"].unique())
    colour = method_colours(table["method"])
    columns = min(len(datasets), 4)
    rows = math.ceil(len(datasets) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.6 * columns, 4.0 * rows), squeeze=False)
    for ax in axes.flat[len(datasets):]:
        ax.set_visible(False)
    for ax, dataset in zip(axes.flat, datasets):
        part = table[table["dataset"] == dataset]
        for method, curve in part.groupby("method"):
            curve, runs = curve.sort_values("steps"), int(curve["runs"].max())
            ax.errorbar(curve["steps"], curve["mean"], yerr=curve["se"].fillna(0), marker="o", ms=3, capsize=0,
                        color=colour[method], label=f"{method} ({runs} run{'s' if runs != 1 else ''})", clip_on=False)
        for model in sorted(part["model"].unique()) if "model" in part else ():
            paper = _paper(published, dataset, model)
            if paper:
                ax.axhline(paper[0], color="k", ls="--", lw=1, label=f"{model}, {published.name}: {paper[0]:g}")
                if paper[1]:
                    ax.axhspan(paper[0] - 2 * paper[1], paper[0] + 2 * paper[1], color="k", alpha=0.08, lw=0,
                               label="± 2 SE")
        log_or_linear(ax, part["steps"])
        metric_limits(ax, part["metric"].iloc[0])
        ax.set_title(dataset)
        ax.set_xlabel("training steps")
        ax.set_ylabel(f"test {part['metric'].iloc[0]}")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2))  # below: never over a curve
    fig.tight_layout()
    return fig


class BudgetCurves(Section):
    """The budget curves: their figure (budget-curves.svg and .png), their table and budget-curves.csv."""

    report_only = True

    @staticmethod
    def _table(ctx: Context) -> pd.DataFrame:
        from tabbench.metrics import PRIMARY

        return ctx.once("budget curves", lambda: budget_table(ctx.selected, PRIMARY))

    def markdown(self, ctx):
        """A mean over fewer splits than its dataset has (family.dataset_splits) shows its fold count."""
        from tabbench.report.family import dataset_splits

        table = self._table(ctx)
        if table.empty:
            return []
        published, show, splits = ctx.published, ctx.show, dataset_splits(ctx.selected, ctx.splits)
        rows = [[show.get(r["method"], r["method"]), r["dataset"], f"{int(r['steps']):,}",
                 Cell(r["mean"], r["se"], int(r["folds"]), splits.get(r["dataset"], 0)).markdown(),
                 str(int(r["runs"])), versus_paper(r["mean"], r["se"], _paper(published, r["dataset"], r["model"]))]
                for _, r in table.sort_values(["dataset", "method", "steps"]).iterrows()]
        models = sorted(table["model"].unique())
        which = " and ".join(m.upper() for m in models) + (" numbers" if len(models) > 1 else " number")
        note = published.note_for(table["dataset"]) if published else None
        return ["## Budget curves", "",
                "The test metric of the weights a shorter run would have used (best validation loss up to that step), "
                "recorded during each run; the last point of a curve is the run's full length. Dashed: the published "
                f"{which}, shaded: its ± 2 standard errors; \"vs paper\": our mean minus it, and whether it lies "
                "within 2 combined standard errors (√(SE ours² + SE paper²); results/README.md). A mean of fewer folds "
                "than the dataset has shows its fold count. `budget-curves.csv` has the numbers.", "",
                "![test metric against training steps](budget-curves.svg)", "",
                markdown_table(["method", "dataset", "steps", "test metric (mean ± SE)", "runs", "vs paper"], rows), "",
                *([markdown_text(note), ""] if note else [])]

    def write_files(self, ctx):
        from tabbench.report.plots import save

        table = self._table(ctx)
        if table.empty:
            return
        save(budget_figure(table, ctx.published), ctx.out_dir / "budget-curves")
        table.drop(columns=["model", "folds"]).round(6).to_csv(ctx.out_dir / "budget-curves.csv", index=False)
