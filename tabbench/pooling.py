"""One set of records from several result folders.

A leaderboard over several folders (``tabbench leaderboard DIR DIR --name NAME``) ranks the union of
their records. Three rules keep the union honest: a dataset name must mean the same data in every
folder (the same dataset fingerprint), a method name the same configuration on a dataset in every folder
(the same parameters: ``npt`` at 300 steps in one folder and at 10,000 in another would otherwise be
averaged into one row; a model's run params, such as NPT's threads, say how a job ran, not what it
computed, and may differ: records are compared by their ``key_params``, which hold them at their defaults),
and a job key present twice keeps its newest record (``tabbench.store.newer``: by ``finished_at``, the later
folder on a tie), as one store does with a re-run.
Folders that ran different splits of the same data (NPT's quickstart ran fold 0 of the quickstart's five) are
compared where all of them ran with ``common_splits`` (``--common-splits``), so that no method is ranked on
splits it never saw.

A method run on different devices (NPT's paper config on a GPU in one folder, on the CPU in another) differs in
its ``device`` parameter, so pooling refuses it unless asked (``across_devices``): then the parameters are compared
without the device, and per (method, dataset) the records of the device whose records cover the most splits are
kept (the first folder's device on a tie), never a mean over both; the leaderboard labels every cell that rests on
a GPU's records.

Everything here is read from the records: pooling needs no model registry, so it gives the same answer
whichever plugins are installed.
"""

from __future__ import annotations

import json
from pathlib import Path

from tabbench.errors import TabbenchError
from tabbench.store import Store, key_params, newer, records_frame


class PoolingError(TabbenchError, ValueError):
    """The result folders cannot be pooled; the message names the folders and what would fix it."""


#: The parameters that say where a job ran, not what it computed: ignored when pooling across devices.
DEVICE_PARAMS = ("device",)


def _plain_names(record: dict, folder: Path, key: str) -> None:
    """A record's method and dataset are plain names, as a suite's are (tables, pages and folders are named by
    them); anything else was not written by a suite's run and is refused before it reaches a report."""
    import re

    from tabbench.names import NAME_PATTERN, NAME_RULE

    for field in ("method", "dataset"):
        if not re.fullmatch(NAME_PATTERN, str(record.get(field))):
            raise PoolingError(f"{folder / 'records'}: the record {key} names its {field} {record.get(field)!r}, "
                               f"which is not {NAME_RULE} as a suite's {field} is; it was not written by a suite's "
                               "run: remove that record (its line in records/) and run the leaderboard again")


def pooled_records(folders, across_devices: bool = False):
    """The newest record per job key over ``folders`` as a DataFrame, with a ``source`` column naming
    each record's folder. ``across_devices``: pool one method made on different devices (see above)."""
    records: dict[str, dict] = {}
    where: dict[str, dict] = {}  # dataset -> {fingerprint: first folder holding it}
    configs: dict[tuple, dict] = {}  # (method, dataset) -> {folder: the parameter sets of its records}
    for folder in map(Path, folders):
        if not (folder / "records").is_dir():
            raise PoolingError(f"{folder}: no records/ folder; run its suite first or name another results folder")
        for key, record in Store(folder).latest().items():
            _plain_names(record, folder, key)
            compared = key_params(record)
            if across_devices:
                compared = {k: v for k, v in compared.items() if k not in DEVICE_PARAMS}
            params = json.dumps(compared, sort_keys=True)
            configs.setdefault((record["method"], record["dataset"]), {}).setdefault(folder, set()).add(params)
            seen = where.setdefault(record["dataset"], {})
            seen.setdefault(record.get("dataset_fingerprint"), folder)
            if len(seen) > 1:
                (fp_a, dir_a), (fp_b, dir_b) = list(seen.items())[:2]
                raise PoolingError(
                    f"dataset {record['dataset']!r} is different data in {dir_a} (fingerprint {fp_a}) and in "
                    f"{dir_b} (fingerprint {fp_b}); one leaderboard cannot rank both under one name: leave one "
                    f"folder out, or rename the dataset in one of the suites")
            old = records.get(key)
            if old is None or newer(record, old):
                records[key] = {**record, "source": str(folder)}
    for (method, dataset), by_folder in configs.items():
        if len(by_folder) > 1 and len({frozenset(params) for params in by_folder.values()}) > 1:
            (dir_a, params_a), (dir_b, params_b) = list(by_folder.items())[:2]
            raise PoolingError(
                f"method {method!r} on dataset {dataset!r} is a different configuration in {dir_a} and in {dir_b} "
                f"({_difference(params_a, params_b)}); one leaderboard cannot average both into one row: give the "
                f"method another name in one of the suites, or leave one folder out")
    if across_devices:
        records = _one_device_each(records, [str(Path(f)) for f in folders])
    return records_frame(records.values())


