import functools
import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The real offline datasets, beside the checkout (see the README). Every test finds them here.
SHARED = ROOT.parent / "shared" / "datasets"
#: Set to 1 by CI (.ci/run): a test that needs the real datasets then fails where they are absent, instead of
#: skipping as it does on a fresh clone.
REQUIRE_DATA_ENV = "TABBENCH_REQUIRE_DATA"
#: Set to 1 by CI, which installs every extra: a test of a model whose package is missing, or of a Ray run
#: where Ray is missing, then fails instead of skipping as it does where they are absent (a GPU machine).
REQUIRE_PACKAGES_ENV = "TABBENCH_REQUIRE_PACKAGES"
#: This project's distribution (pyproject.toml's name): the entry points it installs are the built-in models.
DISTRIBUTION = "tabbench-harness"

def require_shared(relative: str = "") -> Path:
    """``SHARED / relative``; where it is absent the calling test skips, or fails under TABBENCH_REQUIRE_DATA=1."""
    path = SHARED / relative
    if not path.exists():
        message = f"{path} is absent (the real datasets belong in ../shared/datasets beside the checkout)"
        if os.environ.get(REQUIRE_DATA_ENV) == "1":
            pytest.fail(f"{message}; {REQUIRE_DATA_ENV}=1 requires them", pytrace=False)
        pytest.skip(message)
    return path


def pytest_configure(config):
    config.addinivalue_line("markers", "real_data(path=''): the test reads ../shared/datasets/<path> (see "
                                       "require_shared: skipped where absent, failed under TABBENCH_REQUIRE_DATA=1)")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    for mark in item.iter_markers("real_data"):
        require_shared(*mark.args)


@pytest.fixture(scope="session")
def shared() -> Path:
    """The real offline datasets beside the checkout (see require_shared when they are absent)."""
    return require_shared()


@pytest.fixture
def paths(tmp_path):
    from tabbench.data.cache import DataPaths

    mirrors = (SHARED,) if SHARED.is_dir() else ()
    return DataPaths(cache=tmp_path / "cache", mirrors=mirrors, base=ROOT)


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray instance (loopback only) shared by the in-process runner tests."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import logging

    require_ray()
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    yield ray
    ray.shutdown()


@functools.lru_cache(maxsize=None)
def registry() -> dict:
    """The registered models (entry points, as TABBENCH_PLUGINS selects them), loaded once per session."""
    from tabbench.plugins import load_models

    return load_models()


def quick_params(name: str) -> dict:
    """Model ``name``'s small training budget for the tests: the ``quick_params`` its spec declares."""
    return dict(registry()[name].spec.quick_params)


def builtin_models() -> list:
    """The models this repository ships: those its own distribution's entry points register (pyproject.toml), the
    ones held to the quality bars and to what their specs say they record."""
    ours = f"{DISTRIBUTION}=="
    return sorted(name for name, registered in registry().items() if registered.source.startswith(ours))


def unavailable(name: str) -> str | None:
    """Why model ``name`` cannot run here (a package it needs is not installed: its install hint says which
    extra), or None where it can, and always under TABBENCH_REQUIRE_PACKAGES=1."""
    registered = registry().get(name)
    if registered is None or os.environ.get(REQUIRE_PACKAGES_ENV) == "1":
        return None
    missing = registered.spec.missing_requirements()
    return f"{name} needs {missing}: {registered.spec.install_hint}" if missing else None


def model_case(name: str, *values, id: str | None = None, skip: str | None = None):
    """A pytest.param for a parametrized test of model ``name`` (``values`` follow the name), skipped with
    ``skip`` or where the model's packages are missing (``unavailable``)."""
    reason = skip or unavailable(name)
    return pytest.param(name, *values, marks=pytest.mark.skip(reason=reason) if reason else (), id=id)


def skip_unless_models_run(suite) -> None:
    """Skip the calling test where a model the suite names cannot run here (``unavailable``)."""
    for entry in suite.models:
        reason = unavailable(entry.model)
        if reason:
            pytest.skip(f"{suite.name}: {reason}")


def require_ray() -> None:
    """Skip the calling test (in a fixture: the tests that use it) where Ray is not installed (a machine run
    with --no-ray), unless TABBENCH_REQUIRE_PACKAGES=1."""
    if importlib.util.find_spec("ray") is None and os.environ.get(REQUIRE_PACKAGES_ENV) != "1":
        pytest.skip("Ray is not installed (e.g. a GPU machine run with --no-ray)")


def pythonpath(*folders) -> str:
    """PYTHONPATH for a child interpreter: ``folders`` first, then this one's PYTHONPATH (where the project
    itself may live, as on a GPU machine that installs it with pip --target)."""
    return os.pathsep.join([str(f) for f in folders] + [p for p in [os.environ.get("PYTHONPATH")] if p])


def registered_spec(name: str):
    """The registered ModelSpec of model ``name``; the test is skipped when the model is not registered or
    a package it needs is not installed (``unavailable``)."""
    registered = registry()
    if name not in registered:
        pytest.skip(f"{name} is not registered")
    reason = unavailable(name)
    if reason:
        pytest.skip(reason)
    return registered[name].spec
