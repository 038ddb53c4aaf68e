"""Real-data loaders: every parser reads its offline copy in ../shared/datasets (through the mirror
mapping) into the rows, columns, task and target that SOURCES.md states; the parsers for the original
publishers' formats read the same rows back when the copy is rewritten in the original layout and
downloaded from a file:// URL (the real download + checksum path); subsets never pass for the full data.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tabbench.data import images, mirror
from tabbench.data.cache import DataPaths, DownloadError, download_target, fetch_url
from tabbench.data.dataset import DataError, DatasetConfig, SplitConfig, describe, fetch, load_dataset
from tabbench.data.source import CACHE, MIRROR, REMOTE, STAND_IN
from tabbench.data.sources.openml import OpenML
from tabbench.data.splits import make_splits
from tabbench.suite import load_suite

from tests.conftest import ROOT, SHARED

pytestmark = pytest.mark.real_data()


@pytest.fixture(scope="module")
def mpaths(tmp_path_factory) -> DataPaths:
    return DataPaths(cache=tmp_path_factory.mktemp("cache"), mirrors=(SHARED.resolve(),), base=ROOT)


@pytest.fixture(scope="module")
def suite_cfgs() -> dict:
    cfgs = {}
    for name in ("uci", "image"):
        cfgs.update({d.name: d for d in load_suite(ROOT / "suites" / f"{name}.yaml").datasets})
    return cfgs


@pytest.fixture(scope="module")
def loaded(suite_cfgs, mpaths):
    """Each suite dataset loaded once from the mirror (the big ones are parsed once per module)."""
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = load_dataset(suite_cfgs[name], mpaths)
        return cache[name]

    return get


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- every offline copy parses into what SOURCES.md states ---------------------------------------------

# name: (rows, columns incl. target, task, target, n_test_rows, what the subset label must mention or None)
OFFLINE = {
    "boston": (506, 14, "regression", "MEDV", None, None),
    "concrete": (1030, 9, "regression", "compressive_strength", None, None),
    "yacht": (308, 7, "regression", "residuary_resistance", None, None),
    "protein": (45730, 10, "regression", "RMSD", None, None),
    "breast_cancer": (569, 31, "binary", "diagnosis", None, None),  # wdbc.data's ID column dropped
    "higgs": (7000 + 500, 29, "binary", "label", 500, "11,000,000"),
    "poker_hand": (25010 + 18488, 11, "multiclass", "CLASS", 18488, "1,000,000"),
    "forest_cover": (15120, 55, "multiclass", "Cover_Type", None, "581,012"),  # Kaggle's Id column dropped
    "income": (32561 + 16281, 15, "binary", "income", 16281, "SUBSTITUTE"),
    "mnist": (5000 + 10000, 785, "multiclass", "class", 10000, "70,000"),
    "cifar10": (10000, 3073, "multiclass", "class", None, "60,000"),
}


IMAGES = {"mnist", "cifar10"}  # read from ../shared/datasets/image (copied to a GPU machine without it)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.real_data("image") if n in IMAGES else ())
                                  for n in sorted(OFFLINE)])
def test_offline_copy_parses_as_sources_md_states(name, loaded, suite_cfgs, mpaths):
    rows, columns, task, target, n_test, subset_mentions = OFFLINE[name]
    ds = loaded(name)
    assert (len(ds), ds.X.shape[1] + 1) == (rows, columns)
    assert (ds.meta.task, ds.meta.target) == (task, target)
    assert ds.n_test_rows == n_test
    assert mirror.locate(suite_cfgs[name], mpaths).kind == STAND_IN
    if subset_mentions is None:
        assert ds.subset is None, "a whole copy of the original must not carry a subset label"
    else:
        assert ds.subset and subset_mentions in ds.subset, "a subset or substitute must say what it is"
    assert not ds.X.select_dtypes("number").isin([np.inf, -np.inf]).any().any()


def test_categorical_columns_are_the_papers(loaded):
    def categorical(name):
        return {c.name for c in loaded(name).meta.categorical}

    assert categorical("boston") == {"CHAS", "RAD"}
    assert categorical("yacht") == {"longitudinal_position", "prismatic_coefficient", "length_displacement_ratio",
                                    "beam_draught_ratio", "length_beam_ratio", "froude_number"}  # the authors' code
    assert categorical("poker_hand") == {"S1", "S2", "S3", "S4", "S5"}
    assert categorical("forest_cover") == {f"Wilderness_Area{i}" for i in range(1, 5)} | {
        f"Soil_Type{i}" for i in range(1, 41)}
    assert categorical("protein") == categorical("concrete") == categorical("breast_cancer") == set()
    # Income's rule (<= 55 distinct values -> categorical) applies to the Adult substitute as well
    assert {"workclass", "education", "education_num", "sex"} <= categorical("income")
    assert "fnlwgt" not in categorical("income")


def test_class_labels_match_the_originals(loaded):
    bc = loaded("breast_cancer")
    assert bc.meta.classes == ("B", "M")  # scikit-learn's 0/1 mapped back to wdbc.data's labels
    assert np.bincount(bc.y).tolist() == [357, 212]
    adult = loaded("income")
    assert adult.meta.classes == ("<=50K", ">50K")  # adult.test's trailing '.' removed
    cover = loaded("forest_cover")
    assert cover.meta.classes == tuple(str(i) for i in range(1, 8))
    assert np.bincount(cover.y).tolist() == [2160] * 7
    assert loaded("poker_hand").meta.classes == tuple(str(i) for i in range(10))
    assert loaded("higgs").meta.classes == ("0", "1")


@pytest.mark.real_data("image")
def test_image_tables_are_channel_major_pixels(loaded):
    mnist = loaded("mnist")
    assert list(mnist.X.columns[:2]) == ["pixel1", "pixel2"] and mnist.X.columns[-1] == "pixel784"
    assert mnist.meta.classes == tuple(str(i) for i in range(10))
    # the official MNIST test set's class counts
    assert np.bincount(mnist.y[-10000:]).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert np.bincount(mnist.y[:5000]).tolist() == [500] * 10
    assert mnist.X.to_numpy().min() == 0 and mnist.X.to_numpy().max() == 255

    cifar = loaded("cifar10")
    assert list(cifar.X.columns[:2]) == ["a0", "a1"] and cifar.X.columns[-1] == "a3071"
    assert np.bincount(cifar.y).tolist() == [1000] * 10
    from PIL import Image

    with tarfile.open(SHARED / "image" / "cifar10" / "cifar10-test-jpeg.tar") as tar:
        member = tar.getmember("test/airplane/0000.jpg")
        pixels = np.asarray(Image.open(io.BytesIO(tar.extractfile(member).read())))  # (32, 32, 3)
    row = cifar.X.iloc[0].to_numpy().reshape(3, 32, 32)  # first row: airplane/0000.jpg
    assert cifar.meta.classes[cifar.y[0]] == "0"  # airplane
    np.testing.assert_array_equal(row.transpose(1, 2, 0), pixels)


@pytest.mark.real_data("image")
def test_idx_reader_checks_the_header(tmp_path):
    images_ = images.read_idx(SHARED / "image" / "mnist" / "t10k-images-idx3-ubyte.gz")
    assert images_.shape == (10000, 28, 28) and images_.dtype == np.uint8
    broken = tmp_path / "broken-idx3-ubyte"
    broken.write_bytes(b"\x00\x00\x08\x03" + np.array([5, 28, 28], ">u4").tobytes() + b"\x00" * 100)
    with pytest.raises(ValueError, match="declares shape"):
        images.read_idx(broken)


# --- the original publishers' formats, downloaded from file:// URLs ------------------------------------


def _with_source(cfg: DatasetConfig, **fields) -> DatasetConfig:
    """``cfg`` with some of its source's fields changed (a url source's url, sha256, ...)."""
    return replace(cfg, source=cfg.source.model_copy(update=fields))


def _original(cfg: DatasetConfig, path: Path, **changes) -> DatasetConfig:
    return replace(_with_source(cfg, url=path.resolve().as_uri(), sha256=_sha(path)), **changes)


@pytest.fixture
def offline_paths(tmp_path) -> DataPaths:
    """No mirror: only the cache and (file://) downloads."""
    return DataPaths(cache=tmp_path / "cache", mirrors=(), base=tmp_path)


def test_boston_housing_data_downloads_with_checksum(suite_cfgs, offline_paths, loaded):
    source = SHARED / "uci" / "boston" / "housing.data"  # the UCI file as published
    cfg = _original(suite_cfgs["boston"], source)
    assert mirror.locate(cfg, offline_paths).kind == REMOTE
    ds = load_dataset(cfg, offline_paths)
    assert download_target(cfg.source.url, offline_paths).exists()
    assert mirror.locate(cfg, offline_paths).kind == CACHE
    assert ds.fingerprint == loaded("boston").fingerprint
    assert ds.subset is None and "file://" in ds.origin


def test_a_checksum_mismatch_is_refused_and_not_cached(suite_cfgs, offline_paths):
    source = SHARED / "uci" / "boston" / "housing.data"
    cfg = _with_source(_original(suite_cfgs["boston"], source), sha256="0" * 64)
    with pytest.raises(DownloadError, match="checksum mismatch"):
        load_dataset(cfg, offline_paths)
    assert not download_target(cfg.source.url, offline_paths).exists()


def test_casp_csv_target_first_with_header(tmp_path, suite_cfgs, offline_paths, loaded):
    table = pd.read_csv(SHARED / "uci" / "protein" / "protein.txt", sep=r"\s+", header=None)
    casp = tmp_path / "CASP.csv"  # UCI's layout: header line, RMSD first
    table = table[[9, *range(9)]]
    table.columns = ["RMSD", *[f"F{i}" for i in range(1, 10)]]
    table.to_csv(casp, index=False)
    ds = load_dataset(_original(suite_cfgs["protein"], casp), offline_paths)
    assert ds.fingerprint == loaded("protein").fingerprint


def test_wdbc_data_with_its_id_column(tmp_path, suite_cfgs, offline_paths, loaded):
    table = pd.read_csv(SHARED / "uci" / "breast_cancer" / "wdbc.csv", skiprows=1, header=None)
    wdbc = tmp_path / "wdbc.data"  # UCI's layout: ID, diagnosis (M/B), 30 features, no header
    label = table.pop(30).map({0: "M", 1: "B"})
    table.insert(0, "diagnosis", label)
    table.insert(0, "id", np.arange(842302, 842302 + len(table)))  # placeholder IDs: the column is dropped
    table.to_csv(wdbc, index=False, header=False)
    ds = load_dataset(_original(suite_cfgs["breast_cancer"], wdbc), offline_paths)
    assert ds.fingerprint == loaded("breast_cancer").fingerprint


def test_higgs_csv_gz_label_first(tmp_path, suite_cfgs, offline_paths, loaded):
    parts = [pd.read_csv(SHARED / "uci" / "higgs" / f"higgs-subset.{p}", sep="\t", header=None)
             for p in ("train", "test")]
    higgs = tmp_path / "HIGGS.csv.gz"  # UCI's layout: gzipped CSV, label first, no header
    with gzip.open(higgs, "wt") as fh:
        pd.concat(parts).to_csv(fh, index=False, header=False)
    cfg = _original(suite_cfgs["higgs"], higgs, split=replace(suite_cfgs["higgs"].split, test_rows=500))
    ds = load_dataset(cfg, offline_paths)
    assert ds.fingerprint == loaded("higgs").fingerprint
    assert ds.subset is None  # read as an original file: the suite, not a mirror, vouches for it here
    # the same test rows as the stand-in's own test file
    assert make_splits(ds, ds.split)[0].fingerprint == make_splits(loaded("higgs"), loaded("higgs").split)[0].fingerprint


def test_covtype_data_gz_without_header_or_id(tmp_path, suite_cfgs, offline_paths, loaded):
    table = pd.read_csv(SHARED / "uci" / "covertype" / "covertype-kaggle-train.csv").drop(columns=["Id"])
    covtype = tmp_path / "covtype.data.gz"
    table.to_csv(covtype, index=False, header=False)  # pandas gzips by the extension
    ds = load_dataset(_original(suite_cfgs["forest_cover"], covtype), offline_paths)
    assert ds.fingerprint == loaded("forest_cover").fingerprint


def test_poker_training_and_testing_files(suite_cfgs, offline_paths):
    train = SHARED / "uci" / "poker" / "poker-hand-training-true.data"
    test = SHARED / "uci" / "poker" / "poker-hand-testing.SUBSET.data"
    cfg = _with_source(_original(suite_cfgs["poker_hand"], train), test_url=test.resolve().as_uri(),
                       test_sha256=_sha(test))
    ds = load_dataset(cfg, offline_paths)
    assert (len(ds), ds.n_test_rows) == (25010 + 18488, 18488)
    split = make_splits(ds, ds.split)[0]
    assert (len(split.train), len(split.val), len(split.test)) == (21883, 3127, 18488)


def test_yacht_whitespace_original(suite_cfgs, offline_paths, loaded):
    ds = load_dataset(_original(suite_cfgs["yacht"], SHARED / "uci" / "yacht" / "yacht.txt"), offline_paths)
    assert ds.fingerprint == loaded("yacht").fingerprint


# --- subsets never pass for the full dataset -----------------------------------------------------------


def test_a_subset_cannot_take_the_full_datasets_fixed_test_rows(loaded, suite_cfgs):
    higgs = loaded("higgs")
    assert suite_cfgs["higgs"].split.test_rows == 500000
    assert higgs.split.test_rows is None  # the stand-in's own 500-row test file instead
    with pytest.raises(DataError, match="test_rows=500000"):
        make_splits(higgs, suite_cfgs["higgs"].split)  # the suite's split on the subset fails loudly


def test_describe_reports_location_subset_and_split_fingerprints(suite_cfgs, mpaths):
    info = describe(suite_cfgs["higgs"], mpaths)
    assert info["location"] == "stand-in" and "higgs-subset" in info["subset"]
    assert (info["rows"], info["columns"], info["task"], info["target"]) == (7500, 29, "binary", "label")
    assert info["split"]["test"] == "the source's test file"
    assert [(s["train"], s["val"], s["test"]) for s in info["splits"]] == [(6125, 875, 500)]
    assert info["splits"][0]["fingerprint"] == describe(suite_cfgs["higgs"], mpaths)["splits"][0]["fingerprint"]

    kick = describe(suite_cfgs["kick"], mpaths)  # no offline copy: reported, not downloaded
    assert kick["location"] == "remote" and "rows" not in kick and kick["source"] == "openml dataset 41162"


def test_fetch_downloads_then_reports_cached(suite_cfgs, offline_paths):
    cfg = _original(suite_cfgs["boston"], SHARED / "uci" / "boston" / "housing.data")
    first = fetch(cfg, offline_paths)
    assert first["status"] == "downloaded"
    second = fetch(cfg, offline_paths)
    assert second["status"] == "cached" and list(second["sha256"].values()) == [cfg.source.sha256]


def test_fetch_falls_back_to_a_labelled_stand_in_from_the_mirrors_own_mapping(tmp_path, suite_cfgs):
    # a mirror with its own mapping for an original that cannot be downloaded
    root = tmp_path / "mirror"
    (root / "rows").mkdir(parents=True)
    lines = (SHARED / "uci" / "boston" / "housing.data").read_text().splitlines()
    (root / "rows" / "first-100.data").write_text("\n".join(lines[:100]) + "\n")
    missing_url = (tmp_path / "gone" / "housing.data").as_uri()
    (root / mirror.MIRROR_MAPPING_NAME).write_text(
        f"stand_ins:\n  {missing_url}:\n    path: rows/first-100.data\n    format: whitespace\n"
        "    columns: original\n    subset: first 100 of 506 rows\n")
    paths = DataPaths(cache=tmp_path / "cache", mirrors=(root,), base=tmp_path)
    cfg = _with_source(suite_cfgs["boston"], url=missing_url)
    result = fetch(cfg, paths)
    assert result["status"] == "stand-in" and result["subset"] == "first 100 of 506 rows"
    ds = load_dataset(cfg, paths)
    assert (len(ds), ds.subset) == (100, "first 100 of 506 rows")


def test_an_exact_mirror_copy_is_used_as_it_is(tmp_path):
    source = SHARED / "uci" / "boston" / "housing.data"
    paths = DataPaths(cache=tmp_path / "cache", mirrors=(SHARED.resolve(),), base=tmp_path)
    got = fetch_url("https://example.invalid/housing.data", None, paths, mirror_path="uci/boston/housing.data")
    assert got.read_bytes() == source.read_bytes()


def test_the_offline_hint_names_a_flat_mirror_path_that_then_works(tmp_path, suite_cfgs, loaded):
    """A failed download's hint is true: the file put where it says, in a flat folder under its original
    name, is found there; the hint also names the fetch-and-cache route."""
    import re

    cfg = suite_cfgs["yacht"]  # the UCI URL, no mirror_path: only the original file name can be hinted
    gone = _with_source(cfg, url=(tmp_path / "nowhere" / "yacht_hydrodynamics.data").as_uri())
    with pytest.raises(DownloadError) as failure:
        load_dataset(gone, DataPaths(cache=tmp_path / "cache", mirrors=(), base=tmp_path))
    message = str(failure.value)
    assert "--mirror DIR" in message and "tabbench fetch SUITE --cache DIR" in message and "--cache DIR" in message
    (hinted,) = re.findall(r"the file as DIR/(\S+) in a mirror folder", message)
    assert hinted == "yacht_hydrodynamics.data"
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / hinted).write_bytes((SHARED / "uci" / "yacht" / "yacht.txt").read_bytes())
    paths = DataPaths(cache=tmp_path / "cache", mirrors=(flat,), base=tmp_path)
    for c in (cfg, gone):  # the suite's own URL and the unreachable one: both are found by file name
        location = mirror.locate(c, paths)
        assert (location.kind, location.files) == (MIRROR, (flat / hinted,))
        assert load_dataset(c, paths).fingerprint == loaded("yacht").fingerprint


