"""Executors are chosen by name (``tabbench run --executor NAME``, ``RunOptions.executor``) from one registry (the
``register_executors`` hook), implement one declared interface, and a new one is one class a plugin registers: the
runner drives it through that interface alone. Run: python -m pytest tests/test_executors.py"""

import pytest
import yaml

from tabbench.cli import build_parser, main
from tabbench.run.executors import ExecutorError, executor_class, load_executors, make_executor
from tabbench.run.executors.base import Executor
from tabbench.run.executors.local import LocalExecutor
from tabbench.run.runner import RunOptions, run_suite
from tabbench.store import Store
from tabbench.suite import parse_suite
from tests import seams_plugin

SUITE = {"name": "two-folds", "datasets": [{"name": "iris", "source": "sklearn", "id": "iris",
                                            "split": {"protocol": "kfold", "k": 2}}],
         "models": {"knn": {}, "knn_k15": {"model": "knn", "params": {"n_neighbors": 15}}}}


def test_every_registered_executor_is_chosen_by_its_name_and_implements_the_interface():
    assert {"ray", "local"} <= set(load_executors())
    for name in load_executors():
        cls = executor_class(name)
        assert issubclass(cls, Executor) and cls.name == name
        executor = make_executor(name)
        assert type(executor) is cls and executor.gpu_available is False  # known only once started
    assert type(make_executor("local")) is LocalExecutor


def test_an_unknown_executor_is_a_clear_error_listing_the_known_ones(tmp_path, capsys):
    with pytest.raises(ExecutorError, match=r"^--executor 'dask': no such executor; known: local, ray$"):
        make_executor("dask")
    # through the run, before any data is read: the dataset file does not exist, yet the error is the executor's
    raw = {**SUITE, "datasets": [{"name": "gone", "source": "file", "path": str(tmp_path / "gone.csv"),
                                  "split": {"protocol": "holdout"}}]}
    with pytest.raises(ExecutorError, match="known: local, ray"):
        run_suite(parse_suite(raw, tmp_path / "s.yaml"), RunOptions(results=tmp_path, executor="dask", progress=False))
    # through the command, whose --executor takes any name (a --plugin file may register it)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    assert main(["run", str(tmp_path / "s.yaml"), "--executor", "dask", "--results", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == "tabbench: --executor 'dask': no such executor; known: local, ray"


def test_the_flags_before_executor_names_still_choose_them():
    from tabbench.cli import _executor_of

    def chosen(*argv):
        return _executor_of(build_parser().parse_args(["run", "suite.yaml", *argv]))

    assert chosen() == "ray"
    assert chosen("--no-ray") == chosen("--executor", "local") == "local"
    assert chosen("--address", "10.0.0.1:6379") == chosen("--executor", "ray") == "ray"
    assert chosen("--address", "10.0.0.1:6379", "--executor", "ray") == "ray"


@pytest.mark.parametrize("argv, message", [
    (["--no-ray", "--executor", "ray"],
     "tabbench: --no-ray means --executor local, not --executor ray: drop one of them"),
    (["--address", "10.0.0.1:6379", "--executor", "local"],
     "tabbench: --address means --executor ray, not --executor local: drop one of them"),
])
def test_flags_that_contradict_the_executor_named_are_refused(tmp_path, capsys, argv, message):
    suite = tmp_path / "s.yaml"
    suite.write_text(yaml.safe_dump(SUITE))
    assert main(["run", str(suite), "--results", str(tmp_path), *argv]) == 2
    assert capsys.readouterr().err.strip() == message
    assert not (tmp_path / "two-folds").exists()  # nothing ran


def test_the_local_executor_refuses_a_cluster_address():
    with pytest.raises(ExecutorError, match="'local' executor runs the jobs on this machine.*drop --address"):
        make_executor("local", address="10.0.0.1:6379")


def test_a_new_executor_is_one_class_a_plugin_registers_and_its_records_are_the_local_ones(tmp_path):
    """tests/seams_plugin.py's executor, from a plugin file (an installed one: tests/test_seams.py)."""
    plugin = (seams_plugin.__file__,)
    assert executor_class("in-process", plugin).__name__ == "InProcessExecutor"
    with pytest.raises(ExecutorError, match="known: local, ray$"):
        executor_class("in-process")  # only where the plugin is loaded
    suite = parse_suite(SUITE, tmp_path / "two-folds.yaml")
    ours = run_suite(suite, RunOptions(results=tmp_path / "in-process", executor="in-process", progress=False,
                                       plugin_files=plugin))
    local = run_suite(suite, RunOptions(results=tmp_path / "local", executor="local", progress=False))
    assert (ours.planned, ours.done, ours.failed) == (local.planned, local.done, local.failed) == (4, 4, 0)
    same = ("status", "method", "dataset", "fold", "params", "metrics")
    records = {r["key"]: {k: r[k] for k in same} for r in Store(tmp_path / "in-process" / "two-folds").records()}
    assert records == {r["key"]: {k: r[k] for k in same} for r in Store(tmp_path / "local" / "two-folds").records()}
    assert (tmp_path / "in-process" / "two-folds" / "leaderboard.md").exists()
    # the plugin's after_run, called after the report's has written the leaderboard
    assert (tmp_path / "in-process" / "two-folds" / seams_plugin.AFTER_RUN).read_text() == \
        "two-folds: leaderboard.md written before: True\n"
