"""The contract checks offered to plugin authors (tabbench.testing.check_model), and the project's own
conformance tests in an environment where a third-party plugin is installed."""

import re
import subprocess
import sys
import textwrap

import pytest

from tabbench.testing import ContractError, check_model
from tests.conftest import ROOT, pythonpath

# The README's plugin, a plain linear model (pandas for the categorical columns and missing values,
# scikit-learn's linear models), and its complete pyproject.toml: tested here as a user copies them.
README = (ROOT / "README.md").read_text()
(LINEAR_PLUGIN,) = [block for block in re.findall(r"```python\n(.*?)```", README, re.S) if "register_models" in block]
(PYPROJECT,) = [block for block in re.findall(r"```toml\n(.*?)```", README, re.S) if "[build-system]" in block]
(LINEAR_TEST,) = [block for block in re.findall(r"```python\n(.*?)```", README, re.S) if "def test_linear" in block]

# Models that each break the contract one way, on top of a prior (class frequencies or the mean).
BROKEN_PLUGIN = textwrap.dedent('''
    import numpy as np
    import tabbench
    from tabbench.params import Params, param
    from tabbench.spec import ModelSpec

    class BrokenParams(Params):  # a plain factory's params, handed to ModelSpec
        defect: str = param("none", "the rule of the contract to break")

    class Broken:
        def __init__(self, meta, seed, defect="none"):
            self.meta, self.seed, self.defect = meta, seed, defect

        def fit(self, X, y, X_val=None, y_val=None, *, context=None):
            if self.defect == "numeric_only":
                X = X.to_numpy(dtype=np.float64)  # fails on a categorical column of text levels
            self.noise_ = np.random.default_rng().normal(scale=1e-3) if self.defect == "ignores_seed" else 0.0
            if self.meta.is_classification:
                # seen_classes_only: a column per class in the training rows, as a scikit-learn classifier's
                n = np.max(y) + 1 if self.defect == "seen_classes_only" else self.meta.n_classes
                self.prior_ = (np.bincount(y, minlength=n) + 1.0) / (len(y) + n)
            else:
                self.mean_ = float(np.mean(y))
            return None if self.defect == "fit_returns_none" else self

        def predict_proba(self, X):
            proba = np.tile(self.prior_, (len(X), 1))
            proba[:, 0] += self.noise_
            proba[:, -1] -= self.noise_
            return proba[:, ::-1] if self.defect == "columns_reversed" else proba

        def predict(self, X):
            if self.meta.is_classification:
                pred = np.tile(self.prior_, (len(X), 1)).argmax(axis=1)
                return np.full(len(X), self.meta.n_classes) if self.defect == "class_out_of_range" else pred
            pred = np.full(len(X), self.mean_ + self.noise_)
            if self.defect == "nan":
                pred[::2] = np.nan
            return pred

    @tabbench.hookimpl
    def register_models(register):
        register(ModelSpec(name="broken", factory=Broken, tasks=frozenset({"binary", "multiclass", "regression"}),
                           params=BrokenParams))
''')


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    path = tmp_path_factory.mktemp("plugin") / "broken.py"
    path.write_text(BROKEN_PLUGIN)
    return str(path)


def test_the_readme_plugin_example_meets_the_contract(tmp_path):
    """The README's linear model handles categorical columns, missing values and a class absent from training."""
    path = tmp_path / "tabbench_linear.py"
    path.write_text(LINEAR_PLUGIN)
    passed = check_model("linear", plugin_files=[str(path)])
    assert "multiclass: class absent from training" in passed
    assert {p.split(":")[0] for p in passed} == {"binary", "multiclass", "regression"}
    assert len(passed) == 10  # 3 checks per task (the categorical one included), + the missing class


def test_the_readme_plugin_shows_its_description_in_tabbench_models(tmp_path, capsys):
    from tabbench.cli import main

    path = tmp_path / "tabbench_linear.py"
    path.write_text(LINEAR_PLUGIN)
    assert main(["models", "--plugin", str(path)]) == 0
    assert re.search(r"linear\s*:?\s+logistic / ridge regression, one-hot features", capsys.readouterr().out)


