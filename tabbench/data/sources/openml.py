"""Source ``openml``: an OpenML dataset (``id``) or task (``task_id``, with its own folds: split protocol
``openml_task``). The openml package is imported only inside the methods that download or read.

Offline, an OpenML cache layout in a mirror folder (``org/openml/...`` or ``openml-cache/org/openml/...``) is
used as an exact copy: it is copied into openml's cache inside ours, where openml reads it as if downloaded.
A mirror may also declare a stand-in for ``openml:<id>`` or ``openml-task:<id>`` (tabbench/data/mirror.py).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Optional

from pydantic import Field, model_validator

from tabbench.data.cache import DownloadError, offline_hint
from tabbench.data.source import CACHE, MIRROR, Count, DataSource, Location, refuse
from tabbench.data.types import RawTable


def _openml(paths):
    """The openml module, its cache pointed into ours (seeded from any mirror holding an OpenML cache layout)."""
    os.environ.setdefault("OPENML_SKIP_PARQUET", "true")
    import openml

    root = paths.cache / "openml"
    for mirror in paths.mirrors:
        for seed in (mirror / "openml-cache", mirror):
            src = seed / "org" / "openml"
            if src.is_dir():
                shutil.copytree(src, root / "org" / "openml", dirs_exist_ok=True)
    openml.config.set_root_cache_directory(str(root))
    return openml


def _roots(paths):
    """(kind, folder) of every place an OpenML cache layout may be: ours, then each mirror's."""
    yield CACHE, paths.cache / "openml"
    for mirror in paths.mirrors:
        for root in (Path(mirror) / "openml-cache", Path(mirror)):
            yield MIRROR, root


def _dataset_dir(paths, dataset_id: int):
    for kind, root in _roots(paths):
        folder = root / "org" / "openml" / "www" / "datasets" / str(dataset_id)
        if folder.is_dir() and (any(folder.glob("*.arff")) or any(folder.glob("*.pq"))):
            return kind, folder
    return None, None


class OpenML(DataSource):
    """An OpenML dataset or task (an OpenML cache in a mirror is used offline)."""

    name = "openml"
    # OpenML tables (e.g. anneal in OpenML-CC18) ship columns with no value at all, and a user cannot fix
    # OpenML's file: the builder drops them (in a file of the user's own they are an error)
    drops_empty_columns = True

    id: Optional[Count] = Field(None, description="openml: an OpenML dataset id (or give task_id)")
    task_id: Optional[Count] = Field(None, description="openml: an OpenML task id; needed by protocol openml_task")

    @model_validator(mode="after")
    def _one_id(self):
        if (self.id is None) == (self.task_id is None):
            refuse("", "an openml dataset needs exactly one of 'id' (an OpenML dataset id) or 'task_id'")
        return self

    def _get_task(self, openml):
        return openml.tasks.get_task(int(self.task_id), download_splits=True, download_data=True,
                                     download_qualities=False, download_features_meta_data=False)

    def _failed(self, exc: Exception) -> DownloadError:
        """A failed OpenML download, with what to do instead (a raw NameResolutionError says nothing)."""
        copy = "an OpenML cache holding it (DIR/org/openml/... or DIR/openml-cache/org/openml/...)"
        return DownloadError(f"could not fetch {self.describe().replace('openml', 'OpenML', 1)}: "
                             f"{type(exc).__name__}: {exc}. {offline_hint(copy)}")

    def load(self, cfg, paths) -> RawTable:
        openml = _openml(paths)
        task = None
        try:
            if self.task_id is not None:
                task = self._get_task(openml)
                dataset_id, target = task.dataset_id, task.target_name
            else:
                dataset_id, target = int(self.id), None
            dataset = openml.datasets.get_dataset(dataset_id, download_data=True, download_qualities=False,
                                                  download_features_meta_data=False)
        except OSError as exc:  # requests' connection errors (no network, no name resolution) are OSErrors
            raise self._failed(exc) from exc
        frame, _, categorical, names = dataset.get_data(dataset_format="dataframe")
        target = target or dataset.default_target_attribute
        return RawTable(frame, default_target=target,
                        categorical=tuple(n for n, c in zip(names, categorical) if c and n != target),
                        origin=f"openml task {self.task_id}" if task is not None else f"openml dataset {dataset_id}")

    def locate(self, cfg, paths) -> Location | None:
        kind, folder = self._find(paths)
        return Location(kind, (folder,)) if folder is not None else None

    def _find(self, paths):
        """(kind, folder) of a complete cached copy (a task needs its splits and its dataset), or (None, None)."""
        if self.id is not None:
            return _dataset_dir(paths, int(self.id))
        for kind, root in _roots(paths):
            folder = root / "org" / "openml" / "www" / "tasks" / str(int(self.task_id))
            if (folder / "task.xml").exists() and (folder / "datasplits.arff").exists():
                match = re.search(r"<oml:data_set_id>\s*(\d+)\s*<", (folder / "task.xml").read_text())
                if match:
                    data_kind, data_folder = _dataset_dir(paths, int(match.group(1)))
                    if data_folder is not None:
                        return (MIRROR if MIRROR in (kind, data_kind) else CACHE), folder
        return None, None

    def fetch(self, cfg, paths) -> list:
        """The dataset (or task, with its splits and dataset) into the cache; its folders."""
        openml = _openml(paths)
        www = paths.cache / "openml" / "org" / "openml" / "www"
        try:
            dataset_id = self.id
            if self.task_id is not None:
                dataset_id = self._get_task(openml).dataset_id
            openml.datasets.get_dataset(int(dataset_id), download_data=True, download_qualities=False,
                                        download_features_meta_data=False)
        except Exception as exc:  # noqa: BLE001 - openml raises many kinds (server, connection, parse)
            raise self._failed(exc) from exc
        folders = [www / "datasets" / str(int(dataset_id))]
        if self.task_id is not None:
            folders.append(www / "tasks" / str(int(self.task_id)))
        return folders

    def describe(self) -> str:
        return f"openml task {self.task_id}" if self.task_id is not None else f"openml dataset {self.id}"

    def mirror_key(self) -> str:
        return f"openml:{int(self.id)}" if self.id is not None else f"openml-task:{int(self.task_id)}"

    def has_task_splits(self) -> bool:
        return self.task_id is not None

    def task_splits(self, cfg, paths) -> list:
        """The task's own folds, every repeat's, as the task (cached with its dataset by ``load``) holds them."""
        try:
            task = self._get_task(_openml(paths))
        except OSError as exc:
            raise self._failed(exc) from exc
        n_repeats, n_folds, _ = task.get_split_dimensions()
        return [(fold, repeat, *task.get_train_test_split_indices(fold=fold, repeat=repeat))
                for repeat in range(n_repeats) for fold in range(n_folds)]
