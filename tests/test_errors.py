"""One base error: every exception tabbench defines is a TabbenchError, and the `tabbench` command prints
such an error's message (no traceback) with exit status 2. Run: python -m pytest tests/test_errors.py"""

import importlib
import inspect
import pkgutil

import tabbench
from tabbench.cli import main
from tabbench.errors import TabbenchError
from tabbench.store import Store


def _exception_classes() -> dict:
    """Every exception class defined in a tabbench module: qualified name -> class."""
    found = {}
    for info in pkgutil.walk_packages(tabbench.__path__, "tabbench."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == module.__name__:
                found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return found


def test_every_tabbench_exception_derives_from_the_one_base_and_has_its_own_name():
    classes = _exception_classes()
    assert len(classes) >= 12, sorted(classes)  # the walk found the package's errors, not nothing
    strays = sorted(name for name, cls in classes.items() if not issubclass(cls, TabbenchError))
    assert not strays, f"exceptions not derived from tabbench.errors.TabbenchError: {strays}"
    names = [cls.__name__ for cls in classes.values()]
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, f"two exception classes share a name (tell them apart): {twice}"


def test_errors_that_were_value_errors_still_are():
    # code that catches ValueError (e.g. the runner around a dataset's loading) keeps catching them
    from tabbench.data.formats import FormatError
    from tabbench.pooling import PoolingError
    from tabbench.predictions import InvalidPredictions
    from tabbench.published import PublishedError

    assert all(issubclass(cls, ValueError) for cls in (FormatError, PoolingError, InvalidPredictions, PublishedError))


def test_the_command_prints_a_tabbench_errors_message_and_exits_2(tmp_path, capsys):
    # a malformed published file raises PublishedError deep inside the leaderboard; main alone catches it
    Store(tmp_path / "suite").append({"key": "k", "method": "m", "model": "m", "dataset": "d", "task": "binary",
                                      "fold": 0, "repeat": 0, "seed": 0, "trial": None, "status": "ok",
                                      "params": {}, "dataset_fingerprint": "fp", "fit_seconds": 1.0,
                                      "predict_seconds": 0.1, "job_rss_bytes": 1, "metrics": {"test": {"auroc": 0.9}}})
    bad = tmp_path / "paper.yaml"
    bad.write_text("name: p\nmetrics:\n  d: {m: high}\n")
    assert main(["leaderboard", str(tmp_path / "suite"), "--published", str(bad), "--tables-only"]) == 2
    err = capsys.readouterr().err
    assert err == f"tabbench: {bad}: metrics.d.m: expected a number or [mean, standard error], got text\n"
