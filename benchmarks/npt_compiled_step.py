"""torch.compile (inductor, CPU) of NPT's training step at the budget ladder's sizes: what compiling costs, cold and
from the on-disk caches, what it saves a step, and whether it pays in a job of 240-450 s.

For each table (Breast Cancer, scikit-learn's copy: 569 x 30 numeric + a binary target; Boston, the shared
datasets' housing.data: 11 numeric, CHAS and RAD categorical as in the paper, MEDV the target; values standardised,
classes as indices, as the plugin encodes them) and each rung of ``cost.LADDER`` (its e, layers, heads and batch
rows, ``npt_step.rung_shape``), the plugin's model and optimiser as a budgeted job builds them (bf16 autocast where
the CPU has bf16 matrix instructions, LAMB not compiled, in Lookahead, one thread, a job's allocator setting), and
one training step three ways, all on the same model, alternating:

* eager: the step as ``training.TrainStep`` runs it (masking, forward, masked loss, backward, clip + LAMB).
* compiled: the forward and the loss as one ``torch.compile``d function (inductor; AOTAutograd compiles the
  backward with it). The dropout masks are drawn before it, as the eager step draws them (``model.dropout``'s
  numpy PCG64 bits, in the same order from the same generator), and fed to it as inputs: the same masks as the
  eager step, so only the kernels differ. Masking and the optimiser stay eager.
* compiled, inductor's dropout (``--inductor-dropout``): the same, with ``F.dropout`` inside the graph, which
  inductor generates its own random numbers for.

Compile time is measured in fresh processes: **cold** with an empty inductor cache (``TORCHINDUCTOR_CACHE_DIR``, the
FX graph cache and the AOTAutograd cache, all in a folder of the data cache: ``$TABBENCH_CACHE``/npt-compile), then
**warm**, a second process with the same folder (what every later job on the machine would pay). Both as seconds
of the first compiled step (wall, this process's CPU and its children's: the C++ compiler runs as a child), less
an eager step. Inductor compiles on one thread (TORCHINDUCTOR_COMPILE_THREADS=1), as a one-core job would.

Step time: CPU seconds of this process (``time.process_time``), eager and compiled alternating (the order
swapped every pair), min and median of ``--steps`` each. Whether it pays: the steps one job trains at the eager
step (TRAINING_SHARE of the budget, validations left out: an upper bound) times the seconds a compiled step saves,
against the compile's CPU seconds (this process's and the C++ compiler's), cold and warm: a job's budget is CPU time
of its process (tabbench/clock.py), which a busy core's waits do not count, so neither do these.

Row batches (``--dynamic``, at the first table and rung given): the compiled function called on a batch one and two rows
shorter (a "b512" rung's batches differ by a row on most tables) with static shapes (a recompile per shape, then
dynamo marks the rows dynamic itself) and with the rows dimension marked dynamic from the start
(``torch._dynamo.mark_dynamic``), the seconds of each call and the compiled step's time at the dynamic shape.
Padding batches to one shape is not an option for NPT: every row attends to every row, so a padded row would
change the others' attention unless masked out, a different computation.

    python benchmarks/npt_compiled_step.py                                     # both tables, every rung
    python benchmarks/npt_compiled_step.py --configs breast-cancer --rungs e8-l2 --steps 8 --inductor-dropout
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from npt_step import CONFIGS, rung_shape  # noqa: E402

TABLES = ("breast-cancer", "boston")
BUDGETS = (240, 450)


def real_table(name: str, data: Path):
    """(x, cards): the table's values as the plugin's model takes them (numeric standardised, classes as indices,
    the target last) and its columns' cardinalities (0: numeric), in ``npt_step.CONFIGS``'s order."""
    import numpy as np

    if name == "breast-cancer":
        from sklearn.datasets import load_breast_cancer

        X, y = load_breast_cancer(return_X_y=True)
        num, cat, target = X, [], y.astype(float)
    else:
        path = data / "uci" / "boston" / "housing.data"
        if not path.exists():
            sys.exit(f"{path} not found: give --data the shared datasets folder (SOURCES.md names the file)")
        t = np.loadtxt(path)
        num = t[:, [0, 1, 2, 4, 5, 6, 7, 9, 10, 11, 12]]
        cat = [np.unique(t[:, c], return_inverse=True)[1].astype(float) for c in (3, 8)]  # CHAS, RAD
        target = (t[:, 13] - t[:, 13].mean()) / t[:, 13].std()
    num = (num - num.mean(0)) / num.std(0)
    x = np.column_stack([num, *cat, target])
    _, n_num, cats, target_card, _ = CONFIGS[name]
    cards = (0,) * n_num + tuple(cats) + (target_card,)
    assert x.shape[1] == len(cards) and all(c == 0 or x[:, j].max() < c for j, c in enumerate(cards))
    return x.astype("float32"), cards


def worker(args) -> dict:
    """One process: build the rung's model on the table, compile, time; a JSON line of what it measured."""
    import torch
    import torch.nn.functional as F

    from tabbench.run.isolation import steady_allocator
    from tabbench_plugins.npt import model as nm
    from tabbench_plugins.npt import optimiser as no
    from tabbench_plugins.npt.model import corrupt, entry_losses, masked_mean

    steady_allocator()
    torch.set_num_threads(1)
    bf16 = torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    values, cards = real_table(args.configs, args.data)
    n, e, layers, heads = rung_shape(args.configs, args.rungs)
    torch.manual_seed(0)
    cfg = nm.NPTConfig(cards=cards, e=e, n_layers=layers, n_heads=heads)
    model = nm.NPT(cfg)
    opt = no.Lookahead(no.Lamb(list(model.parameters()), lr=1e-3, grad_clamp=1.0, fused=False))
    x = torch.from_numpy(values[:n]).clone()
    missing = torch.zeros(x.shape, dtype=torch.bool)
    d, t = len(cards), len(cards) - 1
    p_col = torch.tensor([0.15] * t + [1.0])
    cards_t = torch.tensor(cards, dtype=torch.float32)
    gen = torch.Generator().manual_seed(0)

    # the dropout masks: drawn by the plugin's own ``model.dropout`` (on a tensor of ones: its mask times one), fed
    # in order to the forward pass through this stand-in for it (a module global, so every call site takes it)
    eager_dropout, plan, feed = nm.dropout, [], {"masks": None, "at": 0, "inductor": False}

    def fed_dropout(x, p, training):
        if not training or p == 0:
            return x
        if feed["inductor"]:
            return F.dropout(x, p, True)
        if feed["masks"] is None:  # recording the step's masks: (shape, p, dtype) in the order they are drawn
            plan.append((tuple(x.shape), p, x.dtype))
            return eager_dropout(x, p, training)
        mask = feed["masks"][feed["at"]]
        feed["at"] += 1
        return x * mask

    nm.dropout = fed_dropout

    def mask(shape, p, dtype):
        return eager_dropout(torch.ones(shape, dtype=dtype), p, True)

    def draw_masks():
        return [mask(shape, p, dtype) for shape, p, dtype in plan]

    def loss_of(cx, cm, xb, scored, w_target, w_feature, masks):
        feed["masks"], feed["at"] = masks, 0
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = model(cx, cm)
        losses = entry_losses(out, xb, cards)
        return (w_target * masked_mean(losses[:, t], scored[:, t])
                + w_feature * masked_mean(losses[:, :t], scored[:, :t]))

    def step(fn, rows=None, eager=False):
        xb = x if rows is None else x[:rows]
        mb = missing[:len(xb)]
        c = corrupt(xb, mb, ~mb, p_col, cards_t, gen)
        w = torch.tensor(0.5)
        if eager:  # exactly the eager step: the masks drawn where the forward pass needs them
            feed["masks"] = None
            nm.dropout = eager_dropout
            try:
                loss = loss_of(c.x, c.m, xb, c.scored, w, w, None)
            finally:
                nm.dropout = fed_dropout
        else:
            loss = fn(c.x, c.m, xb, c.scored, w, w, None if feed["inductor"] else draw_masks())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        for group in opt.param_groups:
            group["lr"] = 1e-3
        opt.base.step()
        opt.advance()
        return loss

    def timed(fn):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (time.perf_counter() - w0, time.process_time() - c0,
                r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)

    model.train()
    loss_of(*(lambda c: (c.x, c.m, x, c.scored))(corrupt(x, missing, ~missing, p_col, cards_t, gen)),
            torch.tensor(0.5), torch.tensor(0.5), None)  # records the plan
    feed["masks"] = None
    eager_s = min(timed(lambda: step(None, eager=True))[0] for _ in range(2))
    feed["inductor"] = args.inductor_dropout
    compiled = torch.compile(loss_of, dynamic=False)
    wall, cpu, children = timed(lambda: step(compiled))
    out = dict(config=args.configs, rung=args.rungs, rows=n, cols=d, e=e, layers=layers,
               params=model.n_params(), masks=len(plan), bf16=bf16, inductor_dropout=args.inductor_dropout,
               compile_wall=wall - eager_s, compile_cpu=cpu - eager_s, compile_children_cpu=children)
    if args.steps:
        step(compiled)
        step(None, eager=True)
        eager, comp = [], []
        for i in range(args.steps):
            pair = [(True, eager), (False, comp)]
            for is_eager, acc in (pair if i % 2 == 0 else pair[::-1]):
                acc.append(timed(lambda: step(compiled, eager=is_eager))[1])
        out.update(eager_min=min(eager), eager_median=statistics.median(eager), compiled_min=min(comp),
                   compiled_median=statistics.median(comp))
    if args.dynamic:
        out["dynamic"] = dynamic_shapes(torch, loss_of, timed, n, x, missing, p_col, cards_t, gen, mask, plan)
    return out


