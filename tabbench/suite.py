"""Suites: YAML files naming datasets (with split protocols), models (with params, variants and
tuning), seeds and per-job budgets.

The format is declared once, as the pydantic models below (``SuiteFile`` and what it holds): they
validate a suite, ``tabbench schema`` prints them as JSON Schema (checked in as
suites/suite.schema.json, for editors), and ``tabbench schema --markdown`` prints the field
reference in suites/README.md. A validation error becomes a SuiteError naming the file, the field
path and what is expected, with the closest valid key for a misspelt one. ``check_models`` then
checks the models and their params against the plugin registry, still before any job runs.
"""

from __future__ import annotations

import difflib
import re
import json
import os
from dataclasses import MISSING, dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from tabbench.data.formats import FORMATS
from tabbench.data.sources import SKLEARN_SETS, SOURCES
from tabbench.data.splits import PROTOCOLS
from tabbench.data.types import DatasetConfig, SplitConfig
from tabbench.errors import TabbenchError
from tabbench.spec import TASKS

TUNING = ("none", "grid", "random")

#: A name that becomes a folder (the suite's, under --results) or may become one (datasets, methods):
#: letters, digits, '-', '_' and '.', not starting with a dot, so never '..', a '/' or an absolute path.
NAME_PATTERN = r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$"
NAME_RULE = "a plain folder name (letters, digits, '-', '_' and '.', not starting with a dot)"


class SuiteError(TabbenchError):
    """A suite is invalid. ``str(err)`` reads 'FILE: FIELD.PATH: what is wrong and what is expected'."""

    def __init__(self, file, path: str, message: str):
        self.file, self.path, self.message = str(file), path, message
        super().__init__(f"{file}: {path}: {message}" if path else f"{file}: {message}")


# --- what the rest of tabbench reads -------------------------------------------------------------------


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

    def results_dir(self, results_root) -> Path:
        """<results_root>/<name>, checked to lie inside results_root (a suite file can come from anywhere)."""
        root = Path(os.path.abspath(results_root))
        target = Path(os.path.normpath(root / self.name))
        if target.parent != root:
            raise SuiteError(self.path, "name", f"{self.name!r} would put results at {target}, not in the "
                             f"results folder {root}; use {NAME_RULE}")
        return Path(results_root) / self.name


# --- the declaration -------------------------------------------------------------------------------------


def _default(cls, name: str):
    """A runtime dataclass's default, so the schema shows the defaults that are really used."""
    f = next(f for f in fields(cls) if f.name == name)
    return f.default if f.default is not MISSING else f.default_factory()


def _fail(where: str, message: str):
    """Raise from a model validator: ``where`` is the field path below the model being validated."""
    raise PydanticCustomError("suite", "{message}", {"where": where, "message": message})


Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
Text = Annotated[str, StringConstraints(min_length=1)]
ColumnRef = Union[str, int]
Count = Annotated[int, Field(ge=1)]
Index = Annotated[int, Field(ge=0)]
Fraction = Annotated[float, Field(gt=0.0, lt=1.0)]
Positive = Annotated[float, Field(gt=0.0)]


class _Section(BaseModel):
    # strict: 'ten' is not an integer, 1 is not true; extra keys are errors (with a did-you-mean)
    model_config = ConfigDict(extra="forbid", strict=True)


class Split(_Section):
    """How a dataset is split into train / validation / test parts (tabbench/data/splits.py)."""

    protocol: Literal[PROTOCOLS] = Field(description="the split protocol")
    k: Annotated[int, Field(ge=2)] = Field(_default(SplitConfig, "k"), description=(
        "kfold, npt_code: number of folds (stratified for classification)"))
    seed: Index = Field(_default(SplitConfig, "seed"), description="shuffling seed of the split (not the model seeds)")
    folds: Optional[Annotated[list[Index], Field(min_length=1)]] = Field(None, description=(
        "run only these folds (default: all)"))
    repeats: Optional[Annotated[list[Index], Field(min_length=1)]] = Field(None, description=(
        "openml_task: run only these repeats (default: all)"))
    val_fraction: Fraction = Field(_default(SplitConfig, "val_fraction"), description=(
        "share of each fold's training part held out for validation (the paper: 2/9 for 10-fold)"))
    test_fraction: Fraction = Field(_default(SplitConfig, "test_fraction"), description=(
        "holdout: share of all rows used as the test set"))
    test_rows: Optional[Count] = Field(None, description=(
        "fixed: the last N rows are the test set (default: the rows of the source's test file)"))
    stratify: bool = Field(_default(SplitConfig, "stratify"), description=(
        "keep class proportions in every part (classification)"))

    @model_validator(mode="after")
    def _folds_below_k(self):
        if self.protocol in ("kfold", "npt_code") and self.folds and max(self.folds) >= self.k:
            _fail("folds", f"fold indices must be below k={self.k}, got {self.folds}")
        return self


