"""tabbench: a benchmark harness for tabular deep learning (NPT and strong baselines)."""

import pluggy

__version__ = "0.1.0"

#: Decorator for plugin hook implementations: ``@tabbench.hookimpl``.
hookimpl = pluggy.HookimplMarker("tabbench")
