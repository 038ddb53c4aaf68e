"""The ``npt`` estimator: the tabbench contract around the model, its optimiser and its training loop.

``fit`` prepares the table (encoding, standardisation, which rows are labelled), builds the model and
the optimiser, trains (``tabbench_plugins.npt.training``) and fills ``info_``. What NPT is and how it
trains is written down in docs/npt.md; the choices where the authors' code and the paper differ are
params, listed there and in ``defaults`` below.

torch is imported only inside ``fit`` and ``predict``: ``tabbench models`` stays fast.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from tabbench.estimator import Estimator, JobContext
from tabbench.spec import CATEGORICAL, ModelSpec
from tabbench_plugins.torch_training import bf16_autocast, deterministic_algorithms, native_bf16, resolve_device

from tabbench_plugins.npt.cost import auto_steps, check_cost, estimate_cpu_seconds, estimate_seconds, eval_chunks

#: Below this size the fused optimiser's one-off compilation costs more than it saves. CPU only: on a GPU
#: one compiled call per parameter is bound by its dispatch (measured on an H100, Boston e 128: 165 ms a
#: step, the same with explicit and fused attention), where the multi-tensor kernels launch a few per step.
FUSED_MIN_PARAMS = 5_000_000

LR_SCHEDULES = ("flat_anneal", "cosine_cyclic")


def fused_optimizer(setting, device_type: str, n_params: int) -> bool:
    """Whether LAMB runs as one compiled kernel per parameter: ``setting`` true or false as given; "auto":
    on the CPU for models of FUSED_MIN_PARAMS parameters or more, on CUDA never (see FUSED_MIN_PARAMS)."""
    if setting == "auto":
        return device_type == "cpu" and n_params >= FUSED_MIN_PARAMS
    return bool(setting)


class NPT(Estimator):
    """Non-Parametric Transformer estimator (tabbench contract, see tabbench/spec.py)."""

    defaults = {
        # architecture (paper defaults; e = 32 is the paper's Breast Cancer size, 64 / 128 elsewhere)
        "e": 32, "n_layers": 8, "n_heads": 8, "dropout": 0.1, "att_dropout": 0.1,
        # code-vs-paper architecture flags (defaults = the authors' code; see model.py)
        "ln_kv": False, "temperature": "hidden", "residual": "linear",
        # optimisation
        # batch_size "auto": the whole table up to AUTO_BATCH_ROWS rows, else class-stratified minibatches of
        # at most that many; null: the whole table always; a number: minibatches of about that many rows
        # steps "auto": as many as the cost model says fit in the job's time budget (cost.auto_steps)
        "lr": 1e-3, "steps": 500, "batch_size": "auto", "eval_batch_size": None,
        # lr_schedule "flat_anneal": constant for flat_fraction of the steps, then cosine to 0 (None: 0.5 with
        # whole-table batches (paper, small data), else 0.7); "cosine_cyclic": linear warm-up over
        # warmup_fraction of the steps, then cosine cycles (optimiser.cosine_cyclic)
        "lr_schedule": "flat_anneal", "flat_fraction": None, "warmup_fraction": 0.2,
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
        # ladder 100, 300, 1000, 2000, 5000, 10000, ... below ``steps`` (checkpoints.BUDGET_LADDER)
        "budgets": None,
        # execution: cpus = torch threads (and the CPUs the job asks Ray for); a checkpoint every
        # checkpoint_minutes when the harness gives the job a checkpoint folder; fused_optimizer: one
        # compiled LAMB kernel per parameter ("auto": on the CPU, for models of FUSED_MIN_PARAMS parameters
        # or more; on CUDA never); deterministic: on CUDA, torch's deterministic algorithms while fitting, so
        # that a seed repeats a fit bit for bit there as it does on the CPU (benchmarks/README.md: its cost);
        # cuda_graph: each training step and validation replayed as a CUDA graph ("auto": on CUDA with
        # whole-table batches, where launches, not arithmetic, bound a step; graphs.py)
        "device": "auto", "amp": True, "checkpointing": False, "attention": "fused", "cpus": 1,
        "checkpoint_minutes": 5.0, "fused_optimizer": "auto", "deterministic": True, "cuda_graph": "auto",
    }

    # --- params -------------------------------------------------------------------------------------

    def _param(self, name):
        return self.params[name]

    def _check_params(self):
        P = self._param
        steps = P("steps")
        if not (steps == "auto" or (isinstance(steps, (int, float)) and not isinstance(steps, bool)
                                    and steps >= 0 and int(steps) == steps)):
            raise ValueError(f"npt: steps must be a whole number >= 0 (0: no training) or 'auto', got {steps!r}")
        if P("clip_mode") not in ("value", "norm"):
            raise ValueError("npt: clip_mode must be 'value' or 'norm'")
        if P("context_labels") not in ("auto", True, False):
            raise ValueError("npt: context_labels must be 'auto', true or false")
        if P("lr_schedule") not in LR_SCHEDULES:
            raise ValueError(f"npt: lr_schedule must be one of {list(LR_SCHEDULES)}, got {P('lr_schedule')!r}")
        if not (isinstance(P("warmup_fraction"), (int, float)) and 0 < P("warmup_fraction") < 1):
            raise ValueError(f"npt: warmup_fraction must be in (0, 1), got {P('warmup_fraction')!r}")
        for name in ("p_feature", "p_target", "p_random", "lambda_init", "dropout", "att_dropout"):
            if not 0 <= P(name) <= 1:
                raise ValueError(f"npt: {name} must be in [0, 1], got {P(name)}")
        for name in ("fused_optimizer", "cuda_graph"):
            if P(name) not in ("auto", True, False):
                raise ValueError(f"npt: {name} must be 'auto', true or false, got {P(name)!r}")
        size = P("batch_size")
        if not (size is None or size == "auto" or (isinstance(size, int) and not isinstance(size, bool) and size > 0)):
            raise ValueError(f"npt: batch_size must be 'auto', null (the whole table) or a row count, got {size!r}")
        if not (isinstance(P("cpus"), (int, float)) and P("cpus") >= 1):
            raise ValueError(f"npt: cpus must be a number >= 1, got {P('cpus')!r}")
        budgets = P("budgets")
        if budgets is not None and (not isinstance(budgets, (list, tuple))
                                    or not all(isinstance(b, int) and b > 0 for b in budgets)):
            raise ValueError(f"npt: budgets must be a list of positive step counts, got {budgets!r}")
        if P("n_patches"):
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

    # --- the table ----------------------------------------------------------------------------------

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

    @staticmethod
    def _row_keys(x, m):
        """One key per encoded row, its features only (values and missing bits, not the target): equal
        keys = rows the model cannot tell apart. Bytes, so that a lookup is exact (no collisions)."""
        features = np.ascontiguousarray(x[:, :-1])
        missing = np.ascontiguousarray(m[:, :-1])
        return [a.tobytes() + b.tobytes() for a, b in zip(features, missing)]

    def _prepare_table(self, X, y, X_val, y_val, X_unlabelled, torch):
        """The table on the device: the training rows, then (transductive) the validation rows and
        ``X_unlabelled``, whose targets are missing (zero, mask bit set, never scored). Sets the
        standardisation, the model's column layout (``cfg_``), the validation tensors and what the
        training loop masks."""
        from tabbench_plugins.npt.model import NPTConfig
        from tabbench.preprocess import TargetScaler

        P, dev = self._param, self.device_
        self.has_val_ = X_val is not None and len(X_val) > 0
        self.transductive_ = bool(P("transductive"))
        unlabelled = [f for f in ((X_val if self.has_val_ else None), X_unlabelled) if f is not None and len(f)]
        unlabelled = unlabelled if self.transductive_ else []
        self._standardise([X, *unlabelled])
        if not self.meta.is_classification:
            self.y_scaler_ = TargetScaler().fit(np.asarray(y, dtype=np.float64))
        n_patches = P("n_patches") or 0
        if n_patches:
            cards = (0,) * n_patches
        else:
            cards = tuple(max(len(c.categories), 1) if c.kind == CATEGORICAL else 0 for c in self.meta.columns)
        self.cards_ = cards + ((self.meta.n_classes,) if self.meta.is_classification else (0,))
        self.cfg_ = NPTConfig(
            cards=self.cards_, e=P("e"), n_layers=P("n_layers"), n_heads=P("n_heads"), dropout=P("dropout"),
            att_dropout=P("att_dropout"), ln_kv=P("ln_kv"), temperature=P("temperature"),
            residual=P("residual"), attention=P("attention"), checkpointing=P("checkpointing"),
            n_patches=n_patches, patch_dim=self.patch_order_.shape[1] if n_patches else 0)

        blocks = [self._encode(X, y)]
        for frame in unlabelled:
            xu, mu = self._encode(frame)
            mu[:, -1] = True
            blocks.append((xu, mu))
        self.n_labelled_ = len(X)
        x = np.concatenate([b[0] for b in blocks])
        m = np.concatenate([b[1] for b in blocks])
        # the unlabelled rows by content, so that predict finds them in any order (see _query_outputs)
        self.table_rows_ = {}
        for i, key in enumerate(self._row_keys(x[self.n_labelled_:], m[self.n_labelled_:]), self.n_labelled_):
            self.table_rows_.setdefault(key, i)
        self.x_tab_ = torch.from_numpy(x).to(dev)
        self.m_tab_ = torch.from_numpy(m).to(dev)
        if self.has_val_:
            xv, mv = self._encode(X_val, y_val)
            self.x_val_, self.m_val_ = torch.from_numpy(xv).to(dev), torch.from_numpy(mv).to(dev)
            self.val_rows_ = (torch.arange(len(xv), device=dev) + self.n_labelled_) if self.transductive_ else None
        self.context_labels_ = P("p_target") < 1 if P("context_labels") == "auto" else bool(P("context_labels"))

    # --- batches ------------------------------------------------------------------------------------

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

    def _epoch(self, n_b, g, torch):
        """The training batches of one epoch: index tensors, or [None] for the whole table."""
        return [b[0] for b in self._chunks(n_b, g, torch)] if n_b > 1 else [None]

    def _eval_chunks(self, n_q):
        """How many chunks a forward pass over the table plus ``n_q`` query rows is split into."""
        return eval_chunks(len(self.x_tab_) + n_q, self._param("eval_batch_size"), self._param("batch_size"))

    def _batches(self, n_q, torch):
        """(context rows, query rows) index batches for prediction; fixed, so predict is deterministic."""
        n_ctx = len(self.x_tab_)
        chunks = self._eval_chunks(n_q)
        q = torch.arange(n_q, device=self.device_)
        if chunks == 1:
            return [(torch.arange(n_ctx, device=self.device_), q)]
        g = torch.Generator(device=self.device_).manual_seed(self.seed + 1)
        return self._chunks(chunks, g, torch, q)

    # --- forward passes for evaluation --------------------------------------------------------------

    def _spread(self, m):
        from tabbench_plugins.npt.model import spread

        return spread(m, self.cfg_.n_patches, self.cfg_.patch_dim)

    def _autocast(self):
        return bf16_autocast(self.device_.type, self.amp_)

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
            if table_out is None and not len(qi):  # a chunk holding no query row (one row probed): nothing to read
                continue
            x = torch.cat([self.x_tab_[ci], xq[qi]])
            m = torch.cat([self.m_tab_[ci], mq[qi]])
            m[len(ci):, t] = True  # query targets are never visible
            if not self.context_labels_:
                m[:, t] = True
            x = torch.where(self._spread(m), torch.zeros_like(x), x)
            with self._autocast():
                y = self.model_(x, m, columns=[t])[t].float()
            y = y.reshape(len(x), -1)
            if table_out is None:
                outs.append(y[len(ci):])
            else:  # the table's own rows are asked for: keep the context rows' outputs
                table_out[ci] = y[:len(ci)]
        out = torch.cat(outs) if table_out is None else table_out[rows]
        return out if self.meta.is_classification else out[:, 0]

    def _validation_loss(self, torch):
        """Loss of the validation rows' targets, predicted with the training rows as context."""
        if self.transductive_:
            pred = self._target_outputs(torch, rows=self.val_rows_)
        else:
            pred = self._target_outputs(torch, self.x_val_, self.m_val_)
        if self.meta.is_classification:
            return torch.nn.functional.cross_entropy(pred, self.x_val_[:, -1].long())
        return ((pred - self.x_val_[:, -1]) ** 2).mean()

    # --- fit ----------------------------------------------------------------------------------------

    def job_identity(self) -> dict:
        """The params and seed a checkpoint must have been made with to be resumed (besides the table
        and the model layout): the job key's params (``SPEC.key_params``) and the seed."""
        return {**SPEC.key_params(self.params), "seed": self.seed,
                **({"steps": self.steps_} if self.params["steps"] == "auto" else {})}

    def fit(self, X, y, X_val=None, y_val=None, X_unlabelled=None, *, context: JobContext = JobContext()):
        """Train on (X, y); (X_val, y_val) choose the best step. Transductive (``transductive=True``):
        the validation rows' and ``X_unlabelled``'s features join the table with their targets
        masked, as in the authors' code; their targets are never an input and never scored."""
        import torch

        from tabbench_plugins.npt import training

        self._check_params()
        self.clock_ = context.training_clock()  # the job's time budget, if any, counted from the job's start
        self.device_ = torch.device(resolve_device(self._param("device")))  # cuda without a GPU: a clear error
        self.amp_ = bool(self._param("amp")) and native_bf16(self.device_.type)
        torch.manual_seed(self.seed)  # initialisation and dropout (the CUDA generators too)

        with deterministic_algorithms(self.device_.type, bool(self._param("deterministic"))):
            self._prepare_table(X, y, X_val, y_val, X_unlabelled, torch)
            self._build_model_and_optimiser(torch)
            self.steps_ = self._resolve_steps(len(X_unlabelled) if X_unlabelled is not None else 0, torch,
                                              context.time_budget_s)
            self.run_, checkpointer = training.train(self, torch, context.checkpoint_dir)
        self.resumed_fit_seconds_ = self.run_.earlier_seconds
        self._fill_info(checkpointer, torch, context.time_budget_s)
        return self

    def _resolve_steps(self, n_unlabelled: int, torch, budget: float | None) -> int:
        """``steps``, or for ``"auto"`` the steps that fit in what is left of the job's training time (the
        clock's ``remaining``, from ``budget``, the suite's budget.time_s that the harness hands fit in the job's
        context, ``JobContext.time_budget_s``) by the cost model (``cost.auto_steps``),
        scaled by how much slower than it one training pass runs here (``training.measured_slowdown``)."""
        steps = self._param("steps")
        if steps != "auto":
            return int(steps)
        from tabbench.spec import SplitSizes
        from tabbench_plugins.npt import training

        if not budget:
            raise ValueError('npt: steps "auto" needs the job\'s time budget (the suite\'s budget.time_s, given '
                             "to fit as context.time_budget_s); none was given: set budget.time_s, or give "
                             "steps a number")
        n_val = len(self.x_val_) if self.has_val_ else 0
        sizes = SplitSizes(self.n_labelled_, n_val, n_unlabelled)
        model = estimate_cpu_seconds(self.meta, sizes, {**self.params, "steps": 0})
        cpus = max(1.0, float(self._param("cpus")))
        self.slowdown_ = training.measured_slowdown(self, torch, model["rows"], model["pass_s"] / cpus)
        steps = auto_steps(self.meta, sizes, self.params, budget, self.slowdown_, self.clock_.remaining())
        if steps < 1:
            raise ValueError(f'npt: steps "auto": not one training step fits in the time budget of {budget:g} s')
        return steps

    def _build_model_and_optimiser(self, torch):
        from tabbench_plugins.npt.model import NPT as Model
        from tabbench_plugins.npt.optimiser import Lamb, Lookahead

        P = self._param
        self.model_ = Model(self.cfg_).to(self.device_)
        fused = fused_optimizer(P("fused_optimizer"), self.device_.type, self.model_.n_params())
        value_clip = P("clip") if P("clip") and P("clip_mode") == "value" else None
        self.opt_ = Lookahead(Lamb(list(self.model_.parameters()), lr=P("lr"), betas=(0.9, 0.999), eps=1e-6,
                                   weight_decay=P("weight_decay"), grad_clamp=value_clip, fused=fused),
                              alpha=P("lookahead_alpha"), k=P("lookahead_k"))

    def _fill_info(self, checkpointer, torch, budget: float | None):
        run, steps, dev = self.run_, self.run_.steps, self.device_
        self.info_ = {
            "n_params": self.model_.n_params(),
            "best_step": int(run.best_step) if self.has_val_ else steps,
            "best_val_loss": float(run.best_loss) if self.has_val_ else None,
            "steps": steps,
            "steps_run": int(run.step),  # fewer than steps only when the time budget stopped training
            "stopped_by_time_budget": self.clock_.stopped,
            "batch_rows": math.ceil(len(self.x_tab_) / self.n_batches_),  # rows per training batch, at most
            "final_train_loss": float(run.last_loss) if run.last_loss is not None else None,
            "device": str(dev),
            "amp": self.amp_,
            "deterministic": dev.type == "cpu" or (dev.type == "cuda" and bool(self._param("deterministic"))),
            "fused_optimizer": self.opt_.base.fused,
            "cuda_graph": self.cuda_graph_,  # "off", "replayed", "eager" (too few steps) or "failed: <why>"
            "threads": torch.get_num_threads() if dev.type == "cpu" else None,
            "resumed_from_step": checkpointer.resumed_from,
            "checkpoint_ignored": checkpointer.ignored,
        }
        if self._param("steps") == "auto":  # the steps planned (above) came from this budget at this speed
            self.info_["steps_from_budget_s"] = budget
            self.info_["slowdown_vs_cost_model"] = self.slowdown_

    # --- step budgets: what a shorter run would have predicted ---------------------------------------

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

    # --- predict ------------------------------------------------------------------------------------

    def _query_outputs(self, X):
        """Target outputs for the rows of X, the fitted table as context.

        Inductive: X's rows are appended to the table, targets masked. Transductive: a row of X whose
        features equal one of the table's unlabelled rows (validation and ``X_unlabelled``, matched by
        content, in any order, duplicates included) is that row: its output is read from the table, so
        the prediction does not depend on X's order or on which other rows X holds. A row the table
        does not hold (or that matches a labelled training row) is appended as a new row, as inductive
        prediction does, with a warning that says how many.
        """
        import torch

        xq, mq = self._encode(X)
        dev = self.device_
        found = np.full(len(xq), -1)
        if self.transductive_:
            found = np.array([self.table_rows_.get(k, -1) for k in self._row_keys(xq, mq)], dtype=np.int64)
        new = np.flatnonzero(found < 0)
        if self.transductive_ and len(new):
            warnings.warn(f"npt (transductive): {len(new)} of the {len(xq)} rows to predict are not among the "
                          f"table's unlabelled rows given to fit; they are predicted as new rows appended to the "
                          f"table (inductively), the other {len(xq) - len(new)} from the table", stacklevel=3)
        with torch.no_grad():
            if len(new) == len(xq):
                return self._target_outputs(torch, torch.from_numpy(xq).to(dev), torch.from_numpy(mq).to(dev))
            out = self._target_outputs(torch, rows=torch.from_numpy(found).to(dev).clamp(min=0))
            if len(new):
                out[torch.from_numpy(new).to(dev)] = self._target_outputs(
                    torch, torch.from_numpy(xq[new]).to(dev), torch.from_numpy(mq[new]).to(dev))
            return out

    def predict_with_context(self, X, context_X, context_y):
        """Row i of X predicted with block i of the context as the table in place of the fitted one
        (tabbench/spec.py): the block's labelled rows (finite ``context_y``) are the table's labelled rows,
        its NaN-target rows its unlabelled ones (a transductive fit's validation and other test rows), and
        row i is appended as a query with its target masked, as inductive prediction appends a row.
        Cost: one forward pass per test row over its table plus the row; where the table is evaluated in
        chunks (larger than one batch), over the one chunk the row falls in, as predict would."""
        import copy

        import torch

        n = len(context_X) // len(X)
        assert n * len(X) == len(context_X) == len(context_y), (
            f"npt: context of {len(context_X)} rows is not {len(X)} blocks of equal size")
        unlabelled = np.isnan(context_y)
        xc, mc = self._encode(context_X, np.where(unlabelled, 0.0, context_y))
        xc[unlabelled, -1] = 0.0
        mc[unlabelled, -1] = True
        xq, mq = self._encode(X)
        dev, out = self.device_, []
        with torch.no_grad():
            for i in range(len(X)):
                block = slice(i * n, (i + 1) * n)
                order = np.argsort(unlabelled[block], kind="stable")  # labelled rows first, as in the table
                table = copy.copy(self)
                table.x_tab_ = torch.from_numpy(xc[block][order]).to(dev)
                table.m_tab_ = torch.from_numpy(mc[block][order]).to(dev)
                table.n_labelled_ = int((~unlabelled[block]).sum())
                out.append(table._target_outputs(torch, torch.from_numpy(xq[i:i + 1]).to(dev),
                                                 torch.from_numpy(mq[i:i + 1]).to(dev)))
        out = torch.cat(out)
        if self.meta.is_classification:
            return out.double().softmax(-1).cpu().numpy()
        return self.y_scaler_.inverse_transform(out.double().cpu().numpy())

    def predict_proba(self, X):
        if not self.meta.is_classification:
            raise AttributeError("predict_proba is only defined for classification")
        return self._query_outputs(X).double().softmax(-1).cpu().numpy()  # sums to 1 in float64

    def predict_values(self, X):
        return self.y_scaler_.inverse_transform(self._query_outputs(X).double().cpu().numpy())


