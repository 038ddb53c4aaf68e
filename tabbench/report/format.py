"""How every report writes a number and a table: Markdown tables, mean ± standard error, and the
aligned plain-text tables the terminal commands print. No pandas here: ``tabbench plan`` and
``tabbench models`` use it too, and stay light."""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass

#: A cell with no value (a missing result, no standard error to show).
MISSING = "–"

#: Marks after a method's name in every table (tabbench.report.leaderboard.display_names): its fit saw the
#: test rows' features (transductive), and the publication beside the table never ran its model.
TRANSDUCTIVE_MARK = "†"
NOT_PUBLISHED_MARK = "‡"


def count(n: int, what: str) -> str:
    """``n`` and the noun, plural unless one: "1 dataset", "38 datasets"."""
    return f"{n} {what}{'s' if n != 1 else ''}"


def _absent(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def mean_se(mean, se=None, digits: int = 3) -> str:
    """``mean ± se`` with ``digits`` decimals; the mean alone where there is no standard error."""
    if _absent(mean):
        return MISSING
    return f"{mean:.{digits}f}" if _absent(se) else f"{mean:.{digits}f} ± {se:.{digits}f}"


@dataclass(frozen=True)
class Cell:
    """One mean as every report writes it: ``mean ± SE``, with its fold count where it rests on fewer of the
    dataset's folds than it has (``ran`` of ``of``) and its device where the table pools devices, in Markdown,
    LaTeX and HTML alike, so that the three
    cannot disagree on a digit. ``bold``: the best of its column (LaTeX and HTML mark it; Markdown does not)."""

    mean: float | None
    se: float | None = None
    ran: int | None = None  # folds the mean rests on, where fewer than the dataset's ``of``
    of: int | None = None
    digits: int = 3
    bold: bool = False
    device: str | None = None  # "GPU" where a table pools devices and this mean rests on a GPU's records

    @property
    def partial(self) -> bool:
        return self.ran is not None and self.of is not None and self.ran < self.of

    def folds(self) -> str:
        """What the mean rests on where a table must say it: " (2 of 10 folds)", " (GPU)", " (6 of 10 folds, GPU)"."""
        said = ([f"{self.ran} of {self.of} folds"] if self.partial else []) + ([self.device] if self.device else [])
        return f" ({', '.join(said)})" if said else ""

    def markdown(self) -> str:
        text = mean_se(self.mean, self.se, self.digits)
        return text + self.folds() if text != MISSING else text

    __str__ = markdown

    def latex(self) -> str:
        """``$0.870 \\pm 0.010$`` (bold: ``\\mathbf``); a partial mean is never bold and keeps its fold count."""
        if _absent(self.mean):
            return "--" + self.folds()
        body = f"{self.mean:.{self.digits}f}" + ("" if _absent(self.se) else f" \\pm {self.se:.{self.digits}f}")
        return (f"$\\mathbf{{{body}}}$" if self.bold and not self.partial else f"${body}$") + self.folds()

    def html(self) -> str:
        """The Markdown text, escaped, in a ``<span>`` whose ``data-v`` is the mean (a sortable table sorts by it)."""
        value = "" if _absent(self.mean) else f"{self.mean:.6g}"
        classes = " ".join(c for c, on in (("best", self.bold), ("partial", self.partial)) if on)
        return (f'<span data-v="{value}"' + (f' class="{classes}"' if classes else "") + f">"
                f"{html.escape(self.markdown())}</span>")


#: What makes text Markdown: a backslash, code, emphasis, raw HTML and entities, table cells, headings, and the
#: ``]`` that closes a link, an image or a reference (followed by ``(``, ``[`` or ``:``; without it a bracket is text).
_MARKDOWN = re.compile(r"[\\`*<>&|#~]|\](?=[(\[:])|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def markdown_text(text) -> str:
    """User text (a dataset's or method's name, a subset label, a published file's note) as Markdown that shows it
    as written: every character that could start a link, an image, raw HTML, code, emphasis or a table cell is
    backslash-escaped, and a line break becomes a space (the text stays in its line, cell or list item). Plain names
    and labels (letters, digits, spaces, ``.,;:'"()[]+-``, an ``_`` inside a word) come back unchanged."""
    return _MARKDOWN.sub(lambda m: "\\" + m[0], " ".join(str(text).splitlines()))


def significant(value, digits: int = 4) -> str:
    """``value`` to ``digits`` significant digits."""
    return MISSING if _absent(value) else f"{value:.{digits}g}"


def markdown_table(header: list, rows: list) -> str:
    """A GitHub Markdown table; cells are written with ``str``."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def text_table(header: list, rows: list) -> list[str]:
    """Lines of a table for the terminal: columns left-aligned to their widest cell, two spaces apart."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows]]
