"""Choose the one free number of NPT's budget-aware size rule (``size: "budget"``, plugins/tabbench_plugins/npt/cost.py:
LADDER, MIN_STEPS, choose_rung) from the meta-training sweep's records (suites/npt-budget-meta.yaml), by their
VALIDATION metrics only.

The rule takes the largest rung of the ladder that can train at least MIN_STEPS steps in the job's budget. On every
meta-training table the sweep ran every rung at ``steps: auto`` under one budget; each record holds the steps that
budget bought the rung (``info.steps``) and the validation metrics of its validation-selected state. For each
candidate threshold the rule's pick on each table is the largest rung whose recorded steps reach it (else the
smallest); the criterion is the mean VALIDATION rank of the picks among the table's rungs (log-loss for
classification, RMSE for regression; a failed rung ranks last). The threshold with the lowest mean rank wins; among
equal ones the smallest (the larger models, nearer the paper's configuration). Test metrics are never read: the
four small UCI tables' test parts are uci-small's verdict, and no breadth table is in the sweep
(tests/test_npt_budget_rule.py checks both facts and that MIN_STEPS is what this script selects).

    python benchmarks/npt_budget_rule.py [results/npt-budget-meta]

prints, per table, each rung's steps and validation metric and rank, then the mean rank of every candidate
threshold, of each rung alone and of the best rung per table (the oracle no rule can beat).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "plugins"))

from tabbench.store import load_records  # noqa: E402
from tabbench_plugins.npt.cost import LADDER  # noqa: E402

#: The thresholds tried: steps a rung must be able to train in the job's budget.
CANDIDATES = (25, 50, 100, 150, 200, 300, 400, 500, 750, 1000, 1500, 2000, 3000)

#: The validation metric ranked per task (lower is better for both).
CRITERION = {"binary": "log_loss", "multiclass": "log_loss", "regression": "rmse"}


def rung_table(records: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, rung): the steps its budget bought, its validation criterion and its rank among the
    dataset's rungs (1 = best; failed and missing rungs last). Only the sweep's rung methods (``npt-<rung>``)."""
    names = [r.name for r in LADDER]
    rows = []
    for rec in records.to_dict("records"):
        rung = rec["method"].removeprefix("npt-")
        if rung not in names:
            continue
        ok = rec["status"] == "ok"
        info = rec.get("info") if isinstance(rec.get("info"), dict) else {}
        rows.append({"dataset": rec["dataset"], "task": rec["task"], "rung": rung, "ok": ok,
                     "steps": info.get("steps") if ok else None,
                     "criterion": rec.get(f"val_{CRITERION[rec['task']]}") if ok else None})
    table = pd.DataFrame(rows)
    table["rank"] = (table["criterion"].fillna(float("inf"))
                     .groupby(table["dataset"]).rank(method="average"))
    return table


def complete(table: pd.DataFrame) -> bool:
    """Every dataset has a record of every rung."""
    return bool(len(table)) and bool((table.groupby("dataset")["rung"].nunique() == len(LADDER)).all())


def picks(table: pd.DataFrame, threshold: int) -> pd.Series:
    """The rule's rung per dataset at ``threshold``: the largest whose recorded steps reach it, else the smallest."""
    order = {r.name: i for i, r in enumerate(LADDER)}

    def pick(group):
        reach = group[group["steps"].fillna(0) >= threshold]
        return max(reach["rung"], key=order.get) if len(reach) else LADDER[0].name

    return table.groupby("dataset").apply(pick, include_groups=False)


def mean_rank(table: pd.DataFrame, chosen: pd.Series) -> float:
    ranks = table.set_index(["dataset", "rung"])["rank"]
    return float(sum(ranks[(d, r)] for d, r in chosen.items()) / len(chosen))


def scores(table: pd.DataFrame) -> pd.Series:
    """Mean validation rank of the rule's picks for every candidate threshold."""
    return pd.Series({t: mean_rank(table, picks(table, t)) for t in CANDIDATES}, name="mean validation rank")


def select(table: pd.DataFrame) -> int:
    """The threshold with the lowest mean validation rank; the smallest among equals."""
    s = scores(table)
    return int(min(t for t in CANDIDATES if s[t] <= s.min() + 1e-12))


def main(folder: str = "results/npt-budget-meta") -> None:
    table = rung_table(load_records(ROOT / folder))
    if not complete(table):
        print(f"{folder}: the sweep is not complete ({table['dataset'].nunique()} datasets, "
              f"{len(table)} of {table['dataset'].nunique() * len(LADDER)} rung records)")
    wide = table.pivot(index="dataset", columns="rung", values=["steps", "criterion", "rank"])
    pd.set_option("display.width", 200)
    print(wide.reindex(columns=[r.name for r in LADDER], level=1).round(4).to_string())
    print("\nmean validation rank of the rule's picks, per threshold (MIN_STEPS):")
    print(scores(table).round(3).to_string())
    order = [r.name for r in LADDER]
    alone = {r: mean_rank(table, pd.Series(r, index=sorted(table["dataset"].unique()))) for r in order}
    print("\neach rung alone:", {k: round(v, 3) for k, v in alone.items()})
    best = table.loc[table.groupby("dataset")["rank"].idxmin()].set_index("dataset")["rung"]
    print("best rung per table (oracle):", round(mean_rank(table, best), 3))
    print(f"\nselected MIN_STEPS = {select(table)}")


if __name__ == "__main__":
    main(*sys.argv[1:])
