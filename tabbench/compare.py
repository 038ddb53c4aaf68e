"""Two result folders side by side: is a run a reproduction of another (e.g. of the published one)?

Per method and dataset, the primary test metric of the runs both folders hold (same method,
dataset and split fingerprints, fold, repeat and seed; for tuned methods the configuration each
folder selected), ours against theirs, and a verdict:

* a model whose spec is ``deterministic`` must give the same number on every run: the largest
  per-run difference may be float noise at most (``FLOAT_NOISE`` relative), else it is FLAGGED;
* a seeded neural model (``deterministic=False``: torch training, whose last digits depend on the
  CPU's kernels and grow over the epochs) run on the same hardware (the records' fingerprint id,
  tabbench.measure) with the same torch version, threads and CPU kernel level must repeat as a
  deterministic one does; run elsewhere, or in a folder whose records predate the fingerprint, it may
  differ, but its mean over folds must stay within ``BAND_SE`` combined standard errors of the two
  means (tabbench.report.agreement, the one rule every report judges by), the error bars the leaderboard prints (with a single split, a holdout, there is no standard
  error: a difference is reported, not judged).

A run that its time budget cut short (its record's ``info.stopped_by_time_budget``) trained as far as the machine
let it in that time: on a busy or slower machine, less. Its cell says so in its note, and the report counts such
cells, so that a verdict moved by the machine's load is not read as a library, split or bug.

Whether a model is deterministic is read from the records (the planner writes the spec's flag into each),
so a comparison needs no model registry and gives the same verdicts whichever plugins are installed.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from tabbench.measure import machines, repeat_key
from tabbench.metrics import PRIMARY
from tabbench.report.agreement import BAND_SE, band
from tabbench.report.format import markdown_table, significant
from tabbench.report.leaderboard import RUN_KEYS, select_trials
from tabbench.store import Store

#: Relative difference below which two runs of a deterministic model count as equal (float rounding
#: of a different BLAS or CPU; a changed split, library or bug moves metrics far more).
FLOAT_NOISE = 1e-6
FLAGGED = "FLAGGED"
NO_BAND = "differs, one run: no band"
COLUMNS = ["method", "dataset", "task", "metric", "runs", "ours", "theirs", "difference", "max_run_difference",
           "allowed", "kind", "verdict", "note"]


def _metric_column(frame: pd.DataFrame) -> pd.Series:
    """The primary test metric of each record's task."""
    values = pd.Series(np.nan, index=frame.index)
    for task, (metric, _) in PRIMARY.items():
        column = f"test_{metric}"
        if column in frame:
            mask = frame["task"] == task
            values[mask] = frame.loc[mask, column]
    return values


def _selected(folder: Path) -> pd.DataFrame:
    frame = Store(folder).frame()
    if frame.empty:
        return frame
    frame = select_trials(frame)
    environments = frame["environment"] if "environment" in frame else pd.Series(None, index=frame.index)
    info = frame["info"] if "info" in frame else pd.Series(None, index=frame.index)
    # a GPU fit with deterministic: false (NPT) does not repeat to the bit even on the same machine
    repeatable = info.map(lambda i: not (isinstance(i, dict) and i.get("deterministic") is False))
    stopped = info.map(lambda i: isinstance(i, dict) and bool(i.get("stopped_by_time_budget")))
    return frame.assign(value=_metric_column(frame), repeat_key=environments.map(repeat_key), repeatable=repeatable,
                        stopped=stopped)


#: The note of a cell where runs were cut short by their time budget (``_stopped_note``).
STOPPED = "stopped by their time budget"


def _stopped_note(runs: pd.DataFrame) -> str:
    """'' or which side's runs their time budget cut short: they trained as far as the machine let them, and a
    busy or slower machine lets them train less, so the difference may be the machine's load."""
    sides = [f"{int(runs[f'stopped_{side}'].fillna(False).astype(bool).sum())} of {len(runs)} in {side}"
             for side in ("ours", "theirs") if runs[f"stopped_{side}"].fillna(False).astype(bool).any()]
    if not sides:
        return ""
    return (f"runs {STOPPED} ({', '.join(sides)}): they trained as far as the machine let them in that time, less on "
            "a busy or slower one; re-run them on an idle machine (`--force --models M --datasets D`) before "
            "reading the difference as a library, split or bug")


def _se(values: pd.Series) -> float:
    return float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0