def test_a_flat_mirror_file_that_is_not_the_original_is_refused_by_its_sha256(tmp_path, suite_cfgs):
    source = SHARED / "uci" / "boston" / "housing.data"
    cfg = _original(suite_cfgs["boston"], source)  # a file:// URL named housing.data, with the file's sha256
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "housing.data").write_text("1 2 3\n")
    paths = DataPaths(cache=tmp_path / "cache", mirrors=(flat,), base=tmp_path)
    with pytest.raises(DownloadError, match=r"flat/housing.data: sha256 \w+ differs from the suite's "
                                            + _sha(source) + ".*replace the file with the original"):
        load_dataset(cfg, paths)


def test_an_openml_download_failure_says_what_to_do(tmp_path, monkeypatch):
    """Offline, openml raises a bare NameResolutionError; the error says which copy to bring and how.
    The server's host is one that never resolves (.invalid), so the failure is real on any machine; one attempt,
    not openml's five (its back-off between them sleeps 10 s in all)."""
    import openml

    monkeypatch.setattr(openml.config, "server", "https://www.openml.invalid/api/v1/xml")
    monkeypatch.setattr(openml.config, "connection_n_retries", 1)
    cfg = DatasetConfig(name="kick", source=OpenML(id=41162), split=SplitConfig(protocol="holdout"))
    with pytest.raises(DownloadError) as failure:
        load_dataset(cfg, DataPaths(cache=tmp_path / "cache", mirrors=(), base=tmp_path))
    message = str(failure.value)
    assert message.startswith("could not fetch OpenML dataset 41162: ConnectionError")
    for hint in ("an OpenML cache holding it (DIR/org/openml/...", "--mirror DIR", "tabbench fetch SUITE --cache DIR"):
        assert hint in message, hint


