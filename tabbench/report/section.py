"""The shape every part of a leaderboard has: a ``Section`` reads one ``Context`` (the records, the typed
per-family tables, the names shown, the published numbers) and gives its Markdown lines, its rows of
leaderboard.csv, its LaTeX lines and its HTML. A leaderboard is a list of sections
(tabbench.report.leaderboard.LEADERBOARD): a new statistic is one Section subclass in a file of its own and one
entry in that list.

A section that draws a figure writes it (SVG and PNG) beside leaderboard.md when its Markdown is asked for;
its HTML inlines the SVG it wrote, so that a page is one self-contained file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd


@dataclass
class Context:
    """What one leaderboard's sections read, made once by leaderboard.make_context."""

    out_dir: Path
    sources: list  # the result folders whose records are ranked together
    records: pd.DataFrame  # the newest record per job key over the sources
    all_runs: pd.DataFrame  # every trial, FirstComplete rows applied
    selected: pd.DataFrame  # one selected trial per run
    tables: dict  # task -> tabbench.report.family.FamilyResults
    labels: dict  # dataset -> its label (a subset named)
    show: dict  # method -> its name in the tables, marks included
    published: object = None  # tabbench.published.Published, or None
    aggregates: object = None  # tabbench.report.arena.Aggregates
    splits: dict = field(default_factory=dict)  # dataset -> the splits its suite declares, where known
    combined_notes: list = field(default_factory=list)  # FirstComplete's notes
    report: bool = False  # the report extra's sections (tests, figures, LaTeX) too
    restricted: str = ""  # what --common-splits left out (tabbench.pooling.common_splits), said under the title
    compared: tuple = ()  # TabArena's published results beside ours (tabbench.tabarena.Comparison)

    @property
    def pooled(self) -> pd.DataFrame:
        from tabbench.report.family import pooled_ranks

        return pooled_ranks(self.tables)

    def model_of(self, method: str) -> str:
        """The registry model a method's records ran (npt-paper: npt); the method itself where none is recorded."""
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
    come after the other sections' (leaderboard.csv's order: per-family rows, then the pooled aggregates)."""

    report_only = False
    csv_late = False

    def markdown(self, ctx: Context) -> list[str]:
        return []

    def csv_rows(self, ctx: Context) -> list[dict]:
        return []

    def latex(self, ctx: Context) -> list[str]:
        return []

    def html(self, ctx: Context, markdown: list[str]) -> str:
        """The section's HTML, by default its Markdown (``markdown``: what ``markdown`` gave) as HTML, the
        figures it links inlined (tabbench.report.html.from_markdown)."""
        from tabbench.report.html import from_markdown

        return from_markdown(markdown, ctx.out_dir)
