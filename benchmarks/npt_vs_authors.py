"""One NPT training step, side by side: the authors' code against tabbench's ``npt`` plugin.

Same machine, same process, same threads, same table, interleaved step for step.

Theirs: the model, optimiser, masking and loss of github.com/OATML/Non-Parametric-Transformers,
commit a399360, imported at run time from a checkout given by ``--authors`` (nothing of theirs is
copied into this project). The config is their ``npt/configs.py`` argparse defaults plus the options
of the paper's command line for the dataset (``scripts/uci_class_reg.sh``, "Default"), parsed by their
own parser. Their step is what ``Trainer.run_epoch`` / ``Trainer.run_batch`` (``npt/train.py``) do for
one full-batch training epoch in the paper's mode (``exp_minibatch_sgd`` on, its default: the step is
taken inside ``run_batch``), restated here as calls into their objects because ``npt.train`` imports
wandb and their data loaders:

    model.train(); optimizer.zero_grad(); NPTBatchDataset.set_mode("train") (shuffle + their BERT
    masking, npt/mask.py); DataLoader with their collate; cast the ground truth; model(masked);
    Loss.compute; Loss.finalize_batch_losses; backward (their per-element gradient clamp to
    [-1, 1] is a hook each parameter got in NPTModel.__init__); LAMB + Lookahead step
    (npt/utils/optim_utils.py, built by npt/utils/train_utils.init_optimizer); tradeoff annealer and
    LR scheduler steps (npt/optim.py); zero_grad; Loss.update_losses; Loss.reset.

Their AMP GradScaler is disabled in the paper's runs (``model_amp`` False), a no-op, so it is left out.
fp32, as they ran it.

Ours: ``NPT.fit`` itself (tabbench_plugins.npt), nothing restated: fused LAMB (grad_clamp=1.0, one
compiled kernel per parameter) in Lookahead, our masking and loss, transductive (the authors' table:
validation and test rows in every batch with their targets masked), with ``amp=True`` (bf16 autocast
on a CPU with bf16 matrix instructions) and ``amp=False`` (fp32). The steps are timed from inside the
real loop: fit calls its checkpointer's ``maybe_save`` once at the end of every step, so for the run the
script swaps ``tabbench_plugins.npt.checkpoints.Checkpointer`` for a subclass that (with no checkpoint folder,
like the base class it saves nothing) records the time since the previous step ended, runs one step of
the authors' code (timed on its own), then restarts the clock. After warm-up + ``--steps`` steps it ends
the run by setting ``run.step = steps``. So a fit of the paper's length (its LR and tradeoff schedules)
is cut short, and the order is ours, theirs, ours, theirs, ... Evaluation is excluded on both sides
(ours gets no validation rows; the validation rows are in the table as unlabelled rows, exactly as in
theirs). Each variant of ours runs as its own interleaved sequence with the authors' model (which keeps
training across them); the steps paired with warm-up steps are not counted on either side.

Data: the real files (suites/uci-small.yaml's entries, read from ``--data``, a mirror folder laid out
like the shared datasets folder), fold 0 of the suite's split: train, validation and test rows stacked
in that order for both sides. Both get the same encoding in the authors' format: numeric columns
standardised (features over all rows, the target over the training rows), categoricals one-hot, and a
mask-token column per feature. The target is the last column on both sides (theirs puts Breast Cancer's
first; the order of columns does not change the work).

Workarounds for running a399360 on today's libraries, all from this script (their files are read-only):

* packages their modules import at the top but that the training step never uses are shimmed in
  ``sys.modules`` when not installed: ``torchmetrics`` (AUROC at evaluation), ``torch.utils.tensorboard``
  (a LAMB histogram logger), ``fairseq``, ``transformers`` and ``dotmap`` (LR schedules other than the
  paper's ``flat_and_anneal``). A shim raises if anything in it is called.
* their encoder (``encode_utils.encode_data``) calls ``OneHotEncoder(sparse=False)``, which scikit-learn
  1.4 removed, so the table is encoded here in their format (above); their dataset, masking, model, loss
  and optimiser objects are constructed directly.
* their config is read with ``.get`` as well as attributes (wandb.config): parsed into a Namespace
  subclass with ``get``.
* their ``Lookahead`` never calls ``Optimizer.__init__``. On torch 2 the first ``zero_grad()`` wraps the
  class's ``step`` in torch's profiling hook, which reads the step-hook dicts ``__init__`` would have
  made: a second Lookahead in the same process (the second config) then fails with AttributeError.
  The script gives each of their Lookahead instances those two empty dicts.
* ``optimizer.zero_grad()`` sets gradients to None on torch 2 (it zero-filled them on the torch 1.x
  they used); the update is the same.

The checkout's commit is checked: ``git rev-parse HEAD`` when it is a git checkout, else the git tree
hash of its files (ignoring ``__pycache__``) against a399360's tree. Another commit is refused unless
``--allow-other-commit``.

    python benchmarks/npt_vs_authors.py --authors PATH [--data DIR] [--threads 2] [--steps 5] [--warmup 2]
    python benchmarks/npt_vs_authors.py --authors PATH --configs breast_cancer --rows 128 --layers 2 --steps 1
    python benchmarks/npt_vs_authors.py --authors PATH --rungs e8-l2,e16-l4 --threads 1
    python benchmarks/npt_vs_authors.py --authors PATH --rungs e8-l2 --threads 1 --variants bf16,bf16-compiled

``--rungs``: the sizes of ``size: "budget"``'s ladder (``tabbench_plugins.npt.cost.LADDER``: embedding, layers,
heads, row batch) on each config's table in place of the paper's, on both sides (theirs: ``--model_dim_hidden``,
``--model_num_heads``, ``--model_stacking_depth`` and ``--exp_batch_size`` added to the paper's command line; a
"auto" batch is the whole table up to 2,048 rows, as the plugin's; theirs gets as many batches as ours, of equal
size), and ours as a budgeted job runs it: LAMB
not compiled (``fused_optimizer: false``). With row batches a step is a batch: their epoch's time is divided by
its batches.

The process runs with a job's allocator setting (``tabbench.run.isolation.steady_allocator``), both sides alike.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import io
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
import warnings
from collections import OrderedDict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PINNED_COMMIT = "a399360c4ac953eac3149692918df12fafee66e0"
PINNED_TREE = "29fcd1773f3711e8e0c741557cc58b48f422525b"  # git rev-parse a399360^{tree}
VARIANTS = ("bf16", "fp32", "bf16-compiled")  # of ours: autocast or not, the step compiled or not

# The paper's settings per dataset: the options of scripts/uci_class_reg.sh's "Default" line that bear
# on the model, optimiser, masking and loss (the rest are logging, evaluation and data-split options).
def _paper(data_set: str, e: int, lr: str, steps: int) -> dict:
    """A dataset's settings, and its line's options as the authors' script passes them."""
    return dict(e=e, lr=float(lr), steps=steps, argv=[
        "--data_set", data_set, "--exp_optimizer", "lookahead_lamb", "--model_num_heads", "8",
        "--model_stacking_depth", "8", "--exp_lr", lr, "--exp_scheduler", "flat_and_anneal",
        "--exp_num_total_steps", str(steps), "--exp_optimizer_warmup_proportion", "0.5",
        "--exp_gradient_clipping", "1", "--exp_batch_size", "-1", "--model_dim_hidden", str(e),
        "--exp_tradeoff", "1", "--exp_tradeoff_annealing", "cosine"])


