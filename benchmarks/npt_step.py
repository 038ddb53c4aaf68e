"""Time one NPT training step and measure its peak memory: fused attention vs explicit softmax.

A training step is what ``NPT.fit`` does per step: BERT-style masking, forward, the masked loss,
backward, element-wise gradient clipping and a LAMB + Lookahead update. Each (config, path) runs in
a fresh subprocess, so peak memory is not polluted by an earlier measurement.

Paths (same model, same maths):
  explicit-fp32   softmax(QK^T / t) V written out (materialises the n x n matrix), fp32
  fused-fp32      F.scaled_dot_product_attention, fp32
  fused-bf16      F.scaled_dot_product_attention under bf16 autocast (the default on CUDA)
  fused-bf16-ckpt the same with activation checkpointing per block
  fused-bf16-det  fused-bf16 under torch's deterministic algorithms (the plugin's deterministic: true on CUDA;
                  the same as fused-bf16 on the CPU)
  fused-bf16-graph fused-bf16 with the step captured once as a CUDA graph and replayed (the plugin's
                  cuda_graph: auto on CUDA over whole-table batches; plugins/tabbench_plugins/npt/graphs.py); CUDA only

Every path times the plugin's own step (``training.TrainStep``), as ``NPT.fit`` runs it.

Configs: the paper's batch shapes, rows x columns (target included) and embedding size e, 8 layers,
8 heads: higgs 4096 x 29 e=64, protein 2048 x 10 e=128, boston 506 x 14 e=128. ``--rows`` caps the
rows (the CPU default caps them at 256: a full Higgs step takes about a minute on 2 CPU cores).

Peak memory: CUDA: torch.cuda.max_memory_allocated / max_memory_reserved over the timed steps.
CPU: VmHWM (peak resident set) of the worker after resetting it (echo 5 > /proc/self/clear_refs)
once the model and optimiser exist and the warm-up steps have run (freed memory returned to the OS
with malloc_trim); "added" subtracts the resident set just before the timed steps (the weights,
optimiser state and Lookahead's slow weights), i.e. the step's working memory.

    python benchmarks/npt_step.py                       # all configs, all paths, default device
    python benchmarks/npt_step.py --device cpu --rows 256 --steps 3 --threads 2
    git worktree add ../before HEAD~1 && python benchmarks/npt_step.py --against ../before/plugins ...
                                                        # before/after a change, steps interleaved
                                                        # (the other tree's model, under this tree's step)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from tabbench.measure import fingerprint, hardware_label, proc_status_kib

CONFIGS = {  # name: (rows, numeric features, categorical feature cardinalities, target cardinality, e)
    "higgs": (4096, 28, (), 2, 64),  # binary target
    "protein": (2048, 9, (), 0, 128),  # regression target
    "boston": (506, 11, (2, 9), 0, 128),  # CHAS and RAD categorical, as in the paper
    "breast-cancer": (569, 30, (), 2, 32),  # the paper's config for it (e 32)
    "yacht": (308, 0, (5, 10, 8, 17, 10, 14), 0, 128),  # the authors' encoding (all six categorical), e 128
    "concrete": (1030, 8, (), 0, 128),  # the paper's config for it (e 128)
    "yacht-e32": (308, 0, (5, 10, 8, 17, 10, 14), 0, 32),  # e 32, as uci-small-npt-paper's npt-e32 runs it
    "concrete-e32": (1030, 8, (), 0, 32),
}
PATHS = ("explicit-fp32", "fused-fp32", "fused-bf16", "fused-bf16-ckpt", "fused-bf16-det", "fused-bf16-graph")


def load_model_module(folder, name="model"):
    """The NPT model (``name="optimiser"``: its optimiser) of another tree's built-in plugins folder
    (``plugins/tabbench_plugins/``, or ``plugins/`` in a tree from before that layout; e.g. a git worktree of an
    earlier commit), imported under its own name beside this tree's, so that both versions run in one process.
    None where that tree has no such module (an optimiser before NPT was a package)."""
    import importlib.util

    if os.path.isdir(os.path.join(folder, "tabbench_plugins")):
        folder = os.path.join(folder, "tabbench_plugins")  # plugins/ given for a tree of today's layout
    path = os.path.join(folder, "npt", f"{name}.py")  # npt/ since NPT is a package
    if not os.path.exists(path):
        if name != "model":
            return None
        path = os.path.join(folder, "npt_model.py")  # an earlier tree's plugins/
    spec = importlib.util.spec_from_file_location(f"npt_{name}_against", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def rung_shape(name, rung):
    """(rows of one training batch, e, layers, heads) of ``size: "budget"``'s rung ``rung`` (cost.LADDER) on
    config ``name``'s table, as a fit batches it (``cost.n_batches``: a "b512" rung splits Concrete's 1,030 rows
    into two batches of 515)."""
    from tabbench_plugins.npt.cost import LADDER, n_batches

    r = {r.name: r for r in LADDER}[rung]
    n = CONFIGS[name][0]
    return -(-n // n_batches(n, r.batch_size)), r.e, r.n_layers, r.n_heads


def build(name, path, rows, device, layers, heads, optimizer="fused", rung=None):
    """The plugin's model, LAMB in Lookahead and training step (``training.TrainStep``) for config ``name`` (at
    ``rung``'s size, if given) and path ``path``, on a random table of the config's shape. Returns a namespace:
    torch, dev, cfg, rows n, columns d, e, model, opt, and ``train_step(model, opt)``, the step of any model of
    the same config on the same table."""
    import types

    import torch

    from tabbench_plugins.npt import model as nm
    from tabbench_plugins.npt import optimiser as no
    from tabbench_plugins.npt.training import TrainStep, masks_generator

    torch.manual_seed(0)
    n, n_num, cat, target, e = CONFIGS[name]
    if rung:  # a rung of the budget ladder, in a process set up as a job's (tabbench.run.isolation)
        from tabbench.run.isolation import steady_allocator

        steady_allocator()
        n, e, layers, heads = rung_shape(name, rung)
    n = min(n, rows) if rows else n
    cards = (0,) * n_num + tuple(cat) + (target,)
    d = len(cards)
    dev = torch.device(device)
    cfg = nm.NPTConfig(cards=cards, e=e, n_layers=layers, n_heads=heads,
                       attention="explicit" if path.startswith("explicit") else "fused",
                       checkpointing=path.endswith("ckpt"))
    bf16 = "bf16" in path
    if path.endswith("-det"):  # as the plugin's fit does; this process measures one path, so never restored
        from tabbench_plugins.torch_training import deterministic_algorithms

        deterministic_algorithms(dev.type, True).__enter__()
    model = nm.NPT(cfg).to(dev)
    opt = no.Lookahead(no.Lamb(list(model.parameters()), lr=1e-3, grad_clamp=1.0, fused=optimizer == "fused"))
    # a real-looking table: standardised numeric values, uniform classes; nothing missing
    x = torch.randn(n, d, device=dev)
    for j, c in enumerate(cards):
        if c:
            x[:, j] = torch.randint(0, c, (n,), device=dev).float()
    missing = torch.zeros(n, d, dtype=torch.bool, device=dev)
    p = torch.tensor([0.15] * (d - 1) + [1.0], device=dev)
    gen = masks_generator(torch, dev, 0)  # as fit's: on CUDA the default one (a graph can replay only it)

    def train_step(model, opt):
        return TrainStep(model, opt, x, missing, p, cards, gen, amp=bf16, graphed=path.endswith("graph"))

    return types.SimpleNamespace(torch=torch, dev=dev, cfg=cfg, n=n, d=d, e=e, model=model, opt=opt,
                                 train_step=train_step)


def worker(name, path, rows, steps, warmup, device, threads, layers, heads, optimizer="fused", profile=False,
           against=None, rung=None):
    import torch

    if threads:
        torch.set_num_threads(threads)
    b = build(name, path, rows, device, layers, heads, optimizer, rung)
    model, cfg, dev, n, d, e = b.model, b.cfg, b.dev, b.n, b.d, b.e
    if against:  # the other tree's model and optimiser, same config and initial weights
        from tabbench_plugins.npt import optimiser as no

        other = load_model_module(against)
        other_opt = load_model_module(against, "optimiser") or no
        model_b = other.NPT(other.NPTConfig(**{f: getattr(cfg, f) for f in other.NPTConfig.__dataclass_fields__
                                                  if hasattr(cfg, f)})).to(dev)
        model_b.load_state_dict(model.state_dict())
        opt_b = other_opt.Lookahead(other_opt.Lamb(list(model_b.parameters()), lr=1e-3, grad_clamp=1.0,
                                                   fused=optimizer == "fused"))
    step_this = b.train_step(model, b.opt)

    def step(step_this=step_this):  # half the loss on the features, half on the target, as mid-run
        step_this(1e-3, 0.5)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    times, times_against, cpu, cpu_against = [], [], [], []
    sides = [(step, times, cpu)]  # with --against, the two trees' steps alternate: both see the same machine load
    if against:
        sides.append((lambda step_b=b.train_step(model_b, opt_b): step_b(1e-3, 0.5), times_against, cpu_against))
    for _ in range(warmup + path.endswith("graph")):  # a graphed step's capture is a warm-up step of its own
        for fn, _out, _cpu in sides:
            fn()
    sync()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:  # give freed warm-up activations back to the OS, so the baseline is the resident state only
        import ctypes

        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except OSError:
            pass
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        base = proc_status_kib("VmRSS") * 1024
    for _ in range(steps):
        for fn, out, out_cpu in sides:
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            sync()
            out.append(time.perf_counter() - t0)
            out_cpu.append(time.process_time() - c0)
    if profile:
        print_profile(model, step, sync, dev)
    if dev.type == "cuda":
        peak, reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
    else:
        peak, reserved = proc_status_kib("VmHWM") * 1024, None
    dev_name = f"{dev.type}; machine: {hardware_label(fingerprint())}"
    ms = statistics.median(times) * 1000
    return {"config": name if not rung else f"{name} {rung}", "path": path, "rows": n, "cols": d, "e": e,
            "n_params": model.n_params(),
            "ms": ms, "rows_per_s": n / (ms / 1000), "peak": peak, "added": peak - base, "reserved": reserved,
            "device": dev_name, "steps": steps,
            "ms_against": statistics.median(times_against) * 1000 if against else None,
            "ms_min": min(times) * 1000, "ms_against_min": min(times_against) * 1000 if against else None,
            # each step of the other tree over this tree's next one, the two run back to back
            "paired": statistics.median(a / b for a, b in zip(times_against, times)) if against else None,
            # the same in CPU time: on a shared machine, what a step took while it held the cores
            "cpu_ms": statistics.median(cpu) * 1000, "cpu_ms_against": statistics.median(cpu_against) * 1000
            if against else None,
            "paired_cpu": statistics.median(a / b for a, b in zip(cpu_against, cpu)) if against else None}


def print_profile(model, step, sync, dev, steps=3):
    """Where a step's time goes: the phases of the step, and the forward/backward per kind of module
    (ABD and ABA blocks split into attention and rFF), from torch.profiler over ``steps`` steps."""
    from torch.profiler import ProfilerActivity, profile, record_function

    hooks = []
    for name, module in model.named_modules():  # label the forward of each part; backward ops inherit it
        kind = ("abd" if "blocks" in name and int(name.split(".")[1]) % 2 == 0 else "aba") if "blocks." in name else None
        label = None
        if name == "embed":
            label = "embedding"
        elif name == "heads":
            label = "heads"
        elif kind and name.endswith(".att"):
            label = f"{kind} attention (qkv, softmax, mix)"
        elif kind and name.endswith(".rff"):
            label = f"{kind} rFF"
        if label:
            ctx = {}
            hooks.append(module.register_forward_pre_hook(
                lambda m, a, label=label, ctx=ctx: ctx.__setitem__(m, record_function("fwd: " + label).__enter__())))
            hooks.append(module.register_forward_hook(lambda m, a, o, ctx=ctx: ctx.pop(m).__exit__(None, None, None)))
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with profile(activities=acts) as prof:
        for _ in range(steps):
            step()
        sync()
    for h in hooks:
        h.remove()
    events = {e.key: e for e in prof.key_averages()}
    total = sum(events[k].cpu_time_total for k in ("masking", "forward", "loss", "backward",
                                                   "clip + LAMB + Lookahead") if k in events)
    print(f"profile over {steps} steps, CPU time per step (ms) and share of the step:")
    for key in ("masking", "forward", "loss", "backward", "clip + LAMB + Lookahead"):
        if key in events:
            t = events[key].cpu_time_total / steps / 1000
            print(f"  {key:40s} {t:9.1f}  {100 * t * 1000 * steps / total:5.1f}%")
    print("forward by part (its backward is in 'backward'):")
    for key in sorted(k for k in events if k.startswith("fwd: ")):
        t = events[key].cpu_time_total / steps / 1000
        print(f"  {key[5:]:40s} {t:9.1f}  {100 * t * 1000 * steps / total:5.1f}%")
    print("top operators by self time:")
    ops = sorted((e for e in prof.key_averages() if not e.key.startswith(("fwd: ", "masking", "forward", "loss",
                  "backward", "clip", "ProfilerStep"))), key=lambda e: -e.self_cpu_time_total)[:12]
    for e in ops:
        t = e.self_cpu_time_total / steps / 1000
        print(f"  {e.key[:40]:40s} {t:9.1f}  {100 * t * 1000 * steps / total:5.1f}%")


def gib(b):
    return "-" if b is None else f"{b / 2**30:.2f}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--device", default="auto")
    ap.add_argument("--rows", type=int, default=None, help="cap on rows per batch (CPU default 256)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default: 10 on CUDA, 3 on CPU)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--optimizer", choices=("auto", "fused", "foreach"), default="auto",
                    help="LAMB as one compiled kernel per parameter (fused) or not compiled (foreach: on the CPU "
                         "from torch's fused Adam kernel, on CUDA the multi-tensor kernels; optimiser.py); auto: as "
                         "the plugin chooses for large models outside a time budget (fused on the CPU, foreach on "
                         "CUDA)")
    ap.add_argument("--profile", action="store_true", help="print where a step's time goes (torch.profiler)")
    ap.add_argument("--against", metavar="DIR",
                    help="another tree's plugins/ folder (e.g. a git worktree of the commit before a change): "
                         "its model's steps alternate with this tree's in one process, a before/after that "
                         "machine load cannot bias (peak memory then covers both models)")
    ap.add_argument("--rungs", default=None,
                    help="sizes of size: budget's ladder (cost.LADDER, e.g. e8-l2-b512,e8-l2): each config at each "
                         "rung's e, layers, heads and batch rows, in place of the config's e and --layers/--heads, "
                         "in a process with a job's allocator setting")
    ap.add_argument("--worker", nargs=2, metavar=("CONFIG", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--worker-rung", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    for option, given, known in (("--configs", args.configs, CONFIGS), ("--paths", args.paths, PATHS)):
        unknown = sorted(set(given.split(",")) - set(known))
        if unknown:
            ap.error(f"{option}: unknown {', '.join(unknown)}; choose from {', '.join(known)}")

    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    rungs = args.rungs or args.worker_rung  # a rung's batch is the table's, whatever the device
    rows = args.rows if args.rows is not None else (None if device == "cuda" or rungs else 256)
    steps = args.steps or (10 if device == "cuda" else 3)
    if args.optimizer == "auto":
        args.optimizer = "foreach" if device == "cuda" else "fused"
    if args.worker:
        print(json.dumps(worker(*args.worker, rows, steps, args.warmup, device, args.threads, args.layers,
                                args.heads, args.optimizer, args.profile, args.against, args.worker_rung)))
        return
    if args.rungs:
        from tabbench_plugins.npt.cost import LADDER

        unknown = sorted(set(args.rungs.split(",")) - {r.name for r in LADDER})
        if unknown:
            ap.error(f"--rungs: unknown {', '.join(unknown)}; choose from {', '.join(r.name for r in LADDER)}")

    results = []
    for name, rung in [(c, r) for c in args.configs.split(",") for r in (args.rungs or "").split(",")]:
        for path in args.paths.split(","):
            if path.endswith("graph") and device != "cuda":
                continue
            if "bf16" in path:
                if device == "cpu":
                    import torch

                    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
                        continue
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, path, "--device", device,
                   "--steps", str(steps), "--warmup", str(args.warmup), "--threads", str(args.threads),
                   "--layers", str(args.layers), "--heads", str(args.heads), "--optimizer", args.optimizer]
            if args.profile:
                cmd.append("--profile")
            if args.against:
                cmd += ["--against", os.path.abspath(args.against)]
            if rung:
                cmd += ["--worker-rung", rung]
            if rows:
                cmd += ["--rows", str(rows)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{name} {path}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
                continue
            lines = proc.stdout.strip().splitlines()
            if args.profile:
                print(f"### {name} {path} ({args.optimizer} LAMB)\n" + "\n".join(lines[:-1]))
            results.append(json.loads(lines[-1]))
            r = results[-1]
            print(f"  done {r['config']:8s} {path:16s} {r['ms']:10.1f} ms", file=sys.stderr, flush=True)
    if not results:
        return
    sizes = f"the ladder's sizes {args.rungs}" if args.rungs else f"{args.layers} layers, {args.heads} heads"
    print(f"device: {results[0]['device']}; {sizes}; median of {steps} steps "
          f"after {args.warmup} warm-up")
    mem = "peak alloc GiB" if device == "cuda" else "peak RSS GiB"
    print(f"| config | rows x cols, e | params | path | ms/step | rows/s | {mem} | step added GiB | "
          f"{'reserved GiB | ' if device == 'cuda' else ''}speed-up | peak ratio | added ratio |")
    print("|---" * (12 if device == "cuda" else 11) + "|")
    for r in results:
        ref = next((b for b in results if b["config"] == r["config"] and b["path"] == "explicit-fp32"), None)
        speed = f"{ref['ms'] / r['ms']:.2f}x" if ref else "-"
        pr = f"{r['peak'] / ref['peak']:.2f}" if ref else "-"
        ar = f"{r['added'] / ref['added']:.2f}" if ref and ref["added"] > 0 else "-"
        res = f"{gib(r['reserved'])} | " if device == "cuda" else ""
        print(f"| {r['config']} | {r['rows']} x {r['cols']}, {r['e']} | {r['n_params'] / 1e6:.1f}M | {r['path']} | "
              f"{r['ms']:.0f} | {r['rows_per_s']:.0f} | {gib(r['peak'])} | {gib(r['added'])} | {res}{speed} | {pr} | {ar} |")
    if args.against:
        print(f"\nagainst {args.against}, steps alternating in one process (threads: {args.threads or 'default'})")
        print("| config | path | against ms/step min / median | this tree min / median | speed-up of medians | "
              "median of paired ratios | CPU ms against / this tree (medians) | median of paired CPU ratios |\n"
              "|---|---|---|---|---|---|---|---|")
        for r in results:
            print(f"| {r['config']} | {r['path']} | {r['ms_against_min']:.1f} / {r['ms_against']:.1f} | "
                  f"{r['ms_min']:.1f} / {r['ms']:.1f} | {r['ms_against'] / r['ms']:.2f}x | {r['paired']:.2f}x | "
                  f"{r['cpu_ms_against']:.1f} / {r['cpu_ms']:.1f} | {r['paired_cpu']:.2f}x |")


if __name__ == "__main__":
    main()
