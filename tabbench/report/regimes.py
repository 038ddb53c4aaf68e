"""Split regimes (issue 64): how much each method's place depends on whether rows are split as the data is
(grouped or temporal splits, tabbench/data/splits.py) or at random, from the records of a folder that holds both.

Pairing. A dataset run under a matching split (records' ``split_regime`` grouped or temporal) and under its
random control (``split_regime`` random) has the same features, so the same dataset fingerprint: two datasets
of a folder with one fingerprint, one of each regime, are a pair (suites/matching-splits.yaml names them NAME
and NAME.random). Records without ``split_regime`` (every other suite's) pair nothing, and the section is empty.

What is compared, all from the per-family tables every section reads (``family.summarise``: each method's test
metric per dataset, NaN where it has no complete result, ranked as the leaderboard ranks, a missing result at
the worst rank):

- per pair, the methods' ranking under each regime and Kendall's tau between the two (scipy's tau-b: ties
  allowed); a tau of 1 says the split changed no pairwise order;
- overall, each method's mean rank over the pairs under each regime (the families pooled, as the leaderboard's
  overall rank), its place (1 = best mean rank; ties share the better place), Kendall's tau between the two
  orders of mean ranks, and its Elo under each regime (tabbench.report.arena: bencheval, anchored as there);
- per method, the change in mean rank, place and Elo from random to matching splits, whether that change is
  told apart from none (Wilcoxon's signed-rank test on its rank per dataset under the two regimes, over the
  pairs, Holm-corrected over the methods: ``p_change``; with few pairs no change can be), and one generated
  sentence per method; a study leads with its own methods' (``led_by``: the NPT study asks whether NPT's place
  holds once a test row's twin, its group or its later self, is no longer among the training rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from tabbench.report.format import markdown_table
from tabbench.report.section import Context, Section

MATCHING = ("grouped", "temporal")
ALPHA = 0.05
RANDOM = "random"


@dataclass(frozen=True)
class Pair:
    dataset: str  # the matching split's dataset name, the pair's name in the tables
    control: str  # the random split's dataset name
    regime: str  # grouped | temporal


def pairs(records: pd.DataFrame) -> list[Pair]:
    """The (matching, random) dataset pairs of a folder's records: one fingerprint, one dataset of each regime."""
    if records.empty or "split_regime" not in records or "dataset_fingerprint" not in records:
        return []
    regimes = records.dropna(subset=["split_regime"])[["dataset", "dataset_fingerprint", "split_regime"]]
    out = []
    for _, group in regimes.drop_duplicates().groupby("dataset_fingerprint", sort=False):
        matching = group[group["split_regime"].isin(MATCHING)]
        control = group[group["split_regime"] == RANDOM]
        if len(matching) == 1 and len(control) == 1:
            out.append(Pair(matching["dataset"].iloc[0], control["dataset"].iloc[0], matching["split_regime"].iloc[0]))
    return sorted(out, key=lambda p: p.dataset)


def regime_tables(tables: dict, found: list[Pair]) -> tuple[dict, dict]:
    """(matching, random): the per-family tables restricted to each regime's datasets, the random ones named as
    their matching twin, so that both hold the same columns."""
    rename = {p.control: p.dataset for p in found}
    matching, control = {}, {}
    for task, table in tables.items():
        ours = [p.dataset for p in found if p.dataset in table.mean.columns and p.control in table.mean.columns]
        if not ours:
            continue
        theirs = [next(p.control for p in found if p.dataset == d) for d in ours]
        matching[task] = replace(table, mean=table.mean[ours], se=table.se[ours])
        control[task] = replace(table, mean=table.mean[theirs].rename(columns=rename),
                                se=table.se[theirs].rename(columns=rename))
    return matching, control


def _tau(a: pd.Series, b: pd.Series) -> float:
    from scipy.stats import kendalltau

    a, b = a.align(b, join="inner")
    if len(a) < 2 or a.nunique() < 2 or b.nunique() < 2:
        return math.nan
    return float(kendalltau(a.to_numpy(), b.to_numpy()).statistic)


def _place(mean_rank: pd.Series) -> pd.Series:
    from tabbench.report.family import place

    return pd.Series({m: place(mean_rank, m) for m in mean_rank.index}, index=mean_rank.index, dtype=int)


@dataclass
class Comparison:
    """Everything the section shows; ``per_dataset``: pair name -> (ranks under random, under matching, tau)."""

    found: list
    per_dataset: dict
    overall: pd.DataFrame  # per method: rank_random, rank_matching, place_random, place_matching, elo_random, ...
    tau: float
    n_methods: int


def compare(ctx: Context) -> Comparison | None:
    """The comparison of the folder's paired regimes, or None when it has no pair; computed once per Context
    (the section's Markdown and CSV rows, and a study's verdict, read it)."""
    return ctx.once("split regimes", lambda: _compare(ctx))


