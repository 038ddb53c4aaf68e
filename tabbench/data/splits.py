"""Split protocols, materialised as index arrays and fingerprinted.

kfold        (Stratified)KFold with shuffle and ``seed``; validation carved from each fold's training part.
holdout      one stratified train/val/test split by ``test_fraction`` and ``val_fraction``; with ``repeats``, one
             such split per repeat r listed, drawn with seed + r (repeat 0 is the split of ``seed`` alone).
fixed        a given test set (the last ``test_rows`` rows, or the rows of the source's test file);
             validation carved from the rest.
openml_task  the source's own folds and repeats (DataSource.task_splits: an OpenML task's); validation carved
             from each training part.
npt_code     the fold sequence the NPT authors' code produces (github.com/OATML/Non-Parametric-Transformers at
             a399360), row for row; it reproduces the paper's published k-fold numbers, not a proper k-fold.

Splits that match the data (kfold and holdout, ``split_column`` reads the column):
group_on     grouped: no value of the column (a person, a household, a school) in two parts, validation
             included. kfold: StratifiedGroupKFold (classification) or GroupKFold, shuffled by ``seed``;
             holdout: GroupShuffleSplit, ``test_fraction`` then a share of the groups, not of the rows (one
             holdout per repeat listed in ``repeats``, drawn with seed + repeat);
             validation: GroupShuffleSplit of each training part's groups. The column is no feature: a test
             row's group never occurs in training, so its level says nothing a model could use (an unseen
             category), and an identifier beside the features only invites memorising it.
time_on      temporal: rows ordered by the column (numbers, or dates); training rows come first, then the
             validation rows, then the test rows, and equal times never fall in two parts (a tie goes with
             the first row of its time). kfold: TimeSeriesSplit's expanding window (split i trains on the
             blocks before block i+1 and tests on it; k splits, k+1 blocks); holdout: the last
             ``test_fraction`` of the rows. Validation: the latest ``val_fraction`` of each training part.
             The column stays a feature (drop it with ``drop``): the time of a row is known when it is
             predicted, and a model must learn how the target moves with it.
regime       random: the control of a matching split. The same sizes of training, validation and test part,
             split by split, drawn at random (stratified for classification; seed + 1000 x repeat + fold), and the
             same features, so that a dataset's two entries differ in how rows are split and in nothing else.

npt_code in detail. npt/utils/cv_utils.py draws the same (Stratified)KFold(k, shuffle=True, random_state=seed)
as ``kfold`` and carves validation from each fold's training part with
``train_test_split(part, test_size=val_fraction, shuffle=True, random_state=seed, stratify=labels[part])``:
the same seed for every fold, and ``labels`` always the ORIGINAL row order's labels. But
npt/column_encoding_dataset.py reorders its data table inside the fold loop (table = table[train] then
table[val] then table[test], each part in the order the splitters return it), so fold f's indices pick rows
of the table as fold f-1 left it. Only fold 0 is a true KFold fold. Here the reordering is tracked as
``order`` (the original row at each position of the authors' table), so every Split holds original row
indices. Consequences: the test parts overlap and miss rows (they cover 199 of Yacht's 308 rows and 674
of Concrete's 1,030), and for classification the validation draw is stratified by the labels of other
rows than it draws. The authors compute val_fraction as exp_val_perc / (1 - exp_test_perc) = 0.2 / 0.9 =
0.22222222222222224 in floating point; sklearn holds out ceil(val_fraction * n) rows, so this value (not
0.2222222222222222) is needed for their 207 validation rows on Concrete. With ``folds: [0]`` (the paper's
large datasets, one run each) npt_code and kfold give the same split.

Everything depends only on the data and the config, so the same suite gives identical splits on any
machine; the fingerprint (sha256 of the dataset fingerprint and the index arrays) proves it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from tabbench.data.types import DataError, Dataset, SplitConfig

PROTOCOLS = ("kfold", "holdout", "fixed", "openml_task", "npt_code")
#: Protocols that take group_on / time_on; the regimes of such a split.
ORDERED_PROTOCOLS = ("kfold", "holdout")
REGIMES = ("matching", "random")


@dataclass(frozen=True)
class Split:
    fold: int
    repeat: int
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    fingerprint: str


def _fingerprint(data_fingerprint: str, train, val, test) -> str:
    digest = hashlib.sha256(data_fingerprint.encode())
    for part in (train, val, test):
        digest.update(np.ascontiguousarray(np.sort(part), dtype=np.int64).tobytes())
        digest.update(b"|")
    return digest.hexdigest()[:16]


def _labels(dataset: Dataset, cfg: SplitConfig):
    return dataset.y if (cfg.stratify and dataset.meta.is_classification) else None


def _carve(idx: np.ndarray, fraction: float, labels, seed: int, dataset: Dataset, what: str):
    """Split ``idx`` into (rest, held_out) with ``fraction`` held out, stratified when labels are given.

    Both come in the order train_test_split draws them (npt_code depends on it).
    """
    from sklearn.model_selection import train_test_split

    strat = labels[idx] if labels is not None else None
    if strat is not None:
        counts = np.bincount(strat)
        if counts[counts > 0].min() < 2:
            raise DataError(f"a class has fewer than 2 rows in the {what}, too few "
                            "for a stratified split; set split.stratify: false or merge rare classes")
    return train_test_split(idx, test_size=fraction, random_state=seed, stratify=strat)


def _kfold(dataset: Dataset, cfg: SplitConfig, labels):
    """(train_and_val, test) per fold of the shuffled (Stratified)KFold, in the order sklearn returns them."""
    from sklearn.model_selection import KFold, StratifiedKFold

    idx = np.arange(len(dataset))
    if labels is None:
        return list(KFold(cfg.k, shuffle=True, random_state=cfg.seed).split(idx))
    counts = np.bincount(labels)
    if counts[counts > 0].min() < cfg.k:
        raise DataError(f"the smallest class has {counts[counts > 0].min()} "
                        f"rows, fewer than k={cfg.k} folds; lower split.k or set split.stratify: false")
    return list(StratifiedKFold(cfg.k, shuffle=True, random_state=cfg.seed).split(idx, labels))


def _npt_code(dataset: Dataset, cfg: SplitConfig, labels):
    """(fold, train, val, test) in original row indices, as the authors' code applies them (module docstring)."""
    order = np.arange(len(dataset))  # order[i]: the original row at position i of the authors' table
    out = []
    for fold, (rest, test) in enumerate(_kfold(dataset, cfg, labels)):
        train, val = _carve(rest, cfg.val_fraction, labels, cfg.seed, dataset, f"training part of fold {fold}")
        train, val, test = order[train], order[val], order[test]
        order = np.concatenate([train, val, test])
        out.append((fold, train, val, test))
    return out