class _Dataset(_Section):
    """Fields every dataset entry has, whatever its source."""

    name: Name = Field(description="the dataset's name in records and tables; unique within the suite")
    split: Split = Field(description="how the rows are split")
    format: Optional[Literal[FORMATS]] = Field(None, description=(
        "the file format (default: from the extension); .gz, .bz2, .xz are read as well"))
    header: bool = Field(_default(DatasetConfig, "header"), description="the first line holds column names")
    columns: Optional[list[str]] = Field(None, description="names for a headerless file (default: col0, col1, ...)")
    skip_rows: Index = Field(_default(DatasetConfig, "skip_rows"), description="lines to skip before the data")
    na_values: Optional[list[str]] = Field(None, description="extra strings that mean 'missing'")
    sep: Optional[Text] = Field(None, description="override the format's separator")
    target: Optional[ColumnRef] = Field(None, description=(
        "column name or position (negative from the end); default: the source's declared target, else the last column"))
    task: Optional[Literal[TASKS]] = Field(None, description="the task (default: inferred from the target)")
    categorical: Union[Literal["auto"], list[ColumnRef]] = Field(_default(DatasetConfig, "categorical"), description=(
        "auto (non-numeric columns, and those an OpenML/ARFF source declares) or a list of column names / positions"))
    drop: list[ColumnRef] = Field([], description="columns to remove (names or positions)")
    categorical_max_levels: Optional[Count] = Field(None, description=(
        "numeric columns with at most this many distinct values are categorical too (the paper's rule for Income)"))
    subset: Optional[Text] = Field(None, description=(
        "a label saying the data is a declared subset of the original; shown in every record and table"))
    model_params: Optional[dict[str, dict[str, Any]]] = Field(None, description=(
        "per-dataset params of this suite's methods, {method: {param: value}}; they update the method's params"))


class SklearnDataset(_Dataset):
    """A dataset scikit-learn ships (no download)."""

    source: Literal["sklearn"] = Field(description="where the data comes from")
    id: Literal[SKLEARN_SETS] = Field(description="sklearn: the bundled set")


class FileDataset(_Dataset):
    """A file of the user's own."""

    source: Literal["file"] = Field(description="where the data comes from")
    path: Text = Field(description=(
        "file: absolute, or relative to the suite's folder, the working directory or a mirror (--mirror)"))
    test_path: Optional[Text] = Field(None, description="file: a separate test file, appended after the rows of path")


class UrlDataset(_Dataset):
    """A file downloaded once into the cache (or read from a mirror)."""

    source: Literal["url"] = Field(description="where the data comes from")
    url: Text = Field(description="url: downloaded once into the cache")
    sha256: Optional[Text] = Field(None, description="url: checked after download (recommended)")
    mirror_path: Optional[Text] = Field(None, description="url: where a mirror holds a copy (used as is, no download)")
    test_url: Optional[Text] = Field(None, description="url: a separate test file")
    test_sha256: Optional[Text] = Field(None, description="url: the test file's sha256")
    test_mirror_path: Optional[Text] = Field(None, description="url: where a mirror holds the test file")


class OpenMLDataset(_Dataset):
    """An OpenML dataset or task (an OpenML cache in a mirror is used offline)."""

    source: Literal["openml"] = Field(description="where the data comes from")
    id: Optional[Count] = Field(None, description="openml: an OpenML dataset id (or give task_id)")
    task_id: Optional[Count] = Field(None, description="openml: an OpenML task id; needed by protocol openml_task")

    @model_validator(mode="after")
    def _one_id(self):
        if (self.id is None) == (self.task_id is None):
            _fail("", "an openml dataset needs exactly one of 'id' (an OpenML dataset id) or 'task_id'")
        return self


Dataset = Annotated[Union[SklearnDataset, FileDataset, UrlDataset, OpenMLDataset], Field(discriminator="source")]
assert {m.model_fields["source"].annotation.__args__[0] for m in Dataset.__origin__.__args__} == set(SOURCES)


