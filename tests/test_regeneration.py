"""Every committed leaderboard regenerates unchanged from its records by the command its folder's README gives.

Each results folder with tables names one command (``Regenerate: `tabbench leaderboard ...```,
tabbench.report.site.REGENERATE); the test runs each in a copy of that folder, and of the folders whose records it
pools, from which every file the folder's command writes was removed, so that each committed table must be written
again by its own command (the folders of thousands of records, ``LARGE``, are checked by tests/test_report_site.py's
run of `tabbench report`, which regenerates every folder by its command anyway), and compares what does not depend
on library versions byte for byte: everything but the bootstrap Elo intervals' ends (their resampled Bradley-Terry
fits move a point or two between numpy builds and CPUs; they are checked to enclose the Elo) and the library
versions the leaderboard names; figures (matplotlib's rendering) must be written, not equal. It never skips in CI:
the records are committed, and the report extra is required there (TABBENCH_REQUIRE_PACKAGES=1).
"""

import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tabbench.report.site import regenerate_command
from tests.conftest import REQUIRE_DATA_ENV, ROOT, require_report_extra, skip_or_fail

RESULTS = ROOT / "results"
FOLDERS = [d.name for d in sorted(RESULTS.iterdir()) if (d / "leaderboard.md").exists()]
#: The folders of thousands of records (uci-small's 10,240 and the folders pooling them), and breadth: tens of seconds
#: each to regenerate, checked in the report site's run of every folder (tests/test_report_site.py), not again here.
LARGE = {"breadth", "uci-cpu", "uci-small", "uci-small-kfold", "uci-small-paper-budget"}
#: What a folder holds that its leaderboard command does not write.
NOT_GENERATED = {"README.md", "records", "probe-corruption", "comparison.md", "comparison.csv", "checkpoints"}
FIGURES = {".svg", ".png"}

_VERSIONS = re.compile(r"Computed with [^:]*:")
_INTERVALS = [re.compile(r"(?<=\| )-?\d+ to -?\d+(?= \|)"),  # leaderboard.md's and the page's tables
              re.compile(r"\$-?\d+\$ to \$-?\d+\$"),  # leaderboard.tex
              re.compile(r"^(elo_low|elo_high),([^,]*),([^,]*),[^,]*", re.M)]  # leaderboard.csv


def comparable(text: str, suffix: str) -> str:
    """``text`` without what library versions may change: the versions named, the Elo intervals' ends, and
    in a page its inline figures."""
    if suffix == ".html":  # inline figures, and the intervals wherever a page writes them
        text = re.sub(r"<svg.*?</svg>", "<svg/>", text, flags=re.S)
        text = re.sub(r"-?\d+ to -?\d+", "(interval)", text)
    text = _VERSIONS.sub("Computed with (versions):", text)
    text = _INTERVALS[0].sub("(interval)", text)
    text = _INTERVALS[1].sub("(interval)", text)
    text = re.sub(r"\((-?\d+) to (-?\d+)\)", "(interval)", text)  # results/README.md's answer
    return _INTERVALS[2].sub(r"\1,\2,\3,(interval)", text)


def test_every_folder_with_tables_gives_its_regenerate_command_once():
    assert len(FOLDERS) >= 11
    for name in FOLDERS:
        args = regenerate_command(RESULTS / name)
        assert args and args[0] == "leaderboard", f"results/{name}/README.md gives no 'Regenerate: `tabbench ...`' line"
        writes_to = args[args.index("--name") + 1] if "--name" in args else Path(args[1]).stem
        assert writes_to == name, f"results/{name}/README.md's command writes results/{writes_to}"


