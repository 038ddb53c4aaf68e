"""The plugin manager: the core's own plugins (``CORE_PLUGINS``), the plugins of the ``tabbench`` entry points
(the built-in models and third parties') and plugin files, all called through the same hooks
(tabbench/hookspecs.py); ``collect`` builds a registry from one ``register_*`` hook. The registries of the core's
ground floor are here: ``load_models`` (models), ``load_sources`` (data sources) and ``load_commands`` (the
commands of ``tabbench``); each other kind's loader sits with the kind: ``tabbench.run.executors.load_executors``,
``tabbench.report.section.load_sections`` and ``load_readme_blocks``.

Which entry-point plugins load can be restricted with the environment variable ``TABBENCH_PLUGINS``
(comma-separated entry-point names; an empty value loads none); the core's own plugins always load, so no
selection drops the data sources, executors, report parts or commands every suite needs. Plugin files are
added with ``--plugin PATH`` or a suite's ``plugins:`` list.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pluggy

from tabbench import hookspecs
from tabbench.errors import TabbenchError
from tabbench.spec import ModelSpec

ENTRY_POINT_GROUP = "tabbench"
PLUGINS_ENV = "TABBENCH_PLUGINS"
#: The core's own plugins, registered first and always, through the same hooks as any other plugin (as llm's and
#: datasette's DEFAULT_PLUGINS): the data sources, the executors, the report's sections, README blocks and
#: after-run leaderboard, the commands. Each module imports what its hooks register only inside them, so that
#: loading the plugins stays light (``tabbench --help``).
CORE_PLUGINS = ("tabbench.data.sources", "tabbench.run.executors", "tabbench.report.plugin", "tabbench.cli")


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


#: The plugin managers this process built, by what each was built from (``get_plugin_manager``).
_MANAGERS: dict = {}


def get_plugin_manager(plugin_files=()) -> pluggy.PluginManager:
    """The core's plugins, the entry points ``TABBENCH_PLUGINS`` selects (default: all) and ``plugin_files``. Built
    once per process for the same selection, installed entry points and plugin files (each file's path, size and
    modification time): a command asks for its models, sources, executors and commands, and pluggy's loading of an
    entry point by name reads every installed distribution's metadata (0.2 s a registry in a virtual environment
    with torch, four times a command before)."""
    allowed = _allowed_entry_points()
    # an install made when the core's data sources were an entry point (data_sources) may still list it
    eps = {(ep.name, ep.value) for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)
           if ep.module not in CORE_PLUGINS}
    files = tuple((str(Path(p).resolve()), *_stat(p)) for p in plugin_files)
    key = (None if allowed is None else tuple(allowed), frozenset(eps), files)
    if key not in _MANAGERS:
        _MANAGERS[key] = _plugin_manager(allowed, sorted({name for name, _ in eps}), plugin_files)
    return _MANAGERS[key]


def _stat(path) -> tuple:
    """(size, modification time in ns) of a plugin file; () where it does not exist (load_plugin_file says so)."""
    try:
        st = Path(path).stat()
    except OSError:
        return ()
    return st.st_size, st.st_mtime_ns


def _plugin_manager(allowed: list[str] | None, installed: list[str], plugin_files) -> pluggy.PluginManager:
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    for module in CORE_PLUGINS:
        pm.register(importlib.import_module(module), name=module)
    for name in installed if allowed is None else allowed:
        if name not in installed:
            raise PluginError(f"{PLUGINS_ENV} names {name!r}, but no installed package provides a "
                              f"'{ENTRY_POINT_GROUP}' entry point of that name; installed: {', '.join(installed)} "
                              "(tabbench's own data sources, executors, report parts and commands always load)")
        try:
            pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP, name=name)
        except Exception as exc:  # one broken package must not hide every other model
            _broken(name, exc, "on import")
    for path in plugin_files:
        module = load_plugin_file(path)
        pm.register(module, name=str(Path(path).resolve()))
    return pm


#: The advice for a plugin written for the API before tabbench's Params classes (README: "Migrating a plugin").
MIGRATION = ("if it was written for an older tabbench: ModelSpec no longer takes default_params (declare the "
             "params once, as a Params class on the estimator) and fit takes context= (see 'Migrating a plugin from "
             "the old API' in tabbench's README)")

#: What this process has already said about broken plugins (a command builds the registry more than once).
_SAID: set = set()


def _entry_point(name: str) -> str:
    """'entry point NAME = MODULE of DIST==VERSION' for an installed entry point of the group."""
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP, name=name):
        dist = f" of {ep.dist.name}=={ep.dist.version}" if ep.dist else ""
        return f"entry point {ep.name} = {ep.value}{dist}"
    return f"entry point {name}"


def _broken(name: str, exc: BaseException, what: str) -> None:
    """An installed plugin that failed is left out: said once on stderr, with what to change and how to leave it
    out, and kept in BROKEN (shown by `tabbench models` and in an unknown model's message)."""
    others = sorted({ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)} - {name} - set(BROKEN))
    BROKEN[name] = f"{type(exc).__name__}: {exc}"
    message = (f"tabbench plugin {name!r} failed to load: {BROKEN[name]} ({what}; {_entry_point(name)}). It is "
               f"left out; every other model is usable. To fix it, update the package ({MIGRATION}). To leave it "
               f"out without this message: {PLUGINS_ENV}={','.join(others)}")
    if message not in _SAID:
        _SAID.add(message)
        print(message, file=sys.stderr)