def _same_kernels(runs: pd.DataFrame) -> tuple[bool, str]:
    """Whether every pair of runs ran on the same hardware, torch version, threads and kernel level (so a
    seeded model must repeat exactly), and if not, a note saying why."""
    if not (runs["repeatable_ours"].astype(bool) & runs["repeatable_theirs"].astype(bool)).all():
        return False, "runs without deterministic kernels (deterministic: false): repeatable only to the band"
    ours, theirs = runs["repeat_key_ours"], runs["repeat_key_theirs"]
    if ours.isna().any() or theirs.isna().any():
        where = " and ".join(side for side, keys in (("ours", ours), ("theirs", theirs)) if keys.isna().any())
        return False, f"hardware not recorded in {where}"
    differ = [(a, b) for a, b in zip(ours, theirs) if a != b]
    if not differ:
        return True, ""
    (a, b), fields = differ[0], ("hardware", "torch", "threads", "kernels")
    return False, "different " + ", ".join(f"{f} ({x} / {y})" for f, x, y in zip(fields, a, b) if x != y)


def _cell(method, dataset, runs: pd.DataFrame, deterministic: bool | None) -> dict:
    task = runs["task"].iloc[0]
    metric = PRIMARY[task][0]
    ok = runs[(runs["status_ours"] == "ok") & (runs["status_theirs"] == "ok")]
    same, why = (True, "") if deterministic else _same_kernels(ok)
    row = {"method": method, "dataset": dataset, "task": task, "metric": metric, "runs": len(ok),
           "kind": "deterministic" if deterministic else "seeded, same hardware" if same else "seeded"}
    notes = [] if deterministic is not None else ["the records do not say whether the model is deterministic "
                                                 "(written before they did): judged as seeded"]
    if why and not ok.empty:
        notes.append(why)
    failed = len(runs) - len(ok)
    if failed:
        notes.append(f"{failed} run(s) failed in one folder")
    if _stopped_note(runs):
        notes.append(_stopped_note(runs))
    if "trial_ours" in runs and (runs["trial_ours"].fillna(-1) != runs["trial_theirs"].fillna(-1)).any():
        notes.append(f"{int((runs['trial_ours'].fillna(-1) != runs['trial_theirs'].fillna(-1)).sum())} run(s) "
                     "selected another configuration")
    if ok.empty:
        return {**row, "verdict": FLAGGED, "note": "; ".join(notes or ["no run succeeded in both"])}
    ours, theirs = ok["value_ours"], ok["value_theirs"]
    diff = ours - theirs
    row.update(ours=float(ours.mean()), theirs=float(theirs.mean()), difference=float(diff.mean()),
               max_run_difference=float(diff.abs().max()))
    scale = max(1.0, float(theirs.abs().max()))
    if deterministic or same:
        row["allowed"] = FLOAT_NOISE * scale
        verdict_ok = row["max_run_difference"] <= row["allowed"]
    else:
        # the band of every report that judges agreement (tabbench.report.agreement), never under float noise
        row["allowed"] = max(FLOAT_NOISE * scale, band(_se(ours), _se(theirs)))
        verdict_ok = abs(row["difference"]) <= row["allowed"]
    if row["max_run_difference"] == 0:
        verdict = "identical"
    elif not (deterministic or same) and len(ok) < 2:
        verdict, row["allowed"] = NO_BAND, np.nan  # one split (a holdout): no standard error to set a band
    elif verdict_ok:
        verdict = "float noise" if deterministic or same else "within band"
    else:
        verdict = FLAGGED
    if failed and verdict != FLAGGED:
        verdict = FLAGGED
    return {**row, "verdict": verdict, "note": "; ".join(notes)}


def _deterministic(runs: pd.DataFrame) -> bool | None:
    """What the records say of the model (``deterministic``, written when the job was planned): ours,
    else theirs; None where neither folder's records say (records written before they did)."""
    for column in ("deterministic_ours", "deterministic_theirs"):
        said = runs[column].dropna() if column in runs else ()
        if len(said):
            return bool(said.iloc[0])
    return None


def compare(ours: str | Path, theirs: str | Path) -> pd.DataFrame:
    """One row per (method, dataset) that ``ours`` holds: the comparison with ``theirs`` (see module doc).
    Read from the records alone: no model registry is needed."""
    a, b = _selected(Path(ours)), _selected(Path(theirs))
    if a.empty:
        return pd.DataFrame(columns=COLUMNS)
    keys = RUN_KEYS + ["dataset_fingerprint", "split_fingerprint"]
    fields = ["task", "model", "value", "status", "trial", "deterministic", "repeat_key", "repeatable", "stopped"]
    a, b = (frame if "deterministic" in frame else frame.assign(deterministic=None) for frame in (a, b))
    if b.empty:
        b = pd.DataFrame(columns=keys + fields)
    joined = a[keys + fields].merge(b[keys + fields], on=keys, how="left", suffixes=("_ours", "_theirs"),
                                    indicator=True)
    joined = joined.rename(columns={"task_ours": "task"})
    rows = []
    for (method, dataset), runs in joined.groupby(["method", "dataset"], sort=True):
        matched = runs[runs["_merge"] == "both"]
        if matched.empty:
            other = b[(b["method"] == method) & (b["dataset"] == dataset)] if len(b) else b
            note = ("their runs of it are on other data or splits (fingerprints differ)" if len(other)
                    else "not in their folder")
            rows.append({"method": method, "dataset": dataset, "task": runs["task"].iloc[0],
                         "metric": PRIMARY[runs["task"].iloc[0]][0], "runs": 0, "verdict": "not compared",
                         "note": note})
            continue
        row = _cell(method, dataset, matched, _deterministic(matched))
        if len(matched) < len(runs):
            row["note"] = "; ".join(x for x in (row["note"], f"{len(runs) - len(matched)} run(s) not in theirs") if x)
        rows.append(row)
    table = pd.DataFrame(rows, columns=COLUMNS)
    table.attrs["machines"] = {side: machines(frame["environment"]) if "environment" in frame else []
                               for side, frame in (("ours", a), ("theirs", b))}
    return table


