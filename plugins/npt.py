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
  clipped (``clip_mode``), ``batch_size`` rows per step (None = the whole table; else shuffled or,
  with ``class_balance``, class-stratified minibatches).
* Every ``eval_every`` steps the validation loss is computed with the validation rows' targets masked
  and the training rows as context; the parameters with the best validation loss are kept (on the
  device, without a host sync) and used for prediction.
* Prediction: the training rows are the context, the rows to predict have their target masked. With
  minibatches every batch holds context and query rows in the proportion of their totals.

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
import time

import numpy as np

import tabbench
from tabbench.spec import BINARY, CATEGORICAL, MULTICLASS, REGRESSION, ModelSpec

DEFAULT_PARAMS = {
    # architecture (paper defaults; e = 32 is the paper's Breast Cancer size, 64 / 128 elsewhere)
    "e": 32, "n_layers": 8, "n_heads": 8, "dropout": 0.1, "att_dropout": 0.1,
    # code-vs-paper architecture flags (defaults = the authors' code; see npt_model.py)
    "ln_kv": False, "temperature": "hidden", "residual": "linear",
    # optimisation
    "lr": 1e-3, "steps": 500, "batch_size": None, "eval_batch_size": None,
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

#: Below this size the fused optimizer's one-off compilation costs more than it saves.
FUSED_MIN_PARAMS = 5_000_000


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

    def _table_order(self, g, torch):
        """A random order of the table's rows as n_b chunks' worth: the labelled rows (class-stratified
        when class_balance is set, so every chunk keeps the class proportions), then the unlabelled
        ones (transductive). Returns the two orders; chunks take a share of each. On the device."""
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
        size = self._param("eval_batch_size") or self._param("batch_size")
        n_ctx = len(self.x_tab_)
        q = torch.arange(n_q, device=self.device_)
        if not size or size >= n_ctx + n_q:
            return [(torch.arange(n_ctx, device=self.device_), q)]
        g = torch.Generator(device=self.device_).manual_seed(self.seed + 1)
        return self._chunks(math.ceil((n_ctx + n_q) / size), g, torch, q)

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
        outs, table_out = [], torch.empty(len(self.x_tab_), self.meta.n_classes or 1, device=self.device_)
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
            outs.append(y[len(ci):])
            table_out[ci] = y[:len(ci)]
        out = table_out[rows] if rows is not None else torch.cat(outs)
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
        start = time.perf_counter()
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
        size = P("batch_size")
        n_b = 1 if not size or size >= n else max(1, round(n / size))
        flat = P("flat_fraction")
        flat = (0.5 if n_b == 1 else 0.7) if flat is None else flat
        eval_every = max(1, int(P("eval_every")))
        budgets = nt.BUDGET_LADDER if P("budgets") is None else tuple(P("budgets"))

        run = nt.Run(model, opt, torch.Generator(device=dev).manual_seed(self.seed), steps, budgets)
        ckpt = nt.Checkpointer(getattr(self, "checkpoint_dir", None), P("checkpoint_minutes"),
                               nt.fingerprint(self.x_tab_.cpu().numpy(), params={**self.params, "seed": self.seed}))
        ckpt.resume(run)
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
            "final_train_loss": float(run.last_loss) if run.last_loss is not None else None,
            "device": str(dev),
            "amp": bool(P("amp")) and (dev.type == "cuda" or self.cpu_bf16_),
            "fused_optimizer": opt.base.fused,
            "threads": torch.get_num_threads() if dev.type == "cpu" else None,
            "resumed_from_step": ckpt.resumed_from,
            "fit_seconds": time.perf_counter() - start,
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


@tabbench.hookimpl
def register_models(register):
    register(ModelSpec(
        name="npt", factory=NPT, tasks=frozenset({BINARY, MULTICLASS, REGRESSION}),
        default_params=dict(DEFAULT_PARAMS), search_space={},
        cpus=lambda p: p["cpus"], gpus=lambda p: 1 if p.get("device") == "cuda" else 0,
        transductive=lambda p: bool(p["transductive"]),
        requires=("torch",), install_hint="pip install 'tabbench[torch]'",
        deterministic=False,  # seeded torch training: last digits differ across CPUs
        description="Non-Parametric Transformer (Kossen et al. 2021): attention between rows and columns",
    ))