PAPER = {
    "boston": _paper("boston-housing", 128, "1e-3", 2000),
    "breast_cancer": _paper("breast-cancer", 32, "5e-4", 2000),
    # Concrete's table (1,030 rows) is the one that splits into row batches at the ladder's 512
    "concrete": _paper("concrete", 128, "1e-3", 10000),
}
FEATURE_MASK = dict(train=0.15, val=0, test=0)  # --model_augmentation_bert_mask_prob in both lines


# --- the authors' checkout ------------------------------------------------------------------------

def git_tree_hash(path: Path) -> str | None:
    """The hash git gives the tree of ``path``'s files (None for a folder with no files)."""
    entries = []
    for child in os.scandir(path):
        if child.name in (".git", "__pycache__") or child.name.endswith(".pyc"):
            continue
        if child.is_symlink():
            mode, sha = "120000", _git_hash(b"blob", os.readlink(child.path).encode())
        elif child.is_dir():
            mode, sha = "40000", git_tree_hash(Path(child.path))
            if sha is None:
                continue
        else:
            mode = "100755" if os.stat(child.path).st_mode & 0o100 else "100644"
            sha = _git_hash(b"blob", Path(child.path).read_bytes())
        entries.append((child.name + ("/" if mode == "40000" else ""), mode, child.name, sha))
    if not entries:
        return None
    entries.sort(key=lambda e: e[0].encode())
    body = b"".join(f"{mode} {name}".encode() + b"\0" + bytes.fromhex(sha) for _, mode, name, sha in entries)
    return _git_hash(b"tree", body)