def _compare(ctx: Context) -> Comparison | None:
    from tabbench.report.family import pooled_ranks

    found = pairs(ctx.records)
    if not found:
        return None
    matching, control = regime_tables(ctx.tables, found)
    if not matching:
        return None
    ranks_m, ranks_r = pooled_ranks(matching), pooled_ranks(control)
    per_dataset = {d: (ranks_r[d], ranks_m[d], _tau(ranks_r[d], ranks_m[d])) for d in ranks_m.columns}
    overall = pd.DataFrame({"rank_random": ranks_r.mean(axis=1), "rank_matching": ranks_m.mean(axis=1)})
    overall["place_random"], overall["place_matching"] = _place(overall["rank_random"]), _place(overall["rank_matching"])
    for name, tables, mean_rank in (("random", control, overall["rank_random"]),
                                    ("matching", matching, overall["rank_matching"])):
        overall[f"elo_{name}"] = _elo(tables, ctx.selected, mean_rank)
    overall["p_change"] = _change_p(ranks_r, ranks_m)
    overall = overall.sort_values(["rank_matching", "rank_random"]).rename_axis("method")
    return Comparison(found, per_dataset, overall, _tau(overall["rank_random"], overall["rank_matching"]),
                      len(overall))


def _change_p(ranks_random: pd.DataFrame, ranks_matching: pd.DataFrame) -> pd.Series:
    """Per method, the Holm-adjusted p-value of Wilcoxon's signed-rank test that its rank per dataset is the same
    under both regimes (scipy; statsmodels' Holm, over the methods); 1 where its rank moved on no dataset."""
    from scipy.stats import wilcoxon
    from statsmodels.stats.multitest import multipletests

    raw = {}
    for method in ranks_matching.index:
        a, b = ranks_random.loc[method].align(ranks_matching.loc[method], join="inner")
        raw[method] = 1.0 if (a == b).all() else float(wilcoxon(b.to_numpy(), a.to_numpy()).pvalue)
    raw = pd.Series(raw, dtype=float)
    return pd.Series(multipletests(raw.to_numpy(), method="holm")[1], index=raw.index) if len(raw) else raw


def _elo(tables: dict, selected: pd.DataFrame, mean_rank: pd.Series) -> pd.Series:
    """bencheval's Elo on these tables (tabbench.report.arena), NaN where it cannot be computed."""
    from tabbench.report import arena

    agg = arena.aggregates(tables, selected, mean_rank)
    return agg.table["elo"].reindex(mean_rank.index) if agg.table is not None else pd.Series(np.nan, mean_rank.index)


def _moved(before: int, after: int) -> str:
    if after == before:
        return "its place holds"
    step = abs(after - before)
    return f"it {'falls' if after > before else 'rises'} {step} place{'s' if step > 1 else ''}"


def sentence(cmp: Comparison, method: str) -> str:
    """One method's move from random to matching splits, in words."""
    row = cmp.overall.loc[method]
    before, after = int(row["place_random"]), int(row["place_matching"])
    elo = ("" if math.isnan(row["elo_random"]) or math.isnan(row["elo_matching"])
           else f", Elo {row['elo_random']:.0f} -> {row['elo_matching']:.0f}")
    told = "told apart from no change" if row["p_change"] < ALPHA else "not told apart from no change"
    return (f"{method}: place {before} of {cmp.n_methods} under random splits, {after} under matching splits (mean "
            f"rank {row['rank_random']:.2f} -> {row['rank_matching']:.2f}{elo}): {_moved(before, after)}; its "
            f"ranks per dataset {told} (Wilcoxon-Holm p = {row['p_change']:.2g} over {len(cmp.found)} pairs).")


def led_by(cmp: Comparison, methods: list, question: str) -> str:
    """``question`` answered for ``methods`` (a study's own, e.g. the NPT study's): whether their places hold from
    random to matching splits, then each one's move."""
    rows = cmp.overall.loc[methods]
    moved = [m for m in methods if rows.loc[m, "place_random"] != rows.loc[m, "place_matching"]]
    told = [m for m in moved if rows.loc[m, "p_change"] < ALPHA]
    if not moved:
        verdict = "it holds: the same places under both regimes"
    elif not told:
        verdict = (f"the places move ({', '.join(moved)}), but no move is told apart from no change, so within what "
                   "these pairs can separate it holds")
    else:
        verdict = (f"it does not hold for {', '.join(told)}: the split moved {'it' if len(told) == 1 else 'them'} "
                   "by more than the pairs' spread allows by chance")
    return f"{question} Over {len(cmp.found)} paired datasets {verdict}. " + " ".join(sentence(cmp, m) for m in methods)


