"""A pydantic validation error, in the suite's own words: 'FILE: FIELD.PATH: what is wrong and what is
expected', the path as users write it and the expectation read from the JSON Schema node at that path, with
the closest valid key for a misspelt one."""

from __future__ import annotations

from functools import lru_cache

from pydantic import ValidationError

from tabbench.suite.declaration import SuiteFile, model_schema
from tabbench.suite.types import NAME_PATTERN, NAME_RULE, SuiteError, did_you_mean, join


@lru_cache(maxsize=None)
def schema_of(model: type[SuiteFile]) -> dict:
    """The JSON Schema of one suite format (``suite_model``'s: it depends on the registered data sources)."""
    return model_schema(model)


def deref(node: dict, schema: dict) -> dict:
    while isinstance(node, dict) and "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def dataset_entries(node: dict, schema: dict) -> dict:
    """The entries a ``datasets[]`` node allows, {source: its entry's schema}, in the declaration's order (the
    registered data sources, then catalogue)."""
    entries = (deref(option, schema) for option in node["oneOf"])
    return {entry["properties"]["source"]["const"]: entry for entry in entries}


def _member(node: dict, tag: str, schema: dict) -> dict | None:
    """The member of an anyOf that pydantic names ``tag`` in an error location (str, int, list[...], Model)."""
    for option in node.get("anyOf", ()):
        option = deref(option, schema)
        kind = {"array": "list", "object": "dict", "string": "str", "integer": "int", "number": "float",
                "boolean": "bool"}.get(option.get("type"), "")
        if tag.startswith(kind) and kind or tag == option.get("title") or (tag.startswith("literal") and "const" in option):
            return option
    return None


def _walk(loc, schema: dict) -> tuple:
    """(field path as users write it, the schema node there) for a pydantic error location."""
    node, path = deref(schema, schema), ""
    parts = list(loc)
    while parts:
        part = parts.pop(0)
        node = deref(node, schema)
        if "anyOf" in node and not (isinstance(part, str) and part in node.get("properties", {})):
            member = _member(node, str(part), schema) if isinstance(part, str) else None
            if member is not None and parts:  # a union member's tag: descend into that member
                node = member
                continue
            if member is not None:
                continue
            options = [deref(o, schema) for o in node["anyOf"] if deref(o, schema).get("type") != "null"]
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
    node = deref(node, schema)
    options = [deref(o, schema) for o in node.get("anyOf", ()) if deref(o, schema).get("type") != "null"]
    return path, options[0] if len(options) == 1 else node  # Optional[X] -> X


def describe(node: dict, schema: dict) -> str:
    """What a schema node accepts, in words: 'an integer >= 2', 'one of kfold, holdout', ..."""
    node = deref(node, schema)
    if "anyOf" in node:
        options = [describe(o, schema) for o in node["anyOf"] if deref(o, schema).get("type") != "null"]
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
        items = describe(node.get("items", {}), schema)
        return f"a {'non-empty ' if node.get('minItems') else ''}list" + (f", each {items}" if node.get("items") else "")
    if kind == "object" and "properties" in node:
        return f"a mapping with keys from {sorted(node['properties'])}"
    if kind == "object":
        return f"a {'non-empty ' if node.get('minProperties') else ''}mapping"
    return "a value"


def _show(value) -> str:
    text = repr(value)
    return (text[:60] + "...") if len(text) > 60 else f"{text} ({type(value).__name__})"


def _pick(errors: list, schema: dict) -> dict:
    """The error to report: a misspelt key first (it explains a 'missing' one), else the first error,
    at its deepest location (inside a union, the member error that says the most)."""
    unknown = [e for e in errors if e["type"] in ("extra_forbidden", "invalid_key")]
    if unknown:
        return unknown[0]
    first_path = _walk(errors[0]["loc"], schema)[0]
    same = [e for e in errors if _walk(e["loc"], schema)[0].startswith(first_path)]
    return max(same, key=lambda e: len(_walk(e["loc"], schema)[0]))


def _problems(errors: list, schema: dict) -> list:
    """One error per mistake, in the order ``_pick`` takes them: each pick takes with it the errors it explains
    (those at or under its field path; for a misspelt key, the 'missing' field beside it)."""
    out, remaining = [], list(errors)
    while remaining:
        err = _pick(remaining, schema)
        out.append(err)
        if err["type"] in ("extra_forbidden", "invalid_key"):
            parent = _walk(err["loc"][:-1], schema)[0]
            remaining = [e for e in remaining if e is not err
                         and not (e["type"] == "missing" and _walk(e["loc"][:-1], schema)[0] == parent)]
        else:
            path = _walk(err["loc"], schema)[0]
            first_path = _walk(remaining[0]["loc"], schema)[0]
            remaining = [e for e in remaining if e is not err and not _walk(e["loc"], schema)[0].startswith(first_path)
                         and _walk(e["loc"], schema)[0] != path]
    return out


def suite_error(file, exc: ValidationError, model: type[SuiteFile]) -> SuiteError:
    """The SuiteError for a ValidationError of ``model`` (the suite format that validated): its first mistake,
    with every further one in ``more``."""
    schema = schema_of(model)
    first, *rest = (_error(file, err, schema) for err in _problems(exc.errors(include_url=False), schema))
    return SuiteError(first.file, first.path, first.message, more=rest) if rest else first


def _error(file, err: dict, schema: dict) -> SuiteError:
    """The SuiteError for one pydantic error."""
    kind, loc, ctx = err["type"], err["loc"], err.get("ctx") or {}
    path, node = _walk(loc, schema)
    if kind in ("extra_forbidden", "invalid_key"):
        keys = _walk(loc[:-1], schema)[1].get("properties", {})
        return SuiteError(file, path, f"unknown field {loc[-1]!r}" + did_you_mean(loc[-1], keys))
    if kind == "missing":
        return SuiteError(file, path, "required field is missing")
    if kind in ("union_tag_not_found", "union_tag_invalid"):  # datasets[i].source: the data sources, or catalogue
        sources = list(dataset_entries(node, schema))
        if kind == "union_tag_not_found":
            return SuiteError(file, join(path, "source"), f"required field is missing; one of {', '.join(sources)}")
        return SuiteError(file, join(path, "source"), f"expected one of {', '.join(sources)}, got {ctx['tag']!r}"
                          + (did_you_mean(ctx["tag"], sources, what=None) or "; a plugin's source needs its plugin: "
                             "list the plugin file under plugins: or install its package"))
    if kind == "suite":
        return SuiteError(file, join(path, ctx["where"]), ctx["message"])
    if "enum" in node and isinstance(err["input"], str):
        return SuiteError(file, path, f"expected {describe(node, schema)}, got {err['input']!r}"
                          + did_you_mean(err["input"], node["enum"], what=None))
    return SuiteError(file, path, f"expected {describe(node, schema)}, got {_show(err['input'])}")
