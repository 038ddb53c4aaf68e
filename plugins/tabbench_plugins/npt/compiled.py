"""NPT's training forward pass and loss compiled by ``torch.compile`` (inductor) on the CPU (param ``compile``).

What is compiled: the model's forward pass under the step's autocast and the masked loss, as one function; AOTAutograd
compiles its backward with it. Masking (its own generator) and the optimiser stay eager. The dropout masks are not
drawn in the graph (inductor's random numbers made the step 1.8 times slower than the eager one at Breast Cancer
e8-l2, benchmarks/README.md): ``model.keep_mask`` draws them before the pass, in the order the eager pass would,
from the same generator, and the pass takes them as inputs (``model.FED``). So a compiled step uses the masks the
eager step would; only the kernels, and with them the rounding, differ.

The cost is paid once per machine and shape, not per job: inductor's on-disk caches (its FX graph cache and
AOTAutograd's, ``TORCHINDUCTOR_CACHE_DIR``) live in the data cache's ``npt-compile/`` ($TABBENCH_CACHE or the user
cache dir, as the speed calibrations do), shared by every job on the machine; a job whose shape another job
compiled before loads the kernels instead of building them. Compiling runs on one thread (a job's core).

Where it pays, measured (benchmarks/npt_compiled_step.py): the compile's seconds against what the compiled steps
save over a job's steps. ``compile: auto`` compiles where the machine's speed book (cost.SpeedBook) holds a compiled
calibration of the pass's shape, so the cache was warmed by an earlier fit with ``compile: true``, and the steps
sized at it, after the compile's seconds recorded with it, exceed the eager steps (estimator.py).
"""

from __future__ import annotations

import os
import time

#: The data cache's folder that holds inductor's caches (``cache_folder``).
CACHE_FOLDER = "npt-compile"


def cache_folder():
    """Where inductor keeps its caches for NPT: the data cache's ``npt-compile/``."""
    from tabbench.data.cache import DataPaths

    return DataPaths.from_env().cache / CACHE_FOLDER


def configure(torch) -> None:
    """Point inductor's caches (FX graph, AOTAutograd) at ``cache_folder`` and compile on one thread. Set before the
    first compile of the process; a folder set by the user ($TORCHINDUCTOR_CACHE_DIR) is kept. (Importing inductor
    sets that variable to its default folder, in the system's temporary folder, where none is set: that one is
    replaced.)"""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    given = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if given is None or os.path.abspath(given) == os.path.abspath(default_cache_dir()):
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_folder())

    inductor_config.fx_graph_cache = True
    inductor_config.compile_threads = 1
    functorch_config.enable_autograd_cache = True


class CompiledLoss:
    """``(model, x, m, x_true, scored, w_target, w_feature) -> loss`` of a training step, compiled: the model's
    forward pass (under bf16 autocast when ``amp``) and the masked loss (``model.step_loss``),
    the dropout masks drawn before it (module docstring). Each new number of rows compiles (dynamo's automatic
    dynamic shapes make the second a graph for any rows). ``seconds``: the CPU seconds of this process its first calls
    at each new shape took (a compile dwarfs a step), ``compiler_seconds`` those of the C++ compiler it ran (child
    processes, which a job's CPU clock does not count), ``compiles``: how many shapes it compiled."""

    def __init__(self, model, cards, n_patches=0, patch_dim=0, amp=False, device_type="cpu"):
        import torch

        configure(torch)
        self.torch, self.model, self.cards = torch, model, list(cards)
        self.n_patches, self.patch_dim, self.amp, self.device_type = n_patches, patch_dim, amp, device_type
        self.plans = {}  # rows -> [(shape, p, dtype)], the masks a step on that many rows draws
        self.fn = torch.compile(self._loss)
        self.seconds, self.compiler_seconds, self.compiles = 0.0, 0.0, 0
        self.failure = None  # why compiling failed, if it did: the step then runs the same function eagerly

    def _autocast(self):
        from tabbench_plugins.torch_training import bf16_autocast

        return bf16_autocast(self.device_type, self.amp)

    def _loss(self, x, m, x_true, scored, w_target, w_feature, masks):
        from tabbench_plugins.npt.model import FED, step_loss

        FED.masks, FED.at = masks, 0
        with self._autocast():
            out = self.model(x, m)
        FED.masks = None
        return step_loss(out, x_true, scored, self.cards, self.n_patches, self.patch_dim, w_target, w_feature)

    def _plan(self, x, m):
        """The masks a training forward pass over ``x``, ``m`` draws: recorded from one eager pass without
        gradients, the random generators left as they were."""
        from tabbench_plugins.npt.model import FED

        torch = self.torch
        FED.plan = []
        try:
            with torch.random.fork_rng(devices=[]), torch.no_grad(), self._autocast():
                self.model(x, m)
            return FED.plan
        finally:
            FED.plan = None

    def __call__(self, x, m, x_true, scored, w_target, w_feature):
        from tabbench_plugins.npt.model import keep_mask

        torch = self.torch
        rows = len(x)
        new = rows not in self.plans
        if new:
            self.plans[rows] = self._plan(x, m)
        masks = [keep_mask(shape, p, dtype) for shape, p, dtype in self.plans[rows]]
        w_target, w_feature = (torch.as_tensor(w, dtype=torch.float32) for w in (w_target, w_feature))
        if self.failure is not None:
            return self._loss(x, m, x_true, scored, w_target, w_feature, masks)
        start, children = time.process_time(), _children_cpu()
        try:
            loss = self.fn(x, m, x_true, scored, w_target, w_feature, masks)
        except Exception as e:  # noqa: BLE001 - a compiler's failure of any kind: the step runs eagerly
            from tabbench_plugins.npt.model import FED

            if not new:
                raise
            FED.masks = None
            self.failure = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            return self._loss(x, m, x_true, scored, w_target, w_feature, masks)
        finally:
            if new:
                self.seconds += time.process_time() - start
                self.compiler_seconds += _children_cpu() - children
                self.compiles += 1
        return loss

    def summary(self) -> dict:
        """What a fit's record keeps of it (``info["compile"]``)."""
        return {"seconds": round(self.seconds, 2), "compiler_seconds": round(self.compiler_seconds, 2),
                "shapes": self.compiles, "failed": self.failure}


def _children_cpu() -> float:
    """CPU seconds of this process's finished child processes (the C++ compiler inductor runs)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
