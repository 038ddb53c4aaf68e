"""Loading a suite: YAML -> the declaration (tabbench/suite/declaration.py) -> the runtime dataclasses
(tabbench/suite/types.py), every mistake a SuiteError; ``check_models`` then checks the models and their
params against the plugin registry, still before any job runs."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import yaml
from pydantic import ValidationError

from tabbench.data.types import DatasetConfig, SplitConfig
from tabbench.suite.declaration import Model, SuiteFile, _Dataset
from tabbench.suite.errors import suite_error
from tabbench.suite.types import NAME_PATTERN, NAME_RULE, Budget, ModelEntry, Suite, SuiteError, join


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
        raise suite_error(file, exc) from None
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


def check_models(suite: Suite, registry: dict) -> None:
    """Every model exists, every param is one the model accepts, every search space is valid."""
    for entry in suite.models:
        path = f"models.{entry.label}"
        if entry.model not in registry:
            hint = difflib.get_close_matches(entry.model, list(registry), n=1)
            from tabbench.plugins import BROKEN

            broken = "".join(f"; plugin {n!r} failed to load ({why})" for n, why in BROKEN.items())
            raise SuiteError(suite.path, join(path, "model") if entry.model != entry.label else path,
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