def regenerate(name: str, root: Path) -> Path:
    """results/NAME copied into ``root`` without what its command writes, beside the folders whose records it pools,
    and its command run there; the fresh folder."""
    require_report_extra()
    args = regenerate_command(RESULTS / name)
    pooled = {a.split("/")[1] for a in args if a.startswith("results/") and (ROOT / a / "records").is_dir()}
    for folder in pooled | {name}:
        shutil.copytree(RESULTS / folder, root / "results" / folder, ignore=shutil.ignore_patterns("checkpoints", "claims"))
    for path in (root / "results" / name).iterdir():
        if path.name not in NOT_GENERATED:
            path.unlink()
    (root / "suites").symlink_to(ROOT / "suites")
    from tabbench.cli import main

    cwd = Path.cwd()
    os.chdir(root)
    try:
        assert main(args) == 0, name
    finally:
        os.chdir(cwd)
    return root / "results" / name


def require_tabarena_file(text: str) -> None:
    """Tables that show TabArena's published numbers (tabbench/tabarena.py) regenerate only where its file lies
    beside the checkout (../shared/published, like the datasets): skipped where it is absent, failed then under
    TABBENCH_REQUIRE_DATA=1 (CI)."""
    from tabbench.tabarena import load_declaration

    file = load_declaration(ROOT / "suites" / "published" / "tabarena-lite.yaml").results_file()
    if "TabArena-Lite" in text and not file.is_file():
        skip_or_fail(REQUIRE_DATA_ENV, f"{file} is absent: the tables that show TabArena's numbers cannot regenerate")


def generated(folder: Path) -> set:
    """The names of the files in a results folder that its command writes."""
    return {p.name for p in folder.iterdir() if p.name not in NOT_GENERATED}


def assert_regenerated(committed: Path, fresh: Path) -> None:
    """``fresh`` (a folder its command wrote again, from nothing) holds the files ``committed`` holds, the same but
    for library versions and interval ends, figures written; every committed Elo interval encloses its Elo."""
    assert generated(fresh) == generated(committed), (
        f"{committed.name}: the files its command writes, against those committed")
    for filename in sorted(generated(committed)):
        if Path(filename).suffix in FIGURES:
            continue
        ours, theirs = (fresh / filename).read_text(), (committed / filename).read_text()
        assert comparable(ours, Path(filename).suffix) == comparable(theirs, Path(filename).suffix), (
            f"{committed.name}/{filename}")
    board = pd.read_csv(committed / "leaderboard.csv")
    elo = board[board["table"].isin(["elo", "elo_low", "elo_high"])].pivot(index="method", columns="table",
                                                                          values="value")
    elo = elo.reindex(columns=["elo", "elo_low", "elo_high"]).dropna()  # too few datasets: no interval (tabbench.report.arena)
    assert ((elo["elo_low"] <= elo["elo"]) & (elo["elo"] <= elo["elo_high"])).all(), (
        f"{committed.name}: an interval not enclosing its Elo")


@pytest.mark.parametrize("name", [name for name in FOLDERS if name not in LARGE])
def test_committed_tables_regenerate_unchanged(name, tmp_path):
    require_tabarena_file((RESULTS / name / "leaderboard.md").read_text())
    assert_regenerated(RESULTS / name, regenerate(name, tmp_path))


def test_the_comparison_ignores_only_versions_and_interval_ends():
    md = "| npt | 414 | -1592 to 528 | 0.529 |\nComputed with numpy 2.4.6, scipy 1.17.1: other"
    moved = "| npt | 414 | -1590 to 528 | 0.529 |\nComputed with numpy 2.5.0, scipy 1.17.1: other"
    assert comparable(md, ".md") == comparable(moved, ".md")
    assert comparable(md, ".md") != comparable(md.replace("| 414 |", "| 415 |"), ".md")  # the Elo itself counts
    csv = "elo_low,npt,,-1592.0\nelo,npt,,414.0\n"
    assert comparable(csv, ".csv") == comparable(csv.replace("-1592.0", "-1590.0"), ".csv")
    assert comparable(csv, ".csv") != comparable(csv.replace("414.0", "414.5"), ".csv")
