"""LAMB wrapped in Lookahead, and the "flat then anneal" schedules NPT trains with.

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

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, max_weight_norm=10.0):
        if lr < 0 or eps < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"invalid LAMB settings lr={lr}, betas={betas}, eps={eps}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      max_weight_norm=max_weight_norm))

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


class Lookahead(torch.optim.Optimizer):
    """Lookahead around any optimiser: every k steps, slow += alpha (fast - slow); fast = slow."""

    def __init__(self, base: torch.optim.Optimizer, alpha: float = 0.5, k: int = 6):
        if not 0.0 <= alpha <= 1.0 or k < 1:
            raise ValueError(f"invalid Lookahead settings alpha={alpha}, k={k}")
        self.base, self.alpha, self.k = base, alpha, k
        self.param_groups = base.param_groups
        self.defaults = base.defaults
        self.state = base.state
        self.steps = 0  # a host counter: deciding when to synchronise reads nothing from the device
        with torch.no_grad():
            self.slow = [[p.detach().clone() for p in g["params"]] for g in self.param_groups]

    def zero_grad(self, set_to_none: bool = True):
        self.base.zero_grad(set_to_none=set_to_none)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self.base.step(closure)
        self.steps += 1
        if self.steps % self.k == 0:
            for group, slow in zip(self.param_groups, self.slow):
                fast = list(group["params"])
                torch._foreach_lerp_(slow, fast, self.alpha)
                torch._foreach_copy_(fast, slow)
        return loss

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
