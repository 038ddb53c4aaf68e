"""Image datasets as tables: one numeric column per pixel, then the label column ``class``.

Pixels are flattened channel-major and row-major within a channel, i.e. an image of shape
(channels, height, width) becomes ``image.reshape(-1)``: for CIFAR-10 the 1024 red values come
first, then green, then blue, exactly as in the original CIFAR-10 arrays and OpenML dataset 40927;
MNIST (OpenML 554) is one 28x28 channel. Column names follow OpenML: ``pixel1 .. pixel784`` for
MNIST, ``a0 .. a3071`` for CIFAR-10 (``pixel_prefix`` / ``pixel_start`` choose them), so an offline
copy and the OpenML original give the same table. A model that wants patches (NPT's linear patch
encoder) reshapes a row back to (channels, height, width).

Readers for the formats images are shipped in:
- IDX (MNIST's own format, optionally gzipped): ``read_idx`` for one file, an images file and a
  labels file together as a table;
- a tar of image files in ``<class>/<name>.<ext>`` folders (the CIFAR-10 JPEG test set): decoded
  with Pillow, sorted by class folder and file name so the row order is deterministic.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd

LABEL = "class"
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif")


def pixel_columns(n: int, prefix: str = "pixel", start: int = 1) -> list:
    return [f"{prefix}{i}" for i in range(start, start + n)]


def image_table(pixels: np.ndarray, labels, prefix: str = "pixel", start: int = 1) -> pd.DataFrame:
    """(n, channels, height, width) or (n, height, width) pixels + n labels -> the image table."""
    flat = pixels.reshape(len(pixels), -1)  # (n, c, h, w) -> (n, c*h*w), channel-major
    frame = pd.DataFrame(flat, columns=pixel_columns(flat.shape[1], prefix, start))
    frame[LABEL] = np.asarray(labels)
    return frame


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (http://yann.lecun.com/exdb/mnist/) as an array of its declared shape."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as fh:
        data = fh.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_TYPES:
        raise ValueError(f"{path}: not an IDX file (bad magic number {data[:4].hex()})")
    ndim = data[3]
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", count=ndim, offset=4))
    dtype = np.dtype(_IDX_TYPES[data[2]])
    expected = int(np.prod(shape)) * dtype.itemsize
    body = data[4 + 4 * ndim:]
    if len(body) != expected:
        raise ValueError(f"{path}: IDX header declares shape {shape} ({expected} bytes) but {len(body)} bytes follow")
    return np.frombuffer(body, dtype).reshape(shape)


def read_idx_table(images: Path, labels: Path, prefix: str = "pixel", start: int = 1) -> pd.DataFrame:
    x, y = read_idx(images), read_idx(labels)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"{images} holds {x.shape[0]} images but {labels} holds {y.shape[0]} labels")
    return image_table(x, y.astype(np.int64), prefix, start)


def read_image_tar(path: Path, prefix: str = "pixel", start: int = 1) -> pd.DataFrame:
    """Images in ``<...>/<class>/<file>`` inside a tar; the label is the class folder's name."""
    from PIL import Image

    members = []
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if member.isfile() and len(parts) >= 2 and Path(member.name).suffix.lower() in _IMAGE_SUFFIXES:
                members.append((parts[-2], parts[-1], member))
        if not members:
            raise ValueError(f"{path}: no images in <class>/<file> folders")
        members.sort(key=lambda m: (m[0], m[1]))
        arrays, labels = [], []
        for label, _, member in members:
            with Image.open(io.BytesIO(tar.extractfile(member).read())) as img:
                array = np.asarray(img)
            arrays.append(array.transpose(2, 0, 1) if array.ndim == 3 else array[None])  # (h, w, c) -> (c, h, w)
            labels.append(label)
    shapes = {a.shape for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"{path}: images differ in shape: {sorted(shapes)[:3]}")
    return image_table(np.stack(arrays), labels, prefix, start)


def read_image_table(path: Path, fmt: str, labels=None, pixel_prefix: str = "pixel", pixel_start: int = 1):
    if fmt == "idx":
        if labels is None:
            raise ValueError(f"{path}: an IDX images file needs its labels file (the 'labels' option)")
        return read_idx_table(path, Path(labels), pixel_prefix, pixel_start)
    if labels is not None:
        raise ValueError(f"{path}: format {fmt!r} takes its labels from the class folders, not a labels file")
    return read_image_tar(path, pixel_prefix, pixel_start)