def test_a_model_that_breaks_nothing_passes(broken):
    check_model("broken", plugin_files=[broken])


def test_a_fit_without_the_context_argument_fails_the_check_saying_what_to_add():
    """The harness hands every fit the job's context (``context=``); a fit written without it would fail every
    job with a TypeError, so the check names the argument and the fix."""
    import numpy as np

    from tabbench.spec import ModelSpec

    class WithoutContext:
        def __init__(self, meta, seed):
            self.meta = meta

        def fit(self, X, y, X_val=None, y_val=None):
            self.mean_ = float(np.mean(y))
            return self

        def predict(self, X):
            return np.full(len(X), self.mean_)

    spec = ModelSpec(name="without_context", factory=WithoutContext, tasks=frozenset({"regression"}))
    with pytest.raises(ContractError, match=r"fit does not take the keyword argument context.*\*, context="):
        check_model(spec)


@pytest.mark.parametrize("defect,task,message", [
    ("fit_returns_none", "binary", "model 'broken' on breast_cancer (binary): fit returned NoneType, not self"),
    ("nan", "regression", "predictions are NaN"),
    ("columns_reversed", "binary", "predict disagrees with the argmax of predict_proba"),
    ("class_out_of_range", "multiclass", "class predictions are outside 0..2 (e.g. 3)"),
    ("ignores_seed", "regression", "two fits with seed 0 give different predict outputs"),
    ("numeric_only", "binary", "with a categorical column 'mean radius' and missing values: ValueError"),
    ("seen_classes_only", "multiclass", "trained without class index 2, predict_proba must still have one column "
                                        "per class of the task (meta.n_classes = 3)"),
])
def test_a_model_that_breaks_the_contract_fails_the_check_naming_what_is_wrong(broken, defect, task, message):
    with pytest.raises(ContractError, match=re.escape(message)):
        check_model("broken", params={"defect": defect}, plugin_files=[broken], tasks=(task,))


TRANSDUCTIVE_PLUGIN = textwrap.dedent('''
    import numpy as np
    import tabbench
    from tabbench.spec import ModelSpec

    class MeanOfAllRows:
        """Regression: predicts the training mean, after checking it was given the test rows' features."""
        def __init__(self, meta, seed):
            self.meta = meta
        def fit(self, X, y, X_val=None, y_val=None, X_unlabelled=None, *, context=None):
            if X_unlabelled is None or "target" in X_unlabelled or len(X_unlabelled) == 0:
                raise ValueError("a transductive fit needs the test rows' features")
            self.mean_ = float(np.mean(y))
            return self
        def predict(self, X):
            return np.full(len(X), self.mean_)

    @tabbench.hookimpl
    def register_models(register):
        register(ModelSpec(name="mean_of_all_rows", factory=MeanOfAllRows, tasks=frozenset({"regression"}),
                           transductive=True))
''')


def test_a_transductive_model_is_fitted_with_the_test_features(tmp_path):
    path = tmp_path / "transductive.py"
    path.write_text(TRANSDUCTIVE_PLUGIN)
    assert len(check_model("mean_of_all_rows", plugin_files=[str(path)])) == 3


def test_an_unknown_model_name_is_a_contract_error_listing_the_registered_ones(broken):
    with pytest.raises(ContractError, match="no model named 'nope' is registered; registered: .*broken"):
        check_model("nope", plugin_files=[broken])


