"""The run pipeline: what ``tabbench run`` does between a checked suite and the records in the store.

Modules, in the order a run uses them (each imports only those above it, and nothing imports this package's
``__init__`` for a name: it stays empty so that reading ``measure``'s hardware fingerprint, as the reports do,
loads nothing else):

- ``jobs``: a ``Job``, its key and the record statuses.
- ``expand``: suite x registry x loaded data -> jobs; ``Selection`` (--models, --datasets, --folds).
- ``prepare``: one preparation of a suite for run, plan and probe (registry, data, splits, the models'
  pre-run refusals) -> ``PreparedSuite``.
- ``measure``, ``execute``, ``isolation``: one job, fitted in a forked child with its budgets enforced.
- ``executors``: where the jobs run (``--executor ray|local``), one declared interface, one module each.
- ``interrupts``: Ctrl-C stops at a safe point.
- ``runner``: ``run_suite``, which drives the rest.
"""
