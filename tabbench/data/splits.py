"""Split protocols, materialised as index arrays and fingerprinted.

kfold        (Stratified)KFold with shuffle and ``seed``; validation carved from each fold's training part.
holdout      one stratified train/val/test split by ``test_fraction`` and ``val_fraction``; with ``repeats``, one
             such split per repeat r listed, drawn with seed + r (repeat 0 is the split of ``seed`` alone).
fixed        a given test set (the last ``test_rows`` rows, or the rows of the source's test file);
             validation carved from the rest.
openml_task  the OpenML task's own folds and repeats; validation carved from each training part.
npt_code     the fold sequence the NPT authors' code produces (github.com/OATML/Non-Parametric-Transformers at
             a399360), row for row; it reproduces the paper's published k-fold numbers, not a proper k-fold.

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


def make_splits(dataset: Dataset, cfg: SplitConfig) -> list[Split]:
    n = len(dataset)
    labels = _labels(dataset, cfg)
    idx = np.arange(n)
    parts = []  # (fold, repeat, train_and_val, test), then (fold, repeat, train, val, test)
    if cfg.protocol == "kfold":
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
        task = dataset.openml_task
        if task is None:
            raise DataError("split protocol 'openml_task' needs source: openml "
                            "with a task_id")
        n_repeats, n_folds, _ = task.get_split_dimensions()
        for repeat in range(n_repeats):
            for fold in range(n_folds):
                rest, test = task.get_train_test_split_indices(fold=fold, repeat=repeat)
                parts.append((fold, repeat, np.asarray(rest), np.asarray(test)))
    elif cfg.protocol != "npt_code":
        raise DataError(f"unknown split protocol {cfg.protocol!r}; expected one of {PROTOCOLS}")

    if cfg.protocol == "npt_code":  # validation is carved inside the authors' fold loop
        parts = [(fold, 0, train, val, test) for fold, train, val, test in _npt_code(dataset, cfg, labels)]
    else:
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
