"""The report as one of the core's plugins (tabbench/plugins.py, ``CORE_PLUGINS``): its hooks register the built-in
leaderboard sections (``sections.LEADERBOARD``, in their order on the page) and README blocks
(``site.README_BLOCKS``) exactly as a plugin registers its own, and write a suite's leaderboard after a run
(``after_run``), so that the run pipeline imports nothing of the report. They import those modules inside, so that
loading the plugins imports no pandas.
"""

from tabbench.hookspecs import hookimpl


@hookimpl
def register_sections(register):
    from tabbench.report.sections import LEADERBOARD

    for section in LEADERBOARD:
        register(section)


@hookimpl
def register_readme_blocks(register):
    from tabbench.report.section import ReadmeBlock
    from tabbench.report.site import README_BLOCKS

    for name, lines in README_BLOCKS.items():
        register(ReadmeBlock(name, lines))
    from tabbench.report.leaders import leaders_block
    from tabbench.report.provenance import provenance_block
    from tabbench.report.regimes import regimes_block
    from tabbench.report.stability import stability_block

    register(ReadmeBlock("leaders", leaders_block))  # which pairs among the leaders Wilcoxon-Holm settles
    register(ReadmeBlock("provenance", provenance_block))  # machines, clocks, dates and re-runs, from the records
    register(ReadmeBlock("split-stability", stability_block))  # the splits a stable ranking needs, per dataset
    register(ReadmeBlock("split-regimes", regimes_block))  # each method's place under matching and random splits


@hookimpl(tryfirst=True)
def after_run(folder, suite, options):
    """The run's leaderboard, from the folder's records: its tests, figures and LaTeX too with ``options.report``.
    First, so that a plugin's ``after_run`` finds it written."""
    from tabbench.report.leaderboard import write_leaderboard

    write_leaderboard(folder, suite.published, report=options.report)
