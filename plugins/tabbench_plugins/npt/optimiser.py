"""LAMB wrapped in Lookahead, and the learning-rate and loss-weight schedules NPT trains with.

NPT (Kossen et al. 2021) optimises with LAMB (You et al. 2019, arXiv 1904.00962) inside Lookahead
(Zhang et al. 2019, arXiv 1907.08610): betas 0.9/0.999, eps 1e-6, no weight decay, alpha 0.5, k 6.
The authors' code uses the cybertronai ``pytorch-lamb`` variant of LAMB, which this file follows:

* no bias correction of the moments (LAMB paper v3);
* the trust ratio is ``clamp(||w||, 0, 10) / ||adam_step||``, and 1 where either norm is 0.

Neither torch nor a small, maintained package ships this variant (timm's ``Lamb`` bias-corrects and
clips the global gradient norm inside the step; ``torch-optimizer`` is unmaintained since 2021), so it
is written here, tested in ``tests/test_npt.py`` against a per-parameter transcription of the rule.

Both optimisers are written for accelerators: multi-tensor (``torch._foreach_*``) kernels over chunks
of parameters, and no value is read back to the host (the trust ratio's branch is a ``torch.where``).
On the CPU, where a multi-tensor kernel is a loop of one kernel per tensor and LAMB's thirteen passes over
the weights, gradients and moments are most of its time, LAMB's moments and its Adam-like update come from
torch's fused Adam kernel (one pass; see ``Lamb._adam_kernel_step``): the same rule, rounded differently.
Lookahead's slow weights start at the initial weights, as in the Lookahead paper (the over9000 wrapper
the authors used initialises them lazily at the first synchronisation, which skips the first pull).
"""

from __future__ import annotations

import math

import torch

# Temporaries of the multi-tensor kernels are bounded by chunks of this many elements, so the
# optimiser step does not add two extra copies of a 180M-parameter model to the peak memory.
_CHUNK_NUMEL = 1 << 24


def _chunks(indices, numels, limit=_CHUNK_NUMEL):
    chunk, size = [], 0
    for i in indices:
        if chunk and size + numels[i] > limit:
            yield chunk
            chunk, size = [], 0
        chunk.append(i)
        size += numels[i]
    if chunk:
        yield chunk


