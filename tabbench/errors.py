"""The one base class of every error tabbench raises on purpose.

Each error's message names the file, field, column or folder at fault and what would fix it, so the
``tabbench`` command (``tabbench.cli.main``) catches ``TabbenchError`` in one place and prints the
message instead of a traceback. An error that keeps a built-in base (``ValueError``,
``AssertionError``) keeps it beside this one, so code catching the built-in still catches it.
"""


class TabbenchError(Exception):
    """Base of every tabbench exception: a message for the user, no traceback needed."""
