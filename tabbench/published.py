"""Published results to compare a leaderboard with: a suite's ``published:`` file.

The file (e.g. suites/published/npt-paper.yaml) holds, per dataset and method, the test value of the
dataset's primary metric (a number, or [mean, standard error]), and per metric the published mean
rank [mean, standard error] of each method, and optionally a ``note`` on what the numbers are (e.g. that
they are the best of several configurations), printed under every table that shows them. ``tabbench
leaderboard`` then prints our numbers and the published ones side by side.

Optionally also ``corruption``: per dataset, the change the publication reports for its model in the
corruption probe (the NPT paper's Table 2; tabbench/probe.py), in that table's convention: accuracy
points for classification, the relative change in RMSE in percent for regression, negative where
performance got worse, with ``corruption_model``, the registry model those numbers are for (the NPT paper's:
``npt``), and optionally ``corruption_label``, its name in the tables (default: the model). ``tabbench probe
corruption`` prints it beside that model's rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tabbench.errors import TabbenchError, did_you_mean
from tabbench.metrics import PRIMARY


KEYS = {"name", "note", "note_datasets", "metrics", "ranks", "corruption", "corruption_model", "corruption_label"}

#: The project's folder of published files (suites/published), which any suite may name beside its own folder.
PUBLISHED_DIR = Path(__file__).resolve().parents[1] / "suites" / "published"


@dataclass(frozen=True)
class PublishedUse:
    """One published file a suite sets beside its results (its ``published:`` list), resolved against the suite's
    folder: a publication's own numbers (this module), or a TabArena declaration (``declaration``,
    tabbench/tabarena.py), for which ``datasets`` holds (our dataset, TabArena's, the share of its rows one of our
    test parts holds or None) per dataset of ours that is one of TabArena's, and ``board`` whether those run
    TabArena's own tasks and folds. Here, not in tabbench.suite, so that a report reads it without the registry."""

    path: Path
    declaration: bool = False
    datasets: tuple = ()
    board: bool = False


class PublishedError(TabbenchError, ValueError):
    """A published-results file is malformed; the message names the file and the field."""


@dataclass(frozen=True)
class Published:
    name: str
    path: Path
    metrics: dict = field(default_factory=dict)  # dataset -> method -> (value, se or None)
    ranks: dict = field(default_factory=dict)  # metric -> method -> (mean rank, se or None)
    note: str = ""  # what the numbers are, printed under every table that shows them
    note_datasets: tuple = ()  # the datasets the note is about (empty: all); tables of other datasets omit it
    corruption: dict = field(default_factory=dict)  # dataset -> published change after corruption (see above)
    corruption_model: str = ""  # the registry model whose rows ``corruption`` is for
    corruption_label: str = ""  # its name in the tables

    def methods(self) -> set:
        """Every method the publication reports a number or a rank for."""
        return {m for table in (*self.metrics.values(), *self.ranks.values()) for m in table}

    def note_for(self, datasets) -> str:
        """The note, where it concerns one of ``datasets`` ('' otherwise)."""
        return self.note if self.note and (not self.note_datasets or set(datasets) & set(self.note_datasets)) else ""


def allowed_folders(suite_folder) -> tuple:
    """Where a suite's ``published:`` files may lie: its own folder (and below) and the project's PUBLISHED_DIR."""
    return (Path(suite_folder).resolve(), PUBLISHED_DIR)


def outside(path, suite_folder) -> bool:
    """Whether ``path`` (links followed) lies outside every folder a suite's published file may lie in."""
    resolved = Path(path).resolve()
    return not any(resolved.is_relative_to(folder) for folder in allowed_folders(suite_folder))