def dynamic_shapes(torch, loss_of, timed, n, x, missing, p_col, cards_t, gen, mask, plan):
    """Seconds of compiled calls (forward and backward) at n, n - 1, n - 2 and n - 1 rows: dynamo's default (static
    shapes first; at the second shape it recompiles with the rows dynamic), and the rows marked dynamic from the
    start; the compiled forward and backward's CPU time at n - 1 rows then."""
    from tabbench_plugins.npt.model import corrupt

    result = {}
    for how in ("automatic", "marked"):
        torch._dynamo.reset()
        fn = torch.compile(loss_of)

        def call(rows, fn=fn, how=how):
            xb, mb = x[:rows], missing[:rows]
            c = corrupt(xb, mb, ~mb, p_col, cards_t, gen)
            # the plan's masks at these rows: the rows are every axis of n (ABD's (1, n, .), its (1, heads, n, n))
            masks = [mask(tuple(rows if s == n else s for s in shape), p, dtype) for shape, p, dtype in plan]
            if how == "marked":
                for a in (c.x, c.m, xb, c.scored, *masks):
                    for axis, size in enumerate(a.shape):
                        if size == rows:
                            torch._dynamo.mark_dynamic(a, axis)
            fn(c.x, c.m, xb, c.scored, torch.tensor(0.5), torch.tensor(0.5), masks).backward()

        result[how] = [round(timed(lambda r=r: call(r))[0], 2) for r in (n, n - 1, n - 2, n - 1)]
        result[f"{how}_step_cpu"] = statistics.median(timed(lambda: call(n - 1))[1] for _ in range(3))
    return result


