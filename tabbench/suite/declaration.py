"""The suite format, declared once as pydantic models (``SuiteFile`` and what it holds): they validate a
suite, ``json_schema`` prints them as JSON Schema (checked in as suites/suite.schema.json, for editors) and
tabbench/suite/reference.py turns them into the field reference of suites/README.md. Defaults shown in the
schema are those of the runtime dataclasses (tabbench/suite/types.py, tabbench/data/types.py).

A dataset entry is the fields every dataset has (``_Dataset``) plus those of its source: each registered data
source (tabbench/data/source.py, registered through the ``register_sources`` hook) declares its own, and
``suite_model`` builds the format from the registry, so a plugin's source is validated, schema'd and documented
as the built-in ones are."""

from __future__ import annotations

import json
from dataclasses import MISSING, fields
from functools import lru_cache
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, StringConstraints, ValidationError, create_model,
                      model_validator)
from pydantic_core import PydanticCustomError

from tabbench.data.formats import FORMATS
from tabbench.data.source import Count, Text
from tabbench.data.source import refuse as _fail
from tabbench.data.splits import ORDERED_PROTOCOLS, PROTOCOLS, REGIMES
from tabbench.data.types import DatasetConfig, SplitConfig
from tabbench.plugins import PluginError, load_sources
from tabbench.spec import TASKS
from tabbench.suite.types import NAME_PATTERN, TUNING, ModelEntry, did_you_mean


def _default(cls, name: str):
    """A runtime dataclass's default, so the schema shows the defaults that are really used."""
    f = next(f for f in fields(cls) if f.name == name)
    return f.default if f.default is not MISSING else f.default_factory()


Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
ColumnRef = Union[str, int]
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
        "openml_task: run only these repeats (default: all); holdout: draw one split per repeat r listed, with "
        "seed + r (default: [0], the split of seed)"))
    val_fraction: Fraction = Field(_default(SplitConfig, "val_fraction"), description=(
        "share of each fold's training part held out for validation (the paper: 2/9 for 10-fold)"))
    test_fraction: Fraction = Field(_default(SplitConfig, "test_fraction"), description=(
        "holdout: share of all rows used as the test set"))
    test_rows: Optional[Count] = Field(None, description=(
        "fixed: the last N rows are the test set (default: the rows of the source's test file)"))
    stratify: bool = Field(_default(SplitConfig, "stratify"), description=(
        "keep class proportions in every part (classification)"))
    group_on: Optional[ColumnRef] = Field(None, description=(
        "kfold, holdout: a grouped split, no value of this column (a person, firm, school) in two parts; holdout's "
        "test_fraction is then a share of the groups; the column is no feature (a test row's group is never seen "
        "in training)"))
    time_on: Optional[ColumnRef] = Field(None, description=(
        "kfold, holdout: a temporal split by this column (numbers or dates): validation and test rows later than "
        "the training rows; kfold: an expanding window of k splits; the column stays a feature (drop it with drop)"))
    regime: Literal[REGIMES] = Field(_default(SplitConfig, "regime"), description=(
        "with group_on or time_on: matching (that split), or random: the same part sizes, rows drawn at random "
        "(the control a report pairs with the matching split)"))

    @model_validator(mode="after")
    def _folds_below_k(self):
        if self.protocol in ("kfold", "npt_code") and self.folds and max(self.folds) >= self.k:
            _fail("folds", f"fold indices must be below k={self.k}, got {self.folds}")
        return self

    @model_validator(mode="after")
    def _one_ordering_column(self):
        if self.group_on is not None and self.time_on is not None:
            _fail("time_on", "a split is grouped (group_on) or temporal (time_on), not both; keep one")
        ordered = self.group_on is not None or self.time_on is not None
        if ordered and self.protocol not in ORDERED_PROTOCOLS:
            _fail("protocol", f"group_on and time_on work with protocol kfold or holdout, not {self.protocol}")
        if self.regime != "matching" and not ordered:
            _fail("regime", f"regime: {self.regime} is the control of a grouped or temporal split; give group_on "
                  "or time_on too")
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

    _source: Any = PrivateAttr(None)

    def data_source(self):
        """The entry's data source (a tabbench.data.source.DataSource holding the source's fields)."""
        return self._source


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


