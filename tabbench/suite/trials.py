"""A suite's method on one dataset -> its trials, each with the params the model gets: the one place a suite's
values are laid over a model's defaults (``method_params``), for run (tabbench/run/expand.py), plan, probe and the
pre-run checks of a suite's values (tabbench/suite/load.py)."""

from __future__ import annotations

import itertools
import math
import random


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
