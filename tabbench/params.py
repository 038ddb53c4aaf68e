"""A model's parameters, declared once as a typed class and checked before anything runs.

A model declares ``class Params(tabbench.params.Params)``: one field per parameter a suite may set, with its
type (choices as a ``Literal``, bounds as ``ge``/``gt``/``le``/``lt``), its default and a one-line description,
written with ``param(...)``::

    class Params(Params):
        n_neighbors: int = param(5, "neighbours that vote", ge=1)
        weights: Literal["uniform", "distance"] = param("uniform", "how the neighbours' votes are weighted")

The one class gives the model's defaults (``defaults``), the check of a suite's values that ``tabbench validate``
and every run make before any data is loaded (``problems``, ``check``), the model's part of
suites/suite.schema.json (``json_schema``) and what ``tabbench models NAME`` prints (``describe``).

Two flags a field may carry, read by ``ModelSpec.key_params``:

* ``run_only=True``: the param says how a job runs, not what it computes (threads, a checkpoint interval): a
  job's key holds its default, so a re-run with another value finds the jobs already done.
* ``added_as=VALUE``: the param was added after jobs of the model were recorded, and ``VALUE`` does what the
  model did before it existed: at that value a job's key leaves the param out, so recorded jobs are still found
  done and a killed run still resumes from its checkpoint.

Values are checked, never converted: pydantic would turn 1 into 1.0 or a list into a tuple, and a job's key is a
hash of the params as written, so the params a model receives are the declared defaults updated by the suite's
values exactly as given (``merged``). The check is strict (``"5"`` is not a number, ``5.0`` not a whole number),
as the models that receive the values are.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class Params(BaseModel):
    """The base of every model's parameter class: strict types, no name but the declared ones."""

    model_config = ConfigDict(extra="forbid", strict=True)


def param(default: Any, description: str, *, run_only: bool = False, added_as: Any = ..., **constraints) -> Any:
    """A parameter's field: its default, a one-line description, pydantic constraints (``ge=1``, ``lt=1``) and
    the two flags of the module docstring (``added_as``: left out, the param was there from the start)."""
    extra = {**({"run_only": True} if run_only else {}), **({} if added_as is ... else {"added_as": added_as})}
    return Field(default, description=description, json_schema_extra=extra or None, **constraints)


def _flags(cls: type[Params], name: str) -> dict:
    return cls.model_fields[name].json_schema_extra or {}


def defaults(cls: type[Params]) -> dict:
    """Every parameter with its declared default (a copy: a list default is never shared)."""
    return {name: copy.deepcopy(info.default) for name, info in cls.model_fields.items()}


def merged(cls: type[Params], *layers: Mapping) -> dict:
    """The declared defaults updated by each of ``layers`` in turn, values as given: the one place where a
    model's defaults meet the values set for it."""
    out = defaults(cls)
    for layer in layers:
        out.update(layer)
    return out


def run_only(cls: type[Params]) -> frozenset:
    return frozenset(name for name in cls.model_fields if _flags(cls, name).get("run_only"))


def added(cls: type[Params]) -> dict:
    """name -> the value that does what the model did before the param existed."""
    return {name: _flags(cls, name)["added_as"] for name in cls.model_fields if "added_as" in _flags(cls, name)}