def _plugin_sources(pm: pluggy.PluginManager) -> dict[int, str]:
    sources = {id(plugin): pm.get_name(plugin) for plugin in pm.get_plugins()}
    for plugin, dist in pm.list_plugin_distinfo():
        sources[id(plugin)] = f"{dist.project_name}=={dist.version}"
    return sources


def collect(hook: str, what: str, plugin_files, key, check) -> dict:
    """Call one ``register_*`` hook of every plugin with a ``register`` callback: {key(thing): (thing, source)}, in
    registration order (the core's first). ``check(thing, source)`` refuses what is not of the hook's kind (a
    ``PluginError`` naming the source); a key registered twice is an error naming both sources."""
    pm = get_plugin_manager(plugin_files)
    sources = _plugin_sources(pm)
    files = {str(Path(p).resolve()) for p in plugin_files}
    found: dict = {}
    for impl in getattr(pm.hook, hook).get_hookimpls():
        source = sources.get(id(impl.plugin), impl.plugin_name)
        mine: dict = {}  # this plugin's, added to found only when its hook ran through

        def register(thing, _source=source, _mine=mine):
            check(thing, _source)
            name = key(thing)
            if name in found or name in _mine:
                raise PluginError(f"{what} {name!r} is registered twice: by {(found.get(name) or _mine[name])[1]} "
                                  f"and by {_source}")
            _mine[name] = (thing, _source)

        try:
            impl.function(register=register)
        except PluginError:
            raise
        except Exception as exc:  # a plugin of another API: its own failure, never every command's
            if impl.plugin_name in files:  # a file the user or the suite named: the command cannot go on without it
                raise PluginError(f"plugin file {impl.plugin_name} failed in {hook}: {type(exc).__name__}: {exc}; "
                                  f"{MIGRATION}") from None
            _broken(impl.plugin_name, exc, f"in its {hook} hook")
            continue
        found.update(mine)
    return found


def load_models(plugin_files=()) -> dict[str, RegisteredModel]:
    """Every registered model by name, each with the distribution or file it came from."""
    def check(spec, source):
        if not isinstance(spec, ModelSpec):
            raise PluginError(f"{source}: register() takes a tabbench.spec.ModelSpec, got {type(spec).__name__}")

    found = collect("register_models", "model", plugin_files, lambda spec: spec.name, check)
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

    found = collect("register_sources", "data source", plugin_files, lambda cls: cls.name, check)
    return {name: RegisteredSource(cls, source) for name, (cls, source) in found.items()}


@dataclass(frozen=True)
class Command:
    """A command of ``tabbench``, registered by a ``register_commands`` hook: ``parser(subparsers)`` adds the
    subcommand ``name`` (``subparsers.add_parser(name, help=...)`` and its arguments), and ``run(args)`` does it
    with the parsed arguments and returns the exit status. A ``TabbenchError`` it raises is printed as a message."""

    name: str
    parser: Callable  # (argparse subparsers) -> None: adds the subcommand `name`
    run: Callable  # (argparse.Namespace) -> int


def load_commands() -> dict[str, Command]:
    """Every registered command by name, the core's first (in the order ``tabbench --help`` lists them). Plugin
    files are not asked: ``--plugin`` is read after the command line is parsed."""
    def check(command, source):
        if not isinstance(command, Command):
            raise PluginError(f"{source}: register() takes a tabbench.plugins.Command, got {type(command).__name__}")
        if not re.fullmatch(r"[a-z][a-z0-9-]*", command.name):
            raise PluginError(f"{source}: a command's name is a lower-case word (hyphens allowed), got {command.name!r}")

    return {name: command for name, (command, _) in collect("register_commands", "command", (), lambda c: c.name,
                                                            check).items()}
