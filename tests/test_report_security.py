"""Hostile text and files (issue 63): user text that holds Markdown or HTML (a subset label, a published file's name
and note, column names and class labels of the data) stays text in leaderboard.md and in the live page; a suite's
``published:`` reads no file outside the suite's folder and the project's published folder and never quotes one;
and the pages read on a phone and from runs/ (no sideways scroll, marks explained, no dead link, no empty index).

The pages are opened in headless Chromium (tests/browser.py), skipped where it is absent and failed in CI."""

import csv
import json
import re
from pathlib import Path

import pytest
import yaml

from tabbench.cli import main
from tabbench.report.format import markdown_text
from tests.conftest import require_shared

#: Markdown links to script, raw HTML with a handler: what a label or note must never become.
HOSTILE = "x](javascript:alert%281%29) <img src=x onerror=alert(1)> [y](javascript:alert%282%29) _z_"
COLUMN = "<b>c</b>](javascript:alert%283%29)"
TARGET = "[t](javascript:alert%284%29)"
CLASSES = {0: "[m](javascript:alert%285%29)", 1: "<script>alert(6)</script>"}
PHONE = 390


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A real run (breast cancer's rows, scikit-learn's wine) whose every user text is hostile: the subset labels,
    the CSV's column names and class labels, the published file's name and note. Returns its results folder."""
    from tabbench.report import report_installed
    from tabbench.run.runner import RunOptions, run_suite
    from tabbench.suite import load_suite

    if not report_installed():
        pytest.skip("the report extra is not installed")
    rows = (require_shared("uci/breast_cancer") / "wdbc.csv").read_text().splitlines()[1:]
    root = tmp_path_factory.mktemp("hostile")
    with open(root / "bc.csv", "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow([f"{COLUMN}{i}" for i in range(30)] + [TARGET])
        for line in rows:
            *features, label = line.split(",")
            writer.writerow(features + [CLASSES[int(label)]])
    (root / "paper.yaml").write_text(yaml.safe_dump({"name": HOSTILE, "note": HOSTILE,
                                                     "metrics": {"bc": {"knn": 0.9}, "wine": {"knn": 0.9}}}))
    split = {"protocol": "kfold", "k": 2, "seed": 0}
    suite = {"name": "hostile", "seeds": [0], "budget": {"time_s": 300}, "published": "paper.yaml",
             "datasets": [{"name": "bc", "source": "file", "path": str(root / "bc.csv"), "format": "csv", "header": True,
                           "target": TARGET, "subset": HOSTILE, "split": split},
                          {"name": "wine", "source": "sklearn", "id": "wine", "subset": HOSTILE, "split": split}],
             "models": {"knn": {}, "knn-3": {"model": "knn", "params": {"n_neighbors": 3}},
                        "random_forest": {"params": {"n_estimators": 10}}}}
    (root / "hostile.yaml").write_text(yaml.safe_dump(suite))
    summary = run_suite(load_suite(root / "hostile.yaml"),
                        RunOptions(results=root / "runs", executor="local", progress=False, report=True))
    assert summary.done == 12 and not summary.failures
    return root / "runs" / "hostile"


def test_markdown_text_escapes_what_makes_markdown_and_leaves_plain_names_alone():
    for plain in ("random_forest", "npt-paper", "uci-small.v2", "UCI Adult (32,561 rows; 14 features) isn't Income"):
        assert markdown_text(plain) == plain
    assert markdown_text("a](javascript:x) <b>&amp; | `c` *d* _e_ \\ #\nf") == \
        "a\\](javascript:x) \\<b\\>\\&amp; \\| \\`c\\` \\*d\\* \\_e\\_ \\\\ \\# f"


def test_hostile_labels_notes_columns_and_classes_stay_text_in_leaderboard_md(hostile):
    md = (hostile / "leaderboard.md").read_text()
    assert markdown_text(HOSTILE) in md  # the label and the note reached the tables, escaped
    assert not re.search(r"(?<!\\)\]\(javascript", md, re.I), "a live link"
    assert not re.search(r"(?<!\\)<(img|script|b)\b", md, re.I), "raw HTML"
    assert "alert%283%29" not in md and "alert%284%29" not in md  # column names are not in the tables at all
    assert "alert%285%29" not in md and "alert(6)" not in md  # nor the class labels


SAFE_DOM = """(() => {
  const bad = [];
  document.querySelectorAll('a[href]').forEach(a => {
    if (!['file:', 'http:', 'https:'].includes(a.protocol)
        && !(a.hasAttribute('download') && a.getAttribute('href').startsWith('data:text/csv;base64,')))
      bad.push('link ' + a.getAttribute('href'));
  });
  document.querySelectorAll('*').forEach(e => { for (const at of e.attributes)
    if (at.name.startsWith('on') || /^\\s*javascript:/i.test(at.value)) bad.push(e.tagName + ' ' + at.name); });
  document.querySelectorAll('img, iframe, object, embed, b').forEach(e => bad.push('element ' + e.tagName));
  if (document.scripts.length !== 1) bad.push(document.scripts.length + ' scripts');
  return bad;
})()"""


def test_the_live_page_holds_no_link_or_element_from_user_text(hostile, browser, tmp_path):
    page = hostile / "report.html"
    opened = browser.open(page.as_uri(), tmp_path / "page.png")
    assert opened["problems"] == []
    assert browser.evaluate(SAFE_DOM) == []
    text = browser.evaluate("document.body.textContent")
    assert HOSTILE in text  # shown as written, in the tables and the notes
    hrefs = browser.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href'))")
    assert hrefs and not [h for h in hrefs if "javascript" in h.lower()]


NO_SIDEWAYS = """(() => {
  const width = document.documentElement.clientWidth, out = [];
  const scrolls = e => { for (let p = e; p; p = p.parentElement) {
    const x = getComputedStyle(p).overflowX; if (x === 'auto' || x === 'scroll') return p !== e; } return false; };
  document.body.querySelectorAll('*').forEach(e => {
    const r = e.getBoundingClientRect();
    if (r.width > 0 && r.right > width + 1 && !scrolls(e)) out.push(e.tagName + ' ' + Math.round(r.right));
  });
  return {width: width, scroll: document.documentElement.scrollWidth, out: out.slice(0, 8),
          viewport: !!document.querySelector('meta[name=viewport][content*="width=device-width"]')};
})()"""


def _index(hostile):
    """results/index.html over the hostile run, as the answer's breadth folder (its tables show ‡ and its notes)."""
    from tabbench.report.leaderboard import write
    from tabbench.report.site import index_page

    results = hostile.parent
    ctx = write(hostile, published_path=hostile.parent.parent / "paper.yaml", report=True)
    readme = results / "breadth" / "README.md"
    readme.parent.mkdir(exist_ok=True)
    readme.write_text("# A hostile run\n")
    try:
        return index_page(results, {"breadth": ctx}).replace('href="breadth/', 'href="hostile/')
    finally:
        readme.unlink()
        readme.parent.rmdir()


