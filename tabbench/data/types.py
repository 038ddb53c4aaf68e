"""The data layer's plain types, at the bottom of tabbench/data: every other module imports them.

DatasetConfig, SplitConfig  what a suite says about a dataset (its source: tabbench/data/source.py) and how to split it
Location                    where a source (or a mirror stand-in) would read a dataset from right now
RawTable                    what a source (or a mirror stand-in) returns: the table as published
Dataset                     what the builder (tabbench.data.dataset) makes of it: typed and fingerprinted
DataError                   the data does not fit its description

tabbench/data/__init__.py lists the layers above; tests/test_data_layer.py checks that imports go
one way only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tabbench.errors import TabbenchError
from tabbench.spec import DatasetMeta


class DataError(TabbenchError):
    """The data does not fit the suite's description; the message names the column or field and the fix.

    It does not name the dataset: the caller that knows which suite entry it loaded says that once
    (``tabbench.run.runner.load_data``: ``SUITE: dataset 'NAME': MESSAGE``).
    """


@dataclass(frozen=True)
class SplitConfig:
    protocol: str = "holdout"  # kfold | holdout | fixed | openml_task
    k: int = 5
    seed: int = 42
    folds: tuple | None = None  # which folds to run (None = all)
    repeats: tuple | None = None  # openml_task: which repeats (None = all); holdout: which to draw (None = 0 only)
    val_fraction: float = 0.125  # share of each fold's training part held out for validation
    test_fraction: float = 0.2  # holdout only
    test_rows: int | None = None  # fixed: the last N rows are the test set (else the source's test file)
    stratify: bool = True  # classification splits keep class proportions
    group_on: str | int | None = None  # kfold, holdout: no value of this column in two parts (the column is no feature)
    time_on: str | int | None = None  # kfold, holdout: validation and test rows later than the training rows
    regime: str = "matching"  # with group_on / time_on: "random" draws rows at random in the matching split's sizes


@dataclass(frozen=True)
class DatasetConfig:
    name: str
    # where the data comes from: an instance of a registered source (tabbench.data.source.DataSource, e.g.
    # OpenML(task_id=1882)) holding the suite's fields of that source; the data layer asks it to load, locate,
    # fetch and describe the data, so no source's fields or name appear here
    source: Any
    split: SplitConfig = field(default_factory=SplitConfig)
    # how to read the data's files (the source's own, or a mirror stand-in's); see suites/README.md
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
    # numeric columns with at most this many distinct values are categorical too (the NPT paper's
    # rule for Income: get_num_cat_auto with cutoff 55); None = no such rule
    categorical_max_levels: int | None = None
    # per-method params for this dataset, {method label: {param: value}}; the runner updates the
    # suite's model params with them (the paper's NPT config differs per dataset)
    model_params: dict | None = field(default=None, hash=False)


# Location kinds: where a dataset would be read from (``tabbench datasets`` shows them)
BUNDLED, LOCAL, CACHE, MIRROR, STAND_IN, REMOTE, MISSING = (
    "bundled", "local", "cache", "mirror", "stand-in", "remote", "missing")


@dataclass(frozen=True)
class Location:
    """Where a dataset would be read from right now (``tabbench datasets`` shows it)."""

    kind: str  # bundled | local | cache | mirror | stand-in | remote | missing
    files: tuple = ()  # the local files that would be read (empty for remote)
    stand_in: object = None  # the mirror's tabbench.data.mirror.StandIn read instead of the original
    note: str = ""

    @property
    def subset(self) -> str | None:
        return self.stand_in.subset if self.stand_in else None


@dataclass
class RawTable:
    frame: pd.DataFrame
    default_target: str | None = None
    n_test_rows: int | None = None  # rows at the end that came from a separate test file
    # the source's own folds, where the split asks for them (DataSource.task_splits; tabbench.data.mirror.load_raw)
    task_splits: tuple | None = None
    categorical: tuple = ()  # columns the source itself declares categorical (openml, arff)
    origin: str = ""  # what was read: a path, a URL, an OpenML id
    overrides: dict = field(default_factory=dict)  # DatasetConfig fields this copy changes (stand-ins)


@dataclass
class Dataset:
    meta: DatasetMeta
    X: pd.DataFrame
    y: np.ndarray
    fingerprint: str
    n_test_rows: int | None = None
    # the source's own folds, for split protocol openml_task: (fold, repeat, training-and-validation rows, test
    # rows) each (DataSource.task_splits)
    task_splits: tuple | None = None
    origin: str = ""
    subset: str | None = None  # the subset/substitute label when this is not the whole original
    split: SplitConfig | None = None  # the split protocol for this data (the suite's, or a stand-in's own)
    # split.group_on's group codes or split.time_on's times, row by row (tabbench.data.splits.split_column)
    split_values: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.y)