#: How a job runs, not what it computes: left at their defaults in the job key and the checkpoint's
#: fingerprint, so that a run resumed or repeated with more threads continues the same job.
RUN_PARAMS = frozenset({"cpus", "checkpoint_minutes", "deterministic", "cuda_graph"})

#: Params added after NPT jobs were recorded and checkpointed, with the value that does what the code
#: did before them: at that value a job's key and its checkpoint fingerprint leave them out, so that
#: recorded jobs are still found done and a killed run still resumes from its checkpoint.
ADDED_PARAMS = {"lr_schedule": "flat_anneal", "warmup_fraction": 0.2, "deterministic": True, "cuda_graph": "auto"}


SPEC = ModelSpec(
    name="npt", factory=NPT, search_space={},
    cpus=lambda p: p["cpus"], gpus=lambda p: 1 if p.get("device") == "cuda" else 0,
    transductive=lambda p: bool(p["transductive"]),
    requires=("torch",), install_hint="pip install 'tabbench-harness[torch]'",
    deterministic=False,  # seeded torch training: last digits differ across CPUs
    check=check_cost, estimate=estimate_seconds, run_params=RUN_PARAMS, added_params=ADDED_PARAMS, uses_other_rows=True,
    # A small NPT (2 layers, e=16) for a few hundred steps; lambda starts at 0.5 so that the short run spends half
    # its loss on the targets (the paper's runs anneal from 1 over thousands of steps).
    quick_params={"e": 16, "n_layers": 2, "n_heads": 4, "steps": 300, "lambda_init": 0.5},
    info_keys=frozenset({"device", "n_params", "steps", "best_step", "best_val_loss", "final_train_loss"}),
    description="Non-Parametric Transformer (Kossen et al. 2021): attention between rows and columns. "
                "CPU cost of the defaults (e 32, 8 layers, 500 steps, batches of at most 2,048 rows): per step "
                "about 0.4 CPU-s per 1,000 rows at 10 features, 2.2 s at 25, 10 s at 54; a job over the suite's "
                "budget.time_s (else 48 CPU-hours) is refused before the run",
)
