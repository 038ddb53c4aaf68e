"""Loading a suite: YAML -> the declaration (tabbench/suite/declaration.py) -> the runtime dataclasses
(tabbench/suite/types.py), every mistake a SuiteError; ``check_models`` then checks the models and their
params against the plugin registry, still before any job runs."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import ValidationError

from tabbench.data.types import DatasetConfig, SplitConfig
from tabbench.suite.declaration import Model, SuiteFile, _Dataset, suite_model
from tabbench.suite.errors import suite_error
from tabbench.suite.types import (NAME_PATTERN, NAME_RULE, Budget, ModelEntry, NamedConfig, PublishedUse, Suite,
                                  SuiteError, did_you_mean, join)


def _tuples(values: dict) -> dict:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}


def _dataset_config(doc: _Dataset) -> DatasetConfig:
    split = SplitConfig(**_tuples(doc.split.model_dump(exclude_unset=True)))
    given = doc.model_dump(exclude_unset=True, include=set(_Dataset.model_fields) - {"split"})
    return DatasetConfig(**_tuples(given), source=doc.data_source(), split=split)


def _model_entry(label: str, doc: Model | None) -> ModelEntry:
    doc = doc or Model()
    configs = tuple(NamedConfig(name, dict((c and c.params) or {}), dict((c and c.datasets) or {}))
                    for name, c in (doc.configs or {}).items())
    return ModelEntry(label, doc.model or label, dict(doc.params or {}), doc.tuning, doc.n_trials, doc.tuning_seed,
                      dict(doc.search_space) if doc.search_space is not None else None, configs)


def _read_yaml(path: Path, what: str):
    try:
        text = path.read_text()
    except OSError as exc:
        raise SuiteError(path, "", f"cannot read the {what}: {exc.strerror or exc}") from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise SuiteError(path, "", f"not valid YAML: {where}{getattr(exc, 'problem', None) or exc}") from exc


#: The keys of a catalogue file; its ``datasets`` map a name to an entry written as in a suite, without
#: ``name`` (the key is the name) and ``model_params`` (they name a suite's methods: the suite gives them).
CATALOGUE_KEYS = ("description", "datasets")


def load_catalogue(path, model: type[SuiteFile]) -> dict:
    """A dataset catalogue: name -> the entry's mapping, each entry validated as a dataset entry of ``model``
    (the suite format with the suite's data sources)."""
    path = Path(path)
    raw = _read_yaml(path, "catalogue file")
    if not isinstance(raw, dict) or not isinstance(raw.get("datasets"), dict) or not raw["datasets"]:
        raise SuiteError(path, "datasets", "a catalogue is a mapping with 'datasets': {name: dataset entry, ...}")
    for key in raw:
        if key not in CATALOGUE_KEYS:
            raise SuiteError(path, str(key), f"unknown field {key!r}" + did_you_mean(key, CATALOGUE_KEYS))
    entries = {}
    for name, entry in raw["datasets"].items():
        where = f"datasets.{name}"
        if not isinstance(entry, dict):
            raise SuiteError(path, where, f"expected a dataset entry (a mapping), got {entry!r}")
        for key, why in (("name", "the key is the name"),
                         ("model_params", "they name a suite's methods: give them in the suite, beside "
                                          "source: catalogue")):
            if key in entry:
                raise SuiteError(path, f"{where}.{key}", f"a catalogue entry has no {key!r} ({why})")
        if entry.get("source") == "catalogue":
            raise SuiteError(path, f"{where}.source", "a catalogue entry names where its data comes from, not "
                             "another catalogue entry")
        try:
            model.model_validate({"datasets": [{**entry, "name": name}], "models": {"m": None}})
        except ValidationError as exc:
            err = suite_error(path, exc, model)
            raise SuiteError(path, err.path.replace("datasets[0]", where, 1), err.message) from None
        entries[name] = entry
    return entries


def _resolve_catalogue(raw: dict, doc: SuiteFile, file) -> dict:
    """The document with each ``source: catalogue`` entry replaced by its catalogue entry, updated with the
    fields the suite gives (all but source and entry)."""
    path = Path(str(file)).parent / doc.catalogue
    catalogue = load_catalogue(path, type(doc))
    datasets = []
    for i, (entry, given) in enumerate(zip(doc.datasets, raw["datasets"])):
        if entry.source != "catalogue":
            datasets.append(given)
            continue
        key = entry.entry or entry.name
        if key not in catalogue:
            field = "entry" if entry.entry else "name"
            raise SuiteError(file, f"datasets[{i}].{field}", f"no dataset {key!r} in the catalogue {doc.catalogue}"
                             + did_you_mean(key, catalogue, "its datasets"))
        datasets.append({**catalogue[key], **{k: v for k, v in given.items() if k not in ("source", "entry")}})
    return {**raw, "datasets": datasets}


def _own_plugin_files(raw, file) -> tuple:
    """The plugin files a suite lists (``plugins:``), read before the suite is validated since their data sources
    decide which dataset entries are valid; a list that is not one of file names is left to the validation."""
    listed = raw.get("plugins") if isinstance(raw, dict) else None
    if not isinstance(listed, list) or not all(isinstance(p, str) and p for p in listed):
        return ()
    base = Path(str(file)).parent
    for i, name in enumerate(listed):
        if not (base / name).is_file():
            raise SuiteError(file, f"plugins[{i}]", f"no plugin file {str(base / name)!r}; the path is relative "
                             "to the suite's folder")
    return tuple(str((base / name).resolve()) for name in listed)


def parse_suite(raw, file="<suite>", plugin_files=()) -> Suite:
    """Validate an already-parsed YAML document (its catalogue entries resolved); raises SuiteError. The data
    sources a dataset entry may name are the registered ones, those of ``plugin_files`` (``--plugin``) and of
    the suite's own ``plugins:`` included."""
    model = suite_model(tuple(plugin_files) + _own_plugin_files(raw, file))
    try:
        doc = model.model_validate(raw)
        if any(d.source == "catalogue" for d in doc.datasets):
            doc = model.model_validate(_resolve_catalogue(raw, doc, file))
    except ValidationError as exc:
        raise suite_error(file, exc, model) from None
    name = doc.name if doc.name is not None else Path(str(file)).stem
    if not re.fullmatch(NAME_PATTERN, name):
        raise SuiteError(file, "name", f"the suite has no name and its file name {name!r} is not {NAME_RULE}; "
                         "set name: in the suite")
    base = Path(str(file)).parent
    plugins = tuple(str((base / p).resolve()) for p in doc.plugins or ())
    datasets = tuple(_dataset_config(d) for d in doc.datasets)
    _refuse_twins(datasets, file)
    published = _published(doc.published, datasets, base, file)
    budget = Budget()
    if doc.budget:
        given = doc.budget.model_dump(exclude_none=True)
        budget = Budget(**{**given, "points_s": tuple(float(p) for p in given.get("points_s", ()))})
    return Suite(name, Path(str(file)), datasets, tuple(_model_entry(label, m) for label, m in doc.models.items()),
                 tuple(doc.seeds), budget, plugins, doc.description or "", published)


#: Why two datasets on the same table and split are refused (here, and in tabbench.run.runner.refuse_twin_jobs for
#: twins that only the data shows): a job's key hashes the data and split fingerprints, not the dataset's name, so
#: both would be one set of jobs; keying by name would change every committed key, and the twin would only repeat
#: the same fits and count the table twice in every rank.
TWINS = ("their jobs would be the same jobs (a job's key is the data and its split, not the dataset's name): one "
         "dataset's records would stand for the other's, which would vanish from the leaderboard. Keep one of them, "
         "or make them differ (another split seed, other rows or columns)")


def _refuse_twins(datasets: tuple, file) -> None:
    """A SuiteError for two dataset entries that declare the same data and split, differing only in their name,
    ``subset`` label or per-method params."""
    from dataclasses import replace

    seen = []  # compared, not hashed: a plugin source's fields may be lists
    for i, cfg in enumerate(datasets):
        same = replace(cfg, name="", subset=None, model_params=None)
        for j, twin in enumerate(seen):
            if twin == same:
                raise SuiteError(file, f"datasets[{i}]", f"dataset {cfg.name!r} declares the same data and split "
                                 f"as datasets[{j}] {datasets[j].name!r}: {TWINS}")
        seen.append(same)


def _published(given, datasets: tuple, base: Path, file) -> tuple:
    """The suite's ``published:`` entries as PublishedUse, each file read and checked now: at most one
    publication's own numbers (tabbench/published.py), any TabArena declarations (tabbench/tabarena.py) with our
    datasets mapped onto TabArena's: those the suite maps, and every OpenML task whose id is one of TabArena's."""
    from tabbench.published import PUBLISHED_DIR, PublishedError, load_published, outside
    from tabbench.tabarena import is_declaration, parse_declaration

    entries = [] if given is None else [given] if isinstance(given, str) else list(given)
    out, papers = [], []
    for i, entry in enumerate(entries):
        where = "published" if isinstance(given, str) else f"published[{i}]"
        entry = {"file": entry, "datasets": None, "board": False} if isinstance(entry, str) else entry.model_dump()
        path = (base / entry["file"]).resolve()
        if outside(path, base):  # refused before it is read: a suite from elsewhere may name any file
            raise SuiteError(file, where, f"{entry['file']} lies outside the suite's folder and the project's "
                             f"published folder ({PUBLISHED_DIR}); a published file lies in one of them: copy it "
                             "beside the suite and name it relative to the suite's folder")
        try:
            raw = yaml.safe_load(path.read_text()) if path.is_file() else None
        except (yaml.YAMLError, UnicodeDecodeError, OSError):
            raw = None  # load_published says where
        try:
            if not is_declaration(raw):
                load_published(path)
                if entry["datasets"] is not None or entry["board"]:
                    raise SuiteError(file, where, f"{entry['file']} is a publication's own numbers, keyed by our "
                                     "dataset names: datasets: and board: belong to a TabArena declaration")
                papers.append(entry["file"])
                out.append(PublishedUse(path))
                continue
            decl = parse_declaration(raw, path)
        except PublishedError as exc:
            raise SuiteError(file, where, f"{exc} (the path is relative to the suite's folder)") from None
        out.append(PublishedUse(path, True, _tabarena_datasets(decl, entry, datasets, file, where), entry["board"]))
    if len(papers) > 1:
        raise SuiteError(file, "published", f"{len(papers)} publications' own numbers ({', '.join(papers)}); a "
                         "leaderboard sets one beside ours: keep one")
    return tuple(out)


def _tabarena_datasets(decl, entry: dict, datasets: tuple, file, where: str) -> tuple:
    """(our dataset, TabArena's, our test share) for every dataset of ours that is one of TabArena's."""
    from tabbench.tabarena import test_share

    ours = {d.name: d for d in datasets}
    by_task = decl.by_task()
    mapped = {}
    for d in datasets:  # an OpenML task of TabArena's is that dataset, by its task id
        task_id = getattr(d.source, "task_id", None)
        if task_id in by_task:
            mapped[d.name] = by_task[task_id]
    for name, theirs in (entry["datasets"] or {}).items():
        if name not in ours:
            raise SuiteError(file, f"{where}.datasets.{name}", f"no dataset {name!r} in this suite"
                             + did_you_mean(name, ours, "its datasets"))
        if theirs not in decl.datasets:
            raise SuiteError(file, f"{where}.datasets.{name}", f"{theirs!r} is not one of {decl.path.name}'s "
                             "datasets" + did_you_mean(theirs, decl.datasets, "TabArena's datasets"))
        mapped[name] = theirs
    if entry["board"]:
        for name, theirs in mapped.items():
            split, task_id = ours[name].split, getattr(ours[name].source, "task_id", None)
            if split.protocol != "openml_task" or task_id != decl.datasets[theirs].task_id:
                raise SuiteError(file, f"{where}.board", f"dataset {name!r} does not run TabArena's task "
                                 f"{decl.datasets[theirs].task_id} on its own folds (source: openml, that task_id, "
                                 "split protocol openml_task), so its records cannot join TabArena's board")
    return tuple((name, theirs, test_share(ours[name].split, decl, getattr(ours[name].source, "task_id", None)))
                 for name, theirs in mapped.items())


def load_suite(path, plugin_files=()) -> Suite:
    path = Path(path)
    return parse_suite(_read_yaml(path, "suite file"), path, plugin_files)


def check_models(suite: Suite, registry: dict) -> None:
    """Every model exists, every param is one the model accepts with a value it accepts (its ``Params``), every
    search space is valid."""
    for entry in suite.models:
        path = f"models.{entry.label}"
        if entry.model not in registry:
            from tabbench.plugins import BROKEN

            broken = "".join(f"; plugin {n!r} failed to load ({why})" for n, why in BROKEN.items())
            raise SuiteError(suite.path, join(path, "model") if entry.model != entry.label else path,
                             f"unknown model {entry.model!r}" + did_you_mean(entry.model, registry, what=None)
                             + f"; registered models: {', '.join(sorted(registry)) or '(none)'}{broken}")
        spec = registry[entry.model].spec
        accepted = set(spec.default_params)
        named = [(f"{path}.params", entry.params), (f"{path}.search_space", entry.search_space or {})]
        named += [(f"datasets[{i}].model_params.{entry.label}", (d.model_params or {}).get(entry.label, {}))
                  for i, d in enumerate(suite.datasets)]
        for config in entry.configs:
            named.append((f"{path}.configs.{config.name}.params", config.params))
            named += [(f"{path}.configs.{config.name}.datasets.{name}", params)
                      for name, params in config.datasets.items()]
        for where, names in named:
            for name in names:
                if name not in accepted:
                    raise SuiteError(suite.path, f"{where}.{name}",
                                     f"model {entry.model!r} does not accept a parameter {name!r}"
                                     + did_you_mean(name, accepted, what=None)
                                     + f"; accepted: {', '.join(sorted(accepted)) or '(none)'}")
        _check_values(suite, entry, spec, named)
        missing = spec.missing_requirements()
        if missing:
            raise SuiteError(suite.path, path, f"model {entry.model!r} needs {', '.join(missing)}, which is not "
                             f"installed; {spec.install_hint or 'install it'}")
        if entry.tuning in ("grid", "random") and not (entry.search_space or spec.search_space):
            raise SuiteError(suite.path, f"{path}.tuning", f"model {entry.model!r} declares no search space; "
                             "give one under search_space or set tuning: none")


def _check_values(suite: Suite, entry: ModelEntry, spec, named: list) -> None:
    """Each value the suite gives a method, where it is written (``named``: (field path, params) pairs; a search
    space's values one by one), then each trial's resolved params on each dataset, for the rules a model states
    over several params (NPT's n_patches and image_shape): a SuiteError naming the place, the model, the
    parameter, the value and what is allowed."""
    from tabbench.suite.trials import method_params
    from tabbench.params import problems

    for where, values in named:
        space = where.endswith(".search_space")
        for name, given in values.items():
            for i, value in enumerate(given) if space else [(None, given)]:
                # one value over the defaults: a rule over several params waits for the resolved trials below
                found = [p for p in problems(spec.params, {name: value}) if p.name is not None]
                if found:
                    raise SuiteError(suite.path, f"{where}.{name}" + ("" if i is None else f"[{i}]"),
                                     f"model {entry.model!r}: {found[0].message}")
    for d in suite.datasets:
        for _, config, params in method_params(entry, spec, d):
            found = problems(spec.params, params)
            if found:
                raise SuiteError(suite.path, f"models.{entry.label}", f"model {entry.model!r} on dataset {d.name!r}"
                                 + (f", configuration {config!r}" if config else "") + f": {found[0].message}")
