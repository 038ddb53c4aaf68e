"""The hooks a tabbench plugin may implement.

A plugin is a module (registered through the ``tabbench`` entry-point group, or a file passed with
``--plugin`` or listed under a suite's ``plugins:``) holding functions decorated with ``@tabbench.hookimpl``
whose names are listed here; it may implement any of them.
"""

import pluggy

#: The marker pair, named after the project, whose name is also the entry-point group (tabbench/plugins.py).
hookspec = pluggy.HookspecMarker("tabbench")
#: Decorator for plugin hook implementations, offered to plugins as ``@tabbench.hookimpl``.
hookimpl = pluggy.HookimplMarker("tabbench")


# --- models ---------------------------------------------------------------------------------------


@hookspec
def register_models(register):
    """Add models to the registry.

    Called once, when the registry is built (``tabbench models``, ``tabbench run``). Call
    ``register(spec)`` once per model, with a :class:`tabbench.spec.ModelSpec`. Import heavy
    libraries (torch, boosters) inside the estimator, not at module level, so that listing models
    stays fast. Returns nothing.
    """


# --- data sources ---------------------------------------------------------------------------------


@hookspec
def register_sources(register):
    """Add data sources: what a suite's ``source:`` can name.

    Called when a suite is read or the suite schema is built (``tabbench validate``, ``run``, ``schema``),
    never by ``tabbench models``. Call ``register(cls)`` once per source, with a subclass of
    :class:`tabbench.data.source.DataSource` (a pydantic model of the source's suite fields, with its
    ``load``; docs/datasets.md shows a complete one). A plugin that registers models too may import its
    source classes inside this function, so that listing models does not import pydantic. Returns nothing.
    """
