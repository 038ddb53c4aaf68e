"""Source ``url``: a file downloaded once into the cache and checked against its sha256, or read from an exact
copy in a mirror (at ``mirror_path``, or under the URL's file name in a flat folder); a declared mirror stand-in
may replace it (its mirror key is the URL)."""

from __future__ import annotations

from typing import Optional

from pydantic import Field

from tabbench.data.cache import cached_copy, fetch_url, mirror_copy
from tabbench.data.source import CACHE, MIRROR, DataSource, Location, Text
from tabbench.data.sources.file import read_files
from tabbench.data.types import RawTable


class Url(DataSource):
    """A file downloaded once into the cache (or read from a mirror)."""

    name = "url"
    shows_sha256 = True

    url: Text = Field(description="url: downloaded once into the cache")
    sha256: Optional[Text] = Field(None, description="url: checked after download (recommended)")
    mirror_path: Optional[Text] = Field(None, description=(
        "url: where a mirror holds a copy (used as is, no download); a mirror's top-level file named as the "
        "URL's is found without it"))
    test_url: Optional[Text] = Field(None, description="url: a separate test file")
    test_sha256: Optional[Text] = Field(None, description="url: the test file's sha256")
    test_mirror_path: Optional[Text] = Field(None, description="url: where a mirror holds the test file")

    def _files(self) -> list:
        """(url, sha256, mirror_path) of the data file, and of the test file when there is one."""
        files = [(self.url, self.sha256, self.mirror_path)]
        if self.test_url:
            files.append((self.test_url, self.test_sha256, self.test_mirror_path))
        return files

    def load(self, cfg, paths) -> RawTable:
        path, *test = self.fetch(cfg, paths)
        return read_files(cfg, path, test[0] if test else None, self.url)

    def locate(self, cfg, paths) -> Location | None:
        hits, kinds = [], set()
        for url, sha256, mirror_path in self._files():
            hit = mirror_copy(url, sha256, paths, mirror_path)
            if hit is not None:
                kinds.add(MIRROR)
            else:
                hit = cached_copy(url, sha256, paths)
                kinds.add(CACHE)
            hits.append(hit)
        if all(hits):
            return Location(MIRROR if MIRROR in kinds else CACHE, tuple(hits))
        return None

    def fetch(self, cfg, paths) -> list:
        return [fetch_url(url, sha256, paths, mirror_path) for url, sha256, mirror_path in self._files()]

    def describe(self) -> str:
        return f"url {self.url}" + (f" + {self.test_url}" if self.test_url else "")

    def mirror_key(self) -> str:
        return self.url