# --- checking values -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One value a model does not accept: ``name`` is the parameter (None for a rule over several),
    ``message`` says what was given and what is allowed."""

    name: str | None
    message: str


def problems(cls: type[Params], values: Mapping) -> list[Problem]:
    """What is wrong with ``values`` (some or all of the params; the rest at their defaults): an unknown name, a
    value outside its type, bounds or choices, or a rule over several params (a model validator)."""
    try:
        cls.model_validate(merged(cls, values))
    except ValidationError as exc:
        out = []
        for err in exc.errors(include_url=False):
            name = err["loc"][0] if err["loc"] else None
            if err["type"] == "extra_forbidden":
                out.append(Problem(name, f"unknown parameter {name!r}" + _suggest(name, cls.model_fields)
                                   + f"; accepted: {', '.join(cls.model_fields) or '(none)'}"))
            elif name is None:  # a model validator: its own message
                out.append(Problem(None, str((err.get("ctx") or {}).get("error", err["msg"]))))
            elif not any(p.name == name for p in out):  # a union reports each member: say it once
                value = values.get(name, cls.model_fields[name].default)
                choices = _choices(json_schema(cls)["properties"][name])
                out.append(Problem(name, f"{name} must be {allowed(cls, name)}, got {yaml_text(value)}"
                                   + (_suggest(value, choices) if isinstance(value, str) and choices else "")))
        return out
    return []


def check(cls: type[Params], values: Mapping, who: str) -> None:
    """Raise for the first problem of ``values``: TypeError for an unknown name (as a Python call does),
    ValueError for a value; the message starts with ``who`` (the model)."""
    unknown = sorted(set(values) - set(cls.model_fields))
    if unknown:
        raise TypeError(f"{who} got unknown params {unknown}; it accepts {sorted(cls.model_fields)}")
    found = problems(cls, values)
    if found:
        raise ValueError(f"{who}: {found[0].message}")


def _suggest(value, choices) -> str:
    """'; did you mean X?' where a choice is close to ``value``, else nothing (the message lists what is allowed)."""
    from tabbench.errors import did_you_mean

    return did_you_mean(value, [c for c in choices if isinstance(c, str)], what=None)


# --- words and schema ----------------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def json_schema(cls: type[Params]) -> dict:
    """The params as JSON Schema: one property per param with its type, default, description and flags."""
    schema = cls.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema


def yaml_text(value) -> str:
    """A value as a suite writes it: 'auto', true, null, 0.5, [1, 28, 28]."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(yaml_text, value)) + "]"
    return repr(value)


def _choices(node: dict) -> list:
    """The values a node lists (an enum, a const, or those among a union's members)."""
    if "enum" in node:
        return list(node["enum"])
    if "const" in node:
        return [node["const"]]
    return [c for member in node.get("anyOf", ()) for c in _choices(member)]


def _or(words: list) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _bounds(node: dict) -> str:
    low = ("[", node["minimum"]) if "minimum" in node else ("(", node.get("exclusiveMinimum"))
    high = ("]", node["maximum"]) if "maximum" in node else (")", node.get("exclusiveMaximum"))
    if low[1] is not None and high[1] is not None:
        return f" in {low[0]}{low[1]:g}, {high[1]:g}{high[0]}"
    if low[1] is not None:
        return f" {'>=' if low[0] == '[' else '>'} {low[1]:g}"
    if high[1] is not None:
        return f" {'<=' if high[0] == ']' else '<'} {high[1]:g}"
    return ""


def _words(node: dict) -> list:
    """What a node accepts, one phrase per alternative: 'a whole number >= 1', "'auto'", 'null'."""
    if "anyOf" in node:
        return [w for member in node["anyOf"] for w in _words(member)]
    if "enum" in node or "const" in node:
        return [yaml_text(c) for c in _choices(node)]
    kind = node.get("type")
    if kind == "integer":
        return ["a whole number" + _bounds(node)]
    if kind == "number":
        return ["a number" + _bounds(node)]
    if kind == "boolean":
        return ["true", "false"]
    if kind == "null":
        return ["null"]
    if kind == "string":
        return ["a string"]
    if kind == "array":
        exact = node.get("minItems") is not None and node.get("minItems") == node.get("maxItems")
        size = f" of {node['minItems']}" if exact else ""
        items = f" (each {_or(_words(node['items']))})" if node.get("items") else ""
        return [f"a list{size}{items}"]
    return ["a value"]


def allowed(cls: type[Params], name: str) -> str:
    """What param ``name`` accepts, in words: "'value' or 'norm'", 'a number in [0, 1]', ..."""
    return _or(_words(json_schema(cls)["properties"][name]))


def describe(cls: type[Params]) -> list[tuple[str, str, str, str, str]]:
    """(name, allowed, default, run-only mark, description) per param, as ``tabbench models NAME`` prints them."""
    return [(name, allowed(cls, name), yaml_text(info.default), "run-only" if name in run_only(cls) else "",
             info.description or "") for name, info in cls.model_fields.items()]
