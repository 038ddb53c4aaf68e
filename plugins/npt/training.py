"""NPT's training loop: masking, loss, optimiser step, validation, checkpoints.

One step (docs/npt.md, "Training"):

    batch      the whole table, or the epoch's next minibatch of rows (``NPT._epoch``)
    corrupt    every observed feature entry masked with p_feature, every visible training label with
               p_target, BERT style (``model.corrupt``); validation and test labels are always masked
    loss       (1 - lambda) * L_targets + lambda * L_features over the masked entries, lambda
               cosine-annealed from lambda_init to 0 (``optimiser.cosine_tradeoff``)
    update     gradients clamped (or norm-clipped), the learning rate of the schedule, LAMB in Lookahead
    validate   every eval_every steps: the validation targets' loss, training rows as context; the
               weights with the best one are kept (``checkpoints.Run.observe``)
    stop       after ``steps`` steps, or earlier when the job's time budget would not hold one more step as
               long as the longest so far (``est.clock_``, tabbench.estimator.TrainingClock: the safety net
               of ``steps: auto``, whose cost model can be slower or faster than this machine); the step it
               stopped at is validated, and the best validation weights are kept as at the end

The state the loop changes lives in a ``checkpoints.Run``, saved every few minutes and resumed bit for
bit (on the CPU) when a killed job runs again.
"""

from __future__ import annotations

import time

from tabbench_plugins.npt import checkpoints
from tabbench_plugins.npt.cost import n_batches
from tabbench_plugins.npt.model import corrupt, entry_losses, masked_mean
from tabbench_plugins.npt.optimiser import cosine_cyclic, cosine_tradeoff, flat_then_anneal


def lr_at(params: dict, step: int, steps: int, whole_table: bool) -> float:
    """The learning rate of step ``step`` (0-based) of ``steps`` under ``params["lr_schedule"]``."""
    if params["lr_schedule"] == "cosine_cyclic":
        return cosine_cyclic(step, steps, params["lr"], params["warmup_fraction"])
    flat = params["flat_fraction"]
    flat = (0.5 if whole_table else 0.7) if flat is None else flat
    return params["lr"] * flat_then_anneal(step, steps, flat)


def measured_slowdown(est, torch, rows: int, model_pass_s: float) -> float:
    """How many times longer than the cost model one training pass takes on this machine, now (``steps: auto``
    sizes the run by it): forward and backward over the table's first ``rows`` rows (a training batch's size)
    under the run's autocast, timed twice, the second counted (the first pays one-off allocations), against
    ``model_pass_s``, the cost model's wall seconds for that pass on the job's cores. The weights, their
    gradients, every random generator and the train/eval mode are left as they were."""
    model, cfg = est.model_, est.cfg_
    xb, mb = est.x_tab_[:rows], est.m_tab_[:rows]
    cuda = est.device_.type == "cuda"
    mode = model.training
    with torch.random.fork_rng(devices=[est.device_.index or 0] if cuda else []):
        model.train()
        for _ in range(2):
            start = time.perf_counter()
            with est._autocast():
                out = model(xb, mb)
            entry_losses(out, xb, est.cards_, cfg.n_patches, cfg.patch_dim).mean().backward()
            if cuda:
                torch.cuda.synchronize(est.device_)
            seconds = time.perf_counter() - start
    for p in model.parameters():
        p.grad = None
    model.train(mode)
    return seconds / model_pass_s


def train(est, torch):
    """Train ``est.model_`` with ``est.opt_`` on the table ``est`` prepared; returns the finished
    ``checkpoints.Run`` (best-validation weights loaded when there are validation rows) and the
    ``checkpoints.Checkpointer`` that saved and resumed it."""
    P, dev, cfg, model, opt = est.params, est.device_, est.cfg_, est.model_, est.opt_
    t = cfg.d - 1  # the target column
    x_tab, m_tab = est.x_tab_, est.m_tab_
    cand = ~m_tab  # entries the masking may select: everything observed (never a missing target)
    p_col = torch.tensor([P["p_feature"]] * t + [P["p_target"]], device=dev)
    cards_t = torch.tensor(est.cards_, dtype=torch.float32, device=dev)
    params = list(model.parameters())
    steps = est.steps_
    est.n_batches_ = n_b = n_batches(len(x_tab), P["batch_size"])
    eval_every = max(1, int(P["eval_every"]))
    budgets = checkpoints.BUDGET_LADDER if P["budgets"] is None else tuple(P["budgets"])

    run = checkpoints.Run(model, opt, torch.Generator(device=dev).manual_seed(est.seed), steps, budgets)
    ckpt = checkpoints.Checkpointer(getattr(est, "checkpoint_dir", None), P["checkpoint_minutes"],
                                    checkpoints.fingerprint(x_tab.cpu().numpy(), params=est.job_identity(),
                                                            model=model))
    ckpt.resume(run)
    while run.step < steps:
        step = run.step
        model.train()
        if not run.batches:  # a new epoch
            run.batches = est._epoch(n_b, run.gen, torch)
        idx = run.batches.pop(0)
        xb, mb, cb = (x_tab, m_tab, cand) if idx is None else (x_tab[idx], m_tab[idx], cand[idx])
        c = corrupt(xb, mb, cb, p_col, cards_t, run.gen, P["p_random"], cfg.n_patches, cfg.patch_dim)
        lam = cosine_tradeoff(step, steps, P["lambda_init"])
        with est._autocast():
            out = model(c.x, c.m)
        losses = entry_losses(out, xb, est.cards_, cfg.n_patches, cfg.patch_dim)
        loss = (1 - lam) * masked_mean(losses[:, t], c.scored[:, t])
        if lam > 0:
            loss = loss + lam * masked_mean(losses[:, :t], c.scored[:, :t])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if P["clip"] and P["clip_mode"] == "norm":
            torch.nn.utils.clip_grad_norm_(params, P["clip"])
        for group in opt.param_groups:
            group["lr"] = lr_at(P, step, steps, n_b == 1)
        opt.step()
        run.step = step + 1
        run.last_loss = loss.detach()

        if est.has_val_ and (run.step % eval_every == 0 or run.step == steps):
            model.eval()
            with torch.no_grad():
                run.observe(est._validation_loss(torch))
        run.snapshot_if_budget(est.has_val_)
        ckpt.maybe_save(run)
        if run.step < steps and est.clock_.out_of_time():
            if est.has_val_ and run.step % eval_every:  # the last steps count too
                model.eval()
                with torch.no_grad():
                    run.observe(est._validation_loss(torch))
            break
    if est.has_val_:
        run.use_best()
    model.eval()
    return run, ckpt
