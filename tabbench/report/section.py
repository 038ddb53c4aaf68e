"""The shapes a report is made of, each read from one ``Context`` (the records, the typed per-family tables, the
names shown, the published numbers): a ``Section`` of a leaderboard gives its Markdown lines, the files they
link, its rows of leaderboard.csv, its LaTeX lines and its HTML; a ``ReadmeBlock`` gives the lines of one
generated block of a results folder's README. Both are registered through hooks (``register_sections``,
``register_readme_blocks``), the built-in ones by tabbench/report/plugin.py as a plugin registers its own: a new
statistic is one Section subclass in a file of its own, registered with its place on the page (``after``).
``load_sections`` and ``load_readme_blocks`` gather them.

Every part of a section is a method over the one Context, and reads nothing else. Its Markdown is text and
writes nothing; the files it links (a figure as SVG and PNG, its numbers as CSV) are written beside
leaderboard.md by its ``write_files``, the leaderboard's files step (tabbench.report.leaderboard.write_files),
and its HTML inlines the SVG written there, so that a page is one self-contained file. What both read (a test's
diagrams, a bootstrap) is computed once per Context (``Context.once``). pandas is imported by the functions that
use it, so that a plugin module may import these shapes at its top and stay light.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from tabbench.published import Published
    from tabbench.report.arena import Aggregates
    from tabbench.report.family import FamilyResults
    from tabbench.tabarena import Comparison


@dataclass
class Context:
    """What one leaderboard's sections read, made once by leaderboard.make_context."""

    out_dir: Path
    sources: list[Path]  # the result folders whose records are ranked together
    records: pd.DataFrame  # the newest record per job key over the sources
    all_runs: pd.DataFrame  # every trial, FirstComplete rows applied
    selected: pd.DataFrame  # one selected trial per run
    tables: dict[str, FamilyResults]  # task -> its metric family's ranks and means
    labels: dict[str, str]  # dataset -> its label (a subset named)
    show: dict[str, str]  # method -> its name in the tables, marks included
    published: Published | None = None  # the publication's own numbers (a suite's published: file), if any
    aggregates: Aggregates | None = None  # TabArena's Elo, improvability and win rate (make_context computes them)
    splits: dict[str, int] = field(default_factory=dict)  # dataset -> the splits its suite declares, where known
    combined_notes: list[str] = field(default_factory=list)  # FirstComplete's notes
    report: bool = False  # the report extra's sections (tests, figures, LaTeX) too
    restricted: str = ""  # what --common-splits left out (tabbench.pooling.common_splits), said under the title
    compared: tuple[Comparison, ...] = ()  # TabArena's published results beside ours
    _computed: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # Context.once's

    def once(self, key: str, compute: Callable):
        """``compute()``, computed once per Context under ``key``: what a section's Markdown and its files both
        read (its statistic, a bootstrap), so that writing the files computes nothing again."""
        if key not in self._computed:
            self._computed[key] = compute()
        return self._computed[key]

    def markdown_of(self, section: Section) -> list[str]:
        """``section``'s Markdown over this Context, rendered once: leaderboard.md and the page both show it."""
        return self.once(f"markdown of {section.name}", lambda: section.markdown(self))

    @property
    def pooled(self) -> pd.DataFrame:
        from tabbench.report.family import pooled_ranks

        return pooled_ranks(self.tables)

    def model_of(self, method: str) -> str:
        """The registry model a method's records ran (mlp-tuned: mlp); the method itself where none is recorded."""
        runs = self.all_runs[self.all_runs["method"] == method]
        models = runs["model"].dropna() if "model" in runs else []
        return models.iloc[0] if len(models) else method

    @property
    def mark_note(self) -> list:
        """The notes explaining the marks in the shown names, as the lines under a table ([] without marks)."""
        from tabbench.report.labels import mark_notes

        notes = mark_notes(self.show, self.published)
        return [" ".join(notes), ""] if notes else []


