"""A plugin that adds one of each of tabbench's seams beside models and data sources, as a third party would:
an executor (``--executor in-process``), a leaderboard section (after the per-family tables), a README block
(``seams-count``), an answer atop the report site (a toy second study's), a command (``tabbench records FOLDER``), and an ``after_run`` that notes whether the
leaderboard was written before it (AFTER_RUN in the results folder). tests/test_seams.py installs it as an entry point
(a dist-info on a child's PYTHONPATH) and uses it as a plugin file; tests/test_executors.py runs its executor.

Light at its top, as every plugin module should be: ``tabbench --help`` imports it.
"""

import socket

import tabbench
from tabbench.report.section import Answer, ReadmeBlock, Section
from tabbench.run.executors.base import Executor

#: The heading of the section below, which tests look for on the page.
HEADING = "## Results per method"
#: The file ``after_run`` writes into the results folder.
AFTER_RUN = "seams-after-run.txt"


class InProcessExecutor(Executor):
    """A third execution mode written against the interface alone, as a new backend would be: each job in this
    very process (no fork, so no enforced budgets), which no built-in does."""

    name = "in-process"

    def __init__(self, address=None):
        super().__init__(address)
        self.refuse_address()  # no cluster: an --address is a mistake to say, not to ignore

    def start(self, needs_gpu_check: bool = True) -> None:
        pass  # nothing to acquire; gpu_available stays False

    def run(self, queue, prepared, store, stop):
        from tabbench.run.execute import execute

        for job in queue:
            stop.check()
            spec, dataset = prepared.registry[job.model].spec, prepared.dataset_of(job)
            record = execute(job, spec.factory, dataset.meta, dataset.X, dataset.y, prepared.split_of(job),
                             str(store.checkpoint_dir(job.key)))
            record["node"] = socket.gethostname()
            yield job, record


class ResultsPerMethod(Section):
    """How many selected results each method has, and how many of them succeeded: placed after the per-family
    tables (the built-in section ``Families``)."""

    after = "Families"

    def markdown(self, ctx):
        counts = ctx.selected.groupby("method")["status"].agg(lambda s: f"{(s == 'ok').sum()} of {len(s)} ok")
        return [HEADING, "", *(f"- {ctx.show.get(m, m)}: {text}" for m, text in counts.items()), ""]


def results_count(ctx) -> list:
    """The README block ``seams-count``: the folder's selected results and datasets."""
    return [f"{len(ctx.selected)} selected results on {ctx.selected['dataset'].nunique()} dataset(s)."]


#: The first line of the toy study's answer atop the report site.
ANSWER = "## A toy study's answer"


def toy_answer(contexts) -> list:
    """A second study's answer atop the site: the folders it was given."""
    return [ANSWER, "", f"{len(contexts)} results folder(s): {', '.join(sorted(contexts))}.", ""]


def _records_parser(sub) -> None:
    records = sub.add_parser("records", help="count a results folder's records, per status")
    records.add_argument("folder", help="a suite's results folder, e.g. runs/quickstart")


def _records(args) -> int:
    from collections import Counter

    from tabbench.store import Store

    counts = Counter(r["status"] for r in Store(args.folder).latest().values())
    print(", ".join(f"{status} {n}" for status, n in sorted(counts.items())) or "no records")
    return 0


@tabbench.hookimpl
def register_executors(register):
    register(InProcessExecutor)


@tabbench.hookimpl
def register_sections(register):
    register(ResultsPerMethod())


@tabbench.hookimpl
def register_readme_blocks(register):
    register(ReadmeBlock("seams-count", results_count))


@tabbench.hookimpl
def register_answers(register):
    register(Answer("toy", toy_answer))


@tabbench.hookimpl
def register_commands(register):
    from tabbench.plugins import Command

    register(Command("records", _records_parser, _records))


@tabbench.hookimpl
def after_run(folder, suite, options):
    (folder / AFTER_RUN).write_text(f"{suite.name}: leaderboard.md written before: "
                                    f"{(folder / 'leaderboard.md').is_file()}\n")