def main(argv=None):
    from tabbench_plugins.npt.cost import LADDER

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default=",".join(TABLES))
    ap.add_argument("--rungs", default=",".join(r.name for r in LADDER))
    ap.add_argument("--steps", type=int, default=8, help="timed steps per variant (min and median reported)")
    ap.add_argument("--inductor-dropout", action="store_true",
                    help="the compiled step draws its dropout masks with inductor's random numbers")
    ap.add_argument("--dynamic", action="store_true", help="also time batches of changing rows (first rung)")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "datasets",
                    help="the shared datasets folder (Boston's housing.data)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args)))
        return
    for option, given, known in (("--configs", args.configs, TABLES),
                                 ("--rungs", args.rungs, [r.name for r in LADDER])):
        unknown = sorted(set(given.split(",")) - set(known))
        if unknown:
            ap.error(f"{option}: unknown {', '.join(unknown)}; choose from {', '.join(known)}")

    from tabbench.data.cache import DataPaths
    from tabbench.estimator import TRAINING_SHARE
    from tabbench.measure import fingerprint, hardware_label

    cache_root = DataPaths.from_env().cache / "npt-compile"
    cache_root.mkdir(parents=True, exist_ok=True)
    print(f"machine: {hardware_label(fingerprint())}")
    print(f"1 thread; LAMB not compiled; dropout in the compiled step: "
          f"{'inductor' if args.inductor_dropout else 'the eager masks, fed in'}; {args.steps} steps a variant, "
          f"alternating; load average (1 min) {os.getloadavg()[0]:.2f} at the start")
    print("compile: the first compiled step less an eager one, CPU seconds (this process's + the C++ compiler's) "
          "and wall; pays: the seconds saved over a job's steps exceed the compile's CPU seconds")
    print()
    print("| config rung | rows x cols, e | params | compile cold CPU s (process + compiler), wall | compile warm CPU "
          "s, wall | eager CPU ms min / median | compiled CPU ms min / median | eager / compiled (medians) | saved "
          "in a 240 s / 450 s job, s | pays at 240 / 450 s: cold; warm |")
    print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
    dynamic_lines = []
    for c, config in enumerate(args.configs.split(",")):
        for i, rung in enumerate(args.rungs.split(",")):
            cache = Path(tempfile.mkdtemp(prefix=f"bench-{config}-{rung}-", dir=cache_root))
            env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
                   "TORCHINDUCTOR_AUTOGRAD_CACHE": "1", "TORCHINDUCTOR_COMPILE_THREADS": "1"}
            cmd = [sys.executable, __file__, "--worker", "--configs", config, "--rungs", rung, "--data", str(args.data)]
            cmd += ["--inductor-dropout"] if args.inductor_dropout else []
            runs = []
            for steps, dynamic in ((0, False), (args.steps, args.dynamic and c == i == 0)):  # cold, then warm
                done = subprocess.run(cmd + ["--steps", str(steps)] + (["--dynamic"] if dynamic else []), env=env,
                                      capture_output=True, text=True)
                if done.returncode:
                    sys.exit(f"{config} {rung}: the worker failed:\n{done.stderr[-3000:]}")
                runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
            shutil.rmtree(cache, ignore_errors=True)
            cold, r = runs
            cost = {"cold": cold["compile_cpu"] + cold["compile_children_cpu"],
                    "warm": r["compile_cpu"] + r["compile_children_cpu"]}
            saved_step = r["eager_median"] - r["compiled_median"]
            saved = [TRAINING_SHARE * b / r["eager_median"] * saved_step for b in BUDGETS]
            pays = {k: " / ".join("yes" if s > v else "no" for s in saved) for k, v in cost.items()}
            print(f"| {config} {rung} | {r['rows']} x {r['cols']}, {r['e']} | {r['params']:,} | "
                  f"{cost['cold']:.1f} ({cold['compile_cpu']:.1f} + {cold['compile_children_cpu']:.1f}), "
                  f"{cold['compile_wall']:.0f} | {cost['warm']:.1f} ({r['compile_cpu']:.1f} + "
                  f"{r['compile_children_cpu']:.1f}), {r['compile_wall']:.0f} | "
                  f"{r['eager_min'] * 1000:.1f} / {r['eager_median'] * 1000:.1f} | "
                  f"{r['compiled_min'] * 1000:.1f} / {r['compiled_median'] * 1000:.1f} | "
                  f"{r['eager_median'] / r['compiled_median']:.2f}x | {saved[0]:.1f} / {saved[1]:.1f} | "
                  f"{pays['cold']}; {pays['warm']} |", flush=True)
            if "dynamic" in r:
                dyn = r["dynamic"]
                dynamic_lines.append(
                    f"row batches, {config} {rung}: wall seconds of the compiled calls (forward and backward) at "
                    f"{r['rows']}, {r['rows'] - 1}, {r['rows'] - 2}, {r['rows'] - 1} rows: dynamo's default "
                    f"(automatic dynamic shapes) {dyn['automatic']}, its forward and backward at {r['rows'] - 1} rows "
                    f"then {dyn['automatic_step_cpu'] * 1000:.1f} ms CPU; the rows marked dynamic from the start "
                    f"{dyn['marked']}, {dyn['marked_step_cpu'] * 1000:.1f} ms CPU")
    print()
    for line in dynamic_lines:
        print(line)
    print(f"load average (1 min) at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