def _git_hash(kind: bytes, body: bytes) -> str:
    return hashlib.sha1(kind + b" %d\0" % len(body) + body).hexdigest()


def checkout_commit(path: Path) -> tuple[str, bool]:
    """(what the checkout is, whether it is the pinned commit)."""
    if (path / ".git").exists():
        head = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True)
        commit = head.stdout.strip()
        return f"commit {commit}", commit == PINNED_COMMIT
    tree = git_tree_hash(path)
    if tree == PINNED_TREE:
        return f"commit {PINNED_COMMIT[:7]} (no .git; its files hash to that commit's tree {tree[:7]})", True
    return f"unknown commit (no .git; its files hash to tree {tree}, not a399360's {PINNED_TREE[:7]})", False


def _shim(name: str, *attrs: str):
    def unavailable(*args, **kwargs):
        raise RuntimeError(f"{name} is a stand-in of benchmarks/npt_vs_authors.py; install it to use this")

    module = types.ModuleType(name)
    for attr in attrs:
        setattr(module, attr, unavailable)
    sys.modules[name] = module


def import_authors(path: Path):
    """Put the checkout on sys.path and import the modules the training step uses."""
    sys.dont_write_bytecode = True  # the checkout is read-only, and stays as it was
    sys.path.insert(0, str(path))
    import importlib.util

    needed = {"torchmetrics": ["torchmetrics", ("torchmetrics.functional", "auroc")],
              "tensorboard": [("torch.utils.tensorboard", "SummaryWriter")],
              "fairseq": ["fairseq", "fairseq.optim", ("fairseq.optim.fairseq_optimizer", "FairseqOptimizer"),
                          ("fairseq.optim.lr_scheduler", "cosine_lr_scheduler")],
              "transformers": [("transformers", "get_constant_schedule", "get_linear_schedule_with_warmup",
                                "get_polynomial_decay_schedule_with_warmup")],
              "dotmap": [("dotmap", "DotMap")]}
    shimmed = []
    for package, modules in needed.items():
        if importlib.util.find_spec(package) is None:
            for m in modules:
                _shim(*((m,) if isinstance(m, str) else m))
            shimmed.append(package)
    mods = {}
    for name in ("npt.configs", "npt.model.npt", "npt.batch_dataset", "npt.loss", "npt.optim",
                 "npt.utils.train_utils", "npt.utils.batch_utils", "npt.utils.encode_utils"):
        mods[name.rsplit(".", 1)[-1]] = __import__(name, fromlist=["_"])
    return types.SimpleNamespace(**mods), shimmed


class AuthorsConfig(argparse.Namespace):
    """Their config is read both as attributes and with ``.get`` (it was a wandb.config)."""

    def get(self, key, default=None):
        return getattr(self, key, default)


# --- the data -------------------------------------------------------------------------------------

def load(name: str, data_dir: Path, rows: int | None):
    """The suite's dataset and fold 0 of its split: (dataset, train, val, test) row indices."""
    from tabbench.data.cache import DataPaths
    from tabbench.data.dataset import load_dataset
    from tabbench.data.splits import make_splits
    from tabbench.suite import load_suite

    cfg = next(d for d in load_suite(ROOT / "suites" / "uci-small.yaml").datasets if d.name == name)
    with tempfile.TemporaryDirectory() as cache:
        ds = load_dataset(cfg, DataPaths(cache=Path(cache), mirrors=(data_dir.resolve(),), base=ROOT))
    split = make_splits(ds, ds.split or cfg.split)[0]
    parts = [split.train, split.val, split.test]
    if rows:  # development runs: the same proportions of a smaller table
        keep = rows / len(ds)
        parts = [p[: max(2, round(len(p) * keep))] for p in parts]
    return ds, *parts


