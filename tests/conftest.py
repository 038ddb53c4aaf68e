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
# The tests' own cache folder (data downloads and NPT's per-machine speed calibration, tabbench_plugins/npt/speed.py),
# never the user's: what an earlier session measured or cached must not decide a test. Set before any test runs so
# that the forked jobs and the child processes the tests start inherit it.
if "TABBENCH_CACHE" not in os.environ:
    import tempfile

    os.environ["TABBENCH_CACHE"] = tempfile.mkdtemp(prefix="tabbench-test-cache-")

# Under pytest-xdist (the README's test commands: two worker processes) each worker computes on one thread, as a
# job does: torch's and BLAS's pools sized to every core in each worker would oversubscribe the cores (measured on
# 2 cores: NPT's conformance tests, which fit in the test's own process, 3 to 6 times slower). Set before torch
# loads; a test or job that asks for threads still gets them.
if os.environ.get("PYTEST_XDIST_WORKER"):
    from tabbench.threads import THREAD_VARIABLES

    for _variable in THREAD_VARIABLES:
        os.environ.setdefault(_variable, "1")


def load_module(path: Path, name: str):
    """The Python file ``path`` (a benchmark script, or an old commit's module) imported as module ``name``, kept in
    sys.modules while it runs (dataclasses look their module up as their classes are made)."""
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def require_shared(relative: str = "") -> Path:
    """``SHARED / relative``; where it is absent the calling test skips, or fails under TABBENCH_REQUIRE_DATA=1."""
    path = SHARED / relative
    if not path.exists():
        skip_or_fail(REQUIRE_DATA_ENV, f"{path} is absent (the real datasets belong in ../shared/datasets beside "
                                       "the checkout)")
    return path


def builtin_entry_points() -> str:
    """This repository's entry points (pyproject.toml's, as installed), comma-separated for TABBENCH_PLUGINS."""
    from importlib import metadata

    return ",".join(sorted({ep.name for ep in metadata.entry_points(group="tabbench")
                            if ep.dist is not None and ep.dist.name == DISTRIBUTION}))


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist >= 3.7: keep FIRST_MODULES' order (below)
        config.option.loadscopereorder = False
    config.addinivalue_line("markers", "real_data(path=''): the test reads ../shared/datasets/<path> (see "
                                       "require_shared: skipped where absent, failed under TABBENCH_REQUIRE_DATA=1)")
    # The tests load this repository's plugins only, whatever else the environment holds (a plugin installed
    # by the README's example would change the schema, the suites' checks and the registry the tests read),
    # and so do the commands they start. TABBENCH_PLUGINS set by hand wins: `TABBENCH_PLUGINS=sklearn_models,linear
    # python -m pytest tests/test_conformance.py` checks an installed plugin beside the scikit-learn models.
    from tabbench.plugins import PLUGINS_ENV

    os.environ.setdefault(PLUGINS_ENV, builtin_entry_points())


# --- the quick selection: `python -m pytest -m "not slow"` (the README's test command) ----------------------
# It keeps every module's behaviour and leaves out what takes minutes on 2 cores: the neural models' fits on
# any table but the smallest (the contract tests fit each of them on wine, 178 rows), training to a quality
# bar, and drivers and clusters started and killed. The full suite (CI, `.ci/run`) runs everything. A test is
# slow where it says so (@pytest.mark.slow) or where the rules below say so, kept here in one place so that
# the selection can be read and changed at once.

