"""The hooks a tabbench plugin may implement.

A plugin is a module (registered through the ``tabbench`` entry-point group, or a file passed with
``--plugin`` or listed under a suite's ``plugins:``) holding functions decorated with ``@tabbench.hookimpl``
whose names are listed here; it may implement any of them. Each ``register_*`` hook is called with a
``register`` callback, which the plugin calls once per thing it adds. The core's own data sources, executors,
report parts and commands are registered through these same hooks (tabbench/plugins.py, ``CORE_PLUGINS``).
"""

import pluggy

#: The marker pair, named after the project, whose name is also the entry-point group (tabbench/plugins.py).
hookspec = pluggy.HookspecMarker("tabbench")
#: Decorator for plugin hook implementations, offered to plugins as ``@tabbench.hookimpl``.
hookimpl = pluggy.HookimplMarker("tabbench")


# --- models ---------------------------------------------------------------------------------------


@hookspec
def register_models(register):
    """Add models to the registry.

    Called once, when the registry is built (``tabbench models``, ``tabbench run``). Call
    ``register(spec)`` once per model, with a :class:`tabbench.spec.ModelSpec`. Import heavy
    libraries (torch, boosters) inside the estimator, not at module level, so that listing models
    stays fast. Returns nothing.
    """


# --- data sources ---------------------------------------------------------------------------------


@hookspec
def register_sources(register):
    """Add data sources: what a suite's ``source:`` can name.

    Called when a suite is read or the suite schema is built (``tabbench validate``, ``run``, ``schema``),
    never by ``tabbench models``. Call ``register(cls)`` once per source, with a subclass of
    :class:`tabbench.data.source.DataSource` (a pydantic model of the source's suite fields, with its
    ``load``; docs/datasets.md shows a complete one). A plugin that registers models too may import its
    source classes inside this function, so that listing models does not import pydantic. Returns nothing.
    """


# --- executors ------------------------------------------------------------------------------------


@hookspec
def register_executors(register):
    """Add execution modes: what ``tabbench run --executor NAME`` can name.

    Called when ``tabbench run`` parses its arguments (its help lists the names) and when a run chooses its
    executor. Call ``register(cls)`` once per mode, with a subclass of
    :class:`tabbench.run.executors.base.Executor` whose ``name`` is the name ``--executor`` takes
    (docs/architecture.md, "How to add an executor"). Import the libraries the mode runs on (Ray, a scheduler's
    client) inside its methods, so that listing the names imports none of them. Returns nothing.
    """


# --- reports --------------------------------------------------------------------------------------


@hookspec
def register_sections(register):
    """Add sections to every leaderboard (leaderboard.md, leaderboard.csv, leaderboard.tex and report.html).

    Called each time a leaderboard is written (``tabbench leaderboard``, ``report``, the end of ``run``). Call
    ``register(section)`` once per section, with an instance of :class:`tabbench.report.section.Section` (each of
    its parts, Markdown, files, CSV rows, LaTeX and HTML, read from the leaderboard's one ``Context``); its
    ``after`` names the section it follows on the page (e.g. ``"Families"``), else it comes after those
    registered before it (the core's first). Returns nothing.
    """


@hookspec
def register_readme_blocks(register):
    """Add the generated blocks a results folder's README may hold, between ``<!-- tabbench report: NAME -->``
    and ``<!-- end of tabbench report: NAME -->``.

    Called by ``tabbench report``, once per folder whose README holds a block. Call ``register(block)`` once per
    block, with a :class:`tabbench.report.section.ReadmeBlock` (its ``name`` and the function that writes its
    lines from the folder's leaderboard ``Context``). Returns nothing.
    """


@hookspec
def register_answers(register):
    """Add an answer to the top of the report site: the text ``tabbench report`` writes first in results/README.md
    (between its generated markers) and first on results/index.html, from every results folder's leaderboard.

    Called once per ``tabbench report``. Call ``register(answer)`` once per answer, with a
    :class:`tabbench.report.section.Answer` (its ``name`` and the function that writes its Markdown lines from the
    folders' ``Context``s, by folder name; no lines where its folders are absent). A study that asks one question
    of several folders (tabbench_plugins.npt_study) answers it here; without any, the site lists the folders.
    Returns nothing.
    """


# --- runs -----------------------------------------------------------------------------------------


@hookspec
def after_run(folder, suite, options):
    """Called by ``tabbench run`` (``tabbench.run.runner.run_suite``) once the run's records are all written:
    ``folder``, the suite's results folder (a ``Path``); ``suite``, the ``tabbench.suite.Suite`` that ran;
    ``options``, its ``tabbench.run.runner.RunOptions``. The core's report writes the folder's leaderboard here
    (tabbench/report/plugin.py), before any plugin's ``after_run`` is called. Ctrl-C stops it as it stops the run,
    every record kept. Returns nothing.
    """


# --- commands -------------------------------------------------------------------------------------


@hookspec
def register_commands(register):
    """Add commands to ``tabbench`` (as llm's ``register_commands``).

    Called each time ``tabbench`` starts, before it parses its command line (so ``tabbench --help`` lists them);
    plugin files (``--plugin``) are not asked, since they are named on that command line. Call
    ``register(command)`` once per command, with a :class:`tabbench.plugins.Command`. Keep the plugin's module
    light: every ``tabbench`` command imports it. Returns nothing.
    """
