"""The report site over every results folder: each folder's README names the one command that regenerates its
tables and page (``Regenerate: `tabbench leaderboard ...```); ``tabbench report`` runs them all from the records and
writes the index page and the generated answer at the top of results/README.md."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tabbench.errors import TabbenchError

class SiteError(TabbenchError, ValueError):
    """A results folder cannot be made into a page; the message names the file and the fix."""


#: The one form a results folder's README gives its regenerate command in (tests/test_regeneration.py finds it).
REGENERATE = re.compile(r"^Regenerate: `(tabbench leaderboard [^`]+)`", re.M)


def regenerate_command(folder: Path) -> list[str] | None:
    """The arguments of ``tabbench`` (``leaderboard ...``) that regenerate ``folder``'s tables, as its README
    gives them; None where the README gives none (a folder of records that another folder's tables pool)."""
    readme = Path(folder) / "README.md"
    if not readme.exists():
        return None
    found = REGENERATE.findall(readme.read_text())
    if len(found) > 1:
        raise SiteError(f"{readme}: {len(found)} 'Regenerate:' lines; a folder's tables have one command, keep one")
    return shlex.split(found[0])[1:] if found else None


def published_folders(results: Path) -> list[Path]:
    """The results folders whose README gives a regenerate command, by name."""
    return [d for d in sorted(Path(results).iterdir()) if d.is_dir() and regenerate_command(d) is not None]
