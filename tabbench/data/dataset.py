"""The Dataset builder: a raw table -> typed feature frame + encoded target + metadata + content fingerprint.

The top of the data layer, with splits: ``load_dataset`` reads a dataset from wherever
tabbench.data.mirror locates it; ``describe`` and ``fetch`` are what ``tabbench datasets`` and
``tabbench fetch`` show. DataError messages name the column or field, not the dataset (the caller
that knows the suite entry adds that once).
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd

from tabbench.data.cache import DataPaths, DownloadError, checked_sha256
from tabbench.data.formats import level
from tabbench.data.mirror import find_stand_in, load_raw, locate
from tabbench.data.splits import make_splits, regime, split_column
from tabbench.data.types import (BUNDLED, CACHE, LOCAL, MIRROR, MISSING, REMOTE, DataError, Dataset, DatasetConfig,
                                 RawTable, SplitConfig)
from tabbench.spec import BINARY, CATEGORICAL, MULTICLASS, NUMERIC, REGRESSION, Column, DatasetMeta


def _resolve_column(frame: pd.DataFrame, ref, what: str) -> str:
    if isinstance(ref, (int, np.integer)) and not isinstance(ref, bool):
        if not -frame.shape[1] <= ref < frame.shape[1]:
            raise DataError(f"{what} position {ref} is out of range; the table has "
                            f"{frame.shape[1]} columns")
        return frame.columns[ref]
    if str(ref) not in frame.columns:
        shown = ", ".join(map(str, frame.columns[:12])) + (" ..." if frame.shape[1] > 12 else "")
        raise DataError(f"{what} column {ref!r} not found; columns are: {shown}")
    return str(ref)


def _categorical(series: pd.Series) -> pd.Series:
    labels = series.map(level, na_action="ignore")
    levels = sorted(labels.dropna().unique(), key=lambda s: (not _is_number(s), float(s) if _is_number(s) else 0.0, s))
    return pd.Series(pd.Categorical(labels, categories=levels), index=series.index)


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _reject_stray_strings(series: pd.Series, col: str) -> None:
    """A column whose values are numbers but for a few strings is a dirty numeric column, not a category.

    A few means at most 1% of the values, and never fewer than one: a share alone cannot be met by a file of
    under 100 rows, where a single typo would otherwise make a categorical column with one level per number.
    More strings than that, in a column still mostly of numbers, may be a real category or several typos: the
    column is read as categorical, with a warning that names it and its strings.
    """
    present = series.dropna()
    numeric = pd.to_numeric(present, errors="coerce")
    stray = numeric.isna()
    if not len(present) or not stray.any():
        return
    if stray.sum() <= max(1, 0.01 * len(present)):
        row = int(np.flatnonzero(series.notna().to_numpy())[np.flatnonzero(stray.to_numpy())[0]])
        raise DataError(f"column {col!r} is numeric but row {row} holds {present[stray].iloc[0]!r}; "
                        "add that marker to na_values, clean the file, or list the column under 'categorical'")
    if stray.sum() < len(present) / 2:
        strings = sorted(map(str, present[stray].unique()))
        shown = ", ".join(map(repr, strings[:5])) + (f" and {len(strings) - 5} more" if len(strings) > 5 else "")
        warnings.warn(f"column {col!r} is read as categorical ({present.nunique()} levels) though "
                      f"{len(present) - int(stray.sum())} of its {len(present)} values are numbers; the others are "
                      f"{shown}. If it is numeric, add those markers to na_values or clean the file; if it is a "
                      "category, list it under 'categorical'", stacklevel=2)


def _infer_task(y: pd.Series) -> str:
    if not pd.api.types.is_numeric_dtype(y) or pd.api.types.is_bool_dtype(y):
        return BINARY if y.nunique(dropna=True) == 2 else MULTICLASS
    values = y.dropna()
    if (values == values.round()).all() and values.nunique() <= 20:
        return BINARY if values.nunique() == 2 else MULTICLASS
    return REGRESSION


def fingerprint_frame(X: pd.DataFrame, y: np.ndarray) -> str:
    """sha256 of the typed content: column names and kinds, every value, the encoded target."""
    digest = hashlib.sha256()
    for name in X.columns:
        column = X[name]
        digest.update(f"{name}:{column.dtype}".encode())
        if isinstance(column.dtype, pd.CategoricalDtype):
            digest.update("|".join(map(str, column.cat.categories)).encode())
            digest.update(np.ascontiguousarray(column.cat.codes.to_numpy(), dtype=np.int64).tobytes())
        else:
            digest.update(np.ascontiguousarray(column.to_numpy(dtype=np.float64)).tobytes())
    digest.update(np.ascontiguousarray(y).tobytes())
    return digest.hexdigest()[:16]


def build_dataset(cfg: DatasetConfig, raw: RawTable) -> Dataset:
    if raw.overrides:  # a mirror stand-in: its own subset label, split, target or drop list
        overrides = dict(raw.overrides)
        if cfg.subset and overrides.get("subset"):
            overrides["subset"] = f"{cfg.subset}; {overrides['subset']}"
        cfg = replace(cfg, **overrides)
    frame = raw.frame
    name = cfg.name
    if frame.shape[0] == 0:
        raise DataError(f"{raw.origin} has no rows")
    # a grouped or temporal split's column, read before the drops; a group column is no feature (splits.py)
    split_name, split_values = split_column(frame, cfg.split)
    if cfg.split.group_on is not None and split_name in frame.columns:
        frame = frame.drop(columns=[split_name])
    for ref in cfg.drop:
        frame = frame.drop(columns=[_resolve_column(frame, ref, "drop")])
    target_ref = cfg.target if cfg.target is not None else (raw.default_target or -1)
    if split_name is not None and target_ref == split_name:
        raise DataError(f"the target {split_name!r} is the split's group_on / time_on column; pick another")
    target = _resolve_column(frame, target_ref, "target")
    y_raw = frame[target]
    features = frame.drop(columns=[target])
    if y_raw.isna().any():
        raise DataError(f"target column {target!r} has {int(y_raw.isna().sum())} missing "
                        "values; drop those rows from the file or pick another target")
    task = cfg.task or _infer_task(y_raw)

    if cfg.categorical == "auto":
        categorical = {c for c in features.columns
                       if not pd.api.types.is_numeric_dtype(features[c]) or c in raw.categorical}
        for col in sorted(categorical - set(raw.categorical), key=list(features.columns).index):
            _reject_stray_strings(features[col], col)
        if cfg.categorical_max_levels is not None:
            categorical |= {c for c in features.columns
                            if features[c].nunique(dropna=True) <= cfg.categorical_max_levels}
    else:
        categorical = {_resolve_column(frame, ref, "categorical") for ref in cfg.categorical}
        categorical.discard(target)
    columns, typed = [], {}
    for col in features.columns:
        if col in categorical:
            typed[col] = _categorical(features[col])
            columns.append(Column(col, CATEGORICAL, tuple(typed[col].cat.categories)))
            continue
        values = pd.to_numeric(features[col], errors="coerce")
        bad = values.isna() & features[col].notna()
        if bad.any():
            example = features[col][bad].iloc[0]
            raise DataError(f"column {col!r} is numeric but row {int(np.flatnonzero(bad)[0])} "
                            f"holds {example!r}; list the column under 'categorical' or clean the file")
        values = values.astype(np.float64)
        infinite = np.isinf(values.to_numpy())
        if infinite.any():
            raise DataError(f"column {col!r} holds an infinite value at row "
                            f"{int(np.flatnonzero(infinite)[0])}; replace it in the file (or list it in na_values)")
        typed[col] = values
        columns.append(Column(col, NUMERIC))
    X = pd.DataFrame(typed, index=pd.RangeIndex(len(features)))
    empty = [col for col in X.columns if X[col].isna().all()]
    if empty and cfg.source.drops_empty_columns and len(empty) < X.shape[1]:
        X = X.drop(columns=empty)
        columns = [c for c in columns if c.name not in empty]
    elif empty:
        raise DataError(f"column(s) {empty} hold no value at all; add them to the dataset's "
                        "'drop' list (or fix the file's separator if every column looks empty)")

    if task == REGRESSION:
        y = pd.to_numeric(y_raw, errors="coerce").to_numpy(dtype=np.float64)
        if np.isnan(y).any():
            raise DataError(f"regression target {target!r} holds non-numeric values; "
                            "set task: binary or multiclass if it is a class label")
        if np.ptp(y) == 0:
            raise DataError(f"regression target {target!r} is constant ({y[0]:g}); there is "
                            "nothing to learn: pick another target column")
        classes = ()
    else:
        labels = _categorical(y_raw)
        classes = tuple(labels.cat.categories)
        y = labels.cat.codes.to_numpy().astype(np.int64)
        if len(classes) < 2:
            raise DataError(f"target {target!r} has a single class ({classes[0]!r}); "
                            "a classifier needs at least two: pick another target or check the file")
        if task == BINARY and len(classes) != 2:
            raise DataError(f"task is binary but target {target!r} has {len(classes)} classes")
    meta = DatasetMeta(name=name, task=task, target=target, columns=tuple(columns), classes=classes)
    return Dataset(meta, X, y, fingerprint_frame(X, y), raw.n_test_rows, raw.task_splits, raw.origin, cfg.subset,
                   cfg.split, split_values)


def load_dataset(cfg: DatasetConfig, paths: DataPaths) -> Dataset:
    """The typed dataset; make its splits with ``make_splits(ds, ds.split)`` (a stand-in may change them)."""
    return build_dataset(cfg, load_raw(cfg, paths))


# --- what `tabbench datasets` and `tabbench fetch` show ------------------------------------------------


def _split_summary(split: SplitConfig) -> dict:
    out = {"protocol": split.protocol, "seed": split.seed, "val_fraction": split.val_fraction}
    if split.protocol in ("kfold", "npt_code"):
        out.update(k=split.k, folds=list(split.folds) if split.folds is not None else "all")
    elif split.protocol == "holdout":
        out["test_fraction"] = split.test_fraction
    elif split.protocol == "fixed":
        out["test"] = f"last {split.test_rows} rows" if split.test_rows else "the source's test file"
    else:
        out["repeats"] = list(split.repeats) if split.repeats is not None else "all"
        out["folds"] = list(split.folds) if split.folds is not None else "all"
    if regime(split) is not None:
        out.update({key: value for key in ("group_on", "time_on") if (value := getattr(split, key)) is not None},
                   regime=split.regime)
    return out


def describe(cfg: DatasetConfig, paths: DataPaths, load: bool = True) -> dict:
    """Where a dataset comes from and, when it is available locally, what it is and how it splits.

    Never downloads: a dataset that is neither cached nor mirrored reports ``location: remote``.
    Keys: name, source, location (bundled|local|cache|mirror|stand-in|remote|missing), files,
    subset (the stand-in's label, None for the whole original), note, and when loaded: rows,
    columns (features + target), task, target, classes, fingerprint, split (the protocol in use),
    splits (one {fold, repeat, train, val, test, fingerprint} per split), or error.
    """
    location = locate(cfg, paths)
    out = {"name": cfg.name, "source": cfg.source.describe(), "location": location.kind,
           "files": [str(f) for f in location.files], "subset": location.subset or cfg.subset,
           "note": location.note, "split": _split_summary(cfg.split)}
    if not load or location.kind in (REMOTE, MISSING):
        return out
    try:
        ds = load_dataset(cfg, paths)
        splits = make_splits(ds, ds.split)
    except Exception as exc:  # noqa: BLE001 - reported, so one broken dataset does not hide the others
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    out.update(rows=len(ds), columns=ds.X.shape[1] + 1, task=ds.meta.task, target=ds.meta.target,
               classes=list(ds.meta.classes), subset=ds.subset, fingerprint=ds.fingerprint,
               split=_split_summary(ds.split), n_test_rows=ds.n_test_rows,
               splits=[{"fold": s.fold, "repeat": s.repeat, "train": len(s.train), "val": len(s.val),
                        "test": len(s.test), "fingerprint": s.fingerprint} for s in splits])
    return out


def fetch(cfg: DatasetConfig, paths: DataPaths) -> dict:
    """Download everything ``cfg`` needs into the cache now, so later runs need no network.

    Returns {name, status, files, sha256, subset, note}. status: ``bundled``/``local`` (nothing to
    fetch), ``cached`` (already there), ``mirror`` (an exact copy in a mirror), ``downloaded``, or
    ``stand-in`` when the download failed but a mirror stand-in will be used (``note`` says why and
    ``subset`` what it is). Raises DownloadError when nothing usable can be had.
    """
    location = locate(cfg, paths)
    out = {"name": cfg.name, "status": location.kind, "files": [str(f) for f in location.files],
           "sha256": {}, "subset": None, "note": location.note}
    if location.kind in (BUNDLED, LOCAL, CACHE, MIRROR):
        if cfg.source.shows_sha256 and location.kind == CACHE:
            out["sha256"] = {str(f): checked_sha256(f) for f in location.files}
        out["status"] = "cached" if location.kind == CACHE else location.kind
        return out
    if location.kind == MISSING:
        raise DownloadError(location.note)
    try:
        files = cfg.source.fetch(cfg, paths)
        if cfg.source.shows_sha256:
            out["sha256"] = {str(f): checked_sha256(f) for f in files}
    except DownloadError as exc:
        stand_in = find_stand_in(cfg, paths)
        if stand_in is None:
            raise
        out.update(status="stand-in", files=[str(f) for f in stand_in.files], subset=stand_in.subset,
                   note=f"download failed, the mirror stand-in will be used: {exc}")
        return out
    out.update(status="downloaded", files=[str(f) for f in files], note="")
    return out