class Lamb(torch.optim.Optimizer):
    """LAMB, the cybertronai/pytorch-lamb variant used by the NPT authors (see the module docstring)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, max_weight_norm=10.0,
                 grad_clamp=None, fused=False, adam_kernel=None):
        """``grad_clamp``: clamp each gradient element to [-grad_clamp, grad_clamp] first (the NPT code's
        "gradient clipping"). ``fused``: one compiled kernel per parameter (see ``fused_lamb``) instead
        of the multi-tensor kernels; the same rule, fewer passes over memory. ``adam_kernel`` (not fused;
        None: on the CPU, without weight decay): the moments and the update from torch's fused Adam kernel
        (``_adam_kernel_step``), else the multi-tensor kernels."""
        if lr < 0 or eps < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"invalid LAMB settings lr={lr}, betas={betas}, eps={eps}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      max_weight_norm=max_weight_norm, grad_clamp=grad_clamp))
        self.fused = fused and fused_lamb() is not None
        self.adam_kernel = adam_kernel

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            for p in params:
                if p.grad.is_sparse:
                    raise RuntimeError("Lamb does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            beta1, beta2 = group["betas"]
            if self.fused:
                self._fused_step(group, params)
                continue
            adam = self.adam_kernel
            if adam is None:
                adam = params[0].device.type == "cpu" and not group["weight_decay"] and hasattr(torch, "_fused_adam_")
            if adam:
                self._adam_kernel_step(group, params)
                continue
            if group["grad_clamp"] is not None:  # one pass over each gradient (two foreach passes on the CPU)
                for p in params:
                    p.grad.clamp_(-group["grad_clamp"], group["grad_clamp"])
            numels = [p.numel() for p in params]
            for idx in _chunks(range(len(params)), numels):
                ps = [params[i] for i in idx]
                grads = [p.grad for p in ps]
                m = [self.state[p]["exp_avg"] for p in ps]
                v = [self.state[p]["exp_avg_sq"] for p in ps]
                torch._foreach_lerp_(m, grads, 1 - beta1)  # m = b1 m + (1 - b1) g
                torch._foreach_mul_(v, beta2)
                torch._foreach_addcmul_(v, grads, grads, value=1 - beta2)
                update = torch._foreach_sqrt(v)
                torch._foreach_add_(update, group["eps"])
                torch._foreach_div_(update, m)
                torch._foreach_reciprocal_(update)  # update = m / (sqrt(v) + eps), one temporary
                if group["weight_decay"]:
                    torch._foreach_add_(update, ps, alpha=group["weight_decay"])
                w_norm = torch.stack(torch._foreach_norm(ps)).clamp(0, group["max_weight_norm"])
                u_norm = torch.stack(torch._foreach_norm(update))
                ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
                torch._foreach_mul_(update, list((ratio * -group["lr"]).unbind()))
                torch._foreach_add_(ps, update)
        return loss

    def _adam_kernel_step(self, group, params):
        """LAMB's moments and update m / (sqrt(v) + eps) in one pass per parameter: torch's fused Adam kernel
        (``torch._fused_adam_``, what ``torch.optim.Adam(fused=True)`` runs) applied to a zeroed buffer with
        learning rate -1 and no bias correction (a step count so large that 1 - beta^t is 1), which leaves the
        update in the buffer; then the two norms, the trust ratio and ``p += -lr * ratio * update`` (one pass).
        Six passes over memory where the multi-tensor path makes thirteen; the same rule, rounded differently
        (an update divided rather than inverted twice, a fused multiply-add): tests/test_npt.py holds it to the
        rule, and benchmarks/README.md shows training unchanged. No weight decay (the Adam kernel's is not LAMB's)."""
        beta1, beta2 = group["betas"]
        clamp = group["grad_clamp"]
        numels = [p.numel() for p in params]
        no_bias_correction = torch.tensor(float(2 ** 40))  # beta ** 2^40 underflows to 0: 1 - beta ** t == 1
        for idx in _chunks(range(len(params)), numels):
            ps = [params[i] for i in idx]
            grads = [p.grad for p in ps]
            if clamp is not None:
                for g in grads:
                    g.clamp_(-clamp, clamp)
            update = [torch.zeros_like(p) for p in ps]
            torch._fused_adam_(update, grads, [self.state[p]["exp_avg"] for p in ps],
                               [self.state[p]["exp_avg_sq"] for p in ps], [], [no_bias_correction] * len(ps),
                               lr=-1.0, beta1=beta1, beta2=beta2, weight_decay=0.0, eps=group["eps"], amsgrad=False,
                               maximize=False)
            w_norm = torch.stack(torch._foreach_norm(ps)).clamp(0, group["max_weight_norm"])
            u_norm = torch.stack(torch._foreach_norm(update))
            ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
            for p, u, scale in zip(ps, update, (ratio * -group["lr"]).tolist()):
                p.add_(u, alpha=scale)

    def _fused_step(self, group, params):
        kernel = fused_lamb()
        beta1, beta2 = group["betas"]
        # the learning rate changes every step (schedule): a tensor, so the kernel is not recompiled
        lr = torch.tensor(group["lr"], dtype=torch.float32, device=params[0].device)
        for p in params:
            state = self.state[p]
            kernel(p.view(-1), p.grad.view(-1), state["exp_avg"].view(-1), state["exp_avg_sq"].view(-1), lr,
                   beta1, beta2, group["eps"], group["weight_decay"], group["max_weight_norm"], group["grad_clamp"])


def _lamb_one(p, g, m, v, lr, beta1: float, beta2: float, eps: float, weight_decay: float, max_norm: float,
              grad_clamp):
    """The LAMB rule for one flat parameter, written for the compiler: it fuses the clamp, the moment
    updates, both norms and the update into two passes over memory (the multi-tensor path makes ~12)."""
    if grad_clamp is not None:
        g = g.clamp(-grad_clamp, grad_clamp)
    m.lerp_(g, 1 - beta1)
    v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    update = m / (v.sqrt() + eps)
    if weight_decay:
        update = update + weight_decay * p
    w_norm = p.norm().clamp(0, max_norm)
    u_norm = update.norm()
    ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
    p.sub_(update * (lr * ratio))


_FUSED = []


def fused_lamb():
    """``_lamb_one`` compiled with torch.compile (dynamic sizes: one kernel for every parameter), or
    None where it cannot be compiled here (no C++ compiler on a CPU machine, no Triton on a GPU one)."""
    if not _FUSED:
        kernel = None
        try:
            compiled = torch.compile(_lamb_one, dynamic=True, fullgraph=True)
            probe = [torch.ones(3), torch.ones(3), torch.zeros(3), torch.zeros(3)]
            compiled(*probe, torch.tensor(1e-3), 0.9, 0.999, 1e-6, 0.0, 10.0, 1.0)
            kernel = compiled
        except Exception as exc:  # noqa: BLE001 - any compiler failure means: use the eager kernels
            import warnings

            warnings.warn(f"fused LAMB unavailable ({type(exc).__name__}: {str(exc)[:200]}); using the "
                          "multi-tensor kernels", RuntimeWarning, stacklevel=2)
        _FUSED.append(kernel)
    return _FUSED[0]


class Lookahead(torch.optim.Optimizer):
    """Lookahead around any optimiser: every k steps, slow += alpha (fast - slow); fast = slow."""

    def __init__(self, base: torch.optim.Optimizer, alpha: float = 0.5, k: int = 6):
        if not 0.0 <= alpha <= 1.0 or k < 1:
            raise ValueError(f"invalid Lookahead settings alpha={alpha}, k={k}")
        self.base, self.alpha, self.k = base, alpha, k
        self.defaults = base.defaults
        self.steps = 0  # a host counter: deciding when to synchronise reads nothing from the device
        with torch.no_grad():
            self.slow = [[p.detach().clone() for p in g["params"]] for g in self.param_groups]

    # the base optimiser's, always: its load_state_dict replaces these objects
    @property
    def param_groups(self):
        return self.base.param_groups

    @property
    def state(self):
        return self.base.state

    def zero_grad(self, set_to_none: bool = True):
        self.base.zero_grad(set_to_none=set_to_none)

    def step(self, closure=None):
        loss = self.base.step(closure)
        self.advance()
        return loss

    @torch.no_grad()
    def advance(self):
        """Count a step of the base optimiser taken (``step`` does, or a caller that stepped it itself, as a
        CUDA graph does); on every k-th, pull the weights towards the slow ones."""
        self.steps += 1
        if self.steps % self.k == 0:
            for group, slow in zip(self.param_groups, self.slow):
                fast = list(group["params"])
                torch._foreach_lerp_(slow, fast, self.alpha)
                torch._foreach_copy_(fast, slow)

    def state_dict(self):
        return {"base": self.base.state_dict(), "slow": self.slow, "steps": self.steps}

    def load_state_dict(self, state):
        self.base.load_state_dict(state["base"])
        with torch.no_grad():
            for mine, theirs in zip(self.slow, state["slow"]):
                torch._foreach_copy_(mine, theirs)
        self.steps = state["steps"]


def flat_then_anneal(step: int, total: int, flat_fraction: float) -> float:
    """LR multiplier: 1 for the first ``flat_fraction`` of the steps, then cosine to 0 at ``total``."""
    flat = int(flat_fraction * total)
    if step < flat:
        return 1.0
    span = max(total - flat, 1)
    return 0.5 * (1.0 + math.cos(math.pi * min(step - flat, span) / span))


def cosine_tradeoff(step: int, total: int, init: float) -> float:
    """The loss weight lambda of the feature loss: ``init`` at step 0, cosine-annealed to 0 at ``total``."""
    return init * 0.5 * (1.0 + math.cos(math.pi * min(step, total) / max(total, 1)))


def cosine_cyclic(step: int, total: int, lr: float, warmup_fraction: float, init_lr: float = 1e-7,
                  t_mult: float = 2.0, shrink: float = 0.5) -> float:
    """The learning rate of step ``step`` (0-based) under fairseq's cosine schedule as the NPT authors
    configure it (their ``cosine_cyclic``; SGDR, Loshchilov and Hutter 2016, arXiv 1608.03983):

    * warm-up: W = warmup_fraction x total steps (not rounded); from ``init_lr`` at step 0, rising
      linearly by (lr - init_lr) / W a step;
    * then cycles of cosine annealing from a peak down to a floor. The first cycle lasts 2W steps, each
      next one t_mult times longer; cycle i (from 0) goes from lr x shrink^i down to init_lr x shrink^i.
    """
    assert t_mult > 1, f"t_mult must be > 1 (cycles that grow), got {t_mult}"
    warmup = warmup_fraction * total
    if step < warmup:
        return init_lr + step * (lr - init_lr) / warmup
    period, since = 2 * warmup, step - warmup
    # cycle i starts after period x (1 + t_mult + ... + t_mult^(i-1)) = period x (t_mult^i - 1) / (t_mult - 1)
    i = math.floor(math.log(1 + since / period * (t_mult - 1), t_mult))
    start = period * (t_mult ** i - 1) / (t_mult - 1)
    length = period * t_mult ** i
    low, high = init_lr * shrink ** i, lr * shrink ** i
    return low + 0.5 * (high - low) * (1 + math.cos(math.pi * (since - start) / length))
