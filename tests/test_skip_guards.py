"""The tests' guards (tests/conftest.py): a test whose package or data is missing skips, and fails instead where CI
sets TABBENCH_REQUIRE_PACKAGES=1 or TABBENCH_REQUIRE_DATA=1, so that a missing install cannot pass CI as skips."""

import pytest

from tests.conftest import REQUIRE_DATA_ENV, REQUIRE_PACKAGES_ENV, need, require_shared

MISSING = "tabbench_no_such_module"


def test_need_returns_the_module_where_it_is_installed():
    assert need("json").dumps([1]) == "[1]"


def test_need_skips_a_missing_module_naming_what_installs_it(monkeypatch):
    monkeypatch.delenv(REQUIRE_PACKAGES_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match=f"the {MISSING} extra is not installed"):
        need(MISSING, f"the {MISSING} extra")


def test_need_fails_a_missing_module_under_require_packages(monkeypatch):
    monkeypatch.setenv(REQUIRE_PACKAGES_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{MISSING} is not installed; {REQUIRE_PACKAGES_ENV}=1 requires it"):
        need(MISSING)


def test_missing_shared_data_skips_and_fails_under_require_data(monkeypatch):
    monkeypatch.delenv(REQUIRE_DATA_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="is absent"):
        require_shared(MISSING)
    monkeypatch.setenv(REQUIRE_DATA_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{REQUIRE_DATA_ENV}=1 requires it"):
        require_shared(MISSING)