class Section:
    """One part of a leaderboard. Every part is optional: a section gives what it has.

    ``report_only``: written only with the report extra (tests, figures, LaTeX); ``csv_late``: its CSV rows
    come after the other sections' (leaderboard.csv's order: per-family rows, then the pooled aggregates);
    ``after``: the name of the section it follows on the page (None: after the sections registered before it);
    ``name``: its own name, by default its class's (what another section's ``after`` gives)."""

    report_only = False
    csv_late = False
    after: str | None = None

    @property
    def name(self) -> str:
        return type(self).__name__

    def markdown(self, ctx: Context) -> list[str]:
        """Its lines of leaderboard.md, a ``## `` heading first; text only: the files they link are
        ``write_files``'s."""
        return []

    def write_files(self, ctx: Context) -> None:
        """Write the files its Markdown links (figures through tabbench.report.plots.save, CSV) into
        ``ctx.out_dir``."""

    def csv_rows(self, ctx: Context) -> list[dict]:
        return []

    def latex(self, ctx: Context) -> list[str]:
        return []

    def html(self, ctx: Context) -> str:
        """The section's HTML, by default its Markdown (``ctx.markdown_of(self)``) as HTML, the figures it links
        inlined (tabbench.report.html.from_markdown: written by ``write_files`` before the page)."""
        from tabbench.report.html import from_markdown

        return from_markdown(ctx.markdown_of(self), ctx.out_dir)


@dataclass(frozen=True)
class ReadmeBlock:
    """A generated block of a results folder's README: the text between ``<!-- tabbench report: NAME -->`` and
    ``<!-- end of tabbench report: NAME -->``, rewritten by ``tabbench report`` as ``lines(ctx)`` from the
    folder's leaderboard ``Context``. ``lines`` raises ``tabbench.report.site.SiteError`` naming the README when
    the folder's records cannot give the block."""

    name: str  # NAME in the README's markers: letters, digits, '_' and '-'
    lines: Callable  # (Context) -> list[str]


@dataclass(frozen=True)
class Answer:
    """An answer atop the report site (results/README.md and results/index.html), written by ``tabbench report``
    as ``lines(contexts)`` from every results folder's leaderboard ``Context`` (folder name -> Context): Markdown,
    links relative to the results folder; no lines where the folders it reads are absent."""

    name: str
    lines: Callable  # (dict[str, Context]) -> list[str]


def _check(kind: type, what: str, pattern: str):
    from tabbench.plugins import PluginError

    def check(thing, source):
        if not isinstance(thing, kind):
            raise PluginError(f"{source}: register() takes a {kind.__module__}.{kind.__name__}, got {thing!r}")
        if not (isinstance(thing.name, str) and re.fullmatch(pattern, thing.name)):
            raise PluginError(f"{source}: the {what} {thing!r} needs a name matching {pattern}, got {thing.name!r}")

    return check


def load_sections(plugin_files=()) -> list[Section]:
    """Every registered leaderboard section in its place on the page: in registration order (the core's first),
    each one whose ``after`` names another right after that one (after those placed there before it). A section
    placed after one that is not registered is an error naming both."""
    from tabbench.plugins import PluginError, collect

    found = collect("register_sections", "leaderboard section", plugin_files, lambda s: s.name,
                    _check(Section, "leaderboard section", r"\w+"))
    page = [s for s, _ in found.values() if s.after is None]
    placed = {s.name for s in page}
    waiting = [(s, source) for s, source in found.values() if s.after is not None]
    while waiting:
        ready = [(s, source) for s, source in waiting if s.after in placed]
        if not ready:
            s, source = waiting[0]
            raise PluginError(f"{source}: leaderboard section {s.name!r} comes after {s.after!r}, which is not on "
                              f"the page (no plugin registers it, or it comes after this one in turn); on the page: "
                              f"{', '.join(p.name for p in page)}")
        for s, source in ready:
            at = next(i for i, p in enumerate(page) if p.name == s.after) + 1
            while at < len(page) and page[at].after == s.after:  # after those placed there before it
                at += 1
            page.insert(at, s)
            placed.add(s.name)
        waiting = [w for w in waiting if w[0].name not in placed]
    return page


def load_readme_blocks(plugin_files=()) -> dict[str, ReadmeBlock]:
    """Every registered README block by name (the core's first)."""
    from tabbench.plugins import collect

    found = collect("register_readme_blocks", "README block", plugin_files, lambda b: b.name,
                    _check(ReadmeBlock, "README block", r"[\w-]+"))
    return {name: block for name, (block, _) in found.items()}


def load_answers(plugin_files=()) -> dict[str, Answer]:
    """Every registered answer by name, in the order the plugins registered them."""
    from tabbench.plugins import collect

    found = collect("register_answers", "answer", plugin_files, lambda a: a.name, _check(Answer, "answer", r"[\w-]+"))
    return {name: answer for name, (answer, _) in found.items()}
