"""Parsers for the file formats datasets come in, each read as the publisher ships it.

csv, tsv, whitespace  delimited text (gzip/bz2/xz by extension), optional header line
parquet, arff         self-describing tables
excel                 .xls / .xlsx workbooks (first sheet), e.g. UCI's Concrete_Data.xls
idx                   MNIST's IDX image files; the labels file comes as the ``labels`` option
image_tar             a tar of images in <class>/<name>.jpg folders (e.g. the CIFAR-10 JPEG test set)

The image formats yield the image-table form of tabbench.data.images: one numeric column per pixel,
channel-major, then the label column ``class``.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd

FORMATS = ("csv", "tsv", "whitespace", "parquet", "arff", "excel", "idx", "image_tar")
_SEPARATORS = {"csv": ",", "tsv": "\t", "whitespace": r"\s+"}
_COMPRESSION = (".gz", ".bz2", ".xz", ".zip")


def infer_format(path: str | Path) -> str:
    name = Path(path).name.lower()
    if "-ubyte" in name or name.endswith(".idx"):
        return "idx"
    suffixes = [s.lower() for s in Path(path).suffixes if s.lower() not in _COMPRESSION]
    ext = suffixes[-1].lstrip(".") if suffixes else ""
    return {"csv": "csv", "tsv": "tsv", "tab": "tsv", "parquet": "parquet", "pq": "parquet", "arff": "arff",
            "txt": "whitespace", "data": "csv", "test": "csv", "train": "csv", "xls": "excel", "xlsx": "excel",
            "tar": "image_tar"}.get(ext, "csv")


def read_table(path: Path, fmt: str | None = None, header: bool = False, columns=None, skip_rows: int = 0,
               na_values=None, sep: str | None = None, **options) -> pd.DataFrame:
    """Read one file into a DataFrame of raw values; column names from the header or ``columns``.

    ``options`` are format-specific: ``labels`` (idx: the labels file), ``pixel_prefix`` and
    ``pixel_start`` (idx, image_tar: how pixel columns are named), ``sheet`` (excel).
    """
    fmt = fmt or infer_format(path)
    if fmt in ("idx", "image_tar"):
        from tabbench.data import images

        frame = images.read_image_table(Path(path), fmt, **options)
    elif options:
        raise ValueError(f"{path}: options {sorted(options)} do not apply to format {fmt!r}")
    elif fmt == "parquet":
        frame = pd.read_parquet(path)
    elif fmt == "arff":
        import arff  # liac-arff, installed with openml

        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "rt") as fh:
            data = arff.load(fh)
        frame = pd.DataFrame(data["data"], columns=[name for name, _ in data["attributes"]])
    elif fmt == "excel":
        try:
            frame = pd.read_excel(path, header=0 if header else None, skiprows=skip_rows or None,
                                  na_values=na_values)
        except ImportError as exc:  # .xls needs xlrd, .xlsx openpyxl
            raise ValueError(f"{path}: reading Excel files needs an extra package ({exc}); "
                             "pip install xlrd (for .xls) or openpyxl (for .xlsx)") from exc
        frame = frame.dropna(axis=0, how="all").dropna(axis=1, how="all")
    else:
        # '\s+' runs on pandas' C parser (as delim_whitespace): leading/trailing blanks are ignored
        frame = pd.read_csv(path, sep=sep or _SEPARATORS[fmt], header=0 if header else None,
                            skiprows=skip_rows or None, na_values=na_values, skipinitialspace=True)
        frame = frame.dropna(axis=1, how="all") if fmt == "whitespace" else frame
    if columns is not None:
        if len(columns) != frame.shape[1]:
            raise ValueError(f"{path}: the suite names {len(columns)} columns but the file has {frame.shape[1]}; "
                             "fix the 'columns' list (or the file's separator/format)")
        frame.columns = list(columns)
    elif not header and fmt not in ("parquet", "arff", "idx", "image_tar"):
        frame.columns = [f"col{i}" for i in range(frame.shape[1])]
    frame.columns = [str(c) for c in frame.columns]
    return frame
