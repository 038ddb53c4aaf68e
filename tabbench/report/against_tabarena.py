"""Two sections of a leaderboard that read TabArena's published results (tabbench/tabarena.py, a suite's TabArena
declaration in ``published:``):

- ``AgainstTabArena``: on each dataset of ours that is one of TabArena's, TabArena's default and tuned number of
  each method's counterpart beside ours, in our metric, each judged by the one 2-SE rule
  (tabbench/report/agreement.py) with the standard error it was judged by stated (tabarena.estimated_se);
- ``TabArenaBoard``: where the suite runs TabArena's own tasks on their own folds, our methods ranked among
  TabArena's on those tasks, by bencheval as TabArena ranks its board, our rows marked.

``beyond_block`` is the generated README block (``<!-- tabbench report: tabarena -->``) listing the cells
beyond 2 SE, for a folder's README to give each its cause beside it.
"""

from __future__ import annotations

import math

import pandas as pd

from tabbench.report.agreement import BAND_SE, band
from tabbench.report.format import markdown_table, markdown_text
from tabbench.report.section import Context, Section

SPREAD, SAMPLING = "¹", "²"
MARKS = {"spread": SPREAD, "sampling": SAMPLING}
SUBTYPE_NAMES = {"default": "default", "tuned": "tuned"}


def _runs(ctx: Context, method: str, dataset: str) -> pd.DataFrame:
    s = ctx.selected
    return s[(s["method"] == method) & (s["dataset"] == dataset)]


def _tuned(ctx: Context, method: str, dataset: str) -> bool:
    runs = _runs(ctx, method, dataset)
    return "trial" in runs and bool(runs["trial"].notna().any())


def cells(ctx: Context, comparison) -> list[dict]:
    """Every (method, dataset, TabArena variant) with a counterpart: ours, theirs, the estimate and the verdict."""
    from tabbench.tabarena import estimated_se

    out = []
    for t in ctx.tables.values():
        for d in [d for d in t.datasets if d in comparison.datasets]:
            theirs_dataset = comparison.decl.datasets[comparison.datasets[d]]
            for m in t.ranks.index:
                found = comparison.counterparts(d, ctx.model_of(m))
                ours, ours_se = t.mean.loc[m, d], t.se.loc[m, d]
                for subtype, (value, metric) in found.items():
                    if metric != t.metric:
                        continue
                    tuned = _tuned(ctx, m, d)
                    row = {"family": t.metric, "method": m, "dataset": d, "subtype": subtype, "ours": ours,
                           "ours_se": ours_se, "theirs": value, "tuned": tuned, "estimate": None,
                           "like": (subtype == "tuned") == tuned, "difference": math.nan, "sigmas": math.nan,
                           "within": None}
                    if not pd.isna(ours):
                        runs = _runs(ctx, m, d)
                        n_runs = int((runs["status"] == "ok").sum())
                        se = None if pd.isna(ours_se) else float(ours_se)
                        mae = runs["test_mae"].mean() if "test_mae" in runs and n_runs == 1 else None
                        estimate = estimated_se(t.metric, float(ours), se, n_runs, value,
                                                comparison.test_shares.get(d), theirs_dataset, comparison.decl.folds,
                                                None if pd.isna(mae) else float(mae))
                        row["estimate"], row["difference"] = estimate, float(ours) - value
                        if estimate is not None:  # judged like for like only: tuned against tuned, defaults
                            allowed = band(estimate.ours, estimate.theirs)  # against default
                            if row["like"]:
                                row["sigmas"] = abs(row["difference"]) / (allowed / BAND_SE)
                                row["within"] = abs(row["difference"]) <= allowed
                    out.append(row)
    return out


def _verdict(row: dict) -> str:
    if pd.isna(row["difference"]):
        return "–"
    text = f"{row['difference']:+.3g}"
    if not row["like"]:
        return text + " (not like for like)"
    if row["within"] is None:
        return text + " (no SE)"
    return text + f" ({row['sigmas']:.1f} SE{', beyond 2' if not row['within'] else ''})"


def _ours(ctx: Context, t, row: dict) -> str:
    return f"{t.cell(row['method'], row['dataset']).markdown()} ({'tuned' if row['tuned'] else 'defaults'})"


def _estimate(row: dict) -> str:
    e = row["estimate"]
    return "–" if e is None else f"{e.ours:.3g} / {e.theirs:.3g} {MARKS[e.how]}"


