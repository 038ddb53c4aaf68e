"""How every report writes a number and a table: Markdown tables, mean ± standard error, and the
aligned plain-text tables the terminal commands print. No pandas here: ``tabbench plan`` and
``tabbench models`` use it too, and stay light."""

from __future__ import annotations

import math

#: A cell with no value (a missing result, no standard error to show).
MISSING = "–"

#: Marks after a method's name in every table (tabbench.report.leaderboard.display_names): its fit saw the
#: test rows' features (transductive), and the publication beside the table never ran its model.
TRANSDUCTIVE_MARK = "†"
NOT_PUBLISHED_MARK = "‡"


def _absent(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def mean_se(mean, se=None, digits: int = 3) -> str:
    """``mean ± se`` with ``digits`` decimals; the mean alone where there is no standard error."""
    if _absent(mean):
        return MISSING
    return f"{mean:.{digits}f}" if _absent(se) else f"{mean:.{digits}f} ± {se:.{digits}f}"


def with_folds(text: str, ran: int, of: int) -> str:
    """A mean's cell with its fold count where the method ran fewer of the dataset's folds than it has:
    ``5.450 ± 0.370 (2 of 10 folds)``; ``text`` unchanged where it ran them all (or there is no mean)."""
    return f"{text} ({ran} of {of} folds)" if ran < of and text != MISSING else text


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
