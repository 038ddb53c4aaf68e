"""Source ``file``: a file of the user's own (and an optional separate test file), read with the dataset's
read options. ``read_files`` is also how the url source reads what it downloaded."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pandas as pd
from pydantic import Field

from tabbench.data.formats import read_table
from tabbench.data.source import LOCAL, MISSING, DataSource, Location, SourceError, Text
from tabbench.data.types import RawTable


def read_files(cfg, path: Path, test_path: Path | None, origin: str) -> RawTable:
    """A data file read with the dataset's read options (format, header, columns, ...); a test file's rows
    are appended after it and counted (``n_test_rows``: the fixed split's test set)."""
    def read(file):
        return read_table(file, cfg.format, cfg.header, cfg.columns, cfg.skip_rows, cfg.na_values, cfg.sep)

    train = read(path)
    if test_path is None:
        return RawTable(train, origin=origin)
    test = read(test_path)
    if list(test.columns) != list(train.columns):
        raise SourceError(f"{test_path}: test file has columns {list(test.columns)[:5]}..., expected the "
                          f"training file's {list(train.columns)[:5]}...")
    return RawTable(pd.concat([train, test], ignore_index=True), n_test_rows=len(test),
                    origin=f"{origin} + {test_path}")


def _require_file(paths, relpath, field: str) -> Path:
    found = paths.find(relpath)
    if found is None:
        where = ", ".join(str(p) for p in (paths.base, Path.cwd(), *paths.mirrors))
        raise SourceError(f"{field}: file {relpath!r} not found (looked in: {where}); fix the path or add the "
                          "folder holding it with --mirror")
    return found


class File(DataSource):
    """A file of the user's own."""

    name = "file"

    path: Text = Field(description=(
        "file: absolute, or relative to the suite's folder, the working directory or a mirror (--mirror)"))
    test_path: Optional[Text] = Field(None, description="file: a separate test file, appended after the rows of path")

    def load(self, cfg, paths) -> RawTable:
        path = _require_file(paths, self.path, "path")
        test = _require_file(paths, self.test_path, "test_path") if self.test_path else None
        return read_files(cfg, path, test, str(path))

    def locate(self, cfg, paths) -> Location:
        found = [paths.find(p) for p in (self.path, self.test_path) if p]
        if all(found):
            return Location(LOCAL, tuple(found))
        return Location(MISSING, note="file not found; fix the path or add its folder with --mirror")

    def describe(self) -> str:
        return f"file {self.path}" + (f" + {self.test_path}" if self.test_path else "")