def _notes(comparison, rows: list) -> list[str]:
    how = {r["estimate"].how for r in rows if r["estimate"] is not None}
    test_rows = sorted({tuple(round(x) for x in r["estimate"].test_rows) for r in rows if r["estimate"] is not None})
    notes = ["Each row: our mean ± SE over folds and seeds (tuned: the configuration selected per fold on validation; "
             "defaults: one configuration) beside TabArena's default and tuned number of the method's counterpart "
             f"({comparison.decl.path.name}'s methods), TabArena's error turned into our metric (AUROC = 1 − its "
             "error; RMSE as it is). A difference is ours − TabArena's, judged like for like (ours tuned against "
             "TabArena's tuned, ours at defaults against its default; the other difference is shown, not judged) by "
             f"results/README.md's rule: within 2 SE when |ours − TabArena's| ≤ {BAND_SE:g} √(SE ours² + SE "
             "TabArena²). TabArena-Lite has one split, so its SE is estimated; the SEs column gives ours / "
             "TabArena's."]
    if "spread" in how:
        notes.append(f"{SPREAD} Our folds' spread (one split's standard deviation, SE × √splits) scaled to TabArena's "
                     "test size (× √(our test rows / TabArena's); the same table, so the ratio of the test shares).")
    if "sampling" in how:
        notes.append(f"{SAMPLING} Ours is one split too: both SEs from the test rows alone, without what another "
                     "training part would change, so lower bounds: RMSE √((κ − 1) / 4n), the residuals' kurtosis κ "
                     "read off our RMSE / MAE ratio through the generalised normal distribution (3 for normal "
                     "residuals), Hanley and McNeil's for AUROC.")
    if test_rows:
        notes.append("Test rows assumed (ours, TabArena's): " + "; ".join(f"{a:,} and {b:,}" for a, b in test_rows) + ".")
    return notes + ([markdown_text(comparison.decl.note)] if comparison.decl.note else [])


class AgainstTabArena(Section):
    """TabArena's default and tuned numbers beside ours, judged (the module docstring)."""

    def markdown(self, ctx):
        md = []
        for comparison in ctx.compared:
            if comparison.board or not comparison.datasets:
                continue
            md += [f"## Against {markdown_text(comparison.decl.name)}", ""]
            if comparison.rows is None:
                md += [comparison.missing, ""]
                continue
            rows = cells(ctx, comparison)
            for t in ctx.tables.values():
                mapped = [d for d in t.datasets if d in comparison.datasets]
                if not mapped:
                    continue
                if t.metric not in ("auroc", "rmse"):
                    md += [f"TabArena scores {t.title.split(' (')[0].lower()}'s datasets ({', '.join(mapped)}) by "
                           "log loss, which our tables do not rank: no TabArena number beside them.", ""]
                    continue
                family = [r for r in rows if r["family"] == t.metric]
                pairs = {}
                for r in family:
                    pairs.setdefault((r["method"], r["dataset"]), {})[r["subtype"]] = r
                table = []
                for (m, d), by in pairs.items():
                    first = next(iter(by.values()))
                    table.append([ctx.show[m], markdown_text(ctx.labels[d]), _ours(ctx, t, first),
                                  *(f"{by[s]['theirs']:.3f}" if s in by else "–" for s in SUBTYPE_NAMES),
                                  " ; ".join(dict.fromkeys(_estimate(by[s]) for s in SUBTYPE_NAMES if s in by)),
                                  *(_verdict(by[s]) if s in by else "–" for s in SUBTYPE_NAMES)])
                names = ", ".join(f"{d} is TabArena's {comparison.datasets[d]}" for d in mapped)
                md += [f"### Test {t.metric} ({names})", ""]
                if not table:
                    md += ["No method here has a TabArena counterpart.", ""]
                    continue
                md += [markdown_table(["method", "dataset", "ours", "TabArena default", "TabArena tuned",
                                       "SEs (ours / TabArena's)", "ours − default", "ours − tuned"], table), "",
                       " ".join(_notes(comparison, family)), "", *ctx.mark_note]
        return md

    def csv_rows(self, ctx):
        out = []
        for comparison in ctx.compared:
            if comparison.rows is None or comparison.board:
                continue
            for r in cells(ctx, comparison):
                e = r["estimate"]
                out.append({"table": f"tabarena_{r['subtype']}", "method": r["method"], "dataset": r["dataset"],
                            "value": r["theirs"], "se": e.theirs if e else math.nan, "difference": r["difference"],
                            "sigmas": r["sigmas"], "within": r["within"]})
        return out


