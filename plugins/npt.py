"""Non-Parametric Transformers (Kossen et al., NeurIPS 2021) as a tabbench model: ``npt``.

The model itself is in ``tabbench_plugins.npt_model``, the optimiser in ``tabbench_plugins.npt_optim``;
both import torch, so this module imports them only inside ``fit`` (``tabbench models`` stays fast).

Training (paper section 3 and appendix; the reference facts are in docs/npt-reference.md):

* The table is the training rows plus the target as the last column. Each step, every observed
  feature entry is masked with ``p_feature`` and every training target with ``p_target`` (BERT style:
  of the masked entries a ``p_random`` share gets a random value and no mask bit, except where the
  probability is 1). Loss ``lambda * L_features + (1 - lambda) * L_targets``, lambda cosine-annealed
  from ``lambda_init`` to 0 over the run.
* LAMB in Lookahead, LR constant for ``flat_fraction`` of the steps then cosine to 0, gradients
  clipped (``clip_mode``), ``batch_size`` rows per step: ``"auto"`` (the default) is the paper's rule,
  the whole table up to AUTO_BATCH_ROWS (2,048) rows and above that class-stratified minibatches of at
  most 2,048 rows; None = the whole table at any size; a number = shuffled minibatches of about that
  many rows (class-stratified with ``class_balance``).
* Every ``eval_every`` steps the validation loss is computed with the validation rows' targets masked
  and the training rows as context; the parameters with the best validation loss are kept (on the
  device, without a host sync) and used for prediction.
* Prediction: the training rows are the context, the rows to predict have their target masked. With
  minibatches every batch holds context and query rows in the proportion of their totals.

What the defaults cost on a CPU (e = 32, 8 layers, 500 steps; one core of an AMD EPYC with bf16,
benchmarks/npt_default_cost.py). The model has about 4 x 13 x (e x columns)^2 parameters (ABD's width
is e times the columns, target included): 6.4M for a 10-feature table, 36M for 25 features, 161M for
Covertype's 54. A training step costs about 6 operations per parameter per row, at about 1e11 per
CPU-second, plus attention between rows (4 rows^2 x width per ABD layer, forward): per 1,000 rows of
its batch about 0.4 s at 10 features, 2.2 s at 25 and 10 s at 54, plus the weights' update (0.3 s at
161M parameters). Every ``eval_every`` (6) steps a forward pass over the training and validation rows
costs a third of that per row. So ``npt: {}`` on a 15,000-row table of 54 features (10,584 training
rows in a 5-fold split) trains on 6 stratified batches of 1,764 rows, about 20 CPU-s a step, about 4
CPU-hours a job with its evaluations; on the whole table (``batch_size: null``) about 200 s a step,
30 CPU-hours. Before a run, ``check_cost`` (ModelSpec.check) refuses a CPU job whose estimate exceeds
the suite's ``budget.time_s`` (wall time: the estimate divided over ``cpus``), or MAX_CPU_HOURS (48)
when the suite sets no budget, naming the params to set. fp32 (``amp: false``) costs 1.6 times more.

Choices where the code and the paper (or this harness) differ, all settable:

* ``clip_mode="value"``: the code clamps each gradient element to [-clip, clip] (the paper's
  "gradient clipping 1"); ``"norm"`` clips the global norm instead.
* Seeding: the code never seeds torch; here ``seed`` seeds initialisation, dropout, masking and
  batching, and a CPU run is bit-for-bit reproducible.
* Architecture flags ``ln_kv``, ``temperature``, ``residual``: see npt_model.py (defaults = code).
* ``context_labels="auto"``: training labels are visible to the model at evaluation only when
  ``p_target < 1``. With ``p_target = 1`` the model never saw a label as input during training (the
  code then masks every target at evaluation too), so showing labels would feed it an input it never
  learnt to read. ``True`` / ``False`` force either.
* Inductive or transductive (``transductive``). Inductive (the default): the table holds training
  rows only; validation rows are held out exactly as test rows are, so the validation loss is an
  honest stand-in for the test loss. Transductive (the authors' code's default, which produced the
  published numbers): the harness hands ``fit`` the test rows' features (never their targets); the
  validation and test rows join the table with their targets masked, so their features are in every
  training batch (and in the feature loss), and numeric columns are standardised over all rows.
* Long runs: ``steps`` of the paper's length are checkpointed every ``checkpoint_minutes`` into the
  folder the harness gives the job, and a re-run continues where the killed run stopped (bit for bit
  on the CPU); ``budgets`` keeps the best-so-far weights at shorter step counts, so one run also
  scores the shorter runs (the harness records them as the job's budget curve).
"""

