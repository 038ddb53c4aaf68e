"""Suites: YAML files naming datasets (with split protocols), models (with params, variants and
tuning), seeds and per-job budgets. suites/README.md documents every field.

Loading validates everything that can be checked without the data or the models; an error names
the file, the field path and what is expected. ``check_models`` then checks the models and their
params against the plugin registry, still before any job runs.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from tabbench.data.dataset import DatasetConfig, SplitConfig
from tabbench.data.formats import FORMATS
from tabbench.data.sources import SKLEARN_SETS, SOURCES
from tabbench.data.splits import PROTOCOLS
from tabbench.spec import TASKS

TUNING = ("none", "grid", "random")


class SuiteError(Exception):
    """A suite is invalid. ``str(err)`` reads 'FILE: FIELD.PATH: what is wrong and what is expected'."""

    def __init__(self, file, path: str, message: str):
        self.file, self.path, self.message = str(file), path, message
        super().__init__(f"{file}: {path}: {message}" if path else f"{file}: {message}")


@dataclass(frozen=True)
class ModelEntry:
    label: str  # the method's name in records and leaderboards
    model: str  # the registered model it runs
    params: dict = field(default_factory=dict)
    tuning: str = "none"
    n_trials: int = 20  # random search only
    tuning_seed: int = 0
    search_space: dict | None = None  # overrides the model's default search space


@dataclass(frozen=True)
class Budget:
    time_s: float | None = None  # wall-clock limit per job
    memory_mb: float | None = None  # host memory limit per job


@dataclass(frozen=True)
class Suite:
    name: str
    path: Path
    datasets: tuple  # of DatasetConfig
    models: tuple  # of ModelEntry
    seeds: tuple = (0,)
    budget: Budget = Budget()
    plugins: tuple = ()  # plugin files, resolved against the suite's folder
    description: str = ""
    published: Path | None = None  # published results to compare with (tabbench/published.py)


# --- field checking -------------------------------------------------------------------------------


class _Checker:
    def __init__(self, file):
        self.file = file

    def fail(self, path, message):
        raise SuiteError(self.file, path, message)

    def mapping(self, value, path, allowed, required=()):
        if not isinstance(value, dict):
            self.fail(path, f"expected a mapping with keys from {sorted(allowed)}, got {_show(value)}")
        for key in value:
            if not isinstance(key, str) or key not in allowed:
                hint = difflib.get_close_matches(str(key), allowed, n=1)
                suggestion = f"; did you mean {hint[0]!r}?" if hint else f"; valid keys: {', '.join(sorted(allowed))}"
                self.fail(_join(path, key), f"unknown field {key!r}{suggestion}")
        for key in required:
            if key not in value:
                self.fail(_join(path, key), "required field is missing")
        return value

    def string(self, value, path, choices=None):
        if not isinstance(value, str) or not value:
            self.fail(path, f"expected a non-empty string, got {_show(value)}")
        if choices is not None and value not in choices:
            hint = difflib.get_close_matches(value, choices, n=1)
            self.fail(path, f"expected one of {', '.join(choices)}, got {value!r}"
                      + (f"; did you mean {hint[0]!r}?" if hint else ""))
        return value

    def integer(self, value, path, minimum=None):
        if not isinstance(value, int) or isinstance(value, bool) or (minimum is not None and value < minimum):
            self.fail(path, f"expected an integer{f' >= {minimum}' if minimum is not None else ''}, got {_show(value)}")
        return value

    def number(self, value, path, low=None, high=None, exclusive=True):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
        if ok and low is not None:
            ok = value > low if exclusive else value >= low
        if ok and high is not None:
            ok = value < high if exclusive else value <= high
        if not ok:
            bounds = f" in ({low}, {high})" if low is not None and high is not None else (
                f" > {low}" if low is not None else "")
            self.fail(path, f"expected a number{bounds}, got {_show(value)}")
        return float(value)

    def boolean(self, value, path):
        if not isinstance(value, bool):
            self.fail(path, f"expected true or false, got {_show(value)}")
        return value

    def int_list(self, value, path, minimum=0):
        if not isinstance(value, list) or not value:
            self.fail(path, f"expected a non-empty list of integers, got {_show(value)}")
        return tuple(self.integer(v, f"{path}[{i}]", minimum) for i, v in enumerate(value))

    def column_refs(self, value, path):
        if not isinstance(value, list):
            self.fail(path, f"expected a list of column names or positions, got {_show(value)}")
        for i, v in enumerate(value):
            if not (isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool))):
                self.fail(f"{path}[{i}]", f"expected a column name or integer position, got {_show(v)}")
        return tuple(value)


def _join(path, key):
    return f"{path}.{key}" if path else str(key)


def _show(value) -> str:
    text = repr(value)
    return (text[:60] + "...") if len(text) > 60 else f"{text} ({type(value).__name__})"


# --- sections -------------------------------------------------------------------------------------

_SPLIT_KEYS = {f.name for f in fields(SplitConfig)}
_COMMON_DATASET_KEYS = {"name", "source", "split", "target", "task", "categorical", "drop", "subset",
                        "format", "header", "columns", "skip_rows", "na_values", "sep",
                        "categorical_max_levels", "model_params"}
_SOURCE_KEYS = {
    "sklearn": {"id"},
    "file": {"path", "test_path"},
    "url": {"url", "sha256", "mirror_path", "test_url", "test_sha256", "test_mirror_path"},
    "openml": {"id", "task_id"},
}


def _split(c: _Checker, raw, path) -> SplitConfig:
    c.mapping(raw, path, _SPLIT_KEYS, required=("protocol",))
    out = {"protocol": c.string(raw["protocol"], _join(path, "protocol"), PROTOCOLS)}
    if "k" in raw:
        out["k"] = c.integer(raw["k"], _join(path, "k"), 2)
    if "seed" in raw:
        out["seed"] = c.integer(raw["seed"], _join(path, "seed"), 0)
    for key in ("folds", "repeats"):
        if key in raw:
            out[key] = c.int_list(raw[key], _join(path, key))
    for key in ("val_fraction", "test_fraction"):
        if key in raw:
            out[key] = c.number(raw[key], _join(path, key), 0.0, 1.0)
    if "test_rows" in raw:
        out["test_rows"] = c.integer(raw["test_rows"], _join(path, "test_rows"), 1)
    if "stratify" in raw:
        out["stratify"] = c.boolean(raw["stratify"], _join(path, "stratify"))
    if out["protocol"] == "kfold" and "folds" in out and max(out["folds"]) >= out.get("k", SplitConfig.k):
        c.fail(_join(path, "folds"), f"fold indices must be below k={out.get('k', SplitConfig.k)}, got {list(out['folds'])}")
    return SplitConfig(**out)


def _dataset(c: _Checker, raw, path) -> DatasetConfig:
    if not isinstance(raw, dict):
        c.fail(path, f"expected a mapping describing a dataset (name, source, split, ...), got {_show(raw)}")
    source = c.string(raw.get("source"), _join(path, "source"), SOURCES) if "source" in raw else c.fail(
        _join(path, "source"), f"required field is missing; one of {', '.join(SOURCES)}")
    c.mapping(raw, path, _COMMON_DATASET_KEYS | _SOURCE_KEYS[source], required=("name", "split"))
    out: dict[str, Any] = {"name": c.string(raw["name"], _join(path, "name")), "source": source,
                           "split": _split(c, raw["split"], _join(path, "split"))}
    p = lambda key: _join(path, key)  # noqa: E731
    if source == "sklearn":
        out["id"] = c.string(raw.get("id"), p("id"), SKLEARN_SETS)
    elif source == "file":
        out["path"] = c.string(raw.get("path"), p("path"))
        if "test_path" in raw:
            out["test_path"] = c.string(raw["test_path"], p("test_path"))
    elif source == "url":
        for key in ("url", "sha256", "mirror_path", "test_url", "test_sha256", "test_mirror_path"):
            if key in raw or key == "url":
                out[key] = c.string(raw.get(key), p(key))
    else:
        if ("id" in raw) == ("task_id" in raw):
            c.fail(path, "an openml dataset needs exactly one of 'id' (an OpenML dataset id) or 'task_id'")
        key = "id" if "id" in raw else "task_id"
        out[key] = c.integer(raw[key], p(key), 1)
    if "task" in raw:
        out["task"] = c.string(raw["task"], p("task"), TASKS)
    if "target" in raw:
        target = raw["target"]
        if not (isinstance(target, str) or (isinstance(target, int) and not isinstance(target, bool))):
            c.fail(p("target"), f"expected a column name or integer position, got {_show(target)}")
        out["target"] = target
    if "categorical" in raw:
        out["categorical"] = raw["categorical"] if raw["categorical"] == "auto" else c.column_refs(
            raw["categorical"], p("categorical"))
    if "drop" in raw:
        out["drop"] = c.column_refs(raw["drop"], p("drop"))
    if "columns" in raw:
        cols = raw["columns"]
        if not isinstance(cols, list) or not all(isinstance(x, str) for x in cols):
            c.fail(p("columns"), f"expected a list of column names, got {_show(cols)}")
        out["columns"] = tuple(cols)
    if "format" in raw:
        out["format"] = c.string(raw["format"], p("format"), FORMATS)
    if "header" in raw:
        out["header"] = c.boolean(raw["header"], p("header"))
    if "skip_rows" in raw:
        out["skip_rows"] = c.integer(raw["skip_rows"], p("skip_rows"), 0)
    if "na_values" in raw:
        na = raw["na_values"]
        if not isinstance(na, list) or not all(isinstance(x, str) for x in na):
            c.fail(p("na_values"), f"expected a list of strings, got {_show(na)}")
        out["na_values"] = tuple(na)
    for key in ("sep", "subset"):
        if key in raw:
            out[key] = c.string(raw[key], p(key))
    if "categorical_max_levels" in raw:
        out["categorical_max_levels"] = c.integer(raw["categorical_max_levels"], p("categorical_max_levels"), 1)
    if "model_params" in raw:
        per_model = raw["model_params"]
        if not isinstance(per_model, dict) or not all(isinstance(k, str) for k in per_model):
            c.fail(p("model_params"), "expected a mapping of method labels to parameter mappings, "
                   f"got {_show(per_model)}")
        for label, params in per_model.items():
            if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
                c.fail(p(f"model_params.{label}"), f"expected a mapping of parameter names to values, got {_show(params)}")
        out["model_params"] = {label: dict(params) for label, params in per_model.items()}
    if out["split"].protocol == "openml_task" and "task_id" not in out:
        c.fail(_join(path, "split.protocol"), "protocol 'openml_task' needs source: openml with a task_id")
    return DatasetConfig(**out)


_MODEL_KEYS = {"model", "params", "tuning", "n_trials", "tuning_seed", "search_space"}


def _model(c: _Checker, label, raw, path) -> ModelEntry:
    raw = {} if raw is None else raw
    c.mapping(raw, path, _MODEL_KEYS)
    out: dict[str, Any] = {"label": label, "model": c.string(raw.get("model", label), _join(path, "model"))}
    if "params" in raw:
        params = raw["params"] if raw["params"] is not None else {}
        if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
            c.fail(_join(path, "params"), f"expected a mapping of parameter names to values, got {_show(params)}")
        out["params"] = dict(params)
    if "tuning" in raw:
        out["tuning"] = c.string(raw["tuning"], _join(path, "tuning"), TUNING)
    if "n_trials" in raw:
        out["n_trials"] = c.integer(raw["n_trials"], _join(path, "n_trials"), 1)
    if "tuning_seed" in raw:
        out["tuning_seed"] = c.integer(raw["tuning_seed"], _join(path, "tuning_seed"), 0)
    if "search_space" in raw:
        space = raw["search_space"]
        if not isinstance(space, dict) or not all(isinstance(v, list) and v for v in space.values()):
            c.fail(_join(path, "search_space"), "expected a mapping of parameter names to non-empty lists of values, "
                   f"got {_show(space)}")
        out["search_space"] = dict(space)
    return ModelEntry(**out)


_SUITE_KEYS = {"name", "description", "datasets", "models", "seeds", "budget", "plugins", "published"}


def parse_suite(raw, file="<suite>") -> Suite:
    """Validate an already-parsed YAML document; raises SuiteError."""
    c = _Checker(file)
    c.mapping(raw, "", _SUITE_KEYS, required=("datasets", "models"))
    name = c.string(raw.get("name", Path(str(file)).stem), "name")
    datasets_raw = raw["datasets"]
    if not isinstance(datasets_raw, list) or not datasets_raw:
        c.fail("datasets", f"expected a non-empty list of datasets, got {_show(datasets_raw)}")
    datasets = tuple(_dataset(c, d, f"datasets[{i}]") for i, d in enumerate(datasets_raw))
    seen = set()
    for i, d in enumerate(datasets):
        if d.name in seen:
            c.fail(f"datasets[{i}].name", f"dataset name {d.name!r} is used twice; names must be unique")
        seen.add(d.name)
    models_raw = raw["models"]
    if not isinstance(models_raw, dict) or not models_raw:
        c.fail("models", f"expected a non-empty mapping of method names to model settings, got {_show(models_raw)}")
    models = tuple(_model(c, str(label), entry, f"models.{label}") for label, entry in models_raw.items())
    labels = {m.label for m in models}
    for i, d in enumerate(datasets):
        for label in d.model_params or {}:
            if label not in labels:
                hint = difflib.get_close_matches(label, labels, n=1)
                c.fail(f"datasets[{i}].model_params.{label}", f"no method {label!r} in this suite's models"
                       + (f"; did you mean {hint[0]!r}?" if hint else f"; methods: {', '.join(sorted(labels))}"))
    seeds = c.int_list(raw["seeds"], "seeds") if "seeds" in raw else (0,)
    budget_raw = c.mapping(raw.get("budget", {}) or {}, "budget", {"time_s", "memory_mb"})
    budget = Budget(**{k: c.number(v, f"budget.{k}", 0.0) for k, v in budget_raw.items()})
    plugins_raw = raw.get("plugins", []) or []
    if not isinstance(plugins_raw, list):
        c.fail("plugins", f"expected a list of plugin file paths, got {_show(plugins_raw)}")
    base = Path(str(file)).parent
    plugins = tuple(str((base / c.string(p, f"plugins[{i}]")).resolve()) for i, p in enumerate(plugins_raw))
    description = c.string(raw["description"], "description") if "description" in raw else ""
    published = None
    if raw.get("published") is not None:
        from tabbench.published import PublishedError, load_published

        published = (base / c.string(raw["published"], "published")).resolve()
        try:
            load_published(published)
        except PublishedError as exc:
            c.fail("published", f"{exc} (the path is relative to the suite's folder)")
    return Suite(name, Path(str(file)), datasets, models, seeds, budget, plugins, description, published)


def load_suite(path) -> Suite:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SuiteError(path, "", f"cannot read the suite file: {exc.strerror or exc}") from exc
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise SuiteError(path, "", f"not valid YAML: {where}{getattr(exc, 'problem', None) or exc}") from exc
    return parse_suite(raw, path)


def check_models(suite: Suite, registry: dict) -> None:
    """Every model exists, every param is one the model accepts, every search space is valid."""
    for entry in suite.models:
        path = f"models.{entry.label}"
        if entry.model not in registry:
            hint = difflib.get_close_matches(entry.model, list(registry), n=1)
            from tabbench.plugins import BROKEN

            broken = "".join(f"; plugin {n!r} failed to load ({why})" for n, why in BROKEN.items())
            raise SuiteError(suite.path, _join(path, "model") if entry.model != entry.label else path,
                             f"unknown model {entry.model!r}" + (f"; did you mean {hint[0]!r}?" if hint else "")
                             + f"; registered models: {', '.join(sorted(registry)) or '(none)'}{broken}")
        spec = registry[entry.model].spec
        accepted = set(spec.default_params)
        named = [(f"{path}.params", entry.params), (f"{path}.search_space", entry.search_space or {})]
        named += [(f"datasets[{i}].model_params.{entry.label}", (d.model_params or {}).get(entry.label, {}))
                  for i, d in enumerate(suite.datasets)]
        for where, names in named:
            for name in names:
                if name not in accepted:
                    hint = difflib.get_close_matches(name, accepted, n=1)
                    raise SuiteError(suite.path, f"{where}.{name}",
                                     f"model {entry.model!r} does not accept a parameter {name!r}"
                                     + (f"; did you mean {hint[0]!r}?" if hint else "")
                                     + f"; accepted: {', '.join(sorted(accepted)) or '(none)'}")
        missing = spec.missing_requirements()
        if missing:
            raise SuiteError(suite.path, path, f"model {entry.model!r} needs {', '.join(missing)}, which is not "
                             f"installed; {spec.install_hint or 'install it'}")
        if entry.tuning != "none" and not (entry.search_space or spec.search_space):
            raise SuiteError(suite.path, f"{path}.tuning", f"model {entry.model!r} declares no search space; "
                             "give one under search_space or set tuning: none")
