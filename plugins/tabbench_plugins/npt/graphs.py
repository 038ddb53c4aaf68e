"""CUDA graphs for NPT's small-table training: a step launched as one graph instead of ~1,500 kernels.

On a GPU, a whole-table step of the paper's small-data configs is bound by kernel launches, not by
arithmetic: Boston at e 128 (168 M parameters, 506 rows) is about 0.5 TFLOP a step, a millisecond of an
H100's bf16 throughput, yet the eager step takes 31-33 ms (benchmarks/README.md), the time the host takes
to launch its kernels one by one (8 blocks forward and backward, a head and a loss per column, the
multi-tensor LAMB). A CUDA graph records those launches once and replays them with one call.

What may be captured: work whose tensors keep their addresses from one call to the next (the whole table,
parameters, gradients, optimiser state, values the caller refreshes in place such as the learning rate),
that never reads a value back to the host (no ``.item()``, no branch on a device value, no boolean
indexing), and that draws random numbers from the device's default generator only (NPT's masking and
dropout do, on CUDA). A capture that fails anyway is reported once and the work runs eagerly from then on,
unless the failure left the default generator unusable (torch 2.11 does, when a host sync invalidated the
capture): then the run stops with an error that says so, rather than train on with a broken generator.
"""

from __future__ import annotations

import warnings


class Replayed:
    """``fn()`` run eagerly for its first ``warmup`` calls (on a side stream, as capture asks: the lazily
    made state of cuBLAS, autograd and the optimiser exists before capture), captured as a CUDA graph on the
    next call and replayed from then on: every call does ``fn``'s work once and returns its outputs (after
    capture, the same tensors, overwritten by each replay). ``enabled=False``: ``fn()`` every call."""

    def __init__(self, fn, enabled: bool, warmup: int = 2):
        self.fn, self.enabled, self.warmup = fn, enabled, warmup
        self.graph, self.out, self.calls = None, None, 0
        self.failure = None  # why capture failed, if it did

    @property
    def status(self) -> str:
        """"replayed", "eager" (never asked for, or not called often enough), or "failed: <why>"."""
        if self.failure:
            return f"failed: {self.failure}"
        return "replayed" if self.graph is not None else "eager"

    def __call__(self):
        if self.graph is not None:
            self.graph.replay()
            return self.out
        if not self.enabled:
            return self.fn()
        import torch

        if self.calls < self.warmup:
            self.calls += 1
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                out = self.fn()
            torch.cuda.current_stream().wait_stream(side)
            return out
        graph = torch.cuda.CUDAGraph()
        try:
            # thread_local: a measuring thread of the harness may call the CUDA runtime meanwhile
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                out = self.fn()
        except Exception as exc:  # noqa: BLE001 - any capture failure means: run eagerly, say why
            self.enabled, self.failure = False, f"{type(exc).__name__}: {str(exc)[:300]}"
            warnings.warn(f"CUDA graph capture failed ({self.failure}); running eagerly", RuntimeWarning,
                          stacklevel=2)
            torch.cuda.synchronize()
            try:
                torch.rand(1, device="cuda")
            except RuntimeError as broken:
                raise RuntimeError(f"CUDA graph capture failed ({self.failure}) and left the device's random "
                                   "generator unusable in this process; run it with cuda_graph: false") from broken
            return self.fn()
        self.graph, self.out = graph, out
        graph.replay()  # capture recorded the work without running it
        return out
