"""Non-Parametric Transformers (Kossen et al., NeurIPS 2021) as a tabbench model: ``npt``.

docs/npt.md says what NPT is, how it trains and where each piece lives:

    estimator.py    NPT: the tabbench estimator (params, the table, fit, predict)
    training.py     the training loop: masking, loss, optimiser step, validation
    model.py        the model, its masking and its loss (nanoGPT-style, torch only)
    optimiser.py    LAMB in Lookahead; the learning-rate and loss-weight schedules
    checkpoints.py  one run's state, saved and resumed; the budget-curve snapshots
    cost.py         the batching rule and the CPU cost model of the pre-run check

This module registers the model; it imports no torch (``tabbench models`` stays fast).
"""

from __future__ import annotations

import tabbench
from tabbench.spec import ModelSpec

from .cost import check_cost
from .estimator import NPT

#: How a job runs, not what it computes: left at their defaults in the job key and the checkpoint's
#: fingerprint, so that a run resumed or repeated with more threads continues the same job.
RUN_PARAMS = frozenset({"cpus", "checkpoint_minutes"})

#: Params added after NPT jobs were recorded and checkpointed, with the value that does what the code
#: did before them: at that value a job's key and its checkpoint fingerprint leave them out, so that
#: recorded jobs are still found done and a killed run still resumes from its checkpoint.
ADDED_PARAMS = {"lr_schedule": "flat_anneal", "warmup_fraction": 0.2}


SPEC = ModelSpec(
    name="npt", factory=NPT, search_space={},
    cpus=lambda p: p["cpus"], gpus=lambda p: 1 if p.get("device") == "cuda" else 0,
    transductive=lambda p: bool(p["transductive"]),
    requires=("torch",), install_hint="pip install 'tabbench[torch]'",
    deterministic=False,  # seeded torch training: last digits differ across CPUs
    check=check_cost, run_params=RUN_PARAMS, added_params=ADDED_PARAMS,
    description="Non-Parametric Transformer (Kossen et al. 2021): attention between rows and columns. "
                "CPU cost of the defaults (e 32, 8 layers, 500 steps, batches of at most 2,048 rows): per step "
                "about 0.4 CPU-s per 1,000 rows at 10 features, 2.2 s at 25, 10 s at 54; a job over the suite's "
                "budget.time_s (else 48 CPU-hours) is refused before the run",
)


@tabbench.hookimpl
def register_models(register):
    register(SPEC)