class Model(_Section):
    """A method: a registered model with its params (the mapping key is the method's name)."""

    model: Optional[Text] = Field(None, description="the registered model it runs (default: the method's name)")
    params: Optional[dict[str, Any]] = Field(None, description="overrides of the model's default params")
    tuning: Literal[TUNING] = Field("none", description="grid or random search over search_space, or none")
    n_trials: Count = Field(_default(ModelEntry, "n_trials"), description="random: configurations sampled from the grid")
    tuning_seed: Index = Field(_default(ModelEntry, "tuning_seed"), description="random: the sampling seed")
    search_space: Optional[dict[str, Annotated[list[Any], Field(min_length=1)]]] = Field(None, description=(
        "{param: [values]} to tune over (default: the model's own search space)"))


class BudgetSection(_Section):
    """Limits per job."""

    time_s: Optional[Positive] = Field(None, description="wall-clock limit per job, in seconds")
    memory_mb: Optional[Positive] = Field(None, description="host memory limit per job, in MiB")


class SuiteFile(_Section):
    """A tabbench suite: datasets x models x seeds, run as one job per (method, dataset, fold, seed)."""

    model_config = ConfigDict(title="tabbench suite")

    name: Optional[Name] = Field(None, description=(
        "the folder under --results that holds this suite's results (default: the file name without .yaml)"))
    description: Optional[Text] = Field(None, description="free text")
    seeds: Annotated[list[Index], Field(min_length=1)] = Field([0], description=(
        "model seeds; every (method, dataset, fold) runs once per seed"))
    budget: Optional[BudgetSection] = Field(None, description="limits per job")
    plugins: Optional[list[Text]] = Field(None, description="plugin files, relative to the suite's folder")
    published: Optional[Text] = Field(None, description=(
        "published results shown next to ours in the leaderboard, relative to the suite's folder"))
    datasets: Annotated[list[Dataset], Field(min_length=1)] = Field(description=(
        "each entry: a source, how to read it and a split protocol"))
    models: Annotated[dict[Name, Optional[Model]], Field(min_length=1)] = Field(description=(
        "method name -> settings; each method is a leaderboard row"))

    @model_validator(mode="after")
    def _names_resolve(self):
        seen = set()
        for i, d in enumerate(self.datasets):
            if d.name in seen:
                _fail(f"datasets[{i}].name", f"dataset name {d.name!r} is used twice; names must be unique")
            seen.add(d.name)
        for i, d in enumerate(self.datasets):
            for label in d.model_params or {}:
                if label not in self.models:
                    _fail(f"datasets[{i}].model_params.{label}", f"no method {label!r} in this suite's models"
                          + _hint(label, self.models, "methods"))
            if d.split.protocol == "openml_task" and getattr(d, "task_id", None) is None:
                _fail(f"datasets[{i}].split.protocol", "protocol 'openml_task' needs source: openml with a task_id")
        return self


def json_schema() -> dict:
    """The suite format as JSON Schema (what suites/suite.schema.json holds)."""
    schema = SuiteFile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"

    def close(node):  # a mapping with constrained keys (method names) allows no other keys
        if isinstance(node, dict):
            if "patternProperties" in node:
                node.setdefault("additionalProperties", False)
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    close(schema)
    return schema


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2) + "\n"


# --- validation errors, in the suite's own words -------------------------------------------------------


@lru_cache(maxsize=1)
def _schema() -> dict:
    return json_schema()