from __future__ import annotations

import math

import numpy as np

import tabbench
from tabbench.spec import BINARY, CATEGORICAL, MULTICLASS, REGRESSION, ModelSpec

DEFAULT_PARAMS = {
    # architecture (paper defaults; e = 32 is the paper's Breast Cancer size, 64 / 128 elsewhere)
    "e": 32, "n_layers": 8, "n_heads": 8, "dropout": 0.1, "att_dropout": 0.1,
    # code-vs-paper architecture flags (defaults = the authors' code; see npt_model.py)
    "ln_kv": False, "temperature": "hidden", "residual": "linear",
    # optimisation
    # batch_size "auto": the whole table up to AUTO_BATCH_ROWS rows, else class-stratified minibatches of
    # at most that many; null: the whole table always; a number: minibatches of about that many rows
    "lr": 1e-3, "steps": 500, "batch_size": "auto", "eval_batch_size": None,
    "flat_fraction": None,  # None: 0.5 with whole-table batches (paper, small data), else 0.7
    "clip": 1.0, "clip_mode": "value", "weight_decay": 0.0, "lookahead_alpha": 0.5, "lookahead_k": 6,
    "eval_every": 6, "class_balance": False,
    # masking objective
    "p_feature": 0.15, "p_target": 1.0, "p_random": 0.1, "lambda_init": 1.0, "context_labels": "auto",
    # images: a linear patch encoder (paper section 4.2). n_patches patches on a square grid over images
    # of image_shape [channels, height, width], whose pixels are the feature columns, channel-major
    # (tabbench.data.images); each patch is one column of the table. MNIST: 49 (4x4), CIFAR-10: 64 (4x4x3)
    "n_patches": None, "image_shape": None,
    # protocol: transductive = the validation and test rows' features are in every training batch with
    # their targets masked, and standardisation uses all rows (the authors' code's default)
    "transductive": False,
    # step budgets (ascending) at which the best-so-far weights are kept for a budget curve; None: the
    # ladder 100, 300, 1000, 2000, 5000, 10000, ... below ``steps`` (tabbench_plugins.npt_train)
    "budgets": None,
    # execution: cpus = torch threads (and the CPUs the job asks Ray for); a checkpoint every
    # checkpoint_minutes when the harness gives the job a checkpoint folder; fused_optimizer: one
    # compiled LAMB kernel per parameter ("auto": for models of FUSED_MIN_PARAMS parameters or more)
    "device": "auto", "amp": True, "checkpointing": False, "attention": "fused", "cpus": 1,
    "checkpoint_minutes": 5.0, "fused_optimizer": "auto",
}

#: How a job runs, not what it computes: left at their defaults in the job key and the checkpoint's
#: fingerprint, so that a run resumed or repeated with more threads continues the same job.
RUN_PARAMS = frozenset({"cpus", "checkpoint_minutes"})

#: Below this size the fused optimizer's one-off compilation costs more than it saves.
FUSED_MIN_PARAMS = 5_000_000

#: ``batch_size: "auto"``: the whole table up to this many rows (the paper trains on whole tables up to
#: Concrete's 1,030 rows), above it class-stratified minibatches of at most this many rows, as equal as
#: can be (the paper's rule for large tables: minibatches of a few thousand rows that keep the class
#: proportions). A step's CPU time grows about linearly with its rows up to here (attention between
#: rows is a small share of it): benchmarks/npt_default_cost.py.
AUTO_BATCH_ROWS = 2048

#: The CPU cost model of the pre-run check (``check_cost``): a pass over a batch costs ``pass_flops``
#: floating-point operations, done at CPU_FLOPS per CPU-second (one core, bf16 autocast), and every
#: training step adds the LAMB + Lookahead update, UPDATE_SECONDS per parameter. Measured with
#: benchmarks/npt_default_cost.py (AMD EPYC, the defaults on Covertype: 100-127 GFLOP/s per core).
CPU_FLOPS = 1.0e11
UPDATE_SECONDS = 2e-9

#: fp32 (``amp: false``) runs this many times slower than bf16 autocast on the CPU (benchmarks/README.md).
FP32_SLOWDOWN = 1.6

