"""Where a dataset's data comes from: the cache, an exact copy in a mirror, a declared stand-in, or the network.

Suites name only the original sources (UCI URLs, OpenML ids). A mirror (``--mirror DIR`` /
``$TABBENCH_MIRROR``) is a read-only folder of offline copies. Two kinds of copies are used:

- exact copies: the file a url source names at its ``mirror_path``, or an OpenML cache layout
  (``org/openml/...`` or ``openml-cache/org/openml/...``) holding the dataset or task; each source
  finds its own (``DataSource.locate``, tabbench/data/sources/);
- stand-ins: files that stand in for an original but differ from it in layout (another column
  order, a header line, an ID column fewer), in size (a subset) or even in kind (a substitute
  dataset). The mirror mapping declares, per original (named by ``DataSource.mirror_key``: a URL,
  ``openml:<id>``, ``openml-task:<id>``), which files in a mirror stand in for it, how
  to parse them into the original's columns, and how they differ. The mapping shipped with
  tabbench (``mirrors.yaml`` next to this module) describes a mirror laid out like the project's
  shared ``datasets`` folder; a mirror may bring its own ``tabbench-mirror.yaml`` instead.

A stand-in that is not the whole original carries a subset label, which the Dataset keeps
(``Dataset.subset``) and every record and leaderboard shows, so a run on a subset never passes for
a run on the full dataset. A stand-in may also override the split (a subset of Higgs has its own
500-row test file, not "the last 500,000 rows"); the Dataset's ``split`` is the one to use.

Order of preference: cache (a verified download) > exact mirror copy > stand-in > download;
``load_raw`` reads a dataset from the first of these that is there.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import lru_cache
from pathlib import Path

import yaml

from tabbench.data.cache import DataPaths
from tabbench.data.formats import FORMATS, level, read_table
from tabbench.data.images import pixel_columns
from tabbench.data.types import REMOTE, STAND_IN, Location, RawTable, SplitConfig
from tabbench.errors import TabbenchError

PACKAGED_MAPPING = Path(__file__).with_name("mirrors.yaml")
MIRROR_MAPPING_NAME = "tabbench-mirror.yaml"  # a mirror's own mapping, used instead of the packaged one

_READ_KEYS = {"format", "header", "skip_rows", "sep", "na_values", "columns", "labels", "pixel_prefix",
              "pixel_start"}
_ENTRY_KEYS = _READ_KEYS | {"path", "test_path", "test_read", "extra_columns", "missing_columns",
                            "target_position", "target", "target_map", "default_target", "split", "subset",
                            "substitute", "note"}


class MirrorError(TabbenchError):
    """A mirror mapping is invalid or a stand-in does not parse as declared."""


@dataclass(frozen=True)
class StandIn:
    key: str  # the original it stands in for
    root: Path  # the mirror folder holding it
    entry: dict  # the mapping's entry, validated
    mapping: Path  # the mapping file that declared it

    @property
    def path(self) -> Path:
        return self.root / self.entry["path"]

    @property
    def test_path(self) -> Path | None:
        return self.root / self.entry["test_path"] if self.entry.get("test_path") else None

    @property
    def subset(self) -> str | None:
        label = self.entry.get("subset")
        if label and self.entry.get("substitute"):
            return f"SUBSTITUTE: {label}"
        return label

    @property
    def files(self) -> tuple:
        found = [self.path] + ([self.test_path] if self.test_path else [])
        for read in (self.entry, self.entry.get("test_read") or {}):
            if read.get("labels"):
                found.append(self.root / read["labels"])
        return tuple(dict.fromkeys(found))


# --- the mapping ------------------------------------------------------------------------------------


def _check_entry(file, key, entry) -> dict:
    where = f"{file}: stand_ins[{key!r}]"
    if not isinstance(entry, dict):
        raise MirrorError(f"{where}: expected a mapping, got {entry!r}")
    unknown = set(entry) - _ENTRY_KEYS
    if unknown:
        raise MirrorError(f"{where}: unknown fields {sorted(unknown)}; valid: {sorted(_ENTRY_KEYS)}")
    if not isinstance(entry.get("path"), str):
        raise MirrorError(f"{where}.path: required, the stand-in's file relative to the mirror folder")
    for read in (entry, entry.get("test_read") or {}):
        if "format" in read and read["format"] not in FORMATS:
            raise MirrorError(f"{where}: format {read['format']!r} is not one of {FORMATS}")
        if set(read) - _READ_KEYS - (_ENTRY_KEYS if read is entry else set()):
            raise MirrorError(f"{where}.test_read: only read options {sorted(_READ_KEYS)} are allowed")
    if entry.get("target_position") not in (None, "first", "last"):
        raise MirrorError(f"{where}.target_position: expected first or last")
    split_keys = {f.name for f in fields(SplitConfig)}
    if set(entry.get("split") or {}) - split_keys:
        raise MirrorError(f"{where}.split: unknown fields {sorted(set(entry['split']) - split_keys)}")
    if entry.get("substitute") and not entry.get("subset"):
        raise MirrorError(f"{where}: a substitute needs a 'subset' label saying what it is")
    return entry


@lru_cache(maxsize=None)
def _load_mapping_cached(path: str, mtime_ns: int) -> dict:
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise MirrorError(f"{path}: cannot read the mirror mapping: {exc}") from exc
    stand_ins = (raw or {}).get("stand_ins") if isinstance(raw, dict) else None
    if not isinstance(stand_ins, dict):
        raise MirrorError(f"{path}: expected a top-level 'stand_ins' mapping from originals to stand-ins")
    return {str(key): _check_entry(path, key, entry) for key, entry in stand_ins.items()}


def load_mapping(path: Path) -> dict:
    """A validated mirror mapping: {original key: stand-in entry}."""
    path = Path(path)
    return _load_mapping_cached(str(path), path.stat().st_mtime_ns if path.exists() else 0)


def mapping_for(root: Path) -> Path:
    own = Path(root) / MIRROR_MAPPING_NAME
    return own if own.exists() else PACKAGED_MAPPING


def find_stand_in(cfg, paths: DataPaths) -> StandIn | None:
    key = cfg.source.mirror_key()
    if key is None:
        return None
    for root in paths.mirrors:
        mapping_file = mapping_for(root)
        entry = load_mapping(mapping_file).get(key)
        if entry is None:
            continue
        stand_in = StandIn(key, Path(root), entry, mapping_file)
        if all(p.exists() for p in stand_in.files):
            return stand_in
    return None


# --- locating ---------------------------------------------------------------------------------------


def locate(cfg, paths: DataPaths) -> Location:
    """Where ``load_dataset`` would read ``cfg`` from right now, without downloading anything: where the source
    itself finds it, else a declared stand-in, else remote."""
    found = cfg.source.locate(cfg, paths)
    if found is not None:
        return found
    stand_in = find_stand_in(cfg, paths)
    if stand_in is not None:
        return Location(STAND_IN, stand_in.files, stand_in,
                        note=f"stand-in declared in {stand_in.mapping}" + (
                            f": {stand_in.entry['note']}" if stand_in.entry.get("note") else ""))
    return Location(REMOTE, note="not available locally; it is downloaded on first use (or by `tabbench fetch`)")


# --- reading a stand-in -----------------------------------------------------------------------------


def _original_target(cfg) -> str | None:
    if isinstance(cfg.target, str):
        return cfg.target
    if cfg.columns is not None:
        return cfg.columns[cfg.target if cfg.target is not None else -1]
    return None


def _column_names(spec, cfg, entry, where: str):
    """The names the mapping gives a stand-in's columns: none, a list, 'original', or pixels."""
    if spec is None:
        return None
    if spec == "original":
        if cfg.columns is None:
            raise MirrorError(f"{where}: columns 'original' needs the suite to name the original's columns")
        missing = set(entry.get("missing_columns") or ())
        names = [c for c in cfg.columns if c not in missing]
        position = entry.get("target_position")
        if position:
            target = _original_target(cfg)
            names.remove(target)
            names = [target, *names] if position == "first" else [*names, target]
        return names
    if isinstance(spec, dict):  # {pixels: 784, prefix: pixel, start: 1, label: class}
        return pixel_columns(int(spec["pixels"]), spec.get("prefix", "pixel"), int(spec.get("start", 1))) + [
            spec.get("label", "class")]
    return [str(c) for c in spec]


