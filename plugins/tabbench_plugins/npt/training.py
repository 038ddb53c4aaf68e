"""NPT's training loop: masking, loss, optimiser step, validation, checkpoints.

One step (docs/npt.md, "Training"):

    batch      the whole table, or the epoch's next minibatch of rows (``table.Table.epoch``)
    corrupt    every observed feature entry masked with p_feature, every visible training label with
               p_target, BERT style (``model.corrupt``); validation and test labels are always masked
    loss       (1 - lambda) * L_targets + lambda * L_features over the masked entries, lambda
               cosine-annealed from lambda_init to 0 (``optimiser.cosine_tradeoff``)
    update     gradients clamped (or norm-clipped), the learning rate of the schedule, LAMB in Lookahead
    validate   every eval_every steps: the validation targets' loss, training rows as context; the
               weights with the best one are kept (``checkpoints.Run.observe``)
    points     at each of the job's budget points (``points``, tabbench.estimator.TimePoints) a host copy of the
               best weights validated before it (``checkpoints.Run.keep_at_points``), checked after each step
               and around each validation (a point a validation straddles gets the weights from before it)
    stop       after ``steps`` steps, or earlier when the job's time budget would not hold one more step as
               long as the longest so far (``clock``, tabbench.estimator.TrainingClock: with ``steps: auto`` only a
               guard, ``guard_only``, up to the job's end less the prediction reserve (on the ``cpu`` clock
               the end of its planned work's PLANNED_OVERRUN, tabbench/clock.py), since the sizing has
               already fitted the steps into the training share at the machine's stored speed); the step it
               stopped at is validated, and the best validation weights are kept as at the end

The loop sees the table, the model and the optimiser only through their public faces (``table.Table``:
its rows, batches and validation loss; the model's forward; the optimiser's step), and the estimator not
at all: ``fit`` hands it what it needs as arguments. The state the loop changes lives in a
``checkpoints.Run``, saved every few minutes and resumed bit for bit (on the CPU) when a killed job runs
again. On a GPU over the whole table, a step and a validation are each captured once as a CUDA graph and
replayed (``cuda_graph``, ``TrainStep``, graphs.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tabbench_plugins.torch_training import bf16_autocast
from tabbench_plugins.npt import checkpoints, graphs
from tabbench_plugins.npt.cost import prediction_reserve
from tabbench_plugins.npt.model import corrupt, step_loss
from tabbench_plugins.npt.optimiser import cosine_cyclic, cosine_tradeoff, flat_then_anneal


def lr_at(params: dict, step: int, steps: int, whole_table: bool) -> float:
    """The learning rate of step ``step`` (0-based) of ``steps`` under ``params["lr_schedule"]``."""
    if params["lr_schedule"] == "cosine_cyclic":
        return cosine_cyclic(step, steps, params["lr"], params["warmup_fraction"])
    flat = params["flat_fraction"]
    flat = (0.5 if whole_table else 0.7) if flat is None else flat
    return params["lr"] * flat_then_anneal(step, steps, flat)


class TrainStep:
    """One training step: corrupt, forward, the masked loss, backward, clip, LAMB; then Lookahead.

    Eager by default. ``graphed`` (CUDA, whole-table batches): captured once as a CUDA graph and replayed
    (``graphs.Replayed``): the table and every tensor the step touches keep their addresses, and the learning
    rate and the two loss weights are device tensors refreshed in place before each replay. Lookahead's pull,
    every k-th step, runs eagerly after the step (the graph cannot count steps).

    ``compiled_loss`` (the CPU; a ``compiled.CompiledLoss`` of the same model, or None: eager): the forward pass and
    the loss run as that one ``torch.compile``d function (the same dropout masks, other kernels).

    ``gen`` draws the masks: on CUDA the device's default generator, the one a graph can replay (dropout draws
    from it too), elsewhere the run's own. ``amp``: bf16 autocast of the forward pass (its cast cache off when
    graphed, so each replay casts the current weights)."""

    def __init__(self, model, opt, x, m, p_col, cards, gen, *, p_random=0.1, n_patches=0, patch_dim=0,
                 amp=False, clip_norm=None, graphed=False, compiled_loss=None):
        import torch

        from torch.profiler import record_function  # a no-op unless a profiler runs

        self.torch, self.phase, self.model, self.opt, self.gen = torch, record_function, model, opt, gen
        self.x, self.m, self.cand = x, m, ~m  # masking may select every observed entry (never a missing one)
        self.p_col, self.cards = p_col, list(cards)
        self.cards_t = torch.tensor(self.cards, dtype=torch.float32, device=x.device)
        self.p_random, self.n_patches, self.patch_dim = p_random, n_patches, patch_dim
        self.amp, self.clip_norm, self.graphed = amp, clip_norm, graphed
        self.params = list(model.parameters())
        assert not (graphed and compiled_loss), "a step is either compiled (CPU) or graphed (CUDA)"
        self.compiled_loss = compiled_loss
        self.lr_t, self.w_target_t, self.w_feature_t = (torch.zeros((), device=x.device) for _ in range(3))
        self.replayed = graphs.Replayed(lambda: self._step(self.lr_t, self.w_target_t, self.w_feature_t, self.x,
                                                           self.m, self.cand), enabled=graphed)

    @property
    def status(self) -> str:
        return self.replayed.status

    def __call__(self, lr: float, lam: float, idx=None):
        """Step at learning rate ``lr`` and feature-loss weight ``lam`` over the rows ``idx`` (None: the whole
        table); returns the loss (a device tensor: reading it waits for the step)."""
        if self.graphed:  # the loss weights as the eager step's: 1 - lam rounded once, from the double
            assert idx is None, "a graphed step trains on the whole table"
            for value, t in ((lr, self.lr_t), (1 - lam, self.w_target_t), (lam, self.w_feature_t)):
                t.fill_(value)
            loss = self.replayed()
        elif idx is None:
            loss = self._step(lr, 1 - lam, lam, self.x, self.m, self.cand)
        else:
            loss = self._step(lr, 1 - lam, lam, self.x[idx], self.m[idx], self.cand[idx])
        self.opt.advance()
        return loss

    def _step(self, lr, w_target, w_feature, xb, mb, cb):
        torch, phase = self.torch, self.phase

        with phase("masking"):
            c = corrupt(xb, mb, cb, self.p_col, self.cards_t, self.gen, self.p_random, self.n_patches,
                        self.patch_dim)
        if self.compiled_loss is not None:
            with phase("forward + loss (compiled)"):
                loss = self.compiled_loss(c.x, c.m, xb, c.scored, w_target, w_feature)
        else:
            with phase("forward"), bf16_autocast(xb.device.type, self.amp, cache=not self.graphed):
                out = self.model(c.x, c.m)
            with phase("loss"):
                loss = step_loss(out, xb, c.scored, self.cards, self.n_patches, self.patch_dim, w_target, w_feature)
        self.opt.zero_grad(set_to_none=True)
        with phase("backward"):
            loss.backward()
        with phase("clip + LAMB + Lookahead"):  # an element-wise clamp is fused into LAMB
            if self.clip_norm:
                torch.nn.utils.clip_grad_norm_(self.params, self.clip_norm)
            for group in self.opt.param_groups:
                group["lr"] = lr
            self.opt.base.step()
        return loss.detach()


def masks_generator(torch, dev, seed: int):
    """The generator the masks draw from (see TrainStep): on CUDA the device's default one, which a graph can
    replay (``torch.manual_seed`` seeds it), elsewhere one of the run's own, seeded with ``seed``."""
    if dev.type == "cuda":
        return torch.cuda.default_generators[dev.index if dev.index is not None else torch.cuda.current_device()]
    return torch.Generator(device=dev).manual_seed(seed)