def authors_table(ds, train, val, test):
    """The table in the authors' format (npt/column_encoding_dataset.py): per column an (N, H_j + 1)
    tensor (value or one-hot, then the mask token), rows stacked train, val, test; the mode matrices."""
    import torch

    from tabbench.spec import CATEGORICAL

    order = np.concatenate([train, val, test])
    X = ds.X.iloc[order]
    y = np.asarray(ds.y)[order]
    n, n_train = len(order), len(train)
    arrs, sigmas, cat_features = [], [], []
    columns = [(c.name, c.kind == CATEGORICAL, len(c.categories)) for c in ds.meta.columns]
    for j, (name, is_cat, k) in enumerate(columns + [("target", ds.meta.is_classification, ds.meta.n_classes)]):
        values = y if name == "target" else X[name]
        if is_cat:
            codes = np.asarray(values.cat.codes if hasattr(values, "cat") else values, dtype=np.int64)
            col = np.zeros((n, k + 1), dtype=bool)
            col[np.arange(n), codes] = True
            cat_features.append(j)
            sigmas.append(-1)
        else:
            v = np.asarray(values, dtype=np.float64)
            stats = v[:n_train] if name == "target" else v
            mu, sd = stats.mean(), stats.std() or 1.0
            col = np.stack([(v - mu) / sd, np.zeros(n)], 1).astype(np.float32)
            sigmas.append(sd)
        arrs.append(torch.tensor(col))
    d = len(arrs)
    target = d - 1
    bounds = np.cumsum([0, len(train), len(val), len(test)])
    mode_rows = [list(range(bounds[i], bounds[i + 1])) for i in range(3)]
    data = {"data_arrs": arrs, "missing_matrix": torch.zeros(n, d, dtype=torch.bool),
            "new_train_val_test_indices": mode_rows}
    for mode, rows in zip(("train", "val", "test"), mode_rows):
        m = torch.zeros(n, d, dtype=torch.bool)
        m[rows, target] = True
        data[f"{mode}_mask_matrix"] = m
    metadata = {"N": n, "D": d, "cat_features": cat_features,
                "num_features": [j for j in range(d) if j not in cat_features],
                "cat_target_cols": [target] if ds.meta.is_classification else [],
                "num_target_cols": [] if ds.meta.is_classification else [target],
                "input_feature_dims": [a.shape[1] for a in arrs]}
    return data, metadata, sigmas


# --- the two steps --------------------------------------------------------------------------------

