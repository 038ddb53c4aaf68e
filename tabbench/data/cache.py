"""Where data lives: a writable cache directory and read-only mirrors searched before any download.

cache:   --cache DIR, else $TABBENCH_CACHE, else the user's cache dir (e.g. ~/.cache/tabbench).
mirrors: --mirror DIR (repeatable), then $TABBENCH_MIRROR (os.pathsep-separated). A mirror is a
         folder laid out like ../shared/datasets, or a flat folder of downloaded files under their original
         names; relative file paths and downloads are looked up in it first, so an offline machine can run
         suites that name download URLs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tabbench.errors import TabbenchError

CACHE_ENV = "TABBENCH_CACHE"
MIRROR_ENV = "TABBENCH_MIRROR"


@dataclass(frozen=True)
class DataPaths:
    cache: Path
    mirrors: tuple = field(default_factory=tuple)
    base: Path = Path(".")  # the folder relative file paths are read from first (the suite's)

    @classmethod
    def from_env(cls, cache=None, mirrors=(), base=None) -> "DataPaths":
        if cache is None:
            cache = os.environ.get(CACHE_ENV)
        if cache is None:
            import platformdirs

            cache = platformdirs.user_cache_dir("tabbench")
        env_mirrors = [m for m in os.environ.get(MIRROR_ENV, "").split(os.pathsep) if m]
        return cls(Path(cache).expanduser(), tuple(Path(m).expanduser() for m in [*mirrors, *env_mirrors]),
                   Path(base) if base is not None else Path("."))

    def find(self, relpath: str | Path) -> Path | None:
        """An existing file: absolute, or relative to the suite folder, the working dir or a mirror."""
        relpath = Path(relpath).expanduser()
        if relpath.is_absolute():
            return relpath if relpath.exists() else None
        for root in (self.base, Path.cwd(), *self.mirrors):
            candidate = root / relpath
            if candidate.exists():
                return candidate
        return None

    def find_in_mirrors(self, relpath: str | Path) -> Path | None:
        for root in self.mirrors:
            candidate = root / relpath
            if candidate.exists():
                return candidate
        return None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class DownloadError(TabbenchError):
    pass


def offline_hint(copy: str) -> str:
    """What to do when a download fails, the same for every source: ``copy`` says what an offline copy is and
    where a mirror folder holds it; the cache route is the same for all of them."""
    return (f"Offline? Put {copy} in a mirror folder and pass --mirror DIR (or ${MIRROR_ENV}); or, on a machine "
            "with network, run `tabbench fetch SUITE --cache DIR`, copy DIR here and pass --cache DIR "
            f"(or ${CACHE_ENV}).")


def url_filename(url: str) -> str:
    """The file name a URL downloads to (its last path segment)."""
    filename = Path(urllib.parse.urlparse(url).path).name
    return "download" if filename in ("", "..") else filename  # a URL ending in /.. must not name a folder above


def download_target(url: str, paths: DataPaths) -> Path:
    """Where ``url`` is kept in the cache (whether or not it has been downloaded yet)."""
    return paths.cache / "downloads" / hashlib.sha256(url.encode()).hexdigest()[:12] / url_filename(url)


def mirror_copy(url: str, sha256: str | None, paths: DataPaths, mirror_path: str | None = None) -> Path | None:
    """An exact offline copy of ``url`` in a mirror, or None: at ``mirror_path`` (a mirror laid out like the
    project's, used as it is), else at the top of a mirror under the URL's own file name (a flat folder of
    downloads, e.g. ``yacht_hydrodynamics.data``), which must match ``sha256`` when one is given: a file of
    that name is taken for the original, so a different file is refused rather than used."""
    if mirror_path:
        hit = paths.find_in_mirrors(mirror_path)
        if hit is not None:
            return hit
    hit = paths.find_in_mirrors(url_filename(url))
    if hit is None or not hit.is_file():
        return None
    got = checked_sha256(hit) if sha256 is not None else None
    if got != sha256:
        raise DownloadError(f"{hit}: sha256 {got} differs from the suite's {sha256} for {url}; replace the file "
                            "with the original, or remove it from the mirror folder")
    return hit


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def checked_sha256(path: Path) -> str:
    """sha256 of ``path``, remembered next to it (keyed by size and mtime) so big files hash once."""
    stat = path.stat()
    stamp = f"{stat.st_size} {stat.st_mtime_ns}"
    sidecar = _sidecar(path)
    try:
        digest, recorded = sidecar.read_text().split(" ", 1)
        if recorded.strip() == stamp:
            return digest
    except (OSError, ValueError):
        pass
    digest = sha256_of(path)
    try:
        sidecar.write_text(f"{digest} {stamp}\n")
    except OSError:  # a read-only folder: just hash again next time
        pass
    return digest


def cached_copy(url: str, sha256: str | None, paths: DataPaths) -> Path | None:
    """The cached download of ``url`` if present and (when ``sha256`` is given) intact, else None."""
    target = download_target(url, paths)
    if target.exists() and (sha256 is None or checked_sha256(target) == sha256):
        return target
    return None


def fetch_url(url: str, sha256: str | None, paths: DataPaths, mirror_path: str | None = None) -> Path:
    """A local copy of ``url``: from a mirror (at ``mirror_path``), the cache, or a checked download.

    A file found in a mirror (``mirror_copy``: at ``mirror_path``, used as it is, or under the URL's file
    name) is used first; a cached or downloaded file must match ``sha256`` when one is given.
    Without one, the sha256 of the first download is recorded next to it (see ``checked_sha256``),
    so ``tabbench fetch`` can show it for pinning in the suite.
    """
    hit = mirror_copy(url, sha256, paths, mirror_path)
    if hit is not None:
        return hit
    hit = cached_copy(url, sha256, paths)
    if hit is not None:
        return hit
    target = download_target(url, paths)
    filename = target.name
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".part-")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
            shutil.copyfileobj(response, out)
        got = sha256_of(Path(tmp))
        if sha256 is not None and got != sha256:
            raise DownloadError(f"{url}: checksum mismatch (expected sha256 {sha256}, got {got}); the file "
                                "changed upstream or the download was corrupted. Fix the suite's sha256 or "
                                "place a verified copy in a mirror.")
        os.replace(tmp, target)
        stat = target.stat()
        _sidecar(target).write_text(f"{got} {stat.st_size} {stat.st_mtime_ns}\n")
    except OSError as exc:
        places = " or ".join(f"DIR/{p}" for p in dict.fromkeys(filter(None, (filename, mirror_path))))
        raise DownloadError(f"could not download {url}: {exc}. {offline_hint(f'the file as {places}')}") from exc
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target
