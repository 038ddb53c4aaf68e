"""The ``npt`` estimator: the tabbench contract around the model, its optimiser and its training loop.

``fit`` prepares the table (encoding, standardisation, which rows are labelled), builds the model and
the optimiser, trains (``tabbench_plugins.npt.training``) and fills ``info_``. What NPT is and how it
trains is written down in docs/npt.md; the choices where the authors' code and the paper differ are
params, listed there and in ``NPT.Params`` below.

torch is imported only inside ``fit`` and ``predict``: ``tabbench models`` stays fast.
"""

from __future__ import annotations

import math
import warnings
from typing import Annotated, Literal, Optional, Sequence, Union

import numpy as np
from pydantic import AfterValidator, Field, WithJsonSchema, model_validator

from tabbench.estimator import Estimator
from tabbench.params import Params, param
from tabbench.spec import CATEGORICAL, ModelSpec
from tabbench_plugins.torch_training import bf16_autocast, deterministic_algorithms, native_bf16
from tabbench_plugins.torch_training import Device

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


def _whole(value):
    if int(value) != value:
        raise ValueError("not a whole number")
    return value


#: A step count: a whole number, also when written as a float (2000.0), as the code has always taken it.
WholeSteps = Annotated[Union[int, float], Field(ge=0), AfterValidator(_whole),
                       WithJsonSchema({"type": "integer", "minimum": 0})]
Fraction = Annotated[float, Field(ge=0, le=1)]