class Authors:
    """The authors' model, optimiser, masking and loss for one config; ``step()`` is one training step."""

    def __init__(self, npt, name, ds, train, val, test, size):
        import torch

        argv = PAPER[name]["argv"] + ["--model_stacking_depth", str(size["n_layers"]),
                                      "--model_dim_hidden", str(size["e"]), "--model_num_heads", str(size["n_heads"]),
                                      "--exp_batch_size", str(size["their_batch_rows"] or -1)]
        c = npt.configs.build_parser().parse_args(argv, namespace=AuthorsConfig())
        c.model_augmentation_bert_mask_prob = dict(FEATURE_MASK)  # their run.py evaluates the dict string
        c.exp_device = "cpu"
        self.c = c
        data, self.metadata, sigmas = authors_table(ds, train, val, test)
        quiet = contextlib.redirect_stdout(io.StringIO())
        with quiet:
            self.dataset = npt.batch_dataset.NPTBatchDataset(
                data_dict=data, c=c, curr_cv_split=0, metadata=self.metadata, device="cpu", sigmas=sigmas)
            model = npt.npt.NPTModel(c, metadata=self.metadata, device="cpu")
            self.model = model.to(device="cpu").type(npt.encode_utils.get_torch_dtype(c.model_dtype))
            self.optimizer = npt.train_utils.init_optimizer(c=c, model_parameters=self.model.parameters(),
                                                            device="cpu")
            if not hasattr(self.optimizer, "_optimizer_step_pre_hooks"):  # see the module docstring
                self.optimizer._optimizer_step_pre_hooks = OrderedDict()
                self.optimizer._optimizer_step_post_hooks = OrderedDict()
            self.annealer = npt.optim.TradeoffAnnealer(c=c, num_steps=0)
            self.scheduler = npt.optim.LRScheduler(c=c, name=c.exp_scheduler, optimizer=self.optimizer)
            self.loss = npt.loss.Loss(c, self.metadata, is_minibatch_sgd=c.exp_minibatch_sgd,
                                      tradeoff_annealer=self.annealer)
        self.npt, self.torch, self.epoch, self.batches = npt, torch, 0, 0
        self.n_params = npt.train_utils.count_parameters(self.model)
        self.rows, self.cols = self.metadata["N"], self.metadata["D"]

    def step(self):
        torch, c = self.torch, self.c
        self.epoch += 1
        self.model.train()
        self.optimizer.zero_grad()
        self.dataset.set_mode(mode="train", epoch=self.epoch)
        loader = torch.utils.data.DataLoader(
            dataset=self.dataset, batch_size=1, shuffle=False, num_workers=c.data_loader_nprocs,
            collate_fn=self.npt.batch_utils.collate_with_pre_batching, pin_memory=True)
        cast = self.npt.encode_utils.torch_cast_to_dtype
        self.batches = 0
        for batch in loader:
            self.batches += 1
            truth = [cast(obj=a, dtype_name=c.data_dtype).to(device="cpu") for a in batch["data_arrs"]]
            masked = [a.to(device="cpu") for a in batch["masked_tensors"]]
            output = self.model(masked)
            self.loss.compute(output=output, ground_truth_data=truth,
                              label_mask_matrix=batch["label_mask_matrix"],
                              augmentation_mask_matrix=batch["augmentation_mask_matrix"],
                              data_dict=batch, dataset_mode="train", eval_model=False)
            assert c.exp_minibatch_sgd, "the paper's runs take the step per batch (run_batch)"
            self.loss.finalize_batch_losses()["total_loss"].backward()
            self.optimizer.step()
            self.annealer.step()
            self.scheduler.step()
            self.optimizer.zero_grad()
            self.loss.update_losses(eval_model=False)
        self.loss.reset()


def run_ours(name, ds, train, val, test, size, amp, threads, n_steps, between, compile_=False):
    """NPT.fit of the paper's config at ``size``, cut after ``n_steps`` steps; ``between()`` runs after each step;
    ``compile_``: the step compiled (param ``compile``; it compiles in the first step, a warm-up one).
    Returns (step seconds, the fitted estimator)."""
    from tabbench_plugins import npt as plugin
    from tabbench_plugins.npt import checkpoints as nt

    paper = PAPER[name]
    est = plugin.NPT(ds.meta, seed=0, e=size["e"], n_layers=size["n_layers"], n_heads=size["n_heads"],
                     batch_size=size["batch_rows"], lr=paper["lr"], steps=paper["steps"], transductive=True,
                     amp=amp, fused_optimizer=size["fused"], clip=1.0, clip_mode="value", budgets=[],
                     cpus=threads, compile=compile_)
    times, clock = [], [0.0]

    class Interleaved(nt.Checkpointer):
        def resume(self, run):
            resumed = super().resume(run)
            clock[0] = time.perf_counter()
            return resumed

        def maybe_save(self, run, force=False):
            times.append(time.perf_counter() - clock[0])
            print(f"    {name} ours step {len(times)}: {times[-1] * 1000:.0f} ms", file=sys.stderr, flush=True)
            super().maybe_save(run, force)
            if len(times) == n_steps:
                run.step = run.steps  # ends fit's loop here
            else:
                between()
            clock[0] = time.perf_counter()

    original, nt.Checkpointer = nt.Checkpointer, Interleaved
    try:
        X = ds.X
        est.fit(X.iloc[train], np.asarray(ds.y)[train], X_unlabelled=X.iloc[np.concatenate([val, test])])
    finally:
        nt.Checkpointer = original
    return times, est


