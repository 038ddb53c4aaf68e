"""What one NPT training step at the budget ladder's sizes could cost at best on this CPU, against what it costs.

For each config (``npt_step.CONFIGS``: the paper's tables' shapes) at each rung of ``size: "budget"``'s ladder
(``cost.LADDER``, the base configuration e32-l8 included), the plugin's step as a budgeted job runs it (bf16
autocast where the CPU has bf16 matrix instructions, LAMB not compiled, one thread, a job's allocator setting;
``npt_step.build``), and two floors under it:

* arithmetic: the step's matrix products (``mm``, ``addmm``, ``bmm``, forward and backward, counted operator by
  operator from their shapes), at this CPU's measured matrix-product peak in their dtype (a large square
  product, ``matmul_peak.peak``, on the same threads): bf16 products at the bf16 peak, fp32 at the fp32 one.
  The element-wise work (dropout, softmax, LayerNorm, GELU, LAMB) is not counted: the floor assumes it free.
* dispatch: the step's operators (every ATen operator dispatched in one step, forward, backward and optimiser,
  counted with a ``TorchDispatchMode``), each at the overhead of an operator that does no work: views at the
  time of a view, the rest at the time per operator of a forward and backward chain of multiplications of
  one-element tensors (autograd's bookkeeping included), both measured here.

One thread runs the operators one after another, so the two floors add: **bound = arithmetic + dispatch**,
and the step is reported as a multiple of it. Beside them, measured rather than counted: the same step on a
table of the same columns cut to **two rows** (``--small-rows``), whose time is what does not grow with the rows:
every operator's dispatch as the step really pays it (Python, autograd's graph, the modules' calls, the
dropout masks' numpy calls) and the optimiser's passes over the weights. The step less it is what the rows
cost. And the products' own time: each timed as the step runs (CPU time around the operator, under a dispatch
mode), the batched products of attention between attributes (one small matrix a row and head) apart. A floor is
what no implementation of the same operators can
beat on this CPU; the distance to it is the element-wise work's passes over memory and every operator's time
above an empty one's.

    python benchmarks/npt_step_bound.py                       # every config and rung, 1 thread
    python benchmarks/npt_step_bound.py --configs breast-cancer --rungs e8-l2,e16-l4 --steps 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from matmul_peak import peak  # noqa: E402
from npt_step import CONFIGS, build  # noqa: E402

PRODUCTS = ("aten.mm.", "aten.addmm.", "aten.bmm.", "aten.baddbmm.")


def product_flop(func, args) -> int:
    """Floating-point operations of one matrix product (2 per multiply-add); 0 for any other operator."""
    name = str(func)
    if not name.startswith(PRODUCTS):
        return 0
    a, b = (args[1], args[2]) if name.startswith(("aten.addmm.", "aten.baddbmm.")) else (args[0], args[1])
    batch = a.shape[0] if a.dim() == 3 else 1
    return 2 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]


def counter(torch, aba_batch: int | None = None):
    """A dispatch mode that counts the operators run under it (views apart) and the products' FLOP by dtype, and
    times each product (CPU seconds, ``product_s``): those of attention between attributes (``bmm`` over
    ``aba_batch`` matrices: rows x heads) apart from the rest."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops, self.views, self.flop, self.product_s = 0, 0, Counter(), Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if getattr(func, "is_view", False):
                self.views += 1
            else:
                self.ops += 1
            flop = product_flop(func, args)
            if not flop:
                return func(*args, **(kwargs or {}))
            self.flop[args[1].dtype if str(func).startswith(("aten.addmm.", "aten.baddbmm.")) else args[0].dtype] \
                += flop
            start = time.process_time()
            out = func(*args, **(kwargs or {}))
            aba = str(func).startswith("aten.bmm.") and args[0].shape[0] == aba_batch
            self.product_s["between attributes" if aba else "other"] += time.process_time() - start
            return out

    return Count()


def timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one call of ``fn``."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def median_cpu_seconds(fn, repeat: int) -> float:
    """The median CPU seconds of ``repeat`` calls after one: on a shared machine the time the work took while
    it held a core, not the time it waited for one."""
    fn()
    return statistics.median(timed(fn)[1] for _ in range(repeat))


def empty_operator_seconds(torch, links: int = 200, repeat: int = 30) -> tuple[float, float]:
    """(seconds per operator, seconds per view) of operators that do no work: a forward and backward chain of
    ``links`` multiplications of one-element tensors, divided by the operators it dispatches (counted as the
    step's are); a view of a one-element tensor, repeated."""
    x = torch.ones(1, requires_grad=True)
    w = torch.full((1,), 1.0001)

    def chain():
        y = x
        for _ in range(links):
            y = y * w
        y.backward()
        x.grad = None

    with counter(torch) as c:
        chain()
    per_op = median_cpu_seconds(chain, repeat) / (c.ops + c.views)
    t = torch.ones(1)

    def views():
        for _ in range(links):
            t.view(1)

    return per_op, median_cpu_seconds(views, repeat) / links


