"""What a leaderboard's tables say about their rows: the names shown (with the marks for a transductive method
and one the publication never ran), the notes under the tables, and the library versions a table names. Read by
every section (tabbench.report.sections) and by nothing below it, so that it imports no part of the report."""

from __future__ import annotations

import pandas as pd

from tabbench.report.family import RUN_KEYS
from tabbench.report.format import NOT_PUBLISHED_MARK, TRANSDUCTIVE_MARK, markdown_text


TRANSDUCTIVE_NOTE = (f"{TRANSDUCTIVE_MARK} transductive: the method's fit saw the validation and test rows' features "
                     "(never their targets), as the NPT authors' code does; an inductive method never sees test rows, "
                     "so the two are not the same comparison.")


#: Under a table where some mean is of fewer folds than its dataset has (format.Cell).
DEVICE_NOTE = ("A mean marked \"(GPU)\" rests on records made on a GPU, pooled with CPU folders (`tabbench "
               "leaderboard --across-devices`: per method and dataset, the device whose records cover the most folds); "
               "every other mean here ran on CPUs. The method's parameters are the same on both but the device.")
FOLDS_NOTE = ("A mean marked \"(k of n folds)\" is over the k of the dataset's n folds the method ran (n: what the "
              "suite declares, and never fewer than the most any method in this table ran there); it is not a complete "
              "result and takes the worst rank.")


def not_published_note(published) -> str:
    return (f"{NOT_PUBLISHED_MARK} not in {markdown_text(published.name)}: a model the publication did not run, so it has no "
            "published number or rank; its ranks here are among this run's methods only.")


def display_names(frame: pd.DataFrame, published=None) -> dict:
    """method -> the name shown in tables: transductive methods carry TRANSDUCTIVE_MARK; with ``published``,
    methods whose model (the records' ``model``, a registry name) the publication never reports carry
    NOT_PUBLISHED_MARK. A method named apart from its model (mlp-tuned: model mlp) counts as that model."""
    flags = frame["transductive"].fillna(False).astype(bool) if "transductive" in frame else \
        pd.Series(False, index=frame.index)
    transductive = set(frame.loc[flags, "method"])
    models = frame["model"].fillna(frame["method"]) if "model" in frame else frame["method"]
    reported = published.methods() if published is not None else None
    not_published = set() if reported is None else set(frame.loc[~models.isin(reported), "method"])
    show = {}
    for m in frame["method"].unique():
        marks = (TRANSDUCTIVE_MARK if m in transductive else "") + (NOT_PUBLISHED_MARK if m in not_published else "")
        show[m] = f"{m} {marks}" if marks else m
    return show


def mark_notes(show: dict, published=None) -> list[str]:
    """The notes that explain the marks some shown name carries."""
    names = " ".join(show.values())
    notes = [TRANSDUCTIVE_NOTE] if TRANSDUCTIVE_MARK in names else []
    return notes + ([not_published_note(published)] if published is not None and NOT_PUBLISHED_MARK in names else [])


def part_searched(records: pd.DataFrame) -> list[tuple[str, str, str, int, int]]:
    """Tuned runs whose search is incomplete: (method, dataset, folds, trials run, trials declared), one per
    method, dataset and trial count, for splits where a record says how many trials its method has there
    (``n_trials``). Records written before ``n_trials`` existed say nothing, so a split none of whose records
    says is not checked, but they count among the trials run of a split that a later record declares (a run
    resumed after the field came). A run's trials count whether they succeeded or failed; its selected trial
    is the best of those run."""
    if records.empty or "n_trials" not in records or records["trial"].isna().all():
        return []
    tuned = records[records["trial"].notna()]
    runs = tuned.groupby(RUN_KEYS, dropna=False).agg(ran=("trial", "nunique"), of=("n_trials", "max")).reset_index()
    short = runs[runs["of"].notna() & (runs["ran"] < runs["of"])]
    out = []
    for (method, dataset, ran, of), group in short.groupby(["method", "dataset", "ran", "of"], sort=True):
        folds = ", ".join(str(f) for f in sorted(group["fold"].unique()))
        out.append((method, dataset, folds, int(ran), int(of)))
    return out


def part_searched_note(searches, show) -> list[str]:
    """The Markdown line under a task's tables that names its incomplete searches (``part_searched``)."""
    if not searches:
        return []
    return ["Search incomplete (the run stopped before every trial of these splits ran; each rests on the best of "
            "the trials that did, so the cell is provisional): " + "; ".join(
                f"{show.get(m, m)} on {d}, fold{'s' if ',' in folds else ''} {folds} ({ran} of {of} trials)"
                for m, d, folds, ran, of in searches) + ".", ""]


#: The libraries whose versions can move a regenerated table's last digits (the bootstrap Elo intervals).
NUMERIC_LIBRARIES = ("numpy", "scipy", "pandas", "scikit-learn", "bencheval")


def library_versions() -> str:
    """"numpy 2.4.6, scipy 1.17.1, ...": the versions of NUMERIC_LIBRARIES here (read from their metadata,
    nothing imported), as a leaderboard names them."""
    from importlib.metadata import PackageNotFoundError, version

    def one(name):
        try:
            return f"{name} {version(name)}"
        except PackageNotFoundError:
            return f"{name} absent"

    return ", ".join(one(name) for name in NUMERIC_LIBRARIES)