@pytest.mark.parametrize("which", ["report.html", "index.html"])
def test_on_a_phone_the_pages_do_not_scroll_sideways(hostile, browser, tmp_path, which):
    page = hostile / "report.html" if which == "report.html" else tmp_path / "index.html"
    if which == "index.html":
        page.write_text(_index(hostile))
    browser.open(page.as_uri(), tmp_path / "phone.png", phone_width=PHONE)
    seen = browser.evaluate(NO_SIDEWAYS)
    assert seen["viewport"], "no viewport meta"
    assert seen["width"] == PHONE and seen["scroll"] <= PHONE and seen["out"] == [], seen


def test_the_index_explains_the_marks_its_tables_show(hostile):
    text = _index(hostile)
    assert "random_forest ‡" in text  # the answer's table marks the model the publication never ran
    assert "‡ not in " in text and markdown_text(HOSTILE) not in text  # the note, rendered (not raw Markdown)


def test_a_page_under_runs_links_to_nothing_that_is_not_there(hostile):
    text = (hostile / "report.html").read_text()
    hrefs = re.findall(r'<a (?:download )?href="([^"#][^"]*)"', text)
    relative = [h for h in hrefs if not h.startswith(("http://", "https://", "data:"))]
    assert "leaderboard.md" in relative and "../index.html" not in relative and "README.md" not in relative
    assert [h for h in relative if not (hostile / h).exists()] == []