# --- main -----------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--authors", type=Path, required=True, help="checkout of OATML/Non-Parametric-Transformers")
    ap.add_argument("--allow-other-commit", action="store_true", help="run against a checkout other than a399360")
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("TABBENCH_MIRROR", ROOT.parent / "shared" / "datasets")),
                    help="mirror folder with uci/boston/housing.data etc. (default: $TABBENCH_MIRROR, else "
                         "../shared/datasets from the project root)")
    ap.add_argument("--configs", default="boston,breast_cancer", help=f"of {', '.join(PAPER)}")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per side and variant (median reported)")
    ap.add_argument("--warmup", type=int, default=2, help="steps per side and variant before timing")
    ap.add_argument("--rows", type=int, default=None, help="development: cap the table's rows")
    ap.add_argument("--layers", type=int, default=8, help="development: fewer layers than the paper's 8")
    ap.add_argument("--rungs", default=None,
                    help="sizes of size: budget's ladder (e.g. e8-l2-b512,e8-l2) in place of the paper's sizes")
    ap.add_argument("--variants", default="bf16,fp32",
                    help="ours: of bf16, fp32, bf16-compiled (the step compiled: param compile true; its inductor "
                         "cache is the data cache's, so a second run loads what the first compiled)")
    args = ap.parse_args(argv)
    variants = args.variants.split(",")
    if set(variants) - set(VARIANTS):
        ap.error(f"--variants: unknown {', '.join(sorted(set(variants) - set(VARIANTS)))}; choose from "
                 f"{', '.join(VARIANTS)}")
    names = args.configs.split(",")
    unknown = sorted(set(names) - set(PAPER))
    if unknown:
        ap.error(f"--configs: unknown {', '.join(unknown)}; choose from {', '.join(PAPER)}")
    from tabbench_plugins.npt.cost import LADDER, n_batches

    ladder = {r.name: r for r in LADDER}
    rungs = args.rungs.split(",") if args.rungs else [None]
    unknown = sorted(set(rungs) - set(ladder) - {None})
    if unknown:
        ap.error(f"--rungs: unknown {', '.join(unknown)}; choose from {', '.join(ladder)}")
    if not (args.authors / "npt" / "model" / "npt.py").is_file():
        ap.error(f"--authors {args.authors}: no npt/model/npt.py there; give a checkout of "
                 "github.com/OATML/Non-Parametric-Transformers")
    what, pinned = checkout_commit(args.authors)
    print(f"authors' code: {what}")
    if not pinned:
        message = f"the authors' checkout is not commit {PINNED_COMMIT[:7]}, which this benchmark pins"
        if not args.allow_other_commit:
            sys.exit(f"error: {message}; check out a399360 or pass --allow-other-commit")
        print(f"WARNING: {message}")

    import torch

    from tabbench.measure import fingerprint, hardware_label, proc_status_kib

    from tabbench.run.isolation import steady_allocator

    steady_allocator()  # as in a job's process (both sides: one process)
    torch.set_num_threads(args.threads)
    npt, shimmed = import_authors(args.authors)
    if shimmed:
        print(f"stand-ins for packages their modules import but the step does not use: {', '.join(shimmed)}")
    warnings.filterwarnings("once")
    bf16 = torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    load_before = os.getloadavg()
    n = args.warmup + args.steps
    results = []
    for name, rung in [(n, r) for n in names for r in rungs]:
        ds, train, val, test = load(name, args.data, args.rows)
        n_rows = len(train) + len(val) + len(test)
        if rung is None:  # the paper's size, full batch, LAMB compiled as the paper-config runs take it
            size = dict(e=PAPER[name]["e"], n_layers=args.layers, n_heads=8, batch_rows=None, their_batch_rows=None,
                        fused=True)
        else:
            r = ladder[rung]
            batches = n_batches(n_rows, r.batch_size)  # theirs gets as many batches, of equal size: the same work
            size = dict(e=r.e, n_layers=r.n_layers, n_heads=r.n_heads, fused=False,
                        batch_rows=None if batches == 1 else r.batch_size,
                        their_batch_rows=None if batches == 1 else math.ceil(n_rows / batches))
        theirs = Authors(npt, name, ds, train, val, test, size)
        row = {"name": name if rung is None else f"{name} {rung}", "rows": theirs.rows, "cols": theirs.cols,
               "e": size["e"], "theirs_params": theirs.n_params}
        their_times = []
        for variant in variants:
            amp = not variant.startswith("fp32")
            if amp and not bf16:
                print(f"{name}: this CPU has no bf16 matrix instructions; amp=True runs fp32, ours-bf16 skipped")
                continue
            phase = []

            def between():
                t0 = time.perf_counter()
                theirs.step()
                phase.append((time.perf_counter() - t0) / theirs.batches)  # a step is a batch
                print(f"    {name} theirs step {len(phase)}: {phase[-1] * 1000:.0f} ms", file=sys.stderr, flush=True)

            between()  # theirs goes first: order theirs, ours, theirs, ours, ...
            ours, est = run_ours(name, ds, train, val, test, size, amp, args.threads, n, between,
                                 compile_=variant.endswith("compiled"))
            their_times += phase[args.warmup:n]
            row[f"ours_{variant}"] = statistics.median(ours[args.warmup:]) * 1000
            row[f"ours_{variant}_min"] = min(ours[args.warmup:]) * 1000
            row[f"theirs_during_{variant}"] = statistics.median(phase[args.warmup:n]) * 1000
            row["ours_params"] = est.model_.n_params()
            print(f"  {name} ours-{variant}: steps {' '.join(f'{t * 1000:.0f}' for t in ours)} ms; "
                  f"theirs alongside: {' '.join(f'{t * 1000:.0f}' for t in phase)} ms "
                  f"(first {args.warmup} of each are warm-up)", flush=True)
            del est
            gc.collect()
        row["theirs"] = statistics.median(their_times) * 1000
        row["theirs_min"] = min(their_times) * 1000
        results.append(row)
        theirs = None
        gc.collect()
    load_after = os.getloadavg()

    print()
    print(f"machine: {hardware_label(fingerprint())}")
    sizes = (f"{args.layers} layers, 8 heads, full batch" if not args.rungs
             else f"the ladder's sizes {args.rungs} (LAMB not compiled)")
    print(f"{sizes}; {args.threads} threads; median of {args.steps} steps after {args.warmup} warm-up, "
          f"interleaved with the authors' steps; load average (1 min) {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after")
    print(f"peak resident memory of this process: {proc_status_kib('VmHWM') / 2**20:.1f} GiB")
    if args.rows:
        print(f"development run: table capped at {args.rows} rows (not the paper's shapes)")
    print()
    ours = [f"ours_{v}" for v in variants]
    print(f"| config | rows x cols, e | params theirs / ours | theirs fp32 ms/step median (min) | "
          f"{' | '.join(o.replace('_', ' ') for o in ours)} | "
          f"{' | '.join('theirs alongside / ' + o.replace('_', '-') + ' (medians)' for o in ours)} |")
    print("|---|---|---|---|" + "---|" * 2 * len(ours))
    for r in results:
        same = "equal" if r["theirs_params"] == r.get("ours_params") else "DIFFER"
        cells = [f"{r[k]:.0f} ({r[k + '_min']:.0f})" if k in r else "-" for k in ("theirs", *ours)]
        # each variant against the authors' steps interleaved with it: the load they shared
        ratios = [f"{r['theirs_during_' + k[5:]] / r[k]:.2f}x" if k in r else "-" for k in ours]
        print(f"| {r['name']} | {r['rows']} x {r['cols']}, {r['e']} | {r['theirs_params']:,} / "
              f"{r.get('ours_params', 0):,} ({same}) | {' | '.join(cells)} | {' | '.join(ratios)} |")
    for r in results:
        if r["theirs_params"] != r.get("ours_params"):
            print(f"WARNING: {r['name']}: parameter counts differ, the two models are not the same size")


if __name__ == "__main__":
    main()