def _deref(node: dict) -> dict:
    while isinstance(node, dict) and "$ref" in node:
        node = _schema()["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def _member(node: dict, tag: str) -> dict | None:
    """The member of an anyOf that pydantic names ``tag`` in an error location (str, int, list[...], Model)."""
    for option in node.get("anyOf", ()):
        option = _deref(option)
        kind = {"array": "list", "object": "dict", "string": "str", "integer": "int", "number": "float",
                "boolean": "bool"}.get(option.get("type"), "")
        if tag.startswith(kind) and kind or tag == option.get("title") or (tag.startswith("literal") and "const" in option):
            return option
    return None


def _walk(loc) -> tuple:
    """(field path as users write it, the schema node there) for a pydantic error location."""
    node, path = _deref(_schema()), ""
    parts = list(loc)
    while parts:
        part = parts.pop(0)
        node = _deref(node)
        if "anyOf" in node and not (isinstance(part, str) and part in node.get("properties", {})):
            member = _member(node, str(part)) if isinstance(part, str) else None
            if member is not None and parts:  # a union member's tag: descend into that member
                node = member
                continue
            if member is not None:
                continue
            options = [_deref(o) for o in node["anyOf"] if _deref(o).get("type") != "null"]
            if len(options) == 1:  # Optional[X]: the location goes on inside X
                node = options[0]
                parts.insert(0, part)
                continue
        if "oneOf" in node and part in node.get("discriminator", {}).get("mapping", {}):
            node = {"$ref": node["discriminator"]["mapping"][part]}
            continue
        if node.get("type") == "array" and isinstance(part, int):
            node, path = node.get("items", {}), f"{path}[{part}]"
            continue
        path = f"{path}.{part}" if path else str(part)
        if parts and parts[0] == "[key]":  # the key itself is wrong (a method name that is not a plain name)
            pattern = next(iter(node.get("patternProperties", {})), None)
            return path, {"type": "string", "pattern": pattern} if pattern else {"type": "string"}
        props = node.get("properties", {})
        if part in props:
            node = props[part]
        elif "patternProperties" in node:
            node = next(iter(node["patternProperties"].values()))
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            node = {}
    node = _deref(node)
    options = [_deref(o) for o in node.get("anyOf", ()) if _deref(o).get("type") != "null"]
    return path, options[0] if len(options) == 1 else node  # Optional[X] -> X


def _plain(value) -> str:
    return f"{value:g}" if isinstance(value, float) and value.is_integer() is False else str(value)


def describe(node: dict) -> str:
    """What a schema node accepts, in words: 'an integer >= 2', 'one of kfold, holdout', ..."""
    node = _deref(node)
    if "anyOf" in node:
        options = [describe(o) for o in node["anyOf"] if _deref(o).get("type") != "null"]
        return " or ".join(options)
    if "oneOf" in node and "discriminator" in node:
        key = node["discriminator"]["propertyName"]
        return f"a mapping whose {key!r} is one of {', '.join(node['discriminator']['mapping'])}"
    if "const" in node:
        return repr(node["const"])
    if "enum" in node:
        return "one of " + ", ".join(map(str, node["enum"]))
    kind = node.get("type")
    if kind in ("integer", "number"):
        low = (">=", node["minimum"]) if "minimum" in node else (">", node.get("exclusiveMinimum"))
        high = node.get("exclusiveMaximum")
        what = "an integer" if kind == "integer" else "a number"
        if low[1] is not None and high is not None:
            return f"{what} in ({low[1]}, {high})"
        return f"{what} {low[0]} {low[1]}" if low[1] is not None else what
    if kind == "string":
        if node.get("pattern") == NAME_PATTERN:
            return NAME_RULE
        return "a non-empty string" if node.get("minLength") else "a string"
    if kind == "boolean":
        return "true or false"
    if kind == "array":
        items = describe(node.get("items", {}))
        return f"a {'non-empty ' if node.get('minItems') else ''}list" + (f", each {items}" if node.get("items") else "")
    if kind == "object" and "properties" in node:
        return f"a mapping with keys from {sorted(node['properties'])}"
    if kind == "object":
        return f"a {'non-empty ' if node.get('minProperties') else ''}mapping"
    return "a value"


def _show(value) -> str:
    text = repr(value)
    return (text[:60] + "...") if len(text) > 60 else f"{text} ({type(value).__name__})"


def _hint(word, choices, what="valid keys") -> str:
    choices = [str(c) for c in choices]
    match = difflib.get_close_matches(str(word), choices, n=1)
    return f"; did you mean {match[0]!r}?" if match else f"; {what}: {', '.join(sorted(choices))}"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path and key else path or key


def _pick(errors: list) -> dict:
    """The error to report: a misspelt key first (it explains a 'missing' one), else the first error,
    at its deepest location (inside a union, the member error that says the most)."""
    unknown = [e for e in errors if e["type"] in ("extra_forbidden", "invalid_key")]
    if unknown:
        return unknown[0]
    first_path = _walk(errors[0]["loc"])[0]
    same = [e for e in errors if _walk(e["loc"])[0].startswith(first_path)]
    return max(same, key=lambda e: len(_walk(e["loc"])[0]))


def _suite_error(file, exc: ValidationError) -> SuiteError:
    err = _pick(exc.errors(include_url=False))
    kind, loc, ctx = err["type"], err["loc"], err.get("ctx") or {}
    path, node = _walk(loc)
    if kind in ("extra_forbidden", "invalid_key"):
        keys = _walk(loc[:-1])[1].get("properties", {})
        return SuiteError(file, path, f"unknown field {loc[-1]!r}" + _hint(loc[-1], keys))
    if kind == "missing":
        return SuiteError(file, path, "required field is missing")
    if kind == "union_tag_not_found":
        return SuiteError(file, _join(path, "source"), f"required field is missing; one of {', '.join(SOURCES)}")
    if kind == "union_tag_invalid":
        return SuiteError(file, _join(path, "source"), f"expected one of {', '.join(SOURCES)}, got {ctx['tag']!r}"
                          + _hint(ctx["tag"], SOURCES, "sources"))
    if kind == "suite":
        return SuiteError(file, _join(path, ctx["where"]), ctx["message"])
    if "enum" in node and isinstance(err["input"], str):
        match = difflib.get_close_matches(err["input"], [str(v) for v in node["enum"]], n=1)
        return SuiteError(file, path, f"expected {describe(node)}, got {err['input']!r}"
                          + (f"; did you mean {match[0]!r}?" if match else ""))
    return SuiteError(file, path, f"expected {describe(node)}, got {_show(err['input'])}")


# --- loading ----------------------------------------------------------------------------------------------


def _tuples(values: dict) -> dict:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}


