"""The report site: `tabbench report` writes one self-contained page per results folder and an index, and every
committed page opens in a real browser (headless Chromium) with no console error and no failed request.

The browser test is skipped where Chromium is absent, and fails instead in CI (TABBENCH_REQUIRE_PACKAGES=1, and
.ci/run installs Debian's chromium)."""

import os
import re
import struct
from pathlib import Path

import pytest

from tabbench.report.site import BEGIN, END, published_folders

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
PAGES = [d / "report.html" for d in published_folders(RESULTS)] + [RESULTS / "index.html"]
MAX_PAGE_BYTES = 1_000_000


def png_size(data: bytes) -> tuple:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.parent.name if p.name == "report.html" else "index")
def test_every_committed_page_is_one_small_offline_file(page):
    assert page.exists(), f"{page.relative_to(ROOT)} is not committed: run `tabbench report`"
    text = page.read_text()
    assert len(text.encode()) < MAX_PAGE_BYTES
    # nothing fetched: no script, style, font or image from elsewhere (links the reader may follow are fine)
    assert not re.search(r"<(script|img|link|iframe)[^>]+(src|href)=[\"']?(https?:|//)", text)
    assert "@import" not in text and "url(http" not in text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.parent.name if p.name == "report.html" else "index")
def test_every_committed_page_opens_in_chromium_without_an_error(browser, page, tmp_path):
    shot = tmp_path / "page.png"
    opened = browser.open(page.as_uri(), shot)
    assert opened["problems"] == []
    fetched = [u for u in opened["requests"] if not u.startswith(("data:", page.as_uri()))]
    assert fetched == [], "the page fetched something"
    width, height = png_size(shot.read_bytes())
    assert width >= 1000 and height >= 1000
    assert shot.stat().st_size > 40_000, "a blank screenshot is a few kilobytes; a drawn page is more"
    assert browser.evaluate("document.querySelectorAll('table').length") >= 1
    if page.name == "report.html":
        assert browser.evaluate("document.querySelectorAll('figure svg').length") >= 1  # the Elo whiskers at least
        # the drill-down shows one dataset at a time, and sorting a table reorders its rows
        assert browser.evaluate("document.querySelectorAll('.drill:not([hidden])').length") == 1
        order = ("Array.from(document.querySelector('table.sortable:not(.facts)').tBodies[0].rows)"
                 ".map(r => r.cells[0].textContent).join('|')")
        before = browser.evaluate(order)
        browser.evaluate("document.querySelector('table.sortable:not(.facts) th').click()")
        after = browser.evaluate(order)
        assert sorted(before.split("|")) == sorted(after.split("|")) and after.split("|") == sorted(after.split("|"))


def test_report_writes_every_page_and_the_answer_from_the_records(tmp_path):
    """`tabbench report` in a copy of the checkout's results from which every file a folder's command writes was
    removed: each folder's tables as committed (tests/test_regeneration.py's check, here for every folder), a page
    per folder, the index, and the answer atop results/README.md as committed (the committed answer is current)."""
    import shutil
    import subprocess
    import sys

    from tests.conftest import require_report_extra
    from tests.test_regeneration import (assert_regenerated, comparable, generated,
                                         require_tabarena_file)

    require_report_extra()
    require_tabarena_file("TabArena-Lite")  # several folders' tables and README blocks show TabArena's numbers
    shutil.copytree(RESULTS, tmp_path / "results", ignore=shutil.ignore_patterns("checkpoints", "claims", "*.html"))
    for folder in published_folders(tmp_path / "results"):
        for name in generated(folder):
            (folder / name).unlink()
    (tmp_path / "suites").symlink_to(ROOT / "suites")
    readme = tmp_path / "results" / "README.md"
    readme.write_text(readme.read_text().replace("χ²", "chi2"))  # a stale answer is replaced, not kept
    stale = tmp_path / "results" / "uci-cpu" / "README.md"  # and so is a stale generated block in a folder's README
    stale.write_text(re.sub(r"χ² = [0-9.]+", "χ² = 48.7", stale.read_text()))
    subprocess.run([sys.executable, "-m", "tabbench.cli", "report"], cwd=tmp_path, check=True, capture_output=True)
    for folder in published_folders(RESULTS):
        assert_regenerated(folder, tmp_path / "results" / folder.name)
    for page in PAGES:
        fresh = tmp_path / page.relative_to(ROOT)
        assert comparable(fresh.read_text(), ".html") == comparable(page.read_text(), ".html"), page.name
    committed, ours = (RESULTS / "README.md").read_text(), readme.read_text()
    assert committed.index(BEGIN) < 200, "results/README.md opens with the generated answer"
    assert comparable(ours, ".md") == comparable(committed, ".md")
    assert ours.count(BEGIN) == 1 and ours.count(END) == 1
    blocks = 0
    for folder in published_folders(RESULTS):  # every README's generated blocks are current
        committed = (folder / "README.md").read_text()
        blocks += committed.count("<!-- tabbench report: ")
        assert (tmp_path / "results" / folder.name / "README.md").read_text() == committed, folder.name
    assert blocks >= 2


