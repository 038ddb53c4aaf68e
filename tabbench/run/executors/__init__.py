"""Executors by name: ``tabbench run --executor NAME`` (``RunOptions.executor``).

``EXECUTORS`` maps each name to its class as ``"module:Class"``, imported only when chosen: the local executor
never imports Ray's module, and listing the names (``tabbench run --help``) imports none. The interface every
executor implements is ``tabbench.run.executors.base.Executor``; docs/architecture.md says how to add one.
"""

from __future__ import annotations

import importlib

from tabbench.run.executors.base import Executor, ExecutorError

#: name -> "module:Class". ``ray`` is the default; ``--no-ray`` is ``local``, ``--address`` implies ``ray``.
EXECUTORS = {
    "ray": "tabbench.run.executors.ray:RayExecutor",
    "local": "tabbench.run.executors.local:LocalExecutor",
}
DEFAULT = "ray"


def executor_class(name: str) -> type[Executor]:
    """The class registered as ``name``; an unknown name is an error listing the known ones."""
    if name not in EXECUTORS:
        raise ExecutorError(f"--executor {name!r}: no such executor; known: {', '.join(sorted(EXECUTORS))}")
    module, _, cls = EXECUTORS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def make_executor(name: str = DEFAULT, address: str | None = None) -> Executor:
    """A new, not yet started executor of the mode ``name``; ``address``: the cluster to run on (``--address``)."""
    return executor_class(name)(address)
