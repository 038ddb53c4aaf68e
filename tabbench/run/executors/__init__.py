"""Executors by name: ``tabbench run --executor NAME`` (``RunOptions.executor``).

Every execution mode is registered through the ``register_executors`` hook, the built-in ones below exactly as
a plugin's (tabbench/plugins.py, ``CORE_PLUGINS``); ``load_executors`` gathers them by name. Registering a class
imports its module, never the library it runs on: Ray is imported when the ray executor starts, so listing the
names (``tabbench run --help``) imports no Ray. The interface every executor implements is
``tabbench.run.executors.base.Executor``; docs/architecture.md says how to add one.
"""

from __future__ import annotations

import re

from tabbench.hookspecs import hookimpl
from tabbench.run.executors.base import Executor, ExecutorError

#: The executor a run uses unless told otherwise; ``--no-ray`` is ``local``, ``--address`` implies ``ray``.
DEFAULT = "ray"


@hookimpl
def register_executors(register):
    from tabbench.run.executors.local import LocalExecutor
    from tabbench.run.executors.ray import RayExecutor

    register(RayExecutor)
    register(LocalExecutor)


def load_executors(plugin_files=()) -> dict[str, type[Executor]]:
    """Every registered executor class by its name (the core's, the entry points' and ``plugin_files``')."""
    from tabbench.plugins import PluginError, collect

    def check(cls, source):
        if not (isinstance(cls, type) and issubclass(cls, Executor)):
            raise PluginError(f"{source}: register() takes a subclass of tabbench.run.executors.base.Executor, "
                              f"got {cls!r}")
        if not re.fullmatch(r"[a-z][a-z0-9_-]*", getattr(cls, "name", None) or ""):
            raise PluginError(f"{source}: executor {cls.__name__} needs a name (its class attribute 'name', what "
                              f"--executor takes): a lower-case word, got {getattr(cls, 'name', None)!r}")

    return {name: cls for name, (cls, _) in collect("register_executors", "executor", plugin_files,
                                                    lambda cls: cls.name, check).items()}


def executor_class(name: str, plugin_files=()) -> type[Executor]:
    """The class registered as ``name``; an unknown name is an error listing the known ones."""
    known = load_executors(plugin_files)
    if name not in known:
        raise ExecutorError(f"--executor {name!r}: no such executor; known: {', '.join(sorted(known))}")
    return known[name]


def make_executor(name: str = DEFAULT, address: str | None = None, plugin_files=()) -> Executor:
    """A new, not yet started executor of the mode ``name`` (``plugin_files``: those that may register it);
    ``address``: the cluster to run on (``--address``)."""
    return executor_class(name, plugin_files)(address)