def test_the_numbers_the_records_contradicted_are_gone_from_the_readmes():
    """Issue 47's audit: prose that had gone stale against its tables, and figures of a record never committed."""
    cpu, breadth = (RESULTS / "uci-cpu" / "README.md").read_text(), (RESULTS / "breadth" / "README.md").read_text()
    assert "48.7" not in cpu and "4.52" not in cpu
    assert "XGBoost better than TabNet (7.22) and `npt-faithful`" not in cpu
    assert "6 to 149 s" not in breadth and "30 to 326 s" not in breadth
    for readme in (RESULTS / "uci-higgs-npt-gpu" / "README.md", ROOT / "benchmarks" / "README.md"):
        text = readme.read_text()
        assert "15.1 GPU-hours" not in text and "31.2 s" not in text and "x1.85" not in text, readme


def test_an_unknown_generated_block_is_an_error_naming_the_readme(tmp_path):
    from tabbench.report.site import SiteError, fill_blocks

    readme = tmp_path / "README.md"
    readme.write_text("# x\n<!-- tabbench report: sigificance -->\n<!-- end of tabbench report: sigificance -->\n")
    with pytest.raises(SiteError, match=rf"{readme}: unknown generated block 'sigificance'; known: significance"):
        fill_blocks(readme, None)


def test_the_site_workers_start_with_one_numerical_thread_and_the_caller_keeps_its_own(monkeypatch):
    """`tabbench report`'s worker processes are started inside one_thread_each: one BLAS/OpenMP thread each (two a
    core spin against one another); the caller's own settings come back afterwards, unset ones unset."""
    import subprocess
    import sys

    from tabbench.report.site import one_thread_each
    from tabbench.threads import THREAD_VARIABLES

    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    with one_thread_each():
        child = subprocess.run([sys.executable, "-c", "import os; print([os.environ.get(v) for v in "
                                f"{THREAD_VARIABLES!r}])"], capture_output=True, text=True, check=True)
    assert child.stdout.strip() == str(["1"] * len(THREAD_VARIABLES))
    assert os.environ["OMP_NUM_THREADS"] == "3" and "OPENBLAS_NUM_THREADS" not in os.environ


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.parent.name if p.name == "report.html" else "index")
def test_every_committed_page_reads_on_a_phone_without_sideways_scrolling(browser, page, tmp_path):
    from tests.test_report_security import NO_SIDEWAYS, PHONE

    browser.open(page.as_uri(), tmp_path / "phone.png", phone_width=PHONE)
    seen = browser.evaluate(NO_SIDEWAYS)
    assert seen["viewport"] and seen["width"] == PHONE and seen["scroll"] <= PHONE and seen["out"] == [], seen
