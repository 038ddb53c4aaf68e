"""tabbench: a benchmark harness for tabular deep learning (NPT and strong baselines)."""

from tabbench.hookspecs import hookimpl

__version__ = "0.1.0"

__all__ = ["hookimpl"]