def regime(cfg: SplitConfig) -> str | None:
    """How a split's rows are chosen, as records name it: "grouped", "temporal", "random" (the control of
    either, in its sizes), or None for the plain protocols."""
    if cfg.group_on is None and cfg.time_on is None:
        return None
    return "random" if cfg.regime == "random" else "grouped" if cfg.group_on is not None else "temporal"


def split_column(frame, cfg: SplitConfig):
    """(column name, values) of ``split.group_on`` (group codes) or ``split.time_on`` (times as numbers), read
    from the table as the source gives it (before ``drop``); (None, None) for a split without one."""
    import pandas as pd

    field, ref = ("group_on", cfg.group_on) if cfg.group_on is not None else ("time_on", cfg.time_on)
    if ref is None:
        return None, None
    if cfg.protocol not in ORDERED_PROTOCOLS:
        raise DataError(f"split.{field} works with protocol kfold or holdout, not {cfg.protocol!r}")
    if isinstance(ref, int) and not isinstance(ref, bool):
        if not -frame.shape[1] <= ref < frame.shape[1]:
            raise DataError(f"split.{field} position {ref} is out of range; the table has {frame.shape[1]} columns")
        ref = frame.columns[ref]
    if str(ref) not in frame.columns:
        shown = ", ".join(map(str, frame.columns[:12])) + (" ..." if frame.shape[1] > 12 else "")
        raise DataError(f"split.{field} column {ref!r} not found; columns are: {shown}")
    name = str(ref)
    column = frame[name]
    if column.isna().any():
        raise DataError(f"split.{field} column {name!r} has {int(column.isna().sum())} missing values; every row "
                        "needs its group or time: drop those rows from the file or name another column")
    if field == "group_on":
        _, codes = np.unique(column.astype(str).to_numpy(), return_inverse=True)
        return name, codes.astype(np.int64)
    times = pd.to_numeric(column, errors="coerce")
    if times.isna().any():
        times = pd.to_datetime(column, errors="coerce", format="ISO8601")
        if times.isna().any():
            bad = column[times.isna()].iloc[0]
            raise DataError(f"split.time_on column {name!r} holds {bad!r}, neither a number nor an ISO 8601 date "
                            "or time; name a column of times")
        times = times.astype("int64")
    return name, times.to_numpy(dtype=np.float64)


def _count(fraction: float, n: int) -> int:
    """Rows held out of ``n`` for ``fraction``, as train_test_split counts them (ceil)."""
    return int(np.ceil(fraction * n))