#: Without a suite budget (``budget.time_s``) a job estimated above this many CPU-hours (two CPU-days)
#: is refused: far beyond what a CPU benchmark job should take (the paper-budget runs of
#: suites/uci-small-npt-paper.yaml, 10,000 whole-table steps, are estimated at up to 24).
MAX_CPU_HOURS = 48


def n_batches(n: int, batch_size) -> int:
    """Training batches per epoch over a table of ``n`` rows: 1 = the whole table. ``"auto"``: batches
    of at most AUTO_BATCH_ROWS rows; a number: about that many rows each (the table split evenly)."""
    if batch_size == "auto":
        return math.ceil(n / AUTO_BATCH_ROWS)
    return 1 if not batch_size or batch_size >= n else max(1, round(n / batch_size))


def _eval_chunks(n: int, eval_batch_size, batch_size) -> int:
    """Prediction passes over ``n`` rows (context and queries): at most eval_batch_size (else batch_size;
    AUTO_BATCH_ROWS for "auto") rows each; 1 when that is unset or covers all rows."""
    size = eval_batch_size or (AUTO_BATCH_ROWS if batch_size == "auto" else batch_size)
    return 1 if not size or size >= n else math.ceil(n / size)


def _n_params(d: int, e: int, n_layers: int, residual: str) -> int:
    """Parameters of the attention blocks (all but a few thousand): ABD blocks of width d*e, ABA of e."""
    def block(h):
        return 12 * h * h + 13 * h + (h * h + h if residual == "linear" else 0)

    return (n_layers + 1) // 2 * block(d * e) + n_layers // 2 * block(e)


def pass_flops(n_params: int, rows: float, width: int, abd_layers: int, backward: bool = False) -> float:
    """Floating-point operations of one pass over a batch of ``rows`` rows: 2 per parameter per row
    (every row goes through every weight), attention between rows 4 * rows^2 * width per ABD layer
    (width = d * e); a training pass (backward) costs three forward passes."""
    forward = 2 * n_params * rows + 4 * rows * rows * width * abd_layers
    return 3 * forward if backward else forward


def estimate_cpu_seconds(meta, sizes, params) -> dict:
    """CPU seconds (one core) a fit with these params is expected to take on a table with ``sizes``
    (tabbench.spec.SplitSizes): training steps plus validation passes (CPU_FLOPS). Returns the
    estimate and what it was computed from (rows per batch, parameters, seconds per step)."""
    d = (params.get("n_patches") or len(meta.columns)) + 1
    e, layers = params["e"], params["n_layers"]
    n_params = _n_params(d, e, layers, params["residual"])
    transductive = bool(params["transductive"])
    table = sizes.train + (sizes.val + sizes.test if transductive else 0)
    abd = (layers + 1) // 2
    speed = CPU_FLOPS / (1 if params["amp"] else FP32_SLOWDOWN)
    rows = math.ceil(table / n_batches(table, params["batch_size"]))
    step = UPDATE_SECONDS * n_params + pass_flops(n_params, rows, d * e, abd, backward=True) / speed
    steps = int(params["steps"])
    evals = steps // max(1, int(params["eval_every"])) + 2 if sizes.val else 2
    evaluated = table if transductive else table + sizes.val  # context plus validation rows
    chunks = _eval_chunks(evaluated, params["eval_batch_size"], params["batch_size"])
    evaluation = chunks * pass_flops(n_params, evaluated / chunks, d * e, abd) / speed
    return {"seconds": steps * step + evals * evaluation, "rows": rows, "table": table, "whole": rows == table,
            "n_params": n_params, "step_s": step, "eval_s": evaluation, "evals": evals, "steps": steps, "d": d}