def headline(cmp: Comparison) -> str:
    """What the section says first: the largest moves from random to matching splits."""
    change = cmp.overall["place_matching"] - cmp.overall["place_random"]
    if not change.any():
        return f"Over {len(cmp.found)} paired datasets no method's place changes with the split."
    moved = dict.fromkeys([change.idxmin(), change.idxmax()])  # the largest rise, then the largest fall
    return (f"Over {len(cmp.found)} paired datasets the largest moves: "
            + " ".join(sentence(cmp, m) for m in moved if change[m]))


class SplitRegimes(Section):
    """Rankings under matching and random splits, side by side; only where a folder holds paired regimes."""

    def markdown(self, ctx: Context) -> list[str]:
        cmp = compare(ctx)
        if cmp is None:
            return []
        kinds = ", ".join(f"{p.dataset} ({p.regime}, control {p.control})" for p in cmp.found)
        md = ["## Splits that match the data", "",
              f"{len(cmp.found)} datasets run twice, under a split that matches how their rows are related and under "
              f"a random split of the same sizes: {kinds}. Places by mean rank over these datasets (1 = best); "
              "Elo by bencheval (as in the table above) on each regime's datasets alone.", "", *regimes_block(ctx)]
        md += ["Per dataset: the methods' order under each split (best first; `=` a tie) and Kendall's tau between "
               "their ranks under the two.", ""]
        md += [markdown_table(["dataset", "split", "order, random", "order, matching", "tau"], [
            [p.dataset, p.regime, _order(cmp.per_dataset[p.dataset][0], ctx.show),
             _order(cmp.per_dataset[p.dataset][1], ctx.show), _text(cmp.per_dataset[p.dataset][2])]
            for p in cmp.found if p.dataset in cmp.per_dataset]), ""]
        md += [f"- {sentence(cmp, m)}" for m in cmp.overall.index] + [""]
        return md

    def csv_rows(self, ctx: Context) -> list[dict]:
        cmp = compare(ctx)
        if cmp is None:
            return []
        rows = [{"table": f"regime_{column}", "method": m, "dataset": "", "value": r[column], "se": np.nan}
                for m, r in cmp.overall.iterrows() for column in ("rank_random", "rank_matching", "elo_random",
                                                                  "elo_matching", "p_change")]
        rows += [{"table": "regime_tau", "method": "", "dataset": d, "value": tau, "se": np.nan}
                 for d, (_, _, tau) in cmp.per_dataset.items()]
        return rows + [{"table": "regime_tau", "method": "", "dataset": "", "value": cmp.tau, "se": np.nan}]


def overall_table(cmp: Comparison, show: dict) -> list[str]:
    """Per method (best under matching splits first): mean ranks, place and Elo under both regimes, and the
    Holm-adjusted p-value of its rank change."""
    rows = [[show.get(m, m), f"{r['rank_random']:.2f}", f"{r['rank_matching']:.2f}",
             f"{int(r['place_random'])} -> {int(r['place_matching'])}", _elo_text(r), f"{r['p_change']:.2g}"]
            for m, r in cmp.overall.iterrows()]
    return [markdown_table(["method", "mean rank, random", "mean rank, matching", "place", "Elo, random -> matching",
                            "p, rank change"], rows), "",
            f"p, rank change: Wilcoxon's signed-rank test of the method's rank per dataset under the two regimes over "
            f"{len(cmp.found)} pairs, Holm-corrected over {cmp.n_methods} methods; below {ALPHA} the split moved "
            "it by more than the pairs' spread allows by chance.", ""]


def regimes_block(ctx: Context) -> list[str]:
    """The README block ``split-regimes``: the largest moves, Kendall's tau between the two orders and the
    per-method table; nothing where the folder holds no paired regimes."""
    cmp = compare(ctx)
    if cmp is None:
        return []
    tau = "n/a" if math.isnan(cmp.tau) else f"{cmp.tau:.2f}"
    return [headline(cmp), "", f"Kendall's tau between the two orders of mean ranks: {tau} over {cmp.n_methods} "
            "methods (1: the split changes no pairwise order).", "", *overall_table(cmp, ctx.show)]


def _text(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}"


def _elo_text(row) -> str:
    if math.isnan(row["elo_random"]) or math.isnan(row["elo_matching"]):
        return "n/a"
    return f"{row['elo_random']:.0f} -> {row['elo_matching']:.0f} ({row['elo_matching'] - row['elo_random']:+.0f})"


def _order(ranks: pd.Series, show: dict) -> str:
    """Methods best first, a tie joined by '='."""
    return " > ".join(" = ".join(sorted(show.get(m, m) for m in ranks.index[ranks == rank]))
                      for rank in sorted(ranks.unique()))
