"""The NPT study: the questions this project asks of its results folders about Non-Parametric Transformers, as a
plugin of the harness beside the model plugins, registered from its own entry point (``npt_study``) through the
report's hooks like any study's: the answer atop the report site (answer.py), the pairwise verdict beside the Elo
table (verdict.py), and the README blocks of NPT's folders (blocks.py, at_budget.py). The harness's report layer
(tabbench/report/) names none of NPT's methods or of this project's folders; a user's own study registers its own.
"""

from tabbench.hookspecs import hookimpl


@hookimpl
def register_answers(register):
    from tabbench.report.section import Answer
    from tabbench_plugins.npt_study.answer import lines

    register(Answer("npt", lines))


@hookimpl
def register_sections(register):
    from tabbench_plugins.npt_study.verdict import Pairwise, RegimesVerdict

    register(Pairwise())
    register(RegimesVerdict())


@hookimpl
def register_readme_blocks(register):
    from tabbench.report.section import ReadmeBlock
    from tabbench_plugins.npt_study.blocks import BLOCKS

    for name, lines in BLOCKS.items():
        register(ReadmeBlock(name, lines))