def report(table: pd.DataFrame, ours: Path, theirs: Path) -> str:
    """The comparison as markdown: a table, the verdict counts and the tolerances it used."""
    lines = [f"# {ours} against {theirs}", "",
             "Primary test metric per method and dataset, mean over the runs both folders hold "
             "(same data, split, fold and seed); difference = ours - theirs.", ""]
    header = ["method", "dataset", "metric", "runs", "ours", "theirs", "difference", "max per run", "allowed",
              "verdict", "note"]
    rows = [[r.method, r.dataset, r.metric, r.runs, significant(r.ours), significant(r.theirs),
             significant(r.difference, 2), significant(r.max_run_difference, 2), significant(r.allowed, 2),
             f"**{r.verdict}**" if r.verdict == FLAGGED else r.verdict, r.note or ""] for r in table.itertuples()]
    lines.append(markdown_table(header, rows))
    lines += _hardware_lines(table.attrs.get("machines") or {})
    counts = table["verdict"].value_counts()
    lines += ["", f"{len(table)} method x dataset cells: "
              + ", ".join(f"{n} {v}" for v, n in counts.items()) + "."]
    lines += [stopped_line(table)] if stopped_line(table) else []
    lines += ["",
              f"Allowed: deterministic models (k-NN, tree ensembles, boosters) must match run for run to float "
              f"noise ({FLOAT_NOISE:g} relative), and so must seeded neural models (spec deterministic=False) "
              "run on the same hardware (fingerprint id) with the same torch version, threads and CPU kernel "
              "level ('seeded, same hardware'); elsewhere, or where a folder's records predate the fingerprint, "
              "they may differ in the last digits of every step, so their mean over folds must lie within "
              f"{BAND_SE:g} combined standard errors of the two means (with one run, a holdout, there is no "
              f"band: '{NO_BAND}'). FLAGGED: outside that, or a run failed in one folder only.", ""]
    return "\n".join(lines)


def stopped_line(table: pd.DataFrame) -> str:
    """'' or a sentence naming the cells whose runs their time budget cut short (and how many of them FLAGGED)."""
    cells = table[table["note"].fillna("").str.contains(STOPPED, regex=False)] if len(table) else table
    if cells.empty:
        return ""
    flagged = int((cells["verdict"] == FLAGGED).sum())
    names = ", ".join(f"{m}/{d}" for m, d in zip(cells["method"], cells["dataset"]))
    return (f"{len(cells)} cell(s) hold runs {STOPPED} ({names}; {flagged} of them {FLAGGED}): on a busy or slower "
            "machine such runs train less in the same time, so their difference may be the machine's load, not "
            "the code; re-run them on an idle machine to tell.")


def _hardware_lines(sides: dict) -> list:
    """Which machines each folder's runs were made on, and a warning when the two folders differ."""
    if not any(sides.values()):
        return []
    lines = ["", "Hardware (the records' fingerprints):"]
    for side, found in sides.items():
        lines += [f"- {side}: {m['label']} ({m['records']} runs)" for m in found]
    ids = {side: {m["id"] for m in found} for side, found in sides.items()}
    if ids.get("ours") != ids.get("theirs"):
        lines.append("- The two folders were made on different hardware (or one did not record it): seeded "
                     "neural models are held to the band, not to an exact repeat, and fit times are not comparable.")
    return lines


def write_comparison(ours: str | Path, theirs: str | Path) -> tuple[pd.DataFrame, str, Path]:
    """Compare, and write ``comparison.md`` and ``comparison.csv`` into ``ours``."""
    ours, theirs = Path(ours), Path(theirs)
    table = compare(ours, theirs)
    text = report(table, ours, theirs)
    (ours / "comparison.md").write_text(text)
    table.to_csv(ours / "comparison.csv", index=False)
    return table, text, ours / "comparison.md"
