"""The one base class of every error tabbench raises on purpose, and the did-you-mean its messages end with.

Each error's message names the file, field, column or folder at fault and what would fix it, so the
``tabbench`` command (``tabbench.cli.main``) catches ``TabbenchError`` in one place and prints the
message instead of a traceback. An error that keeps a built-in base (``ValueError``,
``AssertionError``) keeps it beside this one, so code catching the built-in still catches it.
"""


class TabbenchError(Exception):
    """Base of every tabbench exception: a message for the user, no traceback needed."""


#: Past this many choices a message names a few and counts the rest (an R package has thousands of datasets).
_LISTED = 30


def did_you_mean(word, choices, what: str | None = "valid keys", n: int = 1) -> str:
    """The tail of an error message about an unknown name: '; did you mean 'x'?' naming the closest of
    ``choices`` (up to ``n`` of them), else '; WHAT: a, b, c' listing the choices (or '' with ``what=None``,
    for a message that lists them anyway). Every "unknown name" message in tabbench ends this way."""
    import difflib

    choices = sorted(str(c) for c in choices)
    match = difflib.get_close_matches(str(word), choices, n=n)
    if match:
        return f"; did you mean {' or '.join(map(repr, match))}?"
    if what is None:
        return ""
    if len(choices) > _LISTED:
        return f"; {len(choices)} {what}, e.g. {', '.join(choices[:8])}"
    return f"; {what}: {', '.join(choices) or '(none)'}"
