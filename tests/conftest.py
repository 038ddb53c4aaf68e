import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "datasets"


@pytest.fixture(scope="session")
def shared() -> Path:
    """The real offline datasets beside the checkout; tests that need them skip when it is absent."""
    if not SHARED.is_dir():
        pytest.skip(f"offline datasets folder {SHARED} is absent")
    return SHARED


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

    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    yield ray
    ray.shutdown()