def dataset_entry(source) -> type[_Dataset]:
    """A dataset entry of one data source (a DataSource subclass): the fields every dataset has, then
    ``source: NAME`` and the source's own fields, checked by the source's own validators too."""
    clash = set(source.model_fields) & (set(_Dataset.model_fields) | {"source", "entry"})
    if clash:
        raise TypeError(f"data source {source.name!r} ({source.__module__}.{source.__qualname__}) declares "
                        f"{sorted(clash)}, which every dataset entry has already; rename its fields")

    def build(entry):
        """The source itself, from the fields the entry gives it (kept for ``data_source()``)."""
        given = {key: getattr(entry, key) for key in source.model_fields if key in entry.model_fields_set}
        try:
            entry._source = source(**given)
        except ValidationError as exc:  # the source's own validators (its fields' types are checked already)
            error = exc.errors(include_url=False)[0]
            if error["type"] == "suite":
                raise PydanticCustomError("suite", "{message}", error["ctx"]) from None
            _fail(".".join(map(str, error["loc"])), error["msg"])
        if entry.split.protocol == "openml_task" and not entry._source.has_task_splits():
            _fail("split.protocol", "protocol 'openml_task' needs source: openml with a task_id")
        return entry

    fields = {key: (info.annotation, info) for key, info in source.model_fields.items()}
    title = source.__name__.removesuffix("Source")
    return create_model(f"{title}Dataset", __base__=_Dataset, __doc__=source.__doc__, __module__=source.__module__,
                        __validators__={"_the_source": model_validator(mode="after")(build)},
                        source=(Literal[source.name], Field(description="where the data comes from")), **fields)


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
    """Limits per job, and the points of elapsed time its record scores."""

    time_s: Optional[Positive] = Field(None, description="limit per job, in seconds of its clock (clock)")
    clock: Optional[Literal["cpu", "wall"]] = Field(None, description=(
        "what time_s and points_s count: cpu, the job's own CPU seconds (all its threads), which another process "
        "on the machine does not move (a job is still killed after 10 x time_s + 60 wall seconds); wall, elapsed "
        "seconds (default: cpu, wall for a job that asks for a GPU; tabbench/clock.py; every record names its clock)"))
    memory_mb: Optional[Positive] = Field(None, description="host memory limit per job, in MiB")
    points_s: Optional[Annotated[list[Positive], Field(min_length=1)]] = Field(None, description=(
        "budget points: seconds of each job's elapsed time (from its start, as time_s counts) at which the job "
        "records its validation-selected state's metrics, or its final ones where it finished earlier "
        "(record: budget_points; ascending, none past time_s; default: none recorded)"))

    @model_validator(mode="after")
    def _points_ascend_within_the_budget(self):
        points = self.points_s or []
        if any(b <= a for a, b in zip(points, points[1:])):
            _fail("points_s", f"budget points must ascend, each once, got {points}")
        if self.time_s is not None and points and points[-1] > self.time_s:
            _fail("points_s", f"budget point {points[-1]:g} s lies past the job's budget time_s {self.time_s:g} s; "
                  "drop it or raise time_s")
        return self


class PublishedEntry(_Section):
    """One published file beside our results, with how our datasets map onto the publication's."""

    file: Text = Field(description="the published file, relative to the suite's folder (e.g. published/tabarena-lite.yaml); "
                       "it lies in that folder or in the project's suites/published")
    datasets: Optional[dict[Name, Text]] = Field(None, description=(
        "a TabArena declaration: our dataset -> TabArena's dataset of the same table (an OpenML task of TabArena's "
        "maps by its task id without this)"))
    board: bool = Field(False, description=(
        "a TabArena declaration: the mapped datasets run TabArena's own tasks on their own folds, so the leaderboard "
        "ranks our methods on TabArena's board (each must be an openml_task split of TabArena's task id)"))