def _dataset_config(doc: _Dataset) -> DatasetConfig:
    split = SplitConfig(**_tuples(doc.split.model_dump(exclude_unset=True)))
    return DatasetConfig(**_tuples(doc.model_dump(exclude_unset=True, exclude={"split"})), split=split)


def _model_entry(label: str, doc: Model | None) -> ModelEntry:
    doc = doc or Model()
    return ModelEntry(label, doc.model or label, dict(doc.params or {}), doc.tuning, doc.n_trials, doc.tuning_seed,
                      dict(doc.search_space) if doc.search_space is not None else None)


def parse_suite(raw, file="<suite>") -> Suite:
    """Validate an already-parsed YAML document; raises SuiteError."""
    try:
        doc = SuiteFile.model_validate(raw)
    except ValidationError as exc:
        raise _suite_error(file, exc) from None
    name = doc.name if doc.name is not None else Path(str(file)).stem
    if not re.fullmatch(NAME_PATTERN, name):
        raise SuiteError(file, "name", f"the suite has no name and its file name {name!r} is not {NAME_RULE}; "
                         "set name: in the suite")
    base = Path(str(file)).parent
    plugins = tuple(str((base / p).resolve()) for p in doc.plugins or ())
    published = None
    if doc.published is not None:
        from tabbench.published import PublishedError, load_published

        published = (base / doc.published).resolve()
        try:
            load_published(published)
        except PublishedError as exc:
            raise SuiteError(file, "published", f"{exc} (the path is relative to the suite's folder)") from None
    budget = Budget(**doc.budget.model_dump(exclude_none=True)) if doc.budget else Budget()
    return Suite(name, Path(str(file)), tuple(_dataset_config(d) for d in doc.datasets),
                 tuple(_model_entry(label, m) for label, m in doc.models.items()), tuple(doc.seeds), budget,
                 plugins, doc.description or "", published)


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


# --- the field reference in suites/README.md --------------------------------------------------------------


def reference_markdown() -> str:
    """The field reference table of suites/README.md, generated from the declaration."""
    defs = _schema()["$defs"]
    common = set(_Dataset.model_fields)
    sections = [("suite (top level)", _schema(), None), ("`budget`", defs["BudgetSection"], None),
                ("`datasets[]`, every source", defs["SklearnDataset"], common)]
    sections += [(f"`datasets[]` with `source: {cls.model_fields['source'].annotation.__args__[0]}`",
                  defs[cls.__name__], set(cls.model_fields) - common)
                 for cls in (SklearnDataset, FileDataset, UrlDataset, OpenMLDataset)]
    sections += [("`datasets[].split`", defs["Split"], None), ("`models.<method>`", defs["Model"], None)]
    lines = []
    for title, node, only in sections:
        lines += [f"{title}:", "", "| field | expects | default | meaning |", "|---|---|---|---|"]
        required = set(node.get("required", ()))
        for key, prop in node["properties"].items():
            if only is not None and key not in only:
                continue
            what = describe(prop)
            default = "required" if key in required else f"`{json.dumps(prop.get('default'))}`"
            lines.append(f"| `{key}` | {what} | {default} | {prop.get('description') or _deref(prop).get('description', '')} |")
        lines.append("")
    return "\n".join(lines)


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
