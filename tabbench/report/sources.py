"""One set of records from several result folders.

A leaderboard over several folders (``tabbench leaderboard DIR DIR --name NAME``) ranks the union of
their records. Two rules keep the union honest: a dataset name must mean the same data in every
folder (the same dataset fingerprint), and a job key present twice keeps its newest record (by
``finished_at``), as one store does with a re-run.
"""

from __future__ import annotations

from pathlib import Path

from tabbench.store import Store, records_frame


class SourceError(ValueError):
    """The result folders cannot be pooled; the message names the folders and what would fix it."""


def load_sources(folders):
    """The newest record per job key over ``folders`` as a DataFrame, with a ``source`` column naming
    each record's folder."""
    records: dict[str, dict] = {}
    where: dict[str, dict] = {}  # dataset -> {fingerprint: first folder holding it}
    for folder in map(Path, folders):
        if not (folder / "records").is_dir():
            raise SourceError(f"{folder}: no records/ folder; run its suite first or name another results folder")
        for key, record in Store(folder).latest().items():
            seen = where.setdefault(record["dataset"], {})
            seen.setdefault(record.get("dataset_fingerprint"), folder)
            if len(seen) > 1:
                (fp_a, dir_a), (fp_b, dir_b) = list(seen.items())[:2]
                raise SourceError(
                    f"dataset {record['dataset']!r} is different data in {dir_a} (fingerprint {fp_a}) and in "
                    f"{dir_b} (fingerprint {fp_b}); one leaderboard cannot rank both under one name: leave one "
                    f"folder out, or rename the dataset in one of the suites")
            old = records.get(key)
            if old is None or str(record.get("finished_at") or "") >= str(old.get("finished_at") or ""):
                records[key] = {**record, "source": str(folder)}
    return records_frame(records.values())