def _grouped(dataset: Dataset, cfg: SplitConfig, labels) -> list:
    """(fold, repeat, train, val, test) with no group in two parts (module docstring)."""
    from sklearn.model_selection import GroupKFold, StratifiedGroupKFold

    groups = dataset.split_values
    n_groups = len(np.unique(groups))
    need = max(3, cfg.k if cfg.protocol == "kfold" else 3)
    if n_groups < need:
        what = "one group" if n_groups == 1 else f"{n_groups} groups"
        raise DataError(f"split.group_on column {cfg.group_on!r} holds {what} in {len(groups)} rows; a grouped "
                        f"{cfg.protocol} needs at least {need} (training, validation and test parts"
                        + (f", k={cfg.k} folds" if cfg.protocol == "kfold" else "")
                        + "): name the column of the person, firm or place each row belongs to")
    idx = np.arange(len(groups))
    if cfg.protocol == "kfold":
        splitter = (StratifiedGroupKFold(cfg.k, shuffle=True, random_state=cfg.seed) if labels is not None
                    else GroupKFold(cfg.k, shuffle=True, random_state=cfg.seed))
        outer = [(fold, 0, *part) for fold, part in enumerate(splitter.split(idx, labels, groups))]
    else:  # one holdout per repeat listed, drawn with seed + repeat (repeat 0: the seed's own)
        outer = [(0, r, *_held_groups(idx, groups, cfg.test_fraction, cfg.seed + r)) for r in cfg.repeats or (0,)]
    out = []
    for fold, repeat, rest, test in outer:
        if len(np.unique(groups[rest])) < 2:
            raise DataError(f"split.group_on column {cfg.group_on!r}: the training part of split {fold} holds one "
                            "group, none left for validation (one group holds most rows); lower split.k or name a "
                            "finer column")
        train, val = _held_groups(rest, groups[rest], cfg.val_fraction, cfg.seed + 1000 * repeat + fold)
        out.append((fold, repeat, rest[train], rest[val], test))
    return out


def _held_groups(idx: np.ndarray, groups: np.ndarray, fraction: float, seed: int):
    """(rest, held) positions into ``idx``: GroupShuffleSplit holding out ``fraction`` of the groups (as it
    counts them, ceil), at least one group and never all."""
    from sklearn.model_selection import GroupShuffleSplit

    n_groups = len(np.unique(groups))
    held = min(n_groups - 1, max(1, int(np.ceil(fraction * n_groups))))
    return next(GroupShuffleSplit(1, test_size=held, random_state=seed).split(idx, groups=groups))


def _boundary(first: np.ndarray, position: int, below: int) -> int | None:
    """The sorted position nearest to ``position`` at which a new time begins (past the first time, before
    ``below``): a cut there keeps equal times in one part. ``first``: each row's first sorted position."""
    bounds = np.unique(first)
    bounds = bounds[(bounds > 0) & (bounds < below)]
    return int(bounds[np.argmin(np.abs(bounds - position))]) if len(bounds) else None


def _temporal(dataset: Dataset, cfg: SplitConfig) -> list:
    """(fold, 0, train, val, test): training rows before validation rows before test rows (module docstring);
    each cut falls where a new time begins, nearest to where the sizes asked put it."""
    from sklearn.model_selection import TimeSeriesSplit

    times = dataset.split_values
    n, distinct = len(times), len(np.unique(times))
    need = cfg.k + 2 if cfg.protocol == "kfold" else 3
    if distinct < need:
        what = "is constant" if distinct == 1 else f"holds {distinct} distinct times"
        raise DataError(f"split.time_on column {cfg.time_on!r} {what}; a temporal {cfg.protocol} needs at least "
                        f"{need} (training, validation and test rows at different times"
                        + (f", k={cfg.k} splits: lower split.k" if cfg.protocol == "kfold" else "")
                        + "): name a column of times")
    if cfg.repeats is not None:
        raise DataError(f"split.time_on column {cfg.time_on!r}: a temporal split has no repeats (its rows are cut by "
                        "time, not drawn); remove split.repeats")
    if cfg.protocol == "kfold":
        blocks = [(test[0], test[-1] + 1) for _, test in TimeSeriesSplit(cfg.k).split(np.arange(n))]
    else:
        blocks = [(n - _count(cfg.test_fraction, n), n)]
    first = np.searchsorted(np.sort(times, kind="stable"), times, side="left")
    out = []
    for fold, (start, stop) in enumerate(blocks):
        test_at = _boundary(first, start, n)
        test_to = n if stop >= n else _boundary(first, stop, n)
        val_at = None if test_at is None else _boundary(first, test_at - _count(cfg.val_fraction, test_at), test_at)
        if val_at is None or test_to is None or test_to <= test_at:
            raise DataError(f"split.time_on column {cfg.time_on!r}: split {fold} finds no time at which to start "
                            "its validation or test rows (a few times hold most rows); lower split.k or name a "
                            "finer column of times")
        out.append((fold, 0, np.flatnonzero(first < val_at), np.flatnonzero((first >= val_at) & (first < test_at)),
                    np.flatnonzero((first >= test_at) & (first < test_to))))
    return out


