"""The hooks a tabbench plugin may implement.

A plugin is a module (registered through the ``tabbench`` entry-point group, or a file passed with
``--plugin``) holding functions decorated with ``@tabbench.hookimpl`` whose names are listed here.
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