def _one_device_each(records: dict, order: list) -> dict:
    """Per (method, dataset) the records of one device: the one whose records cover the most (fold, repeat)
    splits, the earlier folder's on a tie."""
    splits: dict = {}  # (method, dataset) -> {device: set of splits}
    first: dict = {}  # (method, dataset, device) -> the earliest folder index holding it
    for record in records.values():
        where = (record["method"], record["dataset"])
        device = record_device(record)
        splits.setdefault(where, {}).setdefault(device, set()).add((record.get("fold"), record.get("repeat")))
        index = order.index(record["source"])
        first[(*where, device)] = min(first.get((*where, device), index), index)
    keep = {where: max(by_device, key=lambda d: (len(by_device[d]), -first[(*where, d)]))
            for where, by_device in splits.items()}
    return {key: r for key, r in records.items() if record_device(r) == keep[(r["method"], r["dataset"])]}


def _difference(params_a: set, params_b: set) -> str:
    """The parameters two folders' records of one method differ in, e.g. "steps 300 against 10000"."""
    a, b = json.loads(min(params_a)), json.loads(min(params_b))
    differ = [f"{name} {a.get(name, '(unset)')} against {b.get(name, '(unset)')}"
              for name in sorted(set(a) | set(b)) if a.get(name) != b.get(name)]
    return "params " + ", ".join(differ) if differ else "different parameter sets, e.g. tuning grids"


def record_device(record) -> str:
    """"gpu" or "cpu": where a record's job ran, as the record says (its ``info.device``, which the models that
    can use a GPU record; a record without one ran on the CPU)."""
    info = record.get("info") if isinstance(record.get("info"), dict) else {}
    return "gpu" if str(info.get("device") or "cpu").startswith("cuda") else "cpu"


def record_devices(frame):
    """record_device of every row of a records frame, as a Series beside it."""
    import pandas as pd

    if "info" not in frame:
        return pd.Series("cpu", index=frame.index)
    return frame["info"].map(lambda info: record_device({"info": info}))


def common_splits(records):
    """``(records, note)``: the records of the datasets every method ran on, on the splits (split fingerprint
    and repeat) every method ran, and a sentence saying what was left out (empty when nothing was)."""
    methods = set(records["method"])
    split = records["split_fingerprint"].astype(str) + "/" + records.get("repeat", 0).fillna(0).astype(str)
    ran = records.assign(_split=split).groupby(["dataset", "_split"])["method"].agg(set)
    shared = {key for key, who in ran.items() if who == methods}
    keep = [(d, s) in shared for d, s in zip(records["dataset"], split)]
    left_datasets = sorted(set(records["dataset"]) - {d for d, _ in shared})
    out = records[keep]
    dropped = len(records) - len(out)
    if not dropped:
        return out, ""
    note = (f"Compared only where every method ran (--common-splits): {len(shared)} splits of "
            f"{len({d for d, _ in shared})} datasets; {dropped:,} records of other splits left out")
    return out, note + (f", datasets {', '.join(left_datasets)} entirely." if left_datasets else ".")
