"""Expanding a suite into its jobs (suite x registry x loaded data -> Job list, one per tuning configuration,
split and seed), and the selection of some of them (--models, --datasets, --folds) that run and plan share.
"""

from __future__ import annotations

from dataclasses import dataclass

from tabbench.clock import job_clock
from tabbench.data.splits import regime
from tabbench.run.jobs import Job, job_key
from tabbench.suite.trials import method_params


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
                        resources = spec.resources(params)
                        key = job_key(entry.label, entry.model, key_params, dataset.fingerprint,
                                      split.fingerprint, split.fold, split.repeat, seed)
                        jobs.append(Job(key, suite.name, entry.label, entry.model, params, trial, name,
                                        dataset.meta.task, split.fold, split.repeat, seed, dataset.fingerprint,
                                        split.fingerprint, dataset.subset, resources,
                                        suite.budget.time_s, suite.budget.memory_mb,
                                        spec.is_transductive(params), key_params, spec.deterministic, config,
                                        n_trials=len(trials), budget_points_s=suite.budget.points_s,
                                        clock=job_clock(suite.budget.clock, resources.get("num_gpus")),
                                        split_regime=regime(dataset.split)))
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