class NPT(Estimator):
    """Non-Parametric Transformer estimator (tabbench contract, see tabbench/spec.py)."""

    class Params(Params):
        # architecture (paper defaults; e = 32 is the paper's Breast Cancer size, 64 / 128 elsewhere)
        e: int = param(32, "embedding size per column (the hidden size is e x columns)", ge=1)
        n_layers: int = param(8, "attention layers, alternating between datapoints and attributes", ge=1)
        n_heads: int = param(8, "attention heads", ge=1)
        dropout: Fraction = param(0.1, "hidden dropout: embeddings, attention outputs, feed-forward blocks")
        att_dropout: Fraction = param(0.1, "dropout of the attention weights")
        # code-vs-paper architecture flags (defaults = the authors' code; see model.py)
        ln_kv: bool = param(False, "layer norm on keys and values too (paper), not only queries (code)")
        temperature: Literal["hidden", "head"] = param(
            "hidden", "softmax scale: 1/sqrt of the full hidden size (code) or of one head's size (paper)")
        residual: Literal["linear", "identity"] = param(
            "linear", "the residual branch: a learned Linear of the input (code) or the input itself (paper)")
        # optimisation
        lr: float = param(1e-3, "LAMB's learning rate", gt=0)
        steps: Union[WholeSteps, Literal["auto"]] = param(
            500, "training steps (0: none); auto: as many as the cost model fits in the job's time budget")
        batch_size: Union[Annotated[int, Field(gt=0)], Literal["auto"], None] = param(
            "auto", "rows per step: a count (class-stratified minibatches of about that many); auto: the whole "
            "table up to AUTO_BATCH_ROWS rows, else minibatches of at most that many; null: the whole table")
        eval_batch_size: Optional[Annotated[int, Field(gt=0)]] = param(
            None, "rows per prediction pass (null: as batch_size)")
        lr_schedule: Literal[LR_SCHEDULES] = param(
            "flat_anneal", "flat_anneal: constant for flat_fraction of the steps, then cosine to 0; cosine_cyclic: "
            "linear warm-up over warmup_fraction, then cosine cycles", added_as="flat_anneal")
        flat_fraction: Optional[Fraction] = param(
            None, "flat_anneal's flat share of the steps (null: 0.5 with whole-table batches, as the paper, else 0.7)")
        warmup_fraction: Annotated[float, Field(gt=0, lt=1)] = param(
            0.2, "cosine_cyclic's warm-up share of the steps", added_as=0.2)
        clip: Optional[Annotated[float, Field(ge=0)]] = param(1.0, "gradient clipping threshold (0 or null: none)")
        clip_mode: Literal["value", "norm"] = param("value", "clip each gradient value, or the gradients' norm")
        weight_decay: float = param(0.0, "LAMB's weight decay", ge=0)
        lookahead_alpha: Fraction = param(0.5, "Lookahead's step towards the fast weights")
        lookahead_k: int = param(6, "fast steps per Lookahead step", ge=1)
        eval_every: int = param(6, "steps between validation losses (the best step is kept)", ge=1)
        class_balance: bool = param(
            False, "class-stratified minibatches (each keeps the class proportions); batch_size auto has them anyway")
        # masking objective
        p_feature: Fraction = param(0.15, "probability that a feature entry is masked and reconstructed")
        p_target: Fraction = param(
            1.0, "probability that a training label is masked at a step (1: the model never reads one)")
        p_random: Fraction = param(0.1, "of the masked entries, the share replaced by a random value (BERT-style)")
        lambda_init: Fraction = param(
            1.0, "lambda at the start, cosine-annealed to 0; the loss is (1 - lambda) targets + lambda features")
        context_labels: Literal["auto", True, False] = param(
            "auto", "whether the training labels are visible as context when evaluating (auto: when p_target < 1)")
        # images: a linear patch encoder (paper section 4.2) over images whose pixels are the feature columns,
        # channel-major (tabbench.data.images); each patch is one column of the table
        n_patches: Optional[Annotated[int, Field(ge=1)]] = param(
            None, "patches on a square grid over the image (null: none); MNIST 49 (4x4), CIFAR-10 64 (4x4x3)")
        image_shape: Optional[Annotated[Sequence[Annotated[int, Field(gt=0)]], Field(min_length=3, max_length=3)]] = (
            param(None, "[channels, height, width] of the images n_patches cuts"))
        # protocol
        transductive: bool = param(
            False, "the validation and test rows' features are in every training batch with their targets masked, "
            "and standardisation uses all rows (the authors' code's default)")
        budgets: Optional[Sequence[Annotated[int, Field(gt=0)]]] = param(
            None, "step budgets (ascending) at which the best-so-far weights are kept for a budget curve; null: "
            "the ladder 100, 300, 1000, ... below steps (checkpoints.BUDGET_LADDER)")
        # execution
        device: Device = param("auto", "auto: CUDA where a GPU is visible, else the CPU")
        amp: bool = param(True, "bf16 autocast where bf16 is native")
        checkpointing: bool = param(False, "activation checkpointing: less memory, more compute")
        attention: Literal["fused", "explicit"] = param(
            "fused", "fused: torch's scaled_dot_product_attention; explicit: the textbook softmax(QK^T)V")
        cpus: Annotated[float, Field(ge=1)] = param(1, "torch threads, and the CPUs the job asks Ray for",
                                                    run_only=True)
        checkpoint_minutes: float = param(
            5.0, "minutes between checkpoints, when the harness gives the job a checkpoint folder (0: at every "
            "chance to save)", ge=0,
            run_only=True)
        fused_optimizer: Literal["auto", True, False] = param(
            "auto", "one compiled LAMB kernel per parameter; auto: on the CPU for models of FUSED_MIN_PARAMS "
            "parameters or more, on CUDA never")
        deterministic: bool = param(
            True, "on CUDA, torch's deterministic algorithms while fitting, so that a seed repeats a fit bit for "
            "bit there as on the CPU (benchmarks/README.md: its cost)", run_only=True, added_as=True)
        cuda_graph: Literal["auto", True, False] = param(
            "auto", "each training step and validation replayed as a CUDA graph; auto: on CUDA with whole-table "
            "batches, where launches, not arithmetic, bound a step (graphs.py)", run_only=True, added_as="auto")

        @model_validator(mode="after")
        def _patches_tile_the_image(self):
            if self.n_patches:
                if self.image_shape is None:
                    raise ValueError("n_patches needs image_shape: [channels, height, width], got null")
                _, h, w = self.image_shape
                g = math.isqrt(self.n_patches)
                if g * g != self.n_patches or h % g or w % g:
                    raise ValueError(f"n_patches={self.n_patches} must be a square grid (g x g) dividing the {h}x{w} "
                                     "image: e.g. 49 for 28x28 (4x4 patches), 64 for 32x32")
            return self

    # --- params -------------------------------------------------------------------------------------

    def _param(self, name):
        return self.params[name]

    def _patch_order(self):
        """(n_patches, patch_dim) feature-column indices of each patch, patches in row-major grid order (the
        grid's fit to the image is checked with the params, ``Params``; the image's fit to the table here)."""
        P, (c, h, w) = self._param("n_patches"), self._param("image_shape")
        g = math.isqrt(P)
        features = self.meta.columns
        if len(features) != c * h * w or any(col.kind == CATEGORICAL for col in features):
            raise ValueError(f"npt: image_shape {[c, h, w]} needs {c * h * w} numeric pixel columns; "
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

    def fit(self, X, y, X_val=None, y_val=None, X_unlabelled=None):
        """Train on (X, y); (X_val, y_val) choose the best step. Transductive (``transductive=True``):
        the validation rows' and ``X_unlabelled``'s features join the table with their targets
        masked, as in the authors' code; their targets are never an input and never scored."""
        import torch

        from tabbench_plugins.npt import training

        if self._param("n_patches"):
            self.patch_order_ = self._patch_order()
        self.clock_ = self.training_clock()  # the job's time budget, if any, counted from here
        device = self._param("device")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device_ = torch.device(device)
        self.amp_ = bool(self._param("amp")) and native_bf16(self.device_.type)
        torch.manual_seed(self.seed)  # initialisation and dropout (the CUDA generators too)

        with deterministic_algorithms(self.device_.type, bool(self._param("deterministic"))):
            self._prepare_table(X, y, X_val, y_val, X_unlabelled, torch)
            self._build_model_and_optimiser(torch)
            self.steps_ = self._resolve_steps(len(X_unlabelled) if X_unlabelled is not None else 0, torch)
            self.run_, checkpointer = training.train(self, torch)
        self.resumed_fit_seconds_ = self.run_.earlier_seconds
        self._fill_info(checkpointer, torch)
        return self

    def _resolve_steps(self, n_unlabelled: int, torch) -> int:
        """``steps``, or for ``"auto"`` the steps that fit in what is left of the job's training time (the
        clock's ``remaining``, from the suite's budget.time_s, which the harness hands the estimator as the
        attribute ``time_budget_s``, as it hands ``checkpoint_dir``) by the cost model (``cost.auto_steps``),
        scaled by how much slower than it one training pass runs here (``training.measured_slowdown``)."""
        steps = self._param("steps")
        if steps != "auto":
            return int(steps)
        from tabbench.spec import SplitSizes
        from tabbench_plugins.npt import training

        budget = getattr(self, "time_budget_s", None)
        if not budget:
            raise ValueError('npt: steps "auto" needs the job\'s time budget (the suite\'s budget.time_s, given '
                             "to the estimator as time_budget_s); none was given: set budget.time_s, or give "
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

    def _fill_info(self, checkpointer, torch):
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
            self.info_["steps_from_budget_s"] = self.time_budget_s
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


SPEC = ModelSpec(
    name="npt", factory=NPT, search_space={},
    cpus=lambda p: p["cpus"], gpus=lambda p: 1 if p.get("device") == "cuda" else 0,
    transductive=lambda p: bool(p["transductive"]),
    requires=("torch",), install_hint="pip install 'tabbench-harness[torch]'",
    deterministic=False,  # seeded torch training: last digits differ across CPUs
    check=check_cost, estimate=estimate_seconds, uses_other_rows=True,
    description="Non-Parametric Transformer (Kossen et al. 2021): attention between rows and columns. "
                "CPU cost of the defaults (e 32, 8 layers, 500 steps, batches of at most 2,048 rows): per step "
                "about 0.4 CPU-s per 1,000 rows at 10 features, 2.2 s at 25, 10 s at 54; a job over the suite's "
                "budget.time_s (else 48 CPU-hours) is refused before the run",
)
