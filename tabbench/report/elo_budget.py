"""Elo against budget: the leaderboard's mean ranks and TabArena's Elo at each budget point.

A suite with ``budget.points_s`` has every job record, beside its final metrics, the metrics of the state its
validation had selected at fixed points of its elapsed time (the record's ``budget_points``, tabbench/run/execute.py).
Here each point becomes a leaderboard of its own: every selected run's test metric replaced by its metric at that
point, then ranked and rated exactly as the final leaderboard is (tabbench.report.family.summarise, and
tabbench.report.arena's bencheval Elo with its bootstrap interval), so the last point, when it is the job's whole
budget, gives the final Elo again.

- A run without a state at a point (its fit had validated none yet, or a model that keeps no states had not
  finished; ``val``/``test`` null) counts as not finished there: as a failed job, the worst rank and an infinite
  error for Elo (TabArena counts an unfinished job as failed). So does a point left unscored for lack of time.
- A run whose record has no entry for a point (made before the suite asked for points, as a re-run of only a
  suite's slow jobs leaves its fast ones; or its points failed, ``budget_points_error``) has, at a point at or
  after its fit's end (its ``tabbench.clock.spent_seconds`` <= the point), what a job that finished early records there: its final
  state, val and test its final metrics. Before its fit's end its state is unknown (a model that keeps states
  may have had one), so it is neither given its final metrics nor counted as failed: its method is left out
  of the whole section, named with those runs, until they run again with the points. Of the whole section, not
  of those points alone, so that every point ranks and rates the same methods. (``fit_seconds`` is the fit's
  own time; the budget clock starts a fork and the model's construction earlier, so a model that keeps no
  states and whose fit ended just before a point might, re-run, record no state there yet.)
- A tuned method's trial is the one selected on the final validation score, at every point.
- "Reaches its final Elo": the first point from which the method's Elo stays inside its 95% interval at the last
  point. "Still rising": its Elo at the last point lies above the upper end of its interval at the point before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tabbench.clock import spent_seconds
from tabbench.report.section import Context, Section


def has_points(selected: pd.DataFrame) -> bool:
    return "budget_points" in selected and selected["budget_points"].map(
        lambda p: isinstance(p, list) and bool(p)).any()


def budget_points(selected: pd.DataFrame) -> list[float]:
    """Every point of elapsed time the records scored, ascending."""
    if not has_points(selected):
        return []
    return sorted({float(p["at_s"]) for points in selected["budget_points"] if isinstance(points, list)
                   for p in points})


#: ``state_at``: nothing says which state the run had at the point
UNKNOWN = "unknown"


def state_at(run, point_s: float):
    """One finished (``ok``) run's state at ``point_s``: its recorded point's test metrics ({} where it had no
    state there); else, its fit ended by then (``spent_seconds`` <= ``point_s``), None: its final state, its
    metrics as recorded; else ``UNKNOWN``. ``run``: a record, or a row of ``selected``. Under the ``cpu`` clock
    the fit's own CPU seconds are not recorded: the whole job's (``tabbench.clock.spent_seconds``) bound them."""
    points = run.get("budget_points")
    point = next((p for p in points if float(p["at_s"]) == point_s), None) if isinstance(points, list) else None
    if point is not None:
        return point.get("test") or {}
    fit_s = spent_seconds(run)
    if fit_s is not None and fit_s <= point_s:
        return None
    return UNKNOWN


def at_point(selected: pd.DataFrame, point_s: float) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """``selected`` with every ``test_*`` metric of a finished run replaced by its metric at ``point_s`` (``state_at``:
    kept where its final state holds there, NaN where it had no state or its state is unknown), and per method the
    runs without a state there and the runs whose state is unknown. A failed run stays failed."""
    frame = selected.copy()
    test_columns = [c for c in frame.columns if c.startswith("test_")]
    methods = sorted(frame["method"].unique())
    missing, unknown = pd.Series(0, index=methods), pd.Series(0, index=methods)
    for index, row in frame.iterrows():
        if row["status"] != "ok":
            continue
        test = state_at(row, point_s)
        if test is None:
            continue
        if test is UNKNOWN:
            unknown[row["method"]] += 1
            test = {}
        elif not test:
            missing[row["method"]] += 1
        for column in test_columns:
            frame.at[index, column] = test.get(column[len("test_"):], np.nan)
    return frame, missing, unknown


TABLE_COLUMNS = ["point_s", "method", "mean_rank", "elo", "elo_low", "elo_high", "no_state", "runs"]


@dataclass
class EloAtPoints:
    """``table``: one row per (point_s, method): mean_rank, elo, elo_low, elo_high, no_state (its runs without a
    state at the point), runs; ``left_out``: the methods left out because some of their runs' states are unknown at
    some point (``state_at``), each with (those runs, all its runs); ``reason``: why there is no Elo (bencheval
    missing, or fewer than two methods), else None."""

    table: pd.DataFrame
    points: list
    left_out: dict
    anchor: str | None
    reason: str | None = None

    def at(self, column: str) -> pd.DataFrame:
        """methods x points of one column."""
        return self.table.pivot(index="method", columns="point_s", values=column)

    def reached(self) -> pd.DataFrame:
        """Per method: its final Elo and interval (the last point's), the first point from which its Elo stays in
        that interval, and the change into the last point and whether it lies above the interval before."""
        elo, low, high = self.at("elo"), self.at("elo_low"), self.at("elo_high")
        last, rows = self.points[-1], []  # a point without Elo (no method had a state) is never inside
        for method in elo.index:
            inside = (elo.loc[method] >= low.loc[method, last]) & (elo.loc[method] <= high.loc[method, last])
            since = last
            for point in reversed(self.points):
                if not inside[point]:
                    break
                since = point
            before = self.points[-2] if len(self.points) > 1 else None
            rows.append({"method": method, "elo": elo.loc[method, last], "elo_low": low.loc[method, last],
                         "elo_high": high.loc[method, last], "reached_at_s": since,
                         "change": elo.loc[method, last] - elo.loc[method, before] if before is not None else np.nan,
                         "rising": bool(before is not None and elo.loc[method, last] > high.loc[method, before])})
        return pd.DataFrame(rows).set_index("method").sort_values(["elo", "method"], ascending=[False, True])


def elo_against_budget(selected: pd.DataFrame, declared=None) -> EloAtPoints | None:
    """Ranks and Elo at every budget point the records carry (None when none does); ``declared``: the splits
    each dataset has (tabbench.report.family.dataset_splits)."""
    from tabbench.report import arena
    from tabbench.report.family import pooled_ranks, summarise

    points = budget_points(selected)
    if not points:
        return None
    ok = selected[selected["status"] == "ok"]
    unknown = ok[np.array([any(state_at(run, p) is UNKNOWN for p in points) for _, run in ok.iterrows()], bool)]
    runs = selected.groupby("method").size()
    left_out = {m: (int(n), int(runs[m])) for m, n in unknown.groupby("method").size().items()}
    selected = selected[~selected["method"].isin(left_out)]
    if selected.empty:
        return EloAtPoints(pd.DataFrame(columns=TABLE_COLUMNS), points, left_out, None,
                                "No method has a known state for every run at every point.")
    rows, anchor, reasons = [], None, set()
    for point in points:
        frame, missing, _ = at_point(selected, point)  # no state unknown: those methods are left out
        tables = summarise(frame, declared)
        mean_rank = pooled_ranks(tables).mean(axis=1)
        agg = arena.aggregates(tables, frame, mean_rank)
        runs = frame.groupby("method").size()
        if agg.table is None:  # e.g. a point before any state: no method has a result to compare
            reasons.add(agg.reason)
            elo = pd.DataFrame(np.nan, index=mean_rank.index, columns=["elo", "elo_low", "elo_high"])
        else:
            anchor, elo = agg.anchor, agg.table[["elo", "elo_low", "elo_high"]]
        for method, rank in mean_rank.items():
            rows.append({"point_s": point, "method": method, "mean_rank": rank, **elo.loc[method].to_dict(),
                         "no_state": int(missing.get(method, 0)), "runs": int(runs.get(method, 0))})
    table = pd.DataFrame(rows)
    # no Elo at any point (bencheval missing, or one method): say why, once
    reason = " ".join(sorted(r for r in reasons if r)) if table["elo"].isna().all() else None
    return EloAtPoints(table, points, left_out, anchor, reason)


def _seconds(point: float) -> str:
    return f"{point:g} s"


def _elo(elo: float, low: float, high: float) -> str:
    if math.isnan(elo):
        return "–"
    return f"{elo:.0f}" + ("" if math.isnan(low) else f" ({low:.0f} to {high:.0f})")


def figure(result: EloAtPoints, show: dict):
    """Elo against the budget point (log axis), one line per method with its 95% interval; the methods are
    set slightly apart along the axis (a few percent), so that their intervals do not hide each other."""
    from tabbench.report.plots import METHOD_COLOURS, _pyplot, method_colours

    plt = _pyplot()
    elo, low, high = result.at("elo"), result.at("elo_low"), result.at("elo_high")
    order = elo[result.points[-1]].sort_values(ascending=False).index
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    colour = method_colours(order)
    styles = {m: ["-", "--", ":", "-."][(i // len(METHOD_COLOURS)) % 4] for i, m in enumerate(sorted(order))}
    n = len(order)
    for i, method in enumerate(order):
        shift = 1.025 ** (i - (n - 1) / 2)
        x = np.array(result.points) * shift
        y = elo.loc[method].to_numpy(dtype=float)
        below = y - low.loc[method].to_numpy(dtype=float)
        above = high.loc[method].to_numpy(dtype=float) - y
        ax.errorbar(x, y, yerr=np.nan_to_num(np.vstack([below, above])), marker="o", ms=3, capsize=2, lw=1.2,
                    ls=styles[method], color=colour[method],
                    label=show.get(method, method))
    ax.set_xscale("log")
    ax.set_xticks(result.points)
    ax.set_xticklabels([f"{p:g}" for p in result.points])
    ax.minorticks_off()
    ax.set_xlabel("budget point: seconds of each job's elapsed time")
    anchor = f"{result.anchor} = 1000" if result.anchor else "unanchored, mean 1000"
    ax.set_ylabel(f"Elo ({anchor})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    return fig


class EloAgainstBudget(Section):
    """leaderboard.md's "Elo against budget" (nothing where no record carries budget points): the figure, Elo and
    mean rank per point, where each method reaches its final Elo; its files elo-against-budget.{svg,png,csv}. What
    it says where its records mix machines or clocks: tabbench.report.provenance.comparison_note, from every
    record of the leaderboard's folders (``ctx.sources``)."""

    report_only = True

    @staticmethod
    def _result(ctx: Context) -> EloAtPoints | None:
        from tabbench.report.family import dataset_splits

        return ctx.once("elo against budget",
                        lambda: elo_against_budget(ctx.selected, dataset_splits(ctx.selected, ctx.splits)))

    @staticmethod
    def _figure_drawn(result) -> bool:
        return not result.table.empty and not result.reason and len(result.table["method"].unique()) > 1

    def markdown(self, ctx):
        from tabbench.report.format import markdown_table
        from tabbench.report.provenance import comparison_note

        result, show = self._result(ctx), ctx.show
        if result is None:
            return []
        title = ["## Elo against budget", ""]
        table = result.table
        points = result.points
        intro = (f"Each job recorded, besides its final metrics, the test metric of the state its validation had "
                 f"selected at {', '.join(_seconds(p) for p in points)} of its elapsed time (counted from the job's start, "
                 "on the clock of its time budget; a job that had finished keeps its final state for every later point). "
                 "Per point, the datasets are ranked and rated as in the tables above: mean rank over all datasets and "
                 "bencheval's Elo with its 95% bootstrap interval. A run with no state at a point (nothing validated yet, "
                 "or a model that keeps no states not finished) counts as failed there: the worst rank, and a loss to "
                 "every method with a result (TabArena counts unfinished jobs as failed). A record without budget points "
                 "(made before the suite asked for them) has, at every point at or after its fit's end (`fit_seconds`; a "
                 "`cpu`-clock job's `cpu_seconds`), "
                 "its final state, as a job that finished early records it; before that its state is unknown, and its "
                 "method is left out (named below) rather than counted as failed. `elo-against-budget.csv` has "
                 "the numbers, with the runs that had no state at each point (`no_state`).")
        md = title + [intro, "", *comparison_note(ctx.selected, show, ctx.sources, "at the budget points")]
        if table.empty:
            return md + [result.reason, "", *_left_out(result, show)]
        if result.reason:
            md += [result.reason, ""]
        elif self._figure_drawn(result):
            md += ["![Elo against budget, per method](elo-against-budget.svg)", "",
                   "Files: [`elo-against-budget.svg`](elo-against-budget.svg), "
                   "[`elo-against-budget.png`](elo-against-budget.png). The methods are set a few percent apart along "
                   "the axis so that their intervals can be told apart.", ""]
        elo, low, high, rank, missing = (result.at(c) for c in ("elo", "elo_low", "elo_high", "mean_rank", "no_state"))
        runs = result.at("runs")
        order = (result.reached().index if not result.reason else rank[points[-1]].sort_values().index)
        header = ["method", *(f"{_seconds(p)}" for p in points)]
        if not result.reason:
            rows = [[show.get(m, m)] + [_elo(elo.loc[m, p], low.loc[m, p], high.loc[m, p]) for p in points]
                    for m in order]
            md += ["Elo (95% interval) at each budget point; –: no method had a state there, nothing to compare:", "",
                   markdown_table(header, rows), ""]
        rows = [[show.get(m, m)] + [f"{rank.loc[m, p]:.2f}" + (f" ({int(missing.loc[m, p])} of {int(runs.loc[m, p])} "
                                                              "without a state)" if missing.loc[m, p] else "")
                                    for p in points] for m in order]
        md += ["Mean rank over all datasets at each budget point (runs without a state there, where any):", "",
               markdown_table(header, rows), ""]
        if not result.reason and len(points) > 1:
            reached = result.reached()
            rows = [[show.get(m, m), _elo(r["elo"], r["elo_low"], r["elo_high"]), _seconds(r["reached_at_s"]),
                     "–" if math.isnan(r["change"]) else f"{r['change']:+.0f}", "yes" if r["rising"] else "no"]
                    for m, r in reached.iterrows()]
            md += [f"Where each method reaches its final Elo (at {_seconds(points[-1])}): the first point from which its "
                   "Elo stays inside that point's 95% interval; 'still rising': its Elo there lies above the upper end of "
                   f"its interval at {_seconds(points[-2])}.", "",
                   markdown_table(["method", f"Elo at {_seconds(points[-1])}", "reaches it at",
                                   f"change from {_seconds(points[-2])}", "still rising"], rows), ""]
        return md + _left_out(result, show)

    def write_files(self, ctx):
        from tabbench.report.plots import save

        result = self._result(ctx)
        if result is None:
            return
        result.table.round(6).to_csv(ctx.out_dir / "elo-against-budget.csv", index=False)
        if self._figure_drawn(result):
            save(figure(result, ctx.show), ctx.out_dir / "elo-against-budget")


def _left_out(result: EloAtPoints, show: dict) -> list:
    """The methods left out, each with its runs whose state is unknown at a point."""
    if not result.left_out:
        return []
    named = ", ".join(f"{show.get(m, m)} ({unknown} of its {runs} runs)"
                      for m, (unknown, runs) in sorted(result.left_out.items()))
    return [f"Left out, some of their runs' records carry no budget points and their fits ran past a point, so their "
            f"state there is unknown (running those jobs again with the points fills it in): {named}.", ""]