def _read_file(path: Path, read: dict, stand_in: StandIn, cfg, where: str):
    options = {k: read[k] for k in ("labels", "pixel_prefix", "pixel_start") if k in read}
    if "labels" in options:
        options["labels"] = stand_in.root / options["labels"]
    na_values = tuple(read["na_values"]) if read.get("na_values") else None
    try:
        frame = read_table(path, read.get("format"), bool(read.get("header", False)), None,
                           int(read.get("skip_rows", 0)), na_values, read.get("sep"), **options)
    except (ValueError, OSError) as exc:
        raise MirrorError(f"{where}: {exc}") from exc
    extra = list(stand_in.entry.get("extra_columns") or ())
    if extra:
        absent = [c for c in extra if c not in frame.columns]
        if absent:
            raise MirrorError(f"{where}: extra_columns {absent} not in the file's columns {list(frame.columns)[:8]}")
        frame = frame.drop(columns=extra)
    names = _column_names(read.get("columns"), cfg, stand_in.entry, where)
    if names is not None:
        if len(names) != frame.shape[1]:
            raise MirrorError(f"{where}: the mapping names {len(names)} columns but {path} has {frame.shape[1]}")
        frame.columns = names
    return frame


def read_stand_in(cfg, stand_in: StandIn) -> RawTable:
    """Parse a stand-in into the original's columns; the RawTable carries its label and overrides."""
    import pandas as pd

    entry = stand_in.entry
    where = f"{stand_in.mapping}: stand_ins[{stand_in.key!r}]"
    base_read = {k: entry[k] for k in _READ_KEYS if k in entry}
    frame = _read_file(stand_in.path, base_read, stand_in, cfg, where)
    n_test = None
    if stand_in.test_path is not None:
        test = _read_file(stand_in.test_path, {**base_read, **(entry.get("test_read") or {})}, stand_in, cfg, where)
        if list(test.columns) != list(frame.columns):
            raise MirrorError(f"{where}: the test file's columns {list(test.columns)[:5]}... differ from the "
                              f"training file's {list(frame.columns)[:5]}...")
        frame, n_test = pd.concat([frame, test], ignore_index=True), len(test)
    target = entry.get("target") or (cfg.target if isinstance(cfg.target, str) else None)
    if entry.get("target_map"):
        column = target or entry.get("default_target") or frame.columns[
            cfg.target if isinstance(cfg.target, int) else -1]
        mapping = {str(k): v for k, v in entry["target_map"].items()}
        frame[column] = frame[column].map(lambda v: mapping.get(level(v), v), na_action="ignore")
    overrides = {}
    if entry.get("target"):
        overrides["target"] = entry["target"]
    if entry.get("missing_columns"):
        missing = set(entry["missing_columns"])
        overrides["drop"] = tuple(d for d in cfg.drop if d not in missing)
    if entry.get("split"):
        overrides["split"] = replace(cfg.split, **entry["split"])
    if stand_in.subset:
        overrides["subset"] = stand_in.subset
    files = " + ".join(str(p) for p in stand_in.files)
    return RawTable(frame, default_target=entry.get("default_target"), n_test_rows=n_test,
                    origin=f"{files} (mirror stand-in for {stand_in.key})", overrides=overrides)


def load_raw(cfg, paths: DataPaths) -> RawTable:
    """The table as published: a declared stand-in where ``locate`` picks one, else the source's own loader
    (which reads the cache, an exact mirror copy, or downloads), with the source's own folds where the split
    protocol asks for them (``DataSource.task_splits``; a stand-in has none: its rows are not the original's)."""
    location = locate(cfg, paths)
    if location.kind == STAND_IN:
        return read_stand_in(cfg, location.stand_in)
    raw = cfg.source.load(cfg, paths)
    if cfg.split.protocol == "openml_task" and cfg.source.has_task_splits():
        raw.task_splits = tuple(cfg.source.task_splits(cfg, paths))
    return raw