#: The contract tests that fit a neural model on wine and stay in the quick selection.
QUICK_CONTRACT = frozenset({"test_outputs_meet_the_contract", "test_class_missing_from_training_keeps_its_column"})
#: Real tables larger than wine: a test of the NPT module that fits on one of them is slow.
LARGER_TABLES = frozenset({"breast_cancer", "bc_model", "diabetes", "mnist", "cover"})
#: Whole tests (every parametrized case) that are slow, by module, and why.
SLOW_TESTS = {
    "test_cluster.py": {"*"},  # a real two-node Ray cluster in network namespaces, a node lost mid-run
    "test_reliability.py": {  # drivers on Ray killed or interrupted at every phase (and Ctrl-C mid-job on Ray:
        # its parameter is marked slow there; the --no-ray case stays)
        "test_driver_killed_with_sigkill_leaves_a_sound_store_and_rerun_completes_only_the_missing_jobs",
        "test_ctrl_c_at_each_phase_exits_130_keeps_finished_records_and_says_how_to_resume"},
    "test_categorical.py": {"test_models_learn_from_a_mixed_type_table"},  # every model trained on Adult
    "test_modern_models.py": {"test_learns_concrete_and_keeps_a_validated_epoch"},  # trained to a quality bar
    "test_npt_defaults.py": {"*"},  # NPT's cost checks and fits on Covertype's 15,120 rows
    "test_clock.py": {"test_npt_budget_tabr_and_tabm_train_the_same_beside_a_cpu_hog_on_their_core"},  # 6 jobs, 12 CPU-s
    # each, half of them beside a busy loop
    "test_runner.py": {"test_quickstart_end_to_end_through_the_cli"},  # the README's quickstart on Ray, 48 jobs
    "test_probe.py": {"test_a_probe_stopped_mid_fit_by_sigint_continues_its_fit_from_the_checkpoint"},  # NPT
    "test_plugin_contract.py": {"test_conformance_tests_pass_with_a_third_party_plugin_installed"},  # all of
    # tests/test_conformance.py again, in a child
    "test_time_budget.py": {"test_tabr_whose_first_epoch_outlasts_its_budget_ends_mid_epoch_on_its_own_clock"},
    "test_report_site.py": {"test_report_writes_every_page_and_the_answer_from_the_records"},  # `tabbench report`
    # over every folder, each folder's tables checked; the quick selection regenerates the small folders
    # (tests/test_regeneration.py) and opens every page
    "test_suite_properties.py": {  # 300 and 400 generated documents; the generated text files stay quick
        "test_arbitrary_documents_load_or_raise_suite_error",
        "test_a_valid_suite_with_any_one_field_replaced_loads_or_raises_suite_error"},
}
#: Cases of a parametrized test that are slow, by module and test: the case ids. The results folders of thousands
#: of records (uci-small's 10,240 and the folders pooling or citing them): checking their READMEs' numbers against
#: their records takes tens of seconds each; the quick selection runs the same code on the small folders, and on
#: breadth's README.
SLOW_CASES = {
    "test_readme_numbers.py": {
        "test_every_number_in_a_results_readme_is_an_input_a_citation_or_what_the_records_give": {
            "results", "uci-cpu", "uci-large-cpu", "uci-small", "uci-small-kfold", "uci-small-npt-paper",
            "uci-small-npt-paper-fp32", "uci-small-paper-budget", "uci-small-yacht-froude"}},
}


def is_slow(item) -> bool:
    """Whether the quick selection leaves ``item`` out (the rules above)."""
    module, test = item.path.name, item.originalname
    if {"*", test} & SLOW_TESTS.get(module, set()):
        return True
    case = getattr(getattr(item, "callspec", None), "id", None)
    if case in SLOW_CASES.get(module, {}).get(test, ()):
        return True
    params = getattr(getattr(item, "callspec", None), "params", {})
    if params.get("name") is not None and params["name"] in neural():  # a neural model's case: on wine only
        return not (module == "test_conformance.py" and test in QUICK_CONTRACT and params.get("task") == "multiclass")
    return module == "test_npt.py" and bool(LARGER_TABLES & set(getattr(item, "fixturenames", ())))


# --- the order of the modules under pytest-xdist (the README's commands: two workers, `--dist loadfile`) -----------
# xdist hands each worker one module at a time; by default the modules with the most tests go first, so the few
# long tests (compiles, busy loops, whole runs) came last and one worker ran them while the other had finished.
# Here the longest modules go first and the many short ones fill the end. Measured: the full suite in two workers
# on this project's 2-core Xeon, seconds of each module's tests summed (`--durations=0`, 2026-11-29; 2,260 s in
# all, 1,183 s of wall time in the order by test counts). The CPU-hog test's module goes third, so that it runs
# after the compile tests on the worker they free, not beside them: its busy loop made them 1.9 times slower.

