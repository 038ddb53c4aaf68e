"""The run pipeline: what ``tabbench run`` does between a loaded suite and the records in the store (``plan``
and ``probe`` use its first steps).

Its modules, the driver last. This ``__init__`` imports none of them, so that a reader of one
module loads nothing else. What a job measures about its machine and its costs (tabbench/measure.py) and the
records it leaves (tabbench/store.py) stay outside: the reports and the benchmarks read them too.

- ``expand``, ``jobs``: the suite's jobs, one per method, configuration, split and seed, and their keys;
  ``Selection`` (--models, --datasets, --folds).
- ``executors``: where the jobs run (``--executor ray|local``): one declared interface, one module per mode.
- ``isolation``, ``execute``: one job in a forked child with its budgets enforced: fit, evaluate, its record
  with its costs and the machine it ran on.
- ``claims``: each job claimed before it runs (``JobQueue``), so that runs sharing a results folder share its
  jobs and never run one twice.
- ``interrupts``: Ctrl-C stops the run at a safe point.
- ``runner``: ``prepare_suite``, the one preparation of a suite for run, plan and probe (registry, selection,
  data and splits, the models' pre-run refusals) -> ``PreparedSuite``; and ``run_suite``, which drives the
  rest and writes each record to the store.
"""
