"""What the rest of tabbench reads of a suite (frozen dataclasses), the error a bad suite raises, and the
name rules and did-you-mean hints the declaration and the checks share (``did_you_mean``, defined in
tabbench/errors.py so that the data layer's messages use it too)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tabbench.errors import TabbenchError, did_you_mean  # noqa: F401 - the suite modules' did-you-mean
from tabbench.names import NAME_PATTERN, NAME_RULE  # noqa: F401 - the suite format's names
from tabbench.published import PublishedUse  # noqa: F401 - what a Suite's published holds

TUNING = ("none", "grid", "random", "configs")


class SuiteError(TabbenchError):
    """A suite is invalid. ``str(err)`` reads 'FILE: FIELD.PATH: what is wrong and what is expected', one line
    for this error (``path``, ``message``) and one for each of ``more`` (further errors of the same file), so that
    a file with several mistakes is fixed in one pass."""

    def __init__(self, file, path: str, message: str, more: tuple = ()):
        self.file, self.path, self.message, self.more = str(file), path, message, tuple(more)
        line = f"{file}: {path}: {message}" if path else f"{file}: {message}"
        super().__init__("\n".join([line, *map(str, self.more)]))


def join(path: str, key: str) -> str:
    """A field path with one more key: 'models.knn' + 'model'."""
    return f"{path}.{key}" if path and key else path or key


@dataclass(frozen=True)
class NamedConfig:
    """One of a method's named configurations (``tuning: configs``)."""

    name: str  # in every record of its jobs (``config``)
    params: dict = field(default_factory=dict)
    datasets: dict = field(default_factory=dict)  # dataset name -> params for that dataset only


@dataclass(frozen=True)
class ModelEntry:
    label: str  # the method's name in records and leaderboards
    model: str  # the registered model it runs
    params: dict = field(default_factory=dict)
    tuning: str = "none"
    n_trials: int = 20  # random search only
    tuning_seed: int = 0
    search_space: dict | None = None  # overrides the model's default search space
    configs: tuple = ()  # of NamedConfig: tuning "configs" runs exactly these


@dataclass(frozen=True)
class Budget:
    time_s: float | None = None  # limit per job, in seconds of ``clock``
    clock: str | None = None  # cpu | wall; None: cpu, wall for a job that asks for a GPU (tabbench/clock.py)
    memory_mb: float | None = None  # host memory limit per job
    points_s: tuple = ()  # budget points: seconds of a job's elapsed time its record scores (budget_points)


@dataclass(frozen=True)
class Suite:
    name: str
    path: Path
    datasets: tuple  # of DatasetConfig
    models: tuple  # of ModelEntry
    seeds: tuple = (0,)
    budget: Budget = Budget()
    plugins: tuple = ()  # plugin files, resolved against the suite's folder
    description: str = ""
    published: tuple = ()  # of PublishedUse: published results to compare with (tabbench/published.py, tabarena.py)

    def results_dir(self, results_root) -> Path:
        """<results_root>/<name>, checked to lie inside results_root (a suite file can come from anywhere)."""
        root = Path(os.path.abspath(results_root))
        target = Path(os.path.normpath(root / self.name))
        if target.parent != root:
            raise SuiteError(self.path, "name", f"{self.name!r} would put results at {target}, not in the "
                             f"results folder {root}; use {NAME_RULE}")
        return Path(results_root) / self.name