def _random_twin(dataset: Dataset, cfg: SplitConfig, labels, parts: list) -> list:
    """Each matching split's sizes, its rows drawn at random (the control; module docstring)."""
    n, out = len(dataset), []
    for fold, repeat, train, val, test in parts:
        seed, where = cfg.seed + 1000 * repeat + fold, f"rows of the random split {fold}"
        used = np.arange(n)
        unused = n - len(train) - len(val) - len(test)
        if unused:
            used, _ = _carve(used, unused, labels, seed, dataset, where)
        rest, test = _carve(np.sort(used), len(test), labels, seed, dataset, where)
        train, val = _carve(np.sort(rest), len(val), labels, seed, dataset, where)
        out.append((fold, repeat, train, val, test))
    return out


def _matching(dataset: Dataset, cfg: SplitConfig, labels) -> list:
    """(fold, repeat, train, val, test) of a split with group_on or time_on, in its regime."""
    if dataset.split_values is None or len(dataset.split_values) != len(dataset):
        raise DataError("a split with group_on or time_on needs the dataset's split_values (build it with "
                        "tabbench.data.dataset.build_dataset)")
    parts = _grouped(dataset, cfg, labels) if cfg.group_on is not None else _temporal(dataset, cfg)
    return _random_twin(dataset, cfg, labels, parts) if cfg.regime == "random" else parts


def make_splits(dataset: Dataset, cfg: SplitConfig) -> list[Split]:
    n = len(dataset)
    labels = _labels(dataset, cfg)
    idx = np.arange(n)
    parts = []  # (fold, repeat, train_and_val, test), then (fold, repeat, train, val, test)
    if regime(cfg) is not None:
        parts = _matching(dataset, cfg, labels)
    elif cfg.protocol == "kfold":
        parts = [(i, 0, rest, test) for i, (rest, test) in enumerate(_kfold(dataset, cfg, labels))]
    elif cfg.protocol == "holdout":
        for repeat in cfg.repeats or (0,):
            rest, test = _carve(idx, cfg.test_fraction, labels, cfg.seed + repeat, dataset, "dataset")
            parts.append((0, repeat, rest, test))
    elif cfg.protocol == "fixed":
        n_test = cfg.test_rows if cfg.test_rows is not None else dataset.n_test_rows
        if not n_test:
            raise DataError("split protocol 'fixed' needs split.test_rows or a "
                            "source with a test file (test_path / test_url)")
        if not 0 < n_test < n:
            raise DataError(f"split.test_rows={n_test} must be between 1 and "
                            f"{n - 1} (the table has {n} rows)")
        parts = [(0, 0, idx[: n - n_test], idx[n - n_test:])]
    elif cfg.protocol == "openml_task":
        if dataset.task_splits is None:
            raise DataError("split protocol 'openml_task' needs a source with folds of its own (source: openml "
                            "with a task_id; a mirror stand-in has none)")
        parts = [(fold, repeat, np.asarray(rest), np.asarray(test)) for fold, repeat, rest, test in dataset.task_splits]
    elif cfg.protocol != "npt_code":
        raise DataError(f"unknown split protocol {cfg.protocol!r}; expected one of {PROTOCOLS}")

    if cfg.protocol == "npt_code":  # validation is carved inside the authors' fold loop
        parts = [(fold, 0, train, val, test) for fold, train, val, test in _npt_code(dataset, cfg, labels)]
    elif regime(cfg) is None:  # a grouped or temporal split carves validation by its own rule
        parts = [(fold, repeat, *_carve(np.sort(rest), cfg.val_fraction, labels, cfg.seed + 1000 * repeat + fold,
                                        dataset, f"training part of fold {fold}"), test)
                 for fold, repeat, rest, test in parts if _selected(cfg, fold, repeat)]
    splits = []
    for fold, repeat, train, val, test in parts:
        if _selected(cfg, fold, repeat):
            train, val, test = np.sort(train), np.sort(val), np.sort(test)
            splits.append(Split(fold, repeat, train, val, test, _fingerprint(dataset.fingerprint, train, val, test)))
    return splits


def _selected(cfg: SplitConfig, fold: int, repeat: int) -> bool:
    return (cfg.folds is None or fold in cfg.folds) and (cfg.repeats is None or repeat in cfg.repeats)