def use_cuda_graph(setting, device_type: str, n_batches: int) -> bool:
    """Whether to capture the training step (param ``cuda_graph``): "auto" on CUDA with whole-table batches;
    true where that is impossible is an error."""
    possible = device_type == "cuda" and n_batches == 1
    if setting is True and not possible:
        raise ValueError(f"npt: cuda_graph: true needs device cuda and whole-table batches (here: device "
                         f"{device_type}, {n_batches} batches a pass); set cuda_graph to auto or false")
    return possible and setting in ("auto", True)


@dataclass
class Trained:
    """What ``train`` leaves: the finished run (best-validation weights loaded when there are validation
    rows), the checkpointer that saved and resumed it, and how the steps ran on a GPU (``cuda_graph``: "off",
    "replayed", "eager" (too few steps) or "failed: <why>")."""

    run: checkpoints.Run
    checkpointer: checkpoints.Checkpointer
    cuda_graph: str


def train(table, model, opt, params, torch, *, steps: int, seed: int, clock, identity: dict,
          checkpoint_dir=None, predict_rows: int | None = None, points=None, compiled=None) -> Trained:
    """Train ``model`` with ``opt`` (LAMB in Lookahead) for ``steps`` steps on ``table`` (``table.Table``),
    validating on its validation rows, under ``params`` (the estimator's: masking, schedules, clipping,
    evaluation, budgets, checkpoints, CUDA graphs). ``seed``: the masks' and batches' generator's (off CUDA);
    ``clock``: the job's training clock (tabbench.estimator.TrainingClock); ``identity``: the params and seed a
    checkpoint must match (``NPT.job_identity``); ``checkpoint_dir``: where checkpoints go, if anywhere;
    ``predict_rows``: the rows the job predicts after training (``JobContext.predict_rows``): the clock keeps time
    for them, sized from the validation passes as they are timed (``prediction_reserve``); ``points``: the job's
    budget points (tabbench.estimator.TimePoints), if any; ``compiled``: the step's forward pass and loss compiled
    (``compiled.CompiledLoss``), already made (and compiled by the speed measurement) or None: eager."""
    P, dev = params, table.device
    t = len(table.cards) - 1  # the target column
    p_col = torch.tensor([P["p_feature"]] * t + [P["p_target"]], device=dev)
    n_b = table.batches_per_epoch
    eval_every = max(1, int(P["eval_every"]))
    budgets = checkpoints.step_budgets(P)
    graphed = use_cuda_graph(P["cuda_graph"], dev.type, n_b)

    run = checkpoints.Run(model, opt, masks_generator(torch, dev, seed), steps, budgets)
    ckpt = checkpoints.Checkpointer(checkpoint_dir, P["checkpoint_minutes"],
                                    checkpoints.fingerprint(table.x.cpu().numpy(), params=identity, model=model))
    ckpt.resume(run)
    train_step = TrainStep(model, opt, table.x, table.m, p_col, table.cards, run.gen, p_random=P["p_random"],
                           n_patches=table.n_patches, patch_dim=table.patch_dim, amp=table.amp,
                           clip_norm=P["clip"] if P["clip"] and P["clip_mode"] == "norm" else None,
                           graphed=graphed, compiled_loss=compiled)
    at_step = torch.zeros((), dtype=torch.int64, device=dev)  # the step a validation is taken after
    # a validation over several chunks draws their rows from a generator of its own: not capturable
    one_chunk = table.has_val and table.eval_chunks(0 if table.transductive else table.n_val) == 1
    validate = graphs.Replayed(lambda: run.observe(table.validation_loss(model), at_step),
                               enabled=graphed and one_chunk)

    validated_s = {}  # validated step -> the job's elapsed time its validation ended (budget points)
    if ckpt.resumed_from and int(run.best_step) <= run.step:  # its best was validated before this attempt began
        validated_s[int(run.best_step)] = 0.0
    validation_s = math.inf  # the last validation's seconds on the job's clock (none yet: any point may fall in the first)

    def observe():
        nonlocal validation_s
        # a point this validation may straddle gets the weights from before it: copied only then
        before = None
        if points is not None and points.due_within(2 * validation_s):  # twice the last: a slower one too
            before = run.point_state(table.has_val, validated_s)
        start = clock.now()
        model.eval()
        at_step.fill_(run.step)
        with torch.no_grad():
            validate()
        validation_s = clock.now() - start  # on the job's clock, as the reserve it sizes is spent
        if predict_rows:
            clock.reserve(prediction_reserve(validation_s, len(table), table.n_val, predict_rows,
                                             len(run.budgets) + len(points.points if points is not None else ())))
        if points is not None:
            now = points.elapsed()  # one reading: a point passed by now gets the weights before this validation
            if before is not None and points.passed(now):
                points.keep(*before, now)
            validated_s[run.step] = now

    clock.begin()  # the table, the model and the speed measurement are not a step
    while run.step < steps:
        step = run.step
        model.train()
        if not run.batches:  # a new epoch
            run.batches = table.epoch(run.gen)
        idx = run.batches.pop(0)
        run.last_loss = train_step(lr_at(P, step, steps, n_b == 1), cosine_tradeoff(step, steps, P["lambda_init"]),
                                   idx)
        run.step = step + 1
        run.keep_at_points(points, table.has_val, validated_s)  # the points passed during the step
        if table.has_val and (run.step % eval_every == 0 or run.step == steps):
            observe()
        run.snapshot_if_budget(table.has_val)
        ckpt.maybe_save(run)
        if run.step < steps and clock.out_of_time():
            if table.has_val and run.step % eval_every:  # the last steps count too
                observe()
            break
    cuda_graph = ("off" if not graphed else train_step.status if validate.failure is None
                  else f"{train_step.status}; validation {validate.status}")
    run.keep_at_points(points, table.has_val, validated_s)  # those passed in the last validation: the final best
    if table.has_val:
        run.use_best()
    model.eval()
    return Trained(run, ckpt, cuda_graph)
