"""Fixed splits: deterministic, fingerprinted, with the sizes and stratification each protocol promises."""

from dataclasses import replace

import numpy as np
import pytest

from tabbench.data.dataset import DataError, DatasetConfig, SplitConfig, load_dataset
from tabbench.data.sources.file import File
from tabbench.data.sources.sklearn import Sklearn
from tabbench.data.splits import make_splits

KFOLD10 = SplitConfig("kfold", k=10, seed=42, val_fraction=2 / 9)


@pytest.fixture
def breast_cancer(paths):
    return load_dataset(DatasetConfig("breast_cancer", Sklearn(id="breast_cancer")), paths)


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
    again = load_dataset(DatasetConfig("breast_cancer", Sklearn(id="breast_cancer")), paths)
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
    iris = load_dataset(DatasetConfig("iris", Sklearn(id="iris")), paths)
    with pytest.raises(DataError, match="smallest class has 50 rows, fewer than k=60 folds"):
        make_splits(iris, SplitConfig("kfold", k=60))


# --- npt_code: the NPT authors' fold sequence ------------------------------------------------------------

NPT_CODE = SplitConfig("npt_code", k=10, seed=42, val_fraction=0.2 / (1 - 0.1))


def authors_folds(n, labels=None, seed=42, val_perc=0.2, test_perc=0.1):
    """The authors' fold loop, re-stated plainly from reading npt/utils/cv_utils.py and
    npt/column_encoding_dataset.py (commit a399360): the splitters' indices are drawn once on the original
    order, but each fold's indices select rows of the table as the previous fold reordered it, and the
    table is then laid out train, val, test. A first column carries each row's original index along."""
    from sklearn.model_selection import KFold, StratifiedKFold, train_test_split

    table = np.arange(n)[:, None]
    splitter = StratifiedKFold if labels is not None else KFold
    out = []
    for train_val, test in splitter(n_splits=int(1 / test_perc), shuffle=True, random_state=seed).split(
            np.arange(n), labels):
        strat = labels[train_val] if labels is not None else None  # the original order's labels, as in the code
        train, val = train_test_split(train_val, test_size=val_perc / (1 - test_perc), shuffle=True,
                                      random_state=seed, stratify=strat)
        table = np.concatenate([table[train], table[val], table[test]])
        ends = np.cumsum([len(train), len(val)])
        out.append(tuple(np.sort(part[:, 0]) for part in np.split(table, ends)))
    return out


@pytest.fixture(scope="module")
def uci_files(shared, tmp_path_factory):
    from tabbench.data.cache import DataPaths

    paths = DataPaths(cache=tmp_path_factory.mktemp("cache"), mirrors=(), base=shared)

    def load(name):  # the real files, read as they are
        return load_dataset(DatasetConfig(name, File(path=f"uci/{name}/{name}.txt"), format="whitespace",
                                          task="regression"), paths)

    return {"yacht": load("yacht"), "concrete": load("concrete")}


@pytest.mark.parametrize("name, n, covered", [("yacht", 308, 199), ("concrete", 1030, 674)])
def test_npt_code_reproduces_the_authors_folds_row_for_row(uci_files, name, n, covered):
    from sklearn.model_selection import KFold

    ds = uci_files[name]
    ours = make_splits(ds, NPT_CODE)
    assert len(ds) == n and [s.fold for s in ours] == list(range(10))
    for s, (train, val, test) in zip(ours, authors_folds(n)):
        assert np.array_equal(s.train, train) and np.array_equal(s.val, val) and np.array_equal(s.test, test)
        assert len(s.train) + len(s.val) + len(s.test) == n and not set(s.train) & set(s.test)
    # only fold 0 is a true KFold fold: the plain KFold(10, shuffle, 42) test part
    first_test = np.sort(next(KFold(10, shuffle=True, random_state=42).split(np.arange(n)))[1])
    assert np.array_equal(ours[0].test, first_test)
    # the later test parts overlap and leave rows out (the counts)
    assert len(np.unique(np.concatenate([s.test for s in ours]))) == covered
    assert sum(len(s.test) for s in ours) == n


def test_npt_code_holds_out_the_authors_validation_count(uci_files):
    # 0.2 / 0.9 is 0.22222222222222224 in floating point and sklearn holds out ceil(fraction * n) rows:
    # 207 of Concrete's 927 training rows, one more than 2/9 written as 0.2222222222222222 would give
    assert [len(s.val) for s in make_splits(uci_files["concrete"], NPT_CODE)] == [207] * 10
    rounded = SplitConfig("npt_code", k=10, seed=42, val_fraction=0.2222222222222222)
    assert [len(s.val) for s in make_splits(uci_files["concrete"], rounded)] == [206] * 10


def test_npt_code_fingerprints_differ_from_kfold_after_fold_0(uci_files):
    ds = uci_files["yacht"]
    npt_code, kfold = make_splits(ds, NPT_CODE), make_splits(ds, replace(NPT_CODE, protocol="kfold"))
    # fold 0 is the same split (same KFold fold, same validation seed), so its jobs are the same jobs
    assert npt_code[0].fingerprint == kfold[0].fingerprint
    assert all(a.fingerprint != b.fingerprint for a, b in zip(npt_code[1:], kfold[1:]))
    assert [s.fold for s in make_splits(ds, replace(NPT_CODE, folds=(3, 7)))] == [3, 7]
    assert make_splits(ds, replace(NPT_CODE, folds=(3,)))[0].fingerprint == npt_code[3].fingerprint


def test_npt_code_stratifies_as_the_authors_code_on_breast_cancer(breast_cancer):
    # classification: StratifiedKFold on the labels, validation stratified by the ORIGINAL order's labels
    ours = make_splits(breast_cancer, NPT_CODE)
    for s, (train, val, test) in zip(ours, authors_folds(len(breast_cancer), labels=breast_cancer.y)):
        assert np.array_equal(s.train, train) and np.array_equal(s.val, val) and np.array_equal(s.test, test)
