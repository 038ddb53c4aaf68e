"""What a data source is: the base class every source subclasses, the built-in ones (tabbench/data/sources/)
and a plugin's alike, and the Location a source reports.

A source is one class that is both halves of a suite's ``source:`` entry:

- its **declaration**: the class is a pydantic model whose fields are the suite fields of that source (an
  OpenML ``id`` or ``task_id``, a ``url`` and its ``sha256``), each with a type and a one-line description.
  The suite format (tabbench/suite/declaration.py) adds them beside the fields every dataset has (name,
  split, target, format, ...), so ``tabbench validate``, suites/suite.schema.json and the field reference
  of suites/README.md all come from this one declaration;
- its **behaviour**: ``load`` (the table as the publisher ships it), ``locate`` (where it would be read
  from, without downloading), ``fetch`` (download it into the cache now), ``describe`` (one line for
  ``tabbench datasets``) and ``mirror_key`` (how a mirror mapping names its original).

A suite's dataset entry becomes a ``DatasetConfig`` whose ``source`` is an instance of the class, holding
the values the suite gave, so the data layer asks ``cfg.source`` and never switches on a source's name.
Sources are registered through the ``register_sources`` hook (tabbench/hookspecs.py), the built-in ones
too. The methods take the whole ``cfg`` because a source that reads files reads them with the dataset's
read options (``cfg.format``, ``cfg.header``, ``cfg.columns``, ...).
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic_core import PydanticCustomError

# the Location a source returns and its kinds are plain types (tabbench.data.types), offered here to sources
from tabbench.data.types import (BUNDLED, CACHE, LOCAL, MIRROR, MISSING, REMOTE, STAND_IN, Location,  # noqa: F401
                                 RawTable)
from tabbench.errors import TabbenchError

#: Value types a declaration's fields use (the suite declaration uses them too).
Text = Annotated[str, StringConstraints(min_length=1)]
Count = Annotated[int, Field(ge=1)]


class SourceError(TabbenchError):
    """A source cannot give the data its suite entry names; the message names the field and the fix."""


def refuse(where: str, message: str):
    """Refuse a suite value from a declaration's validator: ``where`` is the field path below the dataset
    entry ('' for the entry itself). The suite error then reads 'FILE: datasets[i].WHERE: MESSAGE'."""
    raise PydanticCustomError("suite", "{message}", {"where": where, "message": message})


class DataSource(BaseModel):
    """Base of every data source. Subclass it, declare the suite's fields of the source as pydantic fields
    (each with ``Field(description=...)``), set ``name`` and implement ``load``; the class docstring is the
    one-line description the suite schema shows. Override the other methods where the defaults (data that
    ships with a package: nothing to download, no mirror copies) do not fit."""

    # the fields are checked as a suite gives them (strict: '5' is not an id), a misspelt one is refused, and an
    # instance is immutable (a DatasetConfig holding it is compared and hashed)
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    #: What a suite's ``source:`` says to pick this source: a plain lower-case word, unique among sources.
    name: ClassVar[str]
    #: A publisher's table may hold columns with no value at all (OpenML's anneal): the builder drops them
    #: instead of refusing them, since the user cannot fix the publisher's file.
    drops_empty_columns: ClassVar[bool] = False
    #: ``tabbench fetch`` shows the sha256 of this source's files, ready to pin in the suite (url).
    shows_sha256: ClassVar[bool] = False

    def load(self, cfg, paths) -> RawTable:
        """The table as the publisher ships it, every column the target included (``paths``:
        tabbench.data.cache.DataPaths, the cache and the mirror folders). Raise SourceError (or
        DownloadError) naming the field at fault. A declared mirror stand-in is read one layer up."""
        raise NotImplementedError(f"source {self.name!r} does not implement load")

    def locate(self, cfg, paths) -> Location | None:
        """Where ``load`` would read the data from right now, without downloading: a Location (bundled,
        local, missing, cache or mirror), or None when it is not here and would be downloaded (the data
        layer then looks for a mirror stand-in). Default: it ships with a package, always here."""
        return Location(BUNDLED, note=f"read by source {self.name}, nothing to download")

    def fetch(self, cfg, paths) -> list:
        """Download the data into the cache now, so that later runs need no network; the files or folders
        written. Called only where ``locate`` returned None. Raise DownloadError when it cannot."""
        return []

    def describe(self) -> str:
        """One line saying where the data comes from, e.g. 'openml task 1882' (``tabbench datasets``)."""
        given = " ".join(f"{key}={value}" for key, value in self.model_dump(exclude_none=True).items())
        return f"{self.name} {given}".strip()

    def mirror_key(self) -> str | None:
        """How a mirror mapping (tabbench/data/mirrors.yaml) names this dataset's original, so that a mirror
        can declare a stand-in for it; None: no stand-in can replace it."""
        return None

    def has_task_splits(self) -> bool:
        """Whether the data comes with its publisher's own folds (split protocol ``openml_task``), which
        ``task_splits`` gives; asked when a suite is checked, so it reads nothing."""
        return False

    def task_splits(self, cfg, paths) -> list:
        """The publisher's own folds, where ``has_task_splits``: one ``(fold, repeat, training-and-validation
        rows, test rows)`` per split, row positions in the table ``load`` returns (the validation rows are carved
        from the first part, tabbench.data.splits). Asked after ``load``, for the source's own table only (a mirror
        stand-in's rows are others), when the split protocol is ``openml_task``."""
        raise NotImplementedError(f"source {self.name!r} ships no folds of its own (has_task_splits is False)")