def beyond_block(ctx: Context) -> list[str]:
    """The README block: every cell beyond 2 SE of TabArena's number (``AgainstTabArena``), then the cells within
    by name, so that a README's causes can point at each."""
    lines = []
    for comparison in ctx.compared:
        if comparison.rows is None or comparison.board:
            continue
        judged = [r for r in cells(ctx, comparison) if r["within"] is not None]
        beyond = sorted((r for r in judged if not r["within"]), key=lambda r: (r["dataset"], r["method"], r["subtype"]))
        lines.append(f"Of {len(judged)} cells judged against {markdown_text(comparison.decl.name)} (leaderboard.md, \"Against "
                     f"TabArena\", has each), {len(beyond)} {'lies' if len(beyond) == 1 else 'lie'} beyond 2 SE"
                     + (":" if beyond else "."))
        for r in beyond:
            e = r["estimate"]
            lines.append(f"- {ctx.show.get(r['method'], r['method'])} on {r['dataset']}: ours {r['ours']:.3f} "
                         f"({'tuned' if r['tuned'] else 'defaults'}) against TabArena's {r['subtype']} "
                         f"{r['theirs']:.3f}: {r['difference']:+.3g}, {r['sigmas']:.1f} SE "
                         f"({'our folds’ spread' if e.how == 'spread' else 'test rows alone, a lower bound'})")
        within = [f"{ctx.show.get(r['method'], r['method'])} ({r['subtype']}, {r['dataset']})"
                  for r in sorted(judged, key=lambda r: (r["dataset"], r["method"], r["subtype"])) if r["within"]]
        lines += ["", "Within 2 SE: " + ", ".join(within) + "."] if within else []
    return lines


class TabArenaBoard(Section):
    """Our methods on TabArena's board (the module docstring); nothing where the suite runs no TabArena task."""

    def markdown(self, ctx):
        from tabbench.tabarena import TABARENA_ELO, board, our_rows

        md = []
        for comparison in ctx.compared:
            if not comparison.board:
                continue
            title = [f"## On {markdown_text(comparison.decl.name)}'s board", ""]
            if comparison.rows is None:
                md += title + [comparison.missing, ""]
                continue
            ours = our_rows(ctx.selected, comparison)
            result = board(ours, comparison.rows) if not ours.empty else None
            if result is None or result.table is None:
                md += title + [f"No complete record of ours is on one of the splits {markdown_text(comparison.decl.name)} "
                               "published yet.", ""]
                continue
            t = result.table
            rows = [[str(i + 1), f"**{ctx.show.get(m, m)}**" if r["ours"] else markdown_text(m), "ours" if r["ours"] else "",
                     f"{r['elo']:.0f}", f"{r['elo_low']:.0f} to {r['elo_high']:.0f}", f"{r['rank']:.2f}",
                     f"{r['win_rate']:.3f}"] for i, (m, r) in enumerate(t.iterrows())]
            n_data = len({d for d, _ in result.tasks})
            notes = [f"Our {int(t['ours'].sum())} methods (bold) among {markdown_text(comparison.decl.name)}'s {int((~t['ours']).sum())} "
                     f"on the {len(result.tasks)} of its splits our records cover ({n_data} datasets), ranked "
                     f"together by bencheval {result.version} as TabArena ranks its board: per (dataset, split), "
                     "TabArena's error (1 − AUROC, RMSE, log loss), Elo by Bradley-Terry anchored at "
                     f"{TABARENA_ELO['calibration_framework']} = {TABARENA_ELO['calibration_elo']}, its 95% interval "
                     f"over {TABARENA_ELO['BOOTSTRAP_ROUNDS']} bootstrap resamples of the datasets, mean rank and win "
                     "rate over the splits. TabArena's methods keep their names (default, tuned, tuned + ensemble)."]
            if result.imputed:
                notes.append("Filled with TabArena's default Random Forest's error, as TabArena fills a failure: "
                             + "; ".join(f"{m} on {d} split {f}" for m, d, f in result.imputed) + ".")
            md += title + [markdown_table(["place", "method", "", "Elo", "Elo 95% interval", "mean rank", "win rate"],
                                          rows), "", " ".join(notes), ""]
        return md

    def csv_rows(self, ctx):
        from tabbench.tabarena import board, our_rows

        out = []
        for comparison in ctx.compared:
            if not comparison.board or comparison.rows is None:
                continue
            ours = our_rows(ctx.selected, comparison)
            table = board(ours, comparison.rows).table if not ours.empty else None
            if table is None:
                continue
            for m, r in table.iterrows():
                out += [{"table": f"tabarena_board_{column}", "method": m, "dataset": "", "value": r[column],
                         "ours": bool(r["ours"])} for column in ("elo", "rank")]
        return out
