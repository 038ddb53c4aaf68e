"""Fixed splits: deterministic, fingerprinted, with the sizes and stratification each protocol promises."""

import numpy as np
import pytest

from tabbench.data.dataset import DataError, DatasetConfig, SplitConfig, load_dataset
from tabbench.data.splits import make_splits

KFOLD10 = SplitConfig("kfold", k=10, seed=42, val_fraction=2 / 9)


@pytest.fixture
def breast_cancer(paths):
    return load_dataset(DatasetConfig("breast_cancer", "sklearn", id="breast_cancer"), paths)


def test_kfold_on_breast_cancer_partitions_rows_with_paper_sizes_and_stratification(breast_cancer):
    splits = make_splits(breast_cancer, KFOLD10)
    assert len(splits) == 10
    all_test = np.concatenate([s.test for s in splits])
    assert sorted(all_test) == list(range(569))  # every row is a test row exactly once
    y = breast_cancer.y
    overall = y.mean()
    for s in splits:
        assert not set(s.train) & set(s.val) and not set(s.train) & set(s.test) and not set(s.val) & set(s.test)
        assert len(s.test) in (56, 57)
        assert len(s.val) == pytest.approx(0.2 * 569, abs=2)  # 0.7 / 0.2 / 0.1 as in the paper
        for part in (s.train, s.val, s.test):
            assert abs(y[part].mean() - overall) < 0.03  # class share kept in every part


def test_same_config_gives_identical_splits_and_fingerprints(paths, breast_cancer):
    again = load_dataset(DatasetConfig("breast_cancer", "sklearn", id="breast_cancer"), paths)
    a, b = make_splits(breast_cancer, KFOLD10), make_splits(again, KFOLD10)
    assert breast_cancer.fingerprint == again.fingerprint
    for s, t in zip(a, b):
        assert s.fingerprint == t.fingerprint
        assert np.array_equal(s.train, t.train) and np.array_equal(s.val, t.val) and np.array_equal(s.test, t.test)


def test_fingerprints_are_the_same_on_every_machine(breast_cancer):
    # Recorded once; these depend only on the data and the split config, never on the host. If a
    # library upgrade changes how folds are drawn, this fails and published results must be re-run.
    splits = make_splits(breast_cancer, KFOLD10)
    assert breast_cancer.fingerprint == "703056c6064163e1"
    assert [s.fingerprint for s in splits[:2]] == ["f6ffd94c5c244c5f", "75cd145b1abeb18a"]


def test_fingerprint_changes_with_the_split_seed_and_with_the_data(breast_cancer):
    base = make_splits(breast_cancer, KFOLD10)[0].fingerprint
    assert make_splits(breast_cancer, SplitConfig("kfold", k=10, seed=43, val_fraction=2 / 9))[0].fingerprint != base
    breast_cancer.fingerprint = "0" * 16
    assert make_splits(breast_cancer, KFOLD10)[0].fingerprint != base


def test_folds_selects_a_subset_and_fixed_takes_the_last_rows(paths, breast_cancer):
    assert [s.fold for s in make_splits(breast_cancer, SplitConfig("kfold", k=5, folds=(0,)))] == [0]
    (fixed,) = make_splits(breast_cancer, SplitConfig("fixed", test_rows=100))
    assert list(fixed.test) == list(range(469, 569))
    assert len(fixed.val) == pytest.approx(0.125 * 469, abs=1)


def test_holdout_fractions(breast_cancer):
    (s,) = make_splits(breast_cancer, SplitConfig("holdout", test_fraction=0.2, val_fraction=0.125))
    assert len(s.test) == pytest.approx(0.2 * 569, abs=1)
    assert len(s.train) + len(s.val) + len(s.test) == 569


def test_too_few_members_for_stratified_kfold_is_a_clear_error(paths):
    iris = load_dataset(DatasetConfig("iris", "sklearn", id="iris"), paths)
    with pytest.raises(DataError, match="smallest class has 50 rows, fewer than k=60 folds"):
        make_splits(iris, SplitConfig("kfold", k=60))