def main(argv=None):
    from tabbench_plugins.npt.cost import LADDER

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="boston,breast-cancer,concrete")
    ap.add_argument("--rungs", default=",".join(r.name for r in LADDER))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10, help="timed steps per rung (median and min reported)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--peak-size", type=int, default=2048, help="rows = columns of the peak's square product")
    ap.add_argument("--small-rows", type=int, default=2, help="rows of the small table whose step is timed beside")
    args = ap.parse_args(argv)
    for option, given, known in (("--configs", args.configs, CONFIGS), ("--rungs", args.rungs,
                                                                         [r.name for r in LADDER])):
        unknown = sorted(set(given.split(",")) - set(known))
        if unknown:
            ap.error(f"{option}: unknown {', '.join(unknown)}; choose from {', '.join(known)}")

    import torch

    from tabbench.measure import fingerprint, hardware_label

    torch.set_num_threads(args.threads)
    bf16 = torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    load_before = os.getloadavg()[0]
    # per CPU-second x threads: what the threads do while they hold a core each (matmul_peak's third figure)
    peaks = {dtype: peak(torch, args.peak_size, dtype, 5, args.threads)["per_cpu"] * 1e9
             for dtype in (torch.float32, torch.bfloat16)}
    per_op, per_view = empty_operator_seconds(torch)
    rows = []
    for name in args.configs.split(","):
        for rung in args.rungs.split(","):
            b = build(name, "fused-bf16" if bf16 else "fused-fp32", None, "cpu", 8, 8, "foreach", rung)
            step = b.train_step(b.model, b.opt)
            for _ in range(args.warmup):
                step(1e-3, 0.5)
            with counter(torch) as c:
                step(1e-3, 0.5)
            wall, cpu = zip(*(timed(lambda: step(1e-3, 0.5)) for _ in range(args.steps)))
            with counter(torch, aba_batch=b.n * b.cfg.n_heads) as products:  # the products' own CPU time
                for _ in range(args.steps):
                    step(1e-3, 0.5)
            arith = sum(f / peaks.get(dt, peaks[torch.float32]) for dt, f in c.flop.items())
            dispatch = c.ops * per_op + c.views * per_view
            rows.append(dict(config=f"{name} {rung}", shape=f"{b.n} x {b.d}, e {b.e}", params=b.model.n_params(),
                             ops=c.ops, views=c.views, gflop=sum(c.flop.values()) / 1e9,
                             bf16_share=c.flop[torch.bfloat16] / max(1, sum(c.flop.values())),
                             arith=arith, dispatch=dispatch, median=statistics.median(wall), min=min(wall),
                             cpu=statistics.median(cpu) / args.threads,
                             products=sum(products.product_s.values()) / args.steps / args.threads,
                             aba=products.product_s["between attributes"] / args.steps / args.threads))
            b = step = None  # freed before the small table is built
            small = build(name, "fused-bf16" if bf16 else "fused-fp32", args.small_rows, "cpu", 8, 8, "foreach", rung)
            small_step = small.train_step(small.model, small.opt)
            for _ in range(args.warmup):
                small_step(1e-3, 0.5)
            rows[-1]["small_cpu"] = statistics.median(timed(lambda: small_step(1e-3, 0.5))[1]
                                                      for _ in range(args.steps)) / args.threads
            print(f"  done {name} {rung}: {rows[-1]['median'] * 1000:.1f} ms", file=sys.stderr, flush=True)
            small = small_step = None

    print(f"machine: {hardware_label(fingerprint())}")
    print(f"{args.threads} thread(s); bf16 autocast {'on' if bf16 else 'off (no bf16 matrix instructions)'}; "
          f"LAMB not compiled; median and min of {args.steps} steps after {args.warmup} warm-up; load average "
          f"(1 min) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"per CPU-second (x threads): matrix-product peak ({args.peak_size} x {args.peak_size}, median of 5) fp32 "
          f"{peaks[torch.float32] / 1e9:.0f}, bf16 {peaks[torch.bfloat16] / 1e9:.0f} GFLOP/s; an empty operator "
          f"{per_op * 1e6:.2f} us, a view {per_view * 1e6:.2f} us")
    print("step CPU ms: the step's CPU time over the threads (what it took while it held them, not the waits of a "
          "shared machine); the floors are in the same CPU time")
    print()
    print("| config rung | rows x cols, e | params | operators (+ views) a step | GFLOP a step (bf16 share) | "
          "arithmetic floor ms | dispatch floor ms | bound ms | step wall ms median (min) | step CPU ms | "
          f"step CPU / bound | step CPU ms at {args.small_rows} rows | the rows' share (step less that) | "
          "products CPU ms a step (attention between attributes') |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        bound = r["arith"] + r["dispatch"]
        print(f"| {r['config']} | {r['shape']} | {r['params']:,} | {r['ops']} (+{r['views']}) | {r['gflop']:.2f} "
              f"({r['bf16_share']:.0%}) | {r['arith'] * 1000:.1f} | {r['dispatch'] * 1000:.1f} | {bound * 1000:.1f} | "
              f"{r['median'] * 1000:.1f} ({r['min'] * 1000:.1f}) | {r['cpu'] * 1000:.1f} | {r['cpu'] / bound:.1f}x | "
              f"{r['small_cpu'] * 1000:.1f} | {(r['cpu'] - r['small_cpu']) / r['cpu']:.0%} | "
              f"{r['products'] * 1000:.1f} ({r['aba'] * 1000:.1f}) |")


if __name__ == "__main__":
    main()
