"""A Dataset: typed feature frame + encoded target + metadata + content fingerprint."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tabbench.data.cache import DataPaths
from tabbench.data.sources import RawTable, load_raw
from tabbench.spec import BINARY, CATEGORICAL, MULTICLASS, NUMERIC, REGRESSION, Column, DatasetMeta


class DataError(Exception):
    """The data does not fit the suite's description; the message names the dataset and column."""


@dataclass(frozen=True)
class SplitConfig:
    protocol: str = "holdout"  # kfold | holdout | fixed | openml_task
    k: int = 5
    seed: int = 42
    folds: tuple | None = None  # which folds to run (None = all)
    repeats: tuple | None = None  # openml_task: which repeats (None = all)
    val_fraction: float = 0.125  # share of each fold's training part held out for validation
    test_fraction: float = 0.2  # holdout only
    test_rows: int | None = None  # fixed: the last N rows are the test set (else the source's test file)
    stratify: bool = True  # classification splits keep class proportions


@dataclass(frozen=True)
class DatasetConfig:
    name: str
    source: str
    split: SplitConfig = field(default_factory=SplitConfig)
    id: Any = None  # sklearn set name or OpenML dataset id
    task_id: int | None = None  # OpenML task id
    path: str | None = None
    test_path: str | None = None
    url: str | None = None
    sha256: str | None = None
    mirror_path: str | None = None
    test_url: str | None = None
    test_sha256: str | None = None
    test_mirror_path: str | None = None
    format: str | None = None
    header: bool = False
    columns: tuple | None = None
    skip_rows: int = 0
    na_values: tuple | None = None
    sep: str | None = None
    target: Any = None  # column name or integer position (negative counts from the end)
    task: str | None = None  # inferred when absent
    categorical: Any = "auto"  # "auto" or a list of column names / positions
    drop: tuple = ()
    subset: str | None = None  # set when the data is a declared subset of the original


@dataclass
class Dataset:
    meta: DatasetMeta
    X: pd.DataFrame
    y: np.ndarray
    fingerprint: str
    n_test_rows: int | None = None
    openml_task: Any = None
    origin: str = ""
    subset: str | None = None

    def __len__(self) -> int:
        return len(self.y)


def _resolve_column(frame: pd.DataFrame, ref, what: str, dataset: str) -> str:
    if isinstance(ref, (int, np.integer)) and not isinstance(ref, bool):
        if not -frame.shape[1] <= ref < frame.shape[1]:
            raise DataError(f"dataset {dataset!r}: {what} position {ref} is out of range; the table has "
                            f"{frame.shape[1]} columns")
        return frame.columns[ref]
    if str(ref) not in frame.columns:
        shown = ", ".join(map(str, frame.columns[:12])) + (" ..." if frame.shape[1] > 12 else "")
        raise DataError(f"dataset {dataset!r}: {what} column {ref!r} not found; columns are: {shown}")
    return str(ref)


def _level(value) -> str:
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value).strip()


def _categorical(series: pd.Series) -> pd.Series:
    labels = series.map(_level, na_action="ignore")
    levels = sorted(labels.dropna().unique(), key=lambda s: (not _is_number(s), float(s) if _is_number(s) else 0.0, s))
    return pd.Series(pd.Categorical(labels, categories=levels), index=series.index)


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


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
    frame = raw.frame
    name = cfg.name
    if frame.shape[0] == 0:
        raise DataError(f"dataset {name!r}: {raw.origin} has no rows")
    for ref in cfg.drop:
        frame = frame.drop(columns=[_resolve_column(frame, ref, "drop", name)])
    target_ref = cfg.target if cfg.target is not None else (raw.default_target or -1)
    target = _resolve_column(frame, target_ref, "target", name)
    y_raw = frame[target]
    features = frame.drop(columns=[target])
    if y_raw.isna().any():
        raise DataError(f"dataset {name!r}: target column {target!r} has {int(y_raw.isna().sum())} missing "
                        "values; drop those rows from the file or pick another target")
    task = cfg.task or _infer_task(y_raw)

    if cfg.categorical == "auto":
        categorical = {c for c in features.columns
                       if not pd.api.types.is_numeric_dtype(features[c]) or c in raw.categorical}
    else:
        categorical = {_resolve_column(frame, ref, "categorical", name) for ref in cfg.categorical}
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
            raise DataError(f"dataset {name!r}: column {col!r} is numeric but row {int(np.flatnonzero(bad)[0])} "
                            f"holds {example!r}; list the column under 'categorical' or clean the file")
        typed[col] = values.astype(np.float64)
        columns.append(Column(col, NUMERIC))
    X = pd.DataFrame(typed, index=pd.RangeIndex(len(features)))

    if task == REGRESSION:
        y = pd.to_numeric(y_raw, errors="coerce").to_numpy(dtype=np.float64)
        if np.isnan(y).any():
            raise DataError(f"dataset {name!r}: regression target {target!r} holds non-numeric values; "
                            "set task: binary or multiclass if it is a class label")
        classes = ()
    else:
        labels = _categorical(y_raw)
        classes = tuple(labels.cat.categories)
        y = labels.cat.codes.to_numpy().astype(np.int64)
        if task == BINARY and len(classes) != 2:
            raise DataError(f"dataset {name!r}: task is binary but target {target!r} has {len(classes)} classes")
    meta = DatasetMeta(name=name, task=task, target=target, columns=tuple(columns), classes=classes)
    return Dataset(meta, X, y, fingerprint_frame(X, y), raw.n_test_rows, raw.openml_task, raw.origin, cfg.subset)


def load_dataset(cfg: DatasetConfig, paths: DataPaths) -> Dataset:
    return build_dataset(cfg, load_raw(cfg, paths))
