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

import numpy as np
import pandas as pd

from tabbench.errors import TabbenchError

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


def level(value) -> str:
    """How a raw value reads as a category level: a float that is a whole number without its '.0' (a column read
    as float spells the class 3 as 3.0), anything else as its trimmed text. Categorical columns and targets are
    labelled this way (tabbench.data.dataset), and a mirror mapping's ``target_map`` keys are matched this way."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value).strip()


class FormatError(TabbenchError, ValueError):
    """A data file could not be parsed; the message names the file and what to check."""


def read_table(path: Path, fmt: str | None = None, header: bool = False, columns=None, skip_rows: int = 0,
               na_values=None, sep: str | None = None, **options) -> pd.DataFrame:
    """Read one file into a DataFrame of raw values; column names from the header or ``columns``.

    A missing, empty or corrupt file raises FormatError naming the file.
    """
    fmt = fmt or infer_format(path)
    if Path(path).is_file() and Path(path).stat().st_size == 0:
        raise FormatError(f"{path}: the file is empty; re-download it or fix the path")
    try:
        frame = _read_table(path, fmt, header, columns, skip_rows, na_values, sep, **options)
    except FormatError:
        raise
    except (OSError, ValueError, EOFError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise FormatError(f"{path}: cannot be read as {fmt} ({type(exc).__name__}: {str(exc).strip()}); check the suite's "
                          "format, sep, header and skip_rows, or replace a corrupt file") from exc
    if frame.shape[0] == 0:
        raise FormatError(f"{path}: no data rows (after skipping {skip_rows} lines and any header)")
    return frame


def _read_table(path: Path, fmt: str | None = None, header: bool = False, columns=None, skip_rows: int = 0,
                na_values=None, sep: str | None = None, **options) -> pd.DataFrame:
    """Read one file into a DataFrame of raw values; column names from the header or ``columns``.

    ``options`` are format-specific: ``decimal`` (csv, tsv, whitespace: the decimal mark, e.g. ``","``),
    ``labels`` (idx: the labels file), ``pixel_prefix`` and ``pixel_start`` (idx, image_tar: how pixel columns
    are named).
    """
    fmt = fmt or infer_format(path)
    decimal = options.pop("decimal", ".") if fmt in _SEPARATORS else "."
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
                            skiprows=skip_rows or None, na_values=na_values, skipinitialspace=True, decimal=decimal)
        if fmt == "whitespace":  # trailing separators make empty columns at the end of each line
            while frame.shape[1] > 1 and frame.iloc[:, -1].isna().all():
                frame = frame.iloc[:, :-1]
    if columns is not None:
        if len(columns) != frame.shape[1]:
            raise FormatError(f"{path}: the suite names {len(columns)} columns but the file has {frame.shape[1]}; "
                             "fix the 'columns' list (or the file's separator/format)")
        frame.columns = list(columns)
    elif not header and fmt not in ("parquet", "arff", "idx", "image_tar"):
        frame.columns = [f"col{i}" for i in range(frame.shape[1])]
    frame.columns = [str(c) for c in frame.columns]
    return frame