def test_report_over_a_folder_with_nothing_to_index_says_so_and_writes_nothing(tmp_path, capsys):
    """A results root whose folders hold no records of their own (here one whose README says another folder pools
    its records) has nothing to index; a folder of records without a README does get a page
    (tests/test_seams.py)."""
    pooled = tmp_path / "results" / "pooled-elsewhere"
    pooled.mkdir(parents=True)
    (pooled / "README.md").write_text("# Records another folder's tables pool\n")
    assert main(["report", "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert "nothing to index and nothing was written" in err and "Traceback" not in err
    assert not (tmp_path / "results" / "index.html").exists()


def test_a_record_naming_a_method_that_is_no_plain_name_is_refused_before_any_report(hostile, tmp_path, capsys):
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(hostile / "records", folder / "records")
    log = folder / "records" / "records.jsonl"
    before = log.read_text()
    record = json.loads(before.splitlines()[0])
    log.write_text(before + json.dumps({**record, "key": "f" * 16, "method": HOSTILE}) + "\n")
    assert main(["leaderboard", str(folder), "--tables-only"]) == 2
    err = capsys.readouterr().err
    assert "records: the record ffffffffffffffff names its method" in err and "not a plain folder name" in err
    assert "Traceback" not in err and log.read_text().startswith(before)  # nothing lost
    assert not (folder / "leaderboard.md").exists()


def test_the_elo_figure_cuts_its_axis_for_a_collapse_and_says_so():
    from types import SimpleNamespace

    import pandas as pd

    from tabbench.report.html import ELO_AXIS, _elo_figure

    elo = {"catboost": 1180.0, "xgboost": 1100.0, "random_forest": 1000.0, "mlp": 900.0, "tabnet": -1963.0}
    table = pd.DataFrame({"elo": elo}).assign(elo_low=lambda t: t["elo"] - 80, elo_high=lambda t: t["elo"] + 80)
    figure = _elo_figure(SimpleNamespace(table=table, n_datasets=12, anchor="random_forest"), {})
    assert "axis cut at 0 to 2000" in figure and ">-1963<" in figure
    ticks = [int(t.replace("−", "-")) for t in re.findall(r">(−?\d+)</text>", figure)]
    assert ticks and min(ticks) >= ELO_AXIS[0] - 500 and max(ticks) <= ELO_AXIS[1] + 500


# --- published: -------------------------------------------------------------------------------------------------

SECRET = "root:$6$saltsalt$hashhashhash:19000:0:99999:7:::"


def _validate(tmp_path, suite_dir: Path, published: str, capsys):
    suite = yaml.safe_load((Path(__file__).resolve().parents[1] / "suites" / "quickstart.yaml").read_text())
    suite["published"] = published
    path = suite_dir / "s.yaml"
    path.write_text(yaml.safe_dump(suite))
    code = main(["validate", str(path)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("how", ["absolute", "dotdot", "link"])
def test_a_published_file_outside_the_suites_folder_is_refused_unread(tmp_path, capsys, how):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    secret = elsewhere / "shadow"
    secret.write_text(f"{SECRET}\ndaemon: x\nbin: y\n")
    suite_dir = tmp_path / "suite"
    suite_dir.mkdir()
    if how == "link":
        (suite_dir / "paper.yaml").symlink_to(secret)
    named = {"absolute": str(secret), "dotdot": "../elsewhere/shadow", "link": "paper.yaml"}[how]
    code, err = _validate(tmp_path, suite_dir, named, capsys)
    assert code == 2 and "lies outside the suite's folder and the project's published folder" in err
    assert "saltsalt" not in err and "daemon" not in err and "Traceback" not in err


def test_a_bad_published_file_beside_the_suite_is_named_by_line_never_quoted(tmp_path, capsys):
    (tmp_path / "paper.yaml").write_text(f"name: ok\nsecret_token: hunter2\nnote: fine\n{SECRET}x: 1\n")
    code, err = _validate(tmp_path, tmp_path, "paper.yaml", capsys)
    assert code == 2 and "2 unknown keys on lines 2, 4" in err
    assert "hunter2" not in err and "secret_token" not in err and "saltsalt" not in err
    (tmp_path / "paper.yaml").write_text("name: ok\nmetrics: {bc: [hunter2: x: y]}\n")
    code, err = _validate(tmp_path, tmp_path, "paper.yaml", capsys)
    assert code == 2 and "not valid YAML: line 2" in err and "hunter2" not in err
    (tmp_path / "paper.yaml").write_text("note: [hunter2]\n")
    code, err = _validate(tmp_path, tmp_path, "paper.yaml", capsys)
    assert code == 2 and "note: expected text, got a list of 1 item" in err and "hunter2" not in err


def test_the_projects_published_files_stay_usable_from_a_suite_anywhere(tmp_path, capsys):
    from tabbench.published import PUBLISHED_DIR

    code, err = _validate(tmp_path, tmp_path, str(PUBLISHED_DIR / "npt-paper.yaml"), capsys)
    assert code == 0, err