class SuiteFile(_Section):
    """A tabbench suite: datasets x models x seeds, run as one job per (method, dataset, fold, seed)."""

    model_config = ConfigDict(title="tabbench suite")

    name: Optional[Name] = Field(None, description=(
        "the folder under --results that holds this suite's results (default: the file name without .yaml)"))
    description: Optional[Text] = Field(None, description="free text")
    seeds: Annotated[list[Index], Field(min_length=1)] = Field([0], description=(
        "model seeds; every (method, dataset, fold) runs once per seed"))
    budget: Optional[BudgetSection] = Field(None, description="limits per job, and budget points")
    plugins: Optional[list[Text]] = Field(None, description="plugin files, relative to the suite's folder")
    published: Optional[Union[Text, Annotated[list[Union[Text, PublishedEntry]], Field(min_length=1)]]] = Field(
        None, description=("published results shown next to ours in the leaderboard, relative to the suite's folder: "
                           "a file, or a list of files and {file, datasets, board} entries (a publication's numbers "
                           "such as suites/published/npt-paper.yaml, at most one; TabArena declarations such as "
                           "suites/published/tabarena-lite.yaml); each lies in the suite's folder or in the project's "
                           "suites/published, and no other file is read"))
    catalogue: Optional[Text] = Field(None, description=(
        "a dataset catalogue file (relative to the suite's folder) whose entries datasets[] use with "
        "source: catalogue, e.g. datasets/uci.yaml"))
    # each entry is one of the registered sources' entries or a catalogue entry: ``suite_model`` declares them
    datasets: Annotated[list[_Dataset], Field(min_length=1)] = Field(description=(
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
                          + did_you_mean(label, self.models, "methods"))
            if d.source == "catalogue" and self.catalogue is None:
                _fail(f"datasets[{i}].source", "source: catalogue needs the suite's catalogue: file, e.g. "
                      "catalogue: datasets/uci.yaml")
        for label, model in self.models.items():
            for config_name, config in ((model and model.configs) or {}).items():
                for name in (config and config.datasets) or {}:
                    if name not in seen:
                        _fail(f"models.{label}.configs.{config_name}.datasets.{name}",
                              f"no dataset {name!r} in this suite" + did_you_mean(name, seen, "datasets"))
        return self


@lru_cache(maxsize=None)
def _suite_model(sources: tuple) -> type[SuiteFile]:
    entries = []
    for cls, origin in sources:
        try:
            entries.append(dataset_entry(cls))
        except TypeError as exc:
            raise PluginError(f"{origin}: {exc}") from None
    datasets = Annotated[Union[(*entries, CatalogueDataset)], Field(discriminator="source")]
    return create_model("SuiteFile", __base__=SuiteFile, __module__=__name__, __doc__=SuiteFile.__doc__, datasets=(
        Annotated[list[datasets], Field(min_length=1)], SuiteFile.model_fields["datasets"]))


def suite_model(plugin_files=()) -> type[SuiteFile]:
    """The suite format with every registered data source (those of the plugin files too): SuiteFile whose
    ``datasets[]`` entries are one of the sources' entries (``dataset_entry``) or a catalogue entry."""
    registered = load_sources(tuple(plugin_files))  # the core's always among them, whatever TABBENCH_PLUGINS says
    return _suite_model(tuple((r.cls, r.source) for r in registered.values()))


def json_schema(plugin_files=(), models: dict | None = None) -> dict:
    """The suite format as JSON Schema (what suites/suite.schema.json holds): built from the registered data
    sources (the plugin files' too) and, given ``models`` (a registry, tabbench.plugins.load_models), with each
    method's params checked against its model's."""
    schema = model_schema(suite_model(plugin_files))
    for name, entry in sorted((models or {}).items()):
        _add_model(schema, name, entry.spec.params)
    return schema


def model_schema(model: type[SuiteFile]) -> dict:
    """One suite format (``suite_model``'s) as JSON Schema."""
    schema = model.model_json_schema()
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


def schema_text(plugin_files=(), models: dict | None = None) -> str:
    return json.dumps(json_schema(plugin_files, models), indent=2) + "\n"