def _on_gpu(params) -> bool:
    if params["device"] != "auto":
        return params["device"] == "cuda"
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def check_cost(meta, sizes, params, budget_s=None) -> str | None:
    """Refuse (a message naming the params to set) a CPU fit whose estimated time exceeds the suite's
    per-job budget, or MAX_CPU_HOURS when the suite sets none. ModelSpec.check for ``npt``."""
    est = estimate_cpu_seconds(meta, sizes, params)
    cpus = max(1.0, float(params["cpus"]))
    cpu_limit = budget_s * cpus if budget_s else MAX_CPU_HOURS * 3600  # CPU-seconds: the budget is wall time
    if est["seconds"] <= cpu_limit or _on_gpu(params):
        return None
    hours = est["seconds"] / 3600
    batches = "the whole table" if est["whole"] else f"minibatches of {est['rows']:,} rows"
    over = (f"over the suite's budget.time_s of {budget_s:,.0f} s with cpus {params['cpus']:g}" if budget_s else
            f"over the {MAX_CPU_HOURS} CPU-hours a job may take without a budget (set budget.time_s to allow more)")
    per_step = est["step_s"] + est["eval_s"] * (est["evals"] / max(1, est["steps"]))
    fits = int(cpu_limit / per_step)
    auto = n_batches(est["table"], "auto") > 1
    hint = (f"batch_size (e.g. \"auto\": minibatches of at most {AUTO_BATCH_ROWS:,} rows; now {batches}), "
            if est["whole"] and auto else "batch_size, ")
    return (f"npt would train {est['n_params'] / 1e6:.0f}M parameters (e {params['e']} x {est['d']} columns, "
            f"{params['n_layers']} layers) on {batches} of a {est['table']:,}-row table: about {est['steps']:,} "
            f"steps x {per_step:,.1f} CPU-s = {hours:,.1f} CPU-hours (estimated, one core of this project's "
            f"reference CPU), {over}. Set in the suite's npt params: steps (about {fits:,} fit), {hint}e or "
            f"n_layers (parameters grow with (e x columns)^2), eval_every, cpus, or device: cuda"
            + ("; or raise budget.time_s" if budget_s else ""))


