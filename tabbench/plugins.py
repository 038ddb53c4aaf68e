"""The plugin manager: loads built-in and third-party plugins through the ``tabbench`` entry points, and the
registries built from their hooks: ``load_models`` (models) and ``load_sources`` (data sources).

Which entry-point plugins load can be restricted with the environment variable ``TABBENCH_PLUGINS``
(comma-separated entry-point names; an empty value loads none). Plugin files are added with
``--plugin PATH`` or a suite's ``plugins:`` list.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import warnings
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pluggy

from tabbench import hookspecs
from tabbench.errors import TabbenchError
from tabbench.spec import ModelSpec

ENTRY_POINT_GROUP = "tabbench"
PLUGINS_ENV = "TABBENCH_PLUGINS"


class PluginError(TabbenchError):
    """A plugin could not be loaded or registered something invalid."""


#: Entry points that failed to import in this process, with the reason (shown by `tabbench models`).
BROKEN: dict[str, str] = {}


@dataclass(frozen=True)
class RegisteredModel:
    spec: ModelSpec
    source: str  # "distribution==version" for entry points, the file path for plugin files


def _allowed_entry_points() -> list[str] | None:
    raw = os.environ.get(PLUGINS_ENV)
    if raw is None:
        return None
    return [name.strip() for name in raw.split(",") if name.strip()]


def load_plugin_file(path: str | Path):
    """Import a plugin file as a module (kept in sys.modules so its classes pickle by value)."""
    path = Path(path).resolve()
    if not path.is_file():
        raise PluginError(f"plugin file {path} does not exist")
    name = "tabbench_plugin_file_" + path.stem.replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise PluginError(f"plugin file {path} failed to import: {type(exc).__name__}: {exc}") from exc
    return module


def get_plugin_manager(plugin_files=()) -> pluggy.PluginManager:
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    allowed = _allowed_entry_points()
    installed = sorted({ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)})
    for name in installed if allowed is None else allowed:
        if name not in installed:
            raise PluginError(f"{PLUGINS_ENV} names {name!r}, but no installed package provides a "
                              f"'{ENTRY_POINT_GROUP}' entry point of that name; installed: {', '.join(installed)}")
        try:
            pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP, name=name)
        except Exception as exc:  # one broken package must not hide every other model
            BROKEN[name] = f"{type(exc).__name__}: {exc}"
            warnings.warn(f"tabbench plugin {name!r} failed to load and is skipped: {BROKEN[name]}", stacklevel=2)
    for path in plugin_files:
        module = load_plugin_file(path)
        pm.register(module, name=str(Path(path).resolve()))
    return pm


def _plugin_sources(pm: pluggy.PluginManager) -> dict[int, str]:
    sources = {id(plugin): pm.get_name(plugin) for plugin in pm.get_plugins()}
    for plugin, dist in pm.list_plugin_distinfo():
        sources[id(plugin)] = f"{dist.project_name}=={dist.version}"
    return sources


def _collect(hook: str, what: str, plugin_files, key, check) -> dict:
    """Call one ``register_*`` hook of every plugin with a ``register`` callback: {key(thing): (thing, source)}.
    ``check(thing, source)`` refuses what is not of the hook's kind; a key registered twice is an error."""
    pm = get_plugin_manager(plugin_files)
    sources = _plugin_sources(pm)
    found: dict = {}
    for impl in getattr(pm.hook, hook).get_hookimpls():
        source = sources.get(id(impl.plugin), impl.plugin_name)

        def register(thing, _source=source):
            check(thing, _source)
            name = key(thing)
            if name in found:
                raise PluginError(f"{what} {name!r} is registered twice: by {found[name][1]} and by {_source}")
            found[name] = (thing, _source)

        impl.function(register=register)
    return found


def load_models(plugin_files=()) -> dict[str, RegisteredModel]:
    """Every registered model by name, each with the distribution or file it came from."""
    def check(spec, source):
        if not isinstance(spec, ModelSpec):
            raise PluginError(f"{source}: register() takes a tabbench.spec.ModelSpec, got {type(spec).__name__}")

    found = _collect("register_models", "model", plugin_files, lambda spec: spec.name, check)
    return {name: RegisteredModel(spec, source) for name, (spec, source) in found.items()}


@dataclass(frozen=True)
class RegisteredSource:
    cls: type  # a subclass of tabbench.data.source.DataSource
    source: str  # "distribution==version" for entry points, the file path for plugin files


def load_sources(plugin_files=()) -> dict[str, RegisteredSource]:
    """Every registered data source by the name a suite's ``source:`` gives, in registration order (the built-in
    ones first), each with the distribution or file it came from. Imports pydantic (a source is a model)."""
    from tabbench.data.source import DataSource

    def check(cls, source):
        if not (isinstance(cls, type) and issubclass(cls, DataSource)):
            raise PluginError(f"{source}: register() takes a subclass of tabbench.data.source.DataSource, got {cls!r}")
        name = getattr(cls, "name", None)
        if not (isinstance(name, str) and re.fullmatch(r"[a-z][a-z0-9_]*", name)) or name == "catalogue":
            raise PluginError(f"{source}: data source {cls.__name__} needs a name (its class attribute 'name'): "
                              f"a lower-case word other than 'catalogue', got {name!r}")

    found = _collect("register_sources", "data source", plugin_files, lambda cls: cls.name, check)
    return {name: RegisteredSource(cls, source) for name, (cls, source) in found.items()}
