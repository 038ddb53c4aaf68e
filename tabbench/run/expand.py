"""Expanding a suite into its jobs (suite x registry x loaded data -> Job list, one per tuning configuration,
split and seed), and the selection of some of them (--models, --datasets, --folds) that run and plan share.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass

from tabbench.run.jobs import Job, job_key


def trial_configs(entry, spec) -> list[tuple[int | None, dict]]:
    """(trial index, params) for a model entry: one config, the full grid, or a random sample of it
    (named configurations depend on the dataset: ``dataset_trials``)."""
    if entry.tuning == "configs":
        raise ValueError(f"method {entry.label!r} runs named configurations; use dataset_trials")
    if entry.tuning == "none":
        return [(None, dict(entry.params))]
    space = entry.search_space or dict(spec.search_space)
    names = sorted(space)
    size = math.prod(len(space[n]) for n in names)
    if entry.tuning == "random" and entry.n_trials < size:
        # the sample of the grid in itertools.product order, drawn as indices: random.sample picks the same
        # positions from range(size) as from the grid's list, without building a grid of, say, 40,000 dicts
        picks = random.Random(entry.tuning_seed).sample(range(size), entry.n_trials)
        grid = [_grid_point(space, names, i) for i in picks]
    else:
        grid = [dict(zip(names, values)) for values in itertools.product(*(space[n] for n in names))]
    return [(i, {**entry.params, **config}) for i, config in enumerate(grid)]


def _grid_point(space: dict, names: list, index: int) -> dict:
    """The grid's ``index``-th point in itertools.product order (the last name varies fastest)."""
    point = {}
    for name in reversed(names):
        index, position = divmod(index, len(space[name]))
        point[name] = space[name][position]
    return {name: point[name] for name in names}


def dataset_trials(entry, spec, dataset: str, dataset_params: dict) -> list[tuple[int | None, str | None, dict]]:
    """(trial index, config name, params) of a method on one dataset, before the model's defaults.

    none, grid, random: each trial's params updated by the dataset's model_params for the method. Named
    configurations (``tuning: configs``): the method's params, updated by the dataset's model_params, then by the
    configuration's params, then by the configuration's params for this dataset (``configs.NAME.datasets``), so a
    configuration can change what a dataset sets (e.g. its own step count)."""
    if entry.tuning == "configs":
        return [(i, config.name,
                 {**entry.params, **dataset_params, **config.params, **config.datasets.get(dataset, {})})
                for i, config in enumerate(entry.configs)]
    return [(trial, None, {**params, **dataset_params}) for trial, params in trial_configs(entry, spec)]


def method_params(entry, spec, dataset, gpu_available: bool | None = None) -> list[tuple[int | None, str | None, dict]]:
    """(trial index, config name, params) of a method on one dataset (a DatasetConfig), each trial's params
    resolved (``ModelSpec.resolve``): the model's defaults, updated by the suite's values in ``dataset_trials``'s
    order (the method's params, the dataset's ``model_params`` for the method, the trial or named
    configuration); with ``gpu_available``, ``device: auto`` made cuda or cpu. What run, plan, probe and the
    pre-run checks give a model."""
    dataset_params = (dataset.model_params or {}).get(entry.label, {})
    return [(trial, config, spec.resolve(params, gpu_available=gpu_available))
            for trial, config, params in dataset_trials(entry, spec, dataset.name, dataset_params)]


def expand(suite, registry, loaded, gpu_available=False) -> list[Job]:
    """Every job of a suite. ``loaded`` maps dataset name -> (DatasetConfig, Dataset, splits)."""
    jobs = []
    for name, (cfg, dataset, splits) in loaded.items():
        for entry in suite.models:
            spec = registry[entry.model].spec
            if dataset.meta.task not in spec.tasks:
                continue
            trials = [(trial, config, params, spec.key_params(params))
                      for trial, config, params in method_params(entry, spec, cfg, gpu_available)]
            # split-major: a split's trials are consecutive, so a run stopped part-way leaves splits whose
            # search is complete (and at most the few in flight part-searched), not every split part-searched
            for split in splits:
                for seed in suite.seeds:
                    for trial, config, params, key_params in trials:
                        key = job_key(entry.label, entry.model, key_params, dataset.fingerprint,
                                      split.fingerprint, split.fold, split.repeat, seed)
                        jobs.append(Job(key, suite.name, entry.label, entry.model, params, trial, name,
                                        dataset.meta.task, split.fold, split.repeat, seed, dataset.fingerprint,
                                        split.fingerprint, dataset.subset, spec.resources(params),
                                        suite.budget.time_s, suite.budget.memory_mb,
                                        spec.is_transductive(params), key_params, spec.deterministic, config,
                                        n_trials=len(trials)))
    return jobs


@dataclass(frozen=True)
class Selection:
    """Some of a suite's jobs: only these methods, datasets and folds (empty: all). ``tabbench run`` and
    ``tabbench plan`` select with it (--models, --datasets, --folds)."""

    models: tuple = ()  # method labels
    datasets: tuple = ()  # dataset names
    folds: tuple = ()  # fold indices of each dataset's split

    def problems(self, suite) -> list[str]:
        """One line per selected name the suite does not have, naming the option, the suite file and its names."""
        out = []
        for option, chosen, names in (("--models", self.models, [m.label for m in suite.models]),
                                      ("--datasets", self.datasets, [d.name for d in suite.datasets])):
            unknown = set(chosen) - set(names)
            if unknown:
                out.append(f"{option} names {sorted(unknown)}, not in {suite.path}; its "
                           f"{option[2:]}: {', '.join(names)}")
        return out

    def wants_dataset(self, name: str) -> bool:
        return not self.datasets or name in self.datasets

    def wants_method(self, label: str) -> bool:
        return not self.models or label in self.models

    def select(self, jobs: list[Job]) -> list[Job]:
        return [j for j in jobs if self.wants_method(j.method) and self.wants_dataset(j.dataset)
                and (not self.folds or j.fold in self.folds)]