# --- OpenML, offline from the cached task 1882 ---------------------------------------------------------


def test_openml_task_1882_loads_offline_with_its_own_folds(mpaths):
    cfg = DatasetConfig(name="anneal", source=OpenML(task_id=1882),
                        split=SplitConfig(protocol="openml_task", repeats=(0,)))
    assert mirror.locate(cfg, mpaths).kind == MIRROR
    ds = load_dataset(cfg, mpaths)
    # 898 x 39 as published; its 6 columns with no value at all (m, marvi, corr, jurofm, s, p) are dropped
    assert (len(ds), ds.X.shape[1] + 1 + 6, ds.meta.task, ds.meta.target) == (898, 39, "multiclass", "class")
    # the task's own folds, handed over by the source (DataSource.task_splits): 10 repeats of 10 folds
    assert sorted(part[:2] for part in ds.task_splits) == [(f, r) for f in range(10) for r in range(10)]
    splits = make_splits(ds, ds.split)
    assert len(splits) == 10
    tests = np.concatenate([s.test for s in splits])
    assert sorted(tests.tolist()) == list(range(898))  # the task's 10 test folds partition the rows
    assert [s.fingerprint for s in splits] == [s.fingerprint for s in make_splits(load_dataset(cfg, mpaths), ds.split)]


