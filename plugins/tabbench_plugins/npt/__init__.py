"""Non-Parametric Transformers (Kossen et al., NeurIPS 2021) as a tabbench model: ``npt``.

docs/npt.md says what NPT is, how it trains and where each piece lives:

    estimator.py    NPT: the tabbench estimator (params, the glue of fit and predict)
    table.py        the encoded table, its batches and the forward pass with it as context
    training.py     the training loop: masking, loss, optimiser step, validation
    graphs.py       a step captured once as a CUDA graph and replayed (whole tables on a GPU)
    model.py        the model, its masking and its loss (nanoGPT-style, torch only)
    optimiser.py    LAMB in Lookahead; the learning-rate and loss-weight schedules
    checkpoints.py  one run's state, saved and resumed; the budget-curve snapshots
    cost.py         the batching rule and the CPU cost model of the pre-run check

This module registers the model; it imports no torch (``tabbench models`` stays fast).
"""

from __future__ import annotations

import tabbench
from tabbench_plugins.npt.estimator import NPT, SPEC  # noqa: F401 (the package's names)


@tabbench.hookimpl
def register_models(register):
    register(SPEC)