def test_conformance_tests_pass_with_a_third_party_plugin_installed(tmp_path, shared):
    """pip-install a plain linear model (RMSE about 10 on concrete, above the built-ins' 7.5 ceiling)
    beside the built-in scikit-learn models and run tests/test_conformance.py: the contract checks run
    on it and pass, the quality ceilings run on the built-ins only."""
    package = tmp_path / "tabbench-linear"
    package.mkdir()
    (package / "tabbench_linear.py").write_text(LINEAR_PLUGIN)
    (package / "pyproject.toml").write_text(PYPROJECT)
    # a test file beside the plugin, as the README shows: the pyproject names its module, so discovery accepts it
    (package / "test_tabbench_linear.py").write_text("from tabbench.testing import check_model\n")
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(site), str(package)], check=True, capture_output=True)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": pythonpath(site), "TABBENCH_PLUGINS": "sklearn_models,linear",
           "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                          "tests/test_conformance.py"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stdout[-5000:]
    passed = set(re.findall(r"^PASSED tests/test_conformance\.py::(\S+)", out.stdout, re.M))
    linear = {t for t in passed if "linear" in t}
    assert linear == {"test_outputs_meet_the_contract[linear-binary]", "test_outputs_meet_the_contract[linear-multiclass]",
                      "test_outputs_meet_the_contract[linear-regression]", "test_same_seed_same_predictions[linear-multiclass]",
                      "test_same_seed_same_predictions[linear-regression]",
                      "test_class_missing_from_training_keeps_its_column[linear-multiclass]",
                      "test_categorical_columns_and_missing_values_are_handled[linear]"}
    assert "test_builtin_quality_on_the_test_split[knn-regression]" in passed  # the ceilings run on built-ins
    assert not re.search(r"test_builtin\w*\[linear", out.stdout)  # and never on the third-party model


def _install_readme_plugin(tmp_path):
    """The README's plugin folder (module, pyproject.toml and test), pip-installed into a folder of its own: its
    dist-info on PYTHONPATH is the plugin installed, as `pip install .` in that folder does it."""
    package = tmp_path / "tabbench-linear"
    package.mkdir()
    (package / "tabbench_linear.py").write_text(LINEAR_PLUGIN)
    (package / "pyproject.toml").write_text(PYPROJECT)
    (package / "test_tabbench_linear.py").write_text(LINEAR_TEST)
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(site), str(package)], check=True, capture_output=True)
    return package, site


@pytest.mark.slow  # a package installed and pytest run three times in children: about a minute on 2 cores
def test_the_readme_plugin_test_and_the_projects_tests_pass_before_and_after_the_plugin_is_installed(tmp_path):
    """The README's own order: its plugin's test beside the plugin passes before `pip install .` and after it
    (where the file and the entry point both register 'linear'), and the project's tests that read the registry
    (the schema, the suites' checks, the README's plugin) pass with the plugin installed and TABBENCH_PLUGINS unset."""
    package, site = _install_readme_plugin(tmp_path)
    user = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # a user's environment: no TABBENCH_PLUGINS
    installed = subprocess.run([sys.executable, "-c", "from tabbench.plugins import load_models; "
                                "print(load_models()['linear'].source)"], env={**user, "PYTHONPATH": pythonpath(site)},
                               capture_output=True, text=True)
    assert installed.stdout.strip() == "tabbench-linear==0.1.0", installed.stderr  # the entry point is there
    for path in (pythonpath(), pythonpath(site)):
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              "test_tabbench_linear.py"], cwd=package, env={**user, "PYTHONPATH": path},
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stdout[-3000:]
    tests = ["tests/test_schema.py::test_the_checked_in_schema_is_what_tabbench_schema_prints",
             "tests/test_tabarena_suite.py::test_tabarena_suite_validates_with_its_models_and_no_network",
             "tests/test_plugin_contract.py::test_the_readme_plugin_example_meets_the_contract",
             "tests/test_plugin_contract.py::test_the_readme_plugin_shows_its_description_in_tabbench_models",
             "tests/test_model_params.py"]
    # less test_model_params' checks of one built-in model or one committed folder each: the child's tests load
    # this repository's plugins only (tests/conftest.py), so those are this run's own cases again (40 s of 55)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests, "-k",
                          "not (wrong_value_of_each_param or every_committed_record)"], cwd=ROOT,
                         env={**user, "PYTHONPATH": pythonpath(site)}, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0 and " passed" in out.stdout, out.stdout[-5000:]