def kind(value) -> str:
    """What a value is, for a message about a file that must not quote the file: "text", "a number", "a list of
    3 items", "a mapping of 2 keys", "nothing"."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, dict):
        return f"a mapping of {len(value)} key{'s' if len(value) != 1 else ''}"
    if isinstance(value, list):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    return type(value).__name__


def yaml_problem(exc) -> str:
    """A YAML error's place and kind, without the file's text that PyYAML quotes around it (or in it)."""
    import re

    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + re.sub(r"'[^']*'|\"[^\"]*\"", "(...)", getattr(exc, "problem", None) or "cannot be parsed")


def key_lines(text: str, keys) -> str:
    """The lines of ``text`` (a YAML mapping) on which ``keys`` stand, as "lines 3, 7", so that a message can
    point at a key without quoting it."""
    import yaml

    wanted = {str(k) for k in keys}
    node = yaml.compose(text)
    lines = [k.start_mark.line + 1 for k, _ in getattr(node, "value", ()) if isinstance(k, yaml.ScalarNode)
             and k.value in wanted]
    return f"line{'s' if len(lines) != 1 else ''} {', '.join(map(str, lines))}" if lines else "its top level"


def _pairs(value, where, file) -> dict:
    if not isinstance(value, dict):
        raise PublishedError(f"{file}: {where}: expected a mapping of method -> value or [mean, se], got {kind(value)}")
    out = {}
    for method, v in value.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[str(method)] = (float(v), None)
        elif isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v):
            out[str(method)] = (float(v[0]), float(v[1]))
        else:
            raise PublishedError(f"{file}: {where}.{method}: expected a number or [mean, standard error], got {kind(v)}")
    return out


def load_published(path) -> Published:
    import yaml

    path = Path(path)
    try:
        text = path.read_text()
        raw = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise PublishedError(f"{path}: cannot read the published-results file: "
                             f"{getattr(exc, 'strerror', None) or 'not UTF-8 text'}") from None
    except yaml.YAMLError as exc:
        raise PublishedError(f"{path}: not valid YAML: {yaml_problem(exc)}") from None
    # the messages below name fields and kinds, never the file's text: a suite may name any file (tabbench.suite)
    if not isinstance(raw, dict):
        raise PublishedError(f"{path}: expected a mapping with keys {', '.join(sorted(KEYS))}, got {kind(raw)}")
    unknown = set(map(str, raw)) - KEYS
    if unknown:
        hint = "".join(did_you_mean(key, KEYS, what=None) for key in sorted(unknown)[:1])  # names a known key
        raise PublishedError(f"{path}: {len(unknown)} unknown key{'s' if len(unknown) != 1 else ''} on "
                             f"{key_lines(text, unknown)}{hint}; the keys are {', '.join(sorted(KEYS))}")
    if not isinstance(raw.get("note") or "", str):
        raise PublishedError(f"{path}: note: expected text, got {kind(raw['note'])}")
    note_datasets = raw.get("note_datasets") or []
    if not isinstance(note_datasets, list) or not all(isinstance(d, str) for d in note_datasets):
        raise PublishedError(f"{path}: note_datasets: expected a list of dataset names, got {kind(note_datasets)}")
    for key in ("metrics", "ranks", "corruption"):
        if not isinstance(raw.get(key) or {}, dict):
            raise PublishedError(f"{path}: {key}: expected a mapping, got {kind(raw[key])}")
    metrics = {str(d): _pairs(v, f"metrics.{d}", path) for d, v in (raw.get("metrics") or {}).items()}
    known = {metric for metric, _ in PRIMARY.values()}
    ranks = {}
    for metric, v in (raw.get("ranks") or {}).items():
        if metric not in known:
            raise PublishedError(f"{path}: ranks.{metric}: unknown metric; expected one of {sorted(known)}")
        ranks[metric] = _pairs(v, f"ranks.{metric}", path)
    corruption = {}
    for dataset, v in (raw.get("corruption") or {}).items():
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise PublishedError(f"{path}: corruption.{dataset}: expected a number (the published change: accuracy "
                                 f"points, or the relative RMSE change in percent), got {kind(v)}")
        corruption[str(dataset)] = float(v)
    model = raw.get("corruption_model") or ""
    if corruption and not (isinstance(model, str) and model):
        raise PublishedError(f"{path}: corruption_model: the corruption numbers need the registry model they are for "
                             f"(e.g. corruption_model: npt), got {model!r}")
    label = raw.get("corruption_label") or model
    return Published(str(raw.get("name", path.stem)), path, metrics, ranks, str(raw.get("note") or "").strip(),
                     tuple(note_datasets), corruption, model, str(label))
