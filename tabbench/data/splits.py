"""Split protocols, materialised as index arrays and fingerprinted.

kfold        (Stratified)KFold with shuffle and ``seed``; validation carved from each fold's training part.
holdout      one stratified train/val/test split by ``test_fraction`` and ``val_fraction``.
fixed        a given test set (the last ``test_rows`` rows, or the rows of the source's test file);
             validation carved from the rest.
openml_task  the OpenML task's own folds and repeats; validation carved from each training part.

Everything depends only on the data and the config, so the same suite gives identical splits on any
machine; the fingerprint (sha256 of the dataset fingerprint and the index arrays) proves it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from tabbench.data.dataset import DataError, Dataset, SplitConfig

PROTOCOLS = ("kfold", "holdout", "fixed", "openml_task")


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
    """Split ``idx`` into (rest, held_out) with ``fraction`` held out, stratified when labels are given."""
    from sklearn.model_selection import train_test_split

    strat = labels[idx] if labels is not None else None
    if strat is not None:
        counts = np.bincount(strat)
        if counts[counts > 0].min() < 2:
            raise DataError(f"dataset {dataset.meta.name!r}: a class has fewer than 2 rows in the {what}, too few "
                            "for a stratified split; set split.stratify: false or merge rare classes")
    rest, held = train_test_split(idx, test_size=fraction, random_state=seed, stratify=strat)
    return np.sort(rest), np.sort(held)


def make_splits(dataset: Dataset, cfg: SplitConfig) -> list[Split]:
    n = len(dataset)
    labels = _labels(dataset, cfg)
    idx = np.arange(n)
    parts = []  # (fold, repeat, train_and_val, test)
    if cfg.protocol == "kfold":
        from sklearn.model_selection import KFold, StratifiedKFold

        if labels is not None:
            counts = np.bincount(labels)
            if counts[counts > 0].min() < cfg.k:
                raise DataError(f"dataset {dataset.meta.name!r}: the smallest class has {counts[counts > 0].min()} "
                                f"rows, fewer than k={cfg.k} folds; lower split.k or set split.stratify: false")
            folds = StratifiedKFold(cfg.k, shuffle=True, random_state=cfg.seed).split(idx, labels)
        else:
            folds = KFold(cfg.k, shuffle=True, random_state=cfg.seed).split(idx)
        parts = [(i, 0, rest, test) for i, (rest, test) in enumerate(folds)]
    elif cfg.protocol == "holdout":
        rest, test = _carve(idx, cfg.test_fraction, labels, cfg.seed, dataset, "dataset")
        parts = [(0, 0, rest, test)]
    elif cfg.protocol == "fixed":
        n_test = cfg.test_rows if cfg.test_rows is not None else dataset.n_test_rows
        if not n_test:
            raise DataError(f"dataset {dataset.meta.name!r}: split protocol 'fixed' needs split.test_rows or a "
                            "source with a test file (test_path / test_url)")
        if not 0 < n_test < n:
            raise DataError(f"dataset {dataset.meta.name!r}: split.test_rows={n_test} must be between 1 and "
                            f"{n - 1} (the table has {n} rows)")
        parts = [(0, 0, idx[: n - n_test], idx[n - n_test:])]
    elif cfg.protocol == "openml_task":
        task = dataset.openml_task
        if task is None:
            raise DataError(f"dataset {dataset.meta.name!r}: split protocol 'openml_task' needs source: openml "
                            "with a task_id")
        n_repeats, n_folds, _ = task.get_split_dimensions()
        for repeat in range(n_repeats):
            for fold in range(n_folds):
                rest, test = task.get_train_test_split_indices(fold=fold, repeat=repeat)
                parts.append((fold, repeat, np.asarray(rest), np.asarray(test)))
    else:
        raise DataError(f"unknown split protocol {cfg.protocol!r}; expected one of {PROTOCOLS}")

    splits = []
    for fold, repeat, rest, test in parts:
        if cfg.folds is not None and fold not in cfg.folds:
            continue
        if cfg.repeats is not None and repeat not in cfg.repeats:
            continue
        train, val = _carve(np.sort(rest), cfg.val_fraction, labels, cfg.seed + 1000 * repeat + fold, dataset,
                            f"training part of fold {fold}")
        test = np.sort(test)
        splits.append(Split(fold, repeat, train, val, test, _fingerprint(dataset.fingerprint, train, val, test)))
    return splits