class NPT:
    """Non-Parametric Transformer estimator (tabbench contract, see tabbench/spec.py)."""

    def __init__(self, meta, seed=0, **params):
        self.meta = meta
        self.seed = seed
        self.params = params

    # --- helpers ------------------------------------------------------------------------------

    def _param(self, name):
        return self.params.get(name, DEFAULT_PARAMS[name])

    def _check_params(self):
        unknown = set(self.params) - set(DEFAULT_PARAMS)
        if unknown:
            raise ValueError(f"npt: unknown params {sorted(unknown)}; accepted: {sorted(DEFAULT_PARAMS)}")
        if self._param("clip_mode") not in ("value", "norm"):
            raise ValueError("npt: clip_mode must be 'value' or 'norm'")
        if self._param("context_labels") not in ("auto", True, False):
            raise ValueError("npt: context_labels must be 'auto', true or false")
        for name in ("p_feature", "p_target", "p_random", "lambda_init", "dropout", "att_dropout"):
            if not 0 <= self._param(name) <= 1:
                raise ValueError(f"npt: {name} must be in [0, 1], got {self._param(name)}")
        if self._param("fused_optimizer") not in ("auto", True, False):
            raise ValueError("npt: fused_optimizer must be 'auto', true or false")
        size = self._param("batch_size")
        if not (size is None or size == "auto" or (isinstance(size, int) and not isinstance(size, bool) and size > 0)):
            raise ValueError(f"npt: batch_size must be 'auto', null (the whole table) or a row count, got {size!r}")
        if not (isinstance(self._param("cpus"), (int, float)) and self._param("cpus") >= 1):
            raise ValueError(f"npt: cpus must be a number >= 1, got {self._param('cpus')!r}")
        budgets = self._param("budgets")
        if budgets is not None and (not isinstance(budgets, (list, tuple))
                                    or not all(isinstance(b, int) and b > 0 for b in budgets)):
            raise ValueError(f"npt: budgets must be a list of positive step counts, got {budgets!r}")
        if self._param("n_patches"):
            self.patch_order_ = self._patch_order()

    def _patch_order(self):
        """(n_patches, patch_dim) feature-column indices of each patch, patches in row-major grid order."""
        P, shape = self._param("n_patches"), self._param("image_shape")
        if not (isinstance(shape, (list, tuple)) and len(shape) == 3 and all(isinstance(v, int) and v > 0 for v in shape)):
            raise ValueError(f"npt: n_patches needs image_shape: [channels, height, width], got {shape!r}")
        c, h, w = shape
        g = math.isqrt(P)
        if g * g != P or h % g or w % g:
            raise ValueError(f"npt: n_patches={P} must be a square grid (g x g) dividing the {h}x{w} image: "
                             f"e.g. 49 for 28x28 (4x4 patches), 64 for 32x32")
        features = self.meta.columns
        if len(features) != c * h * w or any(col.kind == CATEGORICAL for col in features):
            raise ValueError(f"npt: image_shape {list(shape)} needs {c * h * w} numeric pixel columns; "
                             f"dataset {self.meta.name!r} has {len(features)} features")
        grid = np.arange(c * h * w).reshape(c, g, h // g, g, w // g)  # channel-major, row-major pixels
        return grid.transpose(1, 3, 0, 2, 4).reshape(P, -1)

    def _encode(self, X, y=None):
        """(n, n_values) float32 values and an (n, d) bool missing mask; the target is the last column.
        With patches the pixel columns come first in patch order and a patch is missing when all its
        pixels are (a missing pixel of a patch otherwise reads as the column mean)."""
        cols, missing = [], []
        for j, col in enumerate(self.meta.columns):
            if col.kind == CATEGORICAL:
                codes = X[col.name].cat.codes.to_numpy().astype(np.float64)
                miss = codes < 0
            else:
                v = X[col.name].to_numpy(dtype=np.float64)
                miss = np.isnan(v)
                codes = (v - self.mean_[j]) / self.scale_[j]
            cols.append(np.where(miss, 0.0, codes))
            missing.append(miss)
        n = len(X)
        if y is None:
            cols.append(np.zeros(n))
            missing.append(np.zeros(n, dtype=bool))
        else:
            y = np.asarray(y)
            cols.append(y.astype(np.float64) if self.meta.is_classification else self.y_scaler_.transform(y))
            missing.append(np.zeros(n, dtype=bool))
        x, miss = np.stack(cols, 1).astype(np.float32).reshape(n, len(cols)), np.stack(missing, 1).reshape(n, len(cols))
        if self._param("n_patches"):
            order = self.patch_order_
            x = np.concatenate([x[:, order.reshape(-1)], x[:, -1:]], 1)
            miss = np.concatenate([miss[:, order].all(-1), miss[:, -1:]], 1)
        return x, miss

    def _stratified(self) -> bool:
        """Class-stratified minibatches: with class_balance, and by default (batch_size "auto")."""
        return self.meta.is_classification and bool(self._param("class_balance")
                                                    or self._param("batch_size") == "auto")

    def _order(self, y, g, torch):
        """A random order of the labelled rows; class-stratified (every chunk keeps the class
        proportions) when ``_stratified``. Built on the device: nothing comes back to the host."""
        n = len(y)
        perm = torch.randperm(n, generator=g, device=y.device)
        if not self._stratified():
            return perm
        yp = y[perm].long()
        onehot = torch.nn.functional.one_hot(yp, self.meta.n_classes)
        rank = (onehot.cumsum(0) * onehot).sum(1) - 1  # position of each row within its class
        count = onehot.sum(0)[yp]
        key = (rank + torch.rand(n, generator=g, device=y.device)) / count
        return perm[torch.argsort(key)]

    def _table_order(self, g, torch):
        """A random order of the table's rows: the labelled rows (class-stratified when ``_stratified``,
        so every chunk keeps the class proportions), then the unlabelled ones (transductive). Returns
        the two orders; chunks take a share of each. On the device."""
        n_lab = self.n_labelled_
        lab = self._order(self.x_tab_[:n_lab, -1], g, torch)
        unl = n_lab + torch.randperm(len(self.x_tab_) - n_lab, generator=g, device=self.device_)
        return lab, unl

    def _chunks(self, n_b, g, torch, *extra):
        """n_b index batches over the table (every batch holds labelled and unlabelled rows in the
        proportion of their totals), zipped with ``extra`` tensors split the same way."""
        lab, unl = self._table_order(g, torch)
        parts = [torch.tensor_split(t, n_b) for t in (lab, unl, *extra)]
        return [(torch.cat([a, b]), *rest) for a, b, *rest in zip(*parts)]

    def _batches(self, n_q, torch):
        """(context rows, query rows) index batches for prediction; fixed, so predict is deterministic."""
        n_ctx = len(self.x_tab_)
        chunks = _eval_chunks(n_ctx + n_q, self._param("eval_batch_size"), self._param("batch_size"))
        q = torch.arange(n_q, device=self.device_)
        if chunks == 1:
            return [(torch.arange(n_ctx, device=self.device_), q)]
        g = torch.Generator(device=self.device_).manual_seed(self.seed + 1)
        return self._chunks(chunks, g, torch, q)

    def _spread(self, m):
        from tabbench_plugins.npt_model import spread

        return spread(m, self.cfg_.n_patches, self.cfg_.patch_dim)

    def _autocast(self, torch):
        enabled = bool(self._param("amp")) and (self.device_.type == "cuda" or self.cpu_bf16_)
        return torch.autocast(self.device_.type, dtype=torch.bfloat16, enabled=enabled)

    def _target_outputs(self, torch, xq=None, mq=None, rows=None):
        """Target-column outputs, the table as context: for query rows appended to it (xq, mq on the
        device), or for the table's own unlabelled rows ``rows`` (transductive)."""
        t = self.cfg_.d - 1
        xq = self.x_tab_[:0] if xq is None else xq
        mq = self.m_tab_[:0] if mq is None else mq
        outs = []
        table_out = None if rows is None else torch.empty(len(self.x_tab_), self.meta.n_classes or 1,
                                                          device=self.device_)
        for ci, qi in self._batches(len(xq), torch):
            x = torch.cat([self.x_tab_[ci], xq[qi]])
            m = torch.cat([self.m_tab_[ci], mq[qi]])
            m[len(ci):, t] = True  # query targets are never visible
            if not self.context_labels_:
                m[:, t] = True
            x = torch.where(self._spread(m), torch.zeros_like(x), x)
            with self._autocast(torch):
                y = self.model_(x, m, columns=[t])[t].float()
            y = y.reshape(len(x), -1)
            if table_out is None:
                outs.append(y[len(ci):])
            else:  # the table's own rows are asked for: keep the context rows' outputs
                table_out[ci] = y[:len(ci)]
        out = torch.cat(outs) if table_out is None else table_out[rows]
        return out if self.meta.is_classification else out[:, 0]

    # --- estimator API ------------------------------------------------------------------------

    def _standardise(self, frames):
        """Numeric columns' mean and scale over the rows of ``frames`` (the training rows; all rows
        of the table when transductive, as the authors' code does)."""
        self.mean_, self.scale_ = {}, {}
        for j, col in enumerate(self.meta.columns):
            if col.kind != CATEGORICAL:
                v = np.concatenate([f[col.name].to_numpy(dtype=np.float64) for f in frames])
                with np.errstate(all="ignore"):
                    finite = np.isfinite(v).any()
                    mu, sd = (np.nanmean(v), np.nanstd(v)) if finite else (0.0, 1.0)
                self.mean_[j] = mu if np.isfinite(mu) else 0.0
                self.scale_[j] = sd if np.isfinite(sd) and sd > 0 else 1.0

    def fit(self, X, y, X_val=None, y_val=None, X_unlabelled=None):
        """Train on (X, y); (X_val, y_val) choose the best step. Transductive (``transductive=True``):
        the validation rows' and ``X_unlabelled``'s features join the table with their targets
        masked, as in the authors' code; their targets are never an input and never scored."""
        import torch

        from tabbench_plugins import npt_model as nm
        from tabbench_plugins import npt_optim as no
        from tabbench_plugins import npt_train as nt
        from tabbench.preprocess import TargetScaler

        self._check_params()
        P = self._param
        device = P("device")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device_ = dev = torch.device(device)
        self.cpu_bf16_ = dev.type == "cpu" and torch.backends.mkldnn.is_available() and \
            torch.ops.mkldnn._is_mkldnn_bf16_supported()
        torch.manual_seed(self.seed)  # initialisation and dropout (the CUDA generators too)

        has_val = X_val is not None and len(X_val) > 0
        transductive = bool(P("transductive"))
        unlabelled = [f for f in ((X_val if has_val else None), X_unlabelled) if f is not None and len(f)]
        unlabelled = unlabelled if transductive else []
        self._standardise([X, *unlabelled])
        if not self.meta.is_classification:
            self.y_scaler_ = TargetScaler().fit(np.asarray(y, dtype=np.float64))
        n_patches = P("n_patches") or 0
        if n_patches:
            cards = (0,) * n_patches
        else:
            cards = tuple(max(len(c.categories), 1) if c.kind == CATEGORICAL else 0 for c in self.meta.columns)
        cards += (self.meta.n_classes,) if self.meta.is_classification else (0,)
        self.cfg_ = cfg = nm.NPTConfig(
            cards=cards, e=P("e"), n_layers=P("n_layers"), n_heads=P("n_heads"), dropout=P("dropout"),
            att_dropout=P("att_dropout"), ln_kv=P("ln_kv"), temperature=P("temperature"),
            residual=P("residual"), attention=P("attention"), checkpointing=P("checkpointing"),
            n_patches=n_patches, patch_dim=self.patch_order_.shape[1] if n_patches else 0)
        t = cfg.d - 1

        # The table goes to the device once: the training rows, then (transductive) the unlabelled
        # rows, whose target entries are missing (zero, mask bit set, never scored).
        blocks = [self._encode(X, y)]
        self.in_table_ = []  # (first row, encoded values) of each unlabelled block, to recognise it in predict
        for frame in unlabelled:
            xu, mu = self._encode(frame)
            mu[:, -1] = True
            self.in_table_.append((sum(len(b[0]) for b in blocks), xu))
            blocks.append((xu, mu))
        self.n_labelled_ = len(X)
        self.x_tab_ = torch.from_numpy(np.concatenate([b[0] for b in blocks])).to(dev)
        self.m_tab_ = torch.from_numpy(np.concatenate([b[1] for b in blocks])).to(dev)
        if has_val:
            xv, mv = self._encode(X_val, y_val)
            x_val, m_val = torch.from_numpy(xv).to(dev), torch.from_numpy(mv).to(dev)
            val_rows = (torch.arange(len(xv), device=dev) + self.n_labelled_) if transductive else None
        cand = ~self.m_tab_
        p_col = torch.tensor([P("p_feature")] * t + [P("p_target")], device=dev)
        cards_t = torch.tensor(cards, dtype=torch.float32, device=dev)
        self.context_labels_ = P("p_target") < 1 if P("context_labels") == "auto" else bool(P("context_labels"))

        self.model_ = model = nm.NPT(cfg).to(dev)
        params = list(model.parameters())
        fused = P("fused_optimizer")
        fused = model.n_params() >= FUSED_MIN_PARAMS if fused == "auto" else bool(fused)
        value_clip = P("clip") if P("clip") and P("clip_mode") == "value" else None
        opt = no.Lookahead(no.Lamb(params, lr=P("lr"), betas=(0.9, 0.999), eps=1e-6, weight_decay=P("weight_decay"),
                                   grad_clamp=value_clip, fused=fused),
                           alpha=P("lookahead_alpha"), k=P("lookahead_k"))
        steps = int(P("steps"))
        n = len(self.x_tab_)
        n_b = n_batches(n, P("batch_size"))
        flat = P("flat_fraction")
        flat = (0.5 if n_b == 1 else 0.7) if flat is None else flat
        eval_every = max(1, int(P("eval_every")))
        budgets = nt.BUDGET_LADDER if P("budgets") is None else tuple(P("budgets"))

        run = nt.Run(model, opt, torch.Generator(device=dev).manual_seed(self.seed), steps, budgets)
        same_job = {**SPEC.key_params(self.params), "seed": self.seed}
        ckpt = nt.Checkpointer(getattr(self, "checkpoint_dir", None), P("checkpoint_minutes"),
                               nt.fingerprint(self.x_tab_.cpu().numpy(), params=same_job, model=model))
        ckpt.resume(run)
        self.resumed_fit_seconds_ = run.earlier_seconds
        while run.step < steps:
            step = run.step
            model.train()
            if not run.batches:  # a new epoch
                run.batches = [b[0] for b in self._chunks(n_b, run.gen, torch)] if n_b > 1 else [None]
            idx = run.batches.pop(0)
            xb, mb, cb = (self.x_tab_, self.m_tab_, cand) if idx is None else \
                (self.x_tab_[idx], self.m_tab_[idx], cand[idx])
            c = nm.corrupt(xb, mb, cb, p_col, cards_t, run.gen, P("p_random"), cfg.n_patches, cfg.patch_dim)
            lam = no.cosine_tradeoff(step, steps, P("lambda_init"))
            with self._autocast(torch):
                out = model(c.x, c.m)
            losses = nm.entry_losses(out, xb, cards, cfg.n_patches, cfg.patch_dim)
            loss = (1 - lam) * nm.masked_mean(losses[:, t], c.scored[:, t])
            if lam > 0:
                loss = loss + lam * nm.masked_mean(losses[:, :t], c.scored[:, :t])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if P("clip") and P("clip_mode") == "norm":
                torch.nn.utils.clip_grad_norm_(params, P("clip"))
            for group in opt.param_groups:
                group["lr"] = P("lr") * no.flat_then_anneal(step, steps, flat)
            opt.step()
            run.step = step + 1
            run.last_loss = loss.detach()

            if has_val and (run.step % eval_every == 0 or run.step == steps):
                model.eval()
                with torch.no_grad():
                    if transductive:
                        pred = self._target_outputs(torch, rows=val_rows)
                    else:
                        pred = self._target_outputs(torch, x_val, m_val)
                    if self.meta.is_classification:
                        vl = torch.nn.functional.cross_entropy(pred, x_val[:, -1].long())
                    else:
                        vl = ((pred - x_val[:, -1]) ** 2).mean()
                    run.observe(vl)
            run.snapshot_if_budget(has_val)
            ckpt.maybe_save(run)
        if has_val:
            run.use_best()
        model.eval()
        self.run_ = run
        self.info_ = {
            "n_params": model.n_params(),
            "best_step": int(run.best_step) if has_val else steps,
            "best_val_loss": float(run.best_loss) if has_val else None,
            "steps": steps,
            "batch_rows": math.ceil(n / n_b),  # rows per training batch, at most (batch_size resolved)
            "final_train_loss": float(run.last_loss) if run.last_loss is not None else None,
            "device": str(dev),
            "amp": bool(P("amp")) and (dev.type == "cuda" or self.cpu_bf16_),
            "fused_optimizer": opt.base.fused,
            "threads": torch.get_num_threads() if dev.type == "cpu" else None,
            "resumed_from_step": ckpt.resumed_from,
            "checkpoint_ignored": ckpt.ignored,
        }
        return self

    # --- step budgets: what a shorter run would have predicted ---------------------------------

    @property
    def budgets_(self) -> list:
        """The step budgets below ``steps`` at which this run kept its best-so-far weights."""
        return sorted(self.run_.snapshots)

    def at_budget(self, budget: int) -> "NPT":
        """This estimator with the weights a run of ``budget`` steps would have used (best
        validation loss up to that step), for scoring the budget curve. Shares everything else."""
        import copy

        import torch

        best_step, weights = self.run_.snapshots[budget]
        other = copy.copy(self)
        other.model_ = copy.deepcopy(self.model_)
        with torch.no_grad():
            for p, w in zip(other.model_.parameters(), weights):
                p.copy_(w)
        other.info_ = {"steps": budget, "best_step": best_step}
        return other

    def _query_outputs(self, X):
        import torch

        xq, mq = self._encode(X)
        with torch.no_grad():
            for first, block in self.in_table_:  # rows already in the table (transductive): no duplicate
                if block.shape == xq.shape and np.array_equal(block, xq):
                    return self._target_outputs(torch, rows=torch.arange(first, first + len(xq), device=self.device_))
            return self._target_outputs(torch, torch.from_numpy(xq).to(self.device_),
                                        torch.from_numpy(mq).to(self.device_))

    def predict_proba(self, X):
        if not self.meta.is_classification:
            raise AttributeError("predict_proba is only defined for classification")
        return self._query_outputs(X).softmax(-1).double().cpu().numpy()

    def predict(self, X):
        if self.meta.is_classification:
            return self.predict_proba(X).argmax(axis=1)
        return self.y_scaler_.inverse_transform(self._query_outputs(X).double().cpu().numpy())


SPEC = ModelSpec(
    name="npt", factory=NPT, tasks=frozenset({BINARY, MULTICLASS, REGRESSION}),
    default_params=dict(DEFAULT_PARAMS), search_space={},
    cpus=lambda p: p["cpus"], gpus=lambda p: 1 if p.get("device") == "cuda" else 0,
    transductive=lambda p: bool(p["transductive"]),
    requires=("torch",), install_hint="pip install 'tabbench[torch]'",
    deterministic=False,  # seeded torch training: last digits differ across CPUs
    check=check_cost, run_params=RUN_PARAMS,
    description="Non-Parametric Transformer (Kossen et al. 2021): attention between rows and columns. "
                "CPU cost of the defaults (e 32, 8 layers, 500 steps, batches of at most 2,048 rows): per step "
                "about 0.4 CPU-s per 1,000 rows at 10 features, 2.2 s at 25, 10 s at 54; a job over the suite's "
                "budget.time_s (else 48 CPU-hours) is refused before the run",
)


@tabbench.hookimpl
def register_models(register):
    register(SPEC)
