"""Data sources on real files: file formats, checked downloads, the OpenML cache, with no network."""

import hashlib
import shutil

import numpy as np
import pytest

from tabbench.data.cache import DataPaths, DownloadError
from tabbench.data.dataset import DataError, DatasetConfig, SplitConfig, load_dataset
from tabbench.data.sources.file import File
from tabbench.data.sources.openml import OpenML
from tabbench.data.sources.url import Url
from tabbench.data.splits import make_splits
from tabbench.spec import CATEGORICAL


def test_file_source_reads_concrete_whitespace_table(shared, paths):
    d = load_dataset(DatasetConfig("concrete", File(path="uci/concrete/concrete.txt"), format="whitespace"), paths)
    assert d.meta.task == "regression" and d.X.shape == (1030, 8)
    assert d.y[:2].tolist() == [79.99, 61.89]  # the first two rows' strength in MPa, as in the file
    assert d.X.iloc[0].tolist()[:3] == [540.0, 0.0, 0.0]


def test_file_source_reads_sklearn_wdbc_csv_skipping_its_count_header(shared, paths):
    d = load_dataset(DatasetConfig("wdbc", File(path="uci/breast_cancer/wdbc.csv"), skip_rows=1), paths)
    assert d.X.shape == (569, 30) and d.meta.task == "binary"
    assert d.meta.classes == ("0", "1") and np.bincount(d.y).tolist() == [212, 357]  # malignant, benign
    assert d.X.iloc[0, 0] == 17.99


def test_url_source_downloads_into_the_cache_and_checks_the_checksum(shared, tmp_path):
    src = shared / "uci/yacht/yacht.txt"
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    paths = DataPaths(cache=tmp_path / "cache")
    cfg = DatasetConfig("yacht", Url(url=src.as_uri(), sha256=digest), format="whitespace")
    d = load_dataset(cfg, paths)
    assert d.X.shape == (308, 6) and d.meta.task == "regression"
    assert list((tmp_path / "cache" / "downloads").rglob("yacht.txt"))
    bad = DatasetConfig("yacht", Url(url=src.as_uri(), sha256="0" * 64), format="whitespace")
    shutil.rmtree(tmp_path / "cache")
    with pytest.raises(DownloadError, match="checksum mismatch"):
        load_dataset(bad, paths)
    assert not list((tmp_path / "cache").rglob("yacht.txt"))  # a bad download is not kept


def test_url_source_prefers_the_mirror_copy_over_a_download(shared, tmp_path):
    paths = DataPaths(cache=tmp_path / "cache", mirrors=(shared,))
    cfg = DatasetConfig("yacht", Url(url="https://example.invalid/yacht.txt", mirror_path="uci/yacht/yacht.txt"),
                        format="whitespace")
    assert load_dataset(cfg, paths).X.shape == (308, 6)  # no network was touched: the host does not exist


def test_openml_task_1882_loads_from_a_copy_of_the_offline_cache(shared, tmp_path):
    mirror = tmp_path / "mirror"
    shutil.copytree(shared / "openml-cache", mirror / "openml-cache")
    paths = DataPaths(cache=tmp_path / "cache", mirrors=(mirror,))
    cfg = DatasetConfig("anneal", OpenML(task_id=1882), split=SplitConfig("openml_task", folds=(0, 1), repeats=(0,)))
    d = load_dataset(cfg, paths)
    assert d.meta.task == "multiclass" and d.meta.target == "class"
    # 38 features as published, less the 6 that hold no value at all in OpenML's file
    assert d.X.shape == (898, 32) and not {"m", "marvi", "corr", "jurofm", "s", "p"} & set(d.X.columns)
    assert any(c.kind == CATEGORICAL for c in d.meta.columns)
    splits = make_splits(d, cfg.split)
    assert [s.fold for s in splits] == [0, 1]
    for s in splits:  # the task's own 10-fold test sets
        assert len(s.test) in (89, 90) and len(s.train) + len(s.val) + len(s.test) == 898



class Halves(File):
    """A file whose publisher ships two folds of its own: the first half of the rows, then the second, as test rows."""

    name = "halves"

    def has_task_splits(self) -> bool:
        return True

    def task_splits(self, cfg, paths) -> list:
        rows = np.arange(1030)
        return [(0, 0, rows[515:], rows[:515]), (1, 0, rows[:515], rows[515:])]


def test_a_source_of_its_own_hands_over_its_folds_through_the_data_source(shared, paths):
    """Split protocol openml_task takes the folds a source ships from ``DataSource.task_splits`` (OpenML's tasks
    are one such source): its test rows are the source's, validation carved from the rest; a source without
    folds of its own is refused."""
    cfg = DatasetConfig("concrete", Halves(path="uci/concrete/concrete.txt"), format="whitespace",
                        split=SplitConfig("openml_task"))
    d = load_dataset(cfg, paths)
    splits = make_splits(d, d.split)
    assert [(s.fold, s.repeat) for s in splits] == [(0, 0), (1, 0)]
    assert splits[0].test.tolist() == list(range(515)) and splits[1].test.tolist() == list(range(515, 1030))
    assert [len(s.val) for s in splits] == [65, 65]  # ceil(0.125 x 515) of each fold's other half
    plain = DatasetConfig("concrete", File(path="uci/concrete/concrete.txt"), format="whitespace",
                          split=SplitConfig("openml_task"))
    with pytest.raises(DataError, match="split protocol 'openml_task' needs"):
        make_splits(load_dataset(plain, paths), plain.split)

def test_strings_in_a_numeric_column_name_the_column(shared, paths, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b,y\n1,2,0\n3,oops,1\n5,6,0\n7,8,1\n")
    with pytest.raises(DataError, match=r"column 'b' is numeric but row 1 holds 'oops'"):
        load_dataset(DatasetConfig("bad", File(path=str(bad)), header=True, categorical=()), paths)