# --- the mapping itself --------------------------------------------------------------------------------


@pytest.mark.real_data("image")
def test_packaged_mapping_covers_every_paper_dataset_with_an_offline_copy(suite_cfgs, mpaths):
    entries = mirror.load_mapping(mirror.PACKAGED_MAPPING)
    keys = {cfg.source.mirror_key() for cfg in suite_cfgs.values()}
    assert set(entries) <= keys, "every stand-in stands in for an original that a suite names"
    for name, cfg in suite_cfgs.items():
        if name != "kick":  # the one dataset with no offline copy
            assert mirror.find_stand_in(cfg, mpaths) is not None, name


def test_a_bad_mapping_names_the_entry(tmp_path):
    bad = tmp_path / "m.yaml"
    bad.write_text("stand_ins:\n  openml:1:\n    path: x.csv\n    colums: original\n")
    with pytest.raises(mirror.MirrorError, match=r"openml:1.*colums"):
        mirror.load_mapping(bad)


@pytest.mark.real_data(path="uci/yacht")
def test_a_decimal_comma_csv_reads_as_the_original_with_read_tables_decimal_option(tmp_path):
    """A European export of the real Yacht table (';' between fields, ',' as the decimal mark) reads back with
    ``read_table(..., "csv", sep=";", decimal=",")`` as the values of the whitespace original (docs/datasets.md)."""
    from tabbench.data.formats import FormatError, read_table
    from tests.conftest import require_shared

    original = read_table(require_shared("uci/yacht/yacht.txt"), "whitespace")
    european = tmp_path / "yacht-de.csv"
    original.to_csv(european, sep=";", decimal=",", header=False, index=False)
    assert "," in european.read_text().splitlines()[0]  # decimal commas are there to be read
    pd.testing.assert_frame_equal(read_table(european, "csv", sep=";", decimal=","), original)
    with pytest.raises(FormatError, match=r"options \['decimal'\] do not apply to format 'parquet'"):
        read_table(european, "parquet", decimal=",")
