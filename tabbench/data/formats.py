"""Parsers for the file formats datasets come in: csv, tsv, whitespace, parquet, arff (gzip allowed)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd

FORMATS = ("csv", "tsv", "whitespace", "parquet", "arff")
_SEPARATORS = {"csv": ",", "tsv": "\t", "whitespace": r"\s+"}


def infer_format(path: str | Path) -> str:
    suffixes = [s.lower() for s in Path(path).suffixes if s.lower() not in (".gz", ".bz2", ".xz", ".zip")]
    ext = suffixes[-1].lstrip(".") if suffixes else ""
    return {"csv": "csv", "tsv": "tsv", "tab": "tsv", "parquet": "parquet", "pq": "parquet", "arff": "arff",
            "txt": "whitespace", "data": "csv", "test": "csv", "train": "csv"}.get(ext, "csv")


def read_table(path: Path, fmt: str | None = None, header: bool = False, columns=None, skip_rows: int = 0,
               na_values=None, sep: str | None = None) -> pd.DataFrame:
    """Read one file into a DataFrame of raw values; column names from the header or ``columns``."""
    fmt = fmt or infer_format(path)
    if fmt == "parquet":
        frame = pd.read_parquet(path)
    elif fmt == "arff":
        import arff  # liac-arff, installed with openml

        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "rt") as fh:
            data = arff.load(fh)
        frame = pd.DataFrame(data["data"], columns=[name for name, _ in data["attributes"]])
    else:
        frame = pd.read_csv(path, sep=sep or _SEPARATORS[fmt], header=0 if header else None,
                            skiprows=skip_rows or None, na_values=na_values, skipinitialspace=True,
                            engine="python" if (sep or _SEPARATORS[fmt]) == r"\s+" else "c")
        frame = frame.dropna(axis=1, how="all") if fmt == "whitespace" else frame
    if columns is not None:
        if len(columns) != frame.shape[1]:
            raise ValueError(f"{path}: the suite names {len(columns)} columns but the file has {frame.shape[1]}; "
                             "fix the 'columns' list (or the file's separator/format)")
        frame.columns = list(columns)
    elif not header and fmt not in ("parquet", "arff"):
        frame.columns = [f"col{i}" for i in range(frame.shape[1])]
    frame.columns = [str(c) for c in frame.columns]
    return frame