#: The modules taken first, in this order (the rest follow in their collection order).
FIRST_MODULES = (
    "test_npt_compile.py",  # 221 s (beside the hog; 111 s without it)
    "test_conformance.py",  # 195
    "test_clock.py",  # 144, its hog test 143
    "test_npt.py",  # 154
    "test_reliability.py",  # 137
    "test_time_budget.py",  # 108
    "test_broken_inputs.py",  # 104
    "test_report_site.py",  # 89
    "test_runner.py",  # 79
    "test_compare_plan.py",  # 77
    "test_regeneration.py",  # 71
    "test_isolation.py",  # 67
    "test_plugin_contract.py",  # 63
    "test_cluster.py",  # 55
    "test_probe.py",  # 48
    "test_model_params.py",  # 47
    "test_claims.py",  # 43
    "test_npt_budget_rule.py",  # 41
    "test_categorical.py",  # 40
    "test_report.py",  # 34
    "test_npt_table.py",  # 32
    "test_schema.py",  # 32
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if is_slow(item) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    first = {name: i for i, name in enumerate(FIRST_MODULES)}
    items.sort(key=lambda item: first.get(item.path.name, len(first)))  # stable: each module's tests stay in order


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


def models_of_extra(*extras: str) -> list:
    """The built-in models whose spec's ``extra`` (tabbench.spec.ModelSpec) is one of ``extras``."""
    return [name for name in builtin_models() if registry()[name].spec.extra in extras]


def extras_installing(package: str) -> list:
    """The distribution's extras (pyproject.toml's optional-dependencies) that install ``package`` themselves."""
    from importlib import metadata

    from packaging.requirements import Requirement

    extras = metadata.metadata(DISTRIBUTION).get_all("Provides-Extra") or []
    needs = [Requirement(line) for line in metadata.requires(DISTRIBUTION) or ()]
    return [extra for extra in extras
            if any(req.name == package and req.marker and req.marker.evaluate({"extra": extra}) for req in needs)]


@functools.lru_cache(maxsize=None)
def neural() -> frozenset:
    """Models whose fits take tens of seconds on a CPU even at the tests' budgets: the built-in models trained
    with torch, those of an extra that installs it."""
    return frozenset(models_of_extra(*extras_installing("torch")))


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


def skip_or_fail(env: str, message: str) -> None:
    """Skip the calling test (in a fixture: the tests that use it) with ``message``, or fail it where ``env`` is 1:
    CI sets TABBENCH_REQUIRE_DATA and TABBENCH_REQUIRE_PACKAGES, since everything the tests use is there."""
    if os.environ.get(env) == "1":
        pytest.fail(f"{message.rstrip('.')}; {env}=1 requires it", pytrace=False)
    pytest.skip(message, allow_module_level=True)


def require(installed: bool, what: str) -> None:
    """``skip_or_fail`` under TABBENCH_REQUIRE_PACKAGES where ``what`` is not installed."""
    if not installed:
        skip_or_fail(REQUIRE_PACKAGES_ENV, f"{what} is not installed")


def need(module: str, what: str | None = None):
    """Import and return ``module`` (``what`` says what installs it); where it is missing, ``require``'s skip,
    or its failure under TABBENCH_REQUIRE_PACKAGES=1 (pytest.importorskip skips even there)."""
    require(importlib.util.find_spec(module) is not None, what or module)
    return importlib.import_module(module)


def require_report_extra() -> None:
    """``require`` the report extra (the figures' and statistics' libraries)."""
    from tabbench.report import report_installed

    require(report_installed(), "the report extra (matplotlib, scikit-posthocs, bencheval)")


def require_ray() -> None:
    """``require`` Ray (absent on a machine run with --no-ray)."""
    require(importlib.util.find_spec("ray") is not None, "Ray (e.g. a GPU machine run with --no-ray)")


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


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Headless Chromium (tests/browser.py) for the report pages' tests: skipped where Chromium is absent, a failure
    in CI (TABBENCH_REQUIRE_PACKAGES=1, and .ci/run installs Debian's chromium)."""
    from tests.browser import Browser, chromium

    executable = chromium()
    require(executable is not None, "chromium (apt-get install chromium)")
    need("websocket", "websocket-client (the test extra)")
    opened = Browser(executable, tmp_path_factory.mktemp("profile"))
    yield opened
    opened.close()
