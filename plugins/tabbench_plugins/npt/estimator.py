"""The ``npt`` estimator: NPT's params and the tabbench contract's glue around its table, model and loop.

``fit`` makes the table (``tabbench_plugins.npt.table``: encoding, which rows join it, its batching and the
forward pass over it as context), builds the model and the optimiser, trains
(``tabbench_plugins.npt.training``, which gets them as arguments) and fills ``info_``; ``predict`` asks the
table for the model's outputs. What NPT is and how it trains is written down in docs/npt.md; the choices
where the authors' code and the paper differ are params, listed there and in ``NPT.Params`` below.

Budget points (``JobContext.budget_points_s``; tabbench/estimator.py, ``Estimator.time_points_``): the loop keeps a
host copy of the best validation weights at each point passed (``training.train``, ``checkpoints.Run``), beside
the step budgets' snapshots; ``at_time`` predicts with them. Cost: one host copy of the weights per point (and
one more around a validation a point may fall inside), one host sync each; no time otherwise.

torch is imported only when ``fit`` runs (table.py, training.py and the model are imported there):
``tabbench models`` stays fast.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal, Optional, Sequence, Union

import numpy as np
from pydantic import AfterValidator, Field, WithJsonSchema, model_validator

from tabbench.estimator import Estimator, JobContext
from tabbench.params import Params, param
from tabbench.spec import CATEGORICAL, ModelSpec
from tabbench_plugins.devices import Device, resolve_device
from tabbench_plugins.torch_training import deterministic_algorithms, native_bf16

from tabbench_plugins.npt.cost import AUTO_BUDGET_SHARE, check_cost, estimate_seconds

#: Below this size the fused optimiser's one-off compilation costs more than it saves. CPU only: on a GPU
#: one compiled call per parameter is bound by its dispatch (measured on an H100, Boston e 128: 165 ms a
#: step, the same with explicit and fused attention), where the multi-tensor kernels launch a few per step.
FUSED_MIN_PARAMS = 5_000_000

LR_SCHEDULES = ("flat_anneal", "cosine_cyclic")


def fused_optimizer(setting, device_type: str, n_params: int, budgeted: bool = False) -> bool:
    """Whether LAMB runs as one compiled kernel per parameter: ``setting`` true or false as given; "auto":
    on the CPU for models of FUSED_MIN_PARAMS parameters or more, on CUDA never (see FUSED_MIN_PARAMS), and
    never in a job with a time budget (``budgeted``): importing and compiling torch's compiler took 20 to 30 s
    of a busy core before the first step (a 51M-parameter model on Breast Cancer), out of the same budget, and
    for a model whose step takes seconds the update it speeds up is a small part of the step."""
    if setting == "auto":
        return device_type == "cpu" and n_params >= FUSED_MIN_PARAMS and not budgeted
    return bool(setting)


def _size_key(params) -> tuple:
    """What tells the sizes ``size: "budget"`` asks apart (cost.Rung.params)."""
    return tuple(params[k] for k in ("e", "n_layers", "n_heads", "batch_size"))


def _with_compile(left_s: float, compile_s: float) -> float:
    """The factor on a pass's slowdown that takes ``compile_s`` seconds of compiling off ``left_s`` seconds of
    training time: the steps sized at the slowdown times it are those that fit in what is left after the compile."""
    return left_s / max(left_s - compile_s, 1e-9)


def _compile_s(book, meta, sizes, params) -> float:
    """The seconds the last fit to compile this size took to, as the book recorded them (0 where none are)."""
    entry = book.entry(meta, sizes, {**params, "compile": True})
    return float((entry or {}).get("compile_s") or 0.0)


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
        size: Literal["given", "budget"] = param(
            "given", "given: e, n_layers, n_heads and batch_size as set; budget: the largest rung of cost.LADDER "
            "that trains at least cost.MIN_STEPS steps in the job's time budget on this machine (each rung timed "
            "as steps auto times it; needs steps auto; docs/npt.md, NPT at a budget)", added_as="given")
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
            "parameters or more, in jobs without a time budget (its compilation comes out of the budget), on CUDA "
            "never")
        compile: Literal["auto", True, False] = param(
            False, "the training step's forward pass and loss compiled by torch.compile on the CPU (compiled.py), "
            "its kernels cached on disk for every job of the machine; auto: in jobs sized by their budget (steps "
            "auto) where this machine's speed book holds a compiled calibration of the shape (an earlier fit with "
            "compile true measured it and warmed the cache) and the compiled steps, after the compile's recorded "
            "seconds, outnumber the eager ones. Off by default: with true or auto, what a budgeted job trains "
            "depends on what earlier jobs left in the machine's cache. In the job's key: other kernels, other "
            "rounding, other steps", added_as=False)
        deterministic: bool = param(
            True, "on CUDA, torch's deterministic algorithms while fitting, so that a seed repeats a fit bit for "
            "bit there as on the CPU (benchmarks/README.md: its cost)", run_only=True, added_as=True)
        cuda_graph: Literal["auto", True, False] = param(
            "auto", "each training step and validation replayed as a CUDA graph; auto: on CUDA with whole-table "
            "batches, where launches, not arithmetic, bound a step (graphs.py)", run_only=True, added_as="auto")

        @model_validator(mode="after")
        def _budget_size_needs_auto_steps(self):
            if self.size == "budget" and self.steps != "auto":
                raise ValueError(f'size "budget" sizes the model for the steps the budget buys: it needs steps '
                                 f'"auto", got steps {self.steps!r}')
            return self

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

    # --- params ----------------------------------------------------------------------------------------

    def _param(self, name):
        """A param as this fit uses it: as given, but for the size ``size: "budget"`` chose (``sizing_``)."""
        sizing = getattr(self, "sizing_", None)
        return (self.params if sizing is None else sizing.params)[name]

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

    # --- fit ----------------------------------------------------------------------------------------

    def job_identity(self) -> dict:
        """The params and seed a checkpoint must have been made with to be resumed (besides the table
        and the model layout): the job key's params (``SPEC.key_params``) and the seed."""
        return {**SPEC.key_params(self.params), "seed": self.seed,
                **({"steps": self.sizing_.steps} if self.params["steps"] == "auto" else {}),
                **({"rung": self.sizing_.rung} if self.params["size"] == "budget" else {})}

    def fit(self, X, y, X_val=None, y_val=None, X_unlabelled=None, *, context: JobContext = JobContext()):
        """Train on (X, y); (X_val, y_val) choose the best step. Transductive (``transductive=True``):
        the validation rows' and ``X_unlabelled``'s features join the table with their targets
        masked, as in the authors' code; their targets are never an input and never scored."""
        import torch

        from tabbench_plugins.npt import training

        self.sizing_ = None
        if self._param("n_patches"):
            self.patch_order_ = self._patch_order()
        self.clock_ = context.training_clock()  # the job's time budget, if any, counted from the job's start
        self.device_ = torch.device(resolve_device(self._param("device")))  # cuda without a GPU: a clear error
        self.amp_ = bool(self._param("amp")) and native_bf16(self.device_.type)
        torch.manual_seed(self.seed)  # initialisation and dropout (the CUDA generators too)

        with deterministic_algorithms(self.device_.type, bool(self._param("deterministic"))):
            self._resolve(X, y, X_val, y_val, X_unlabelled, torch, context)
            points = context.time_points()
            trained = training.train(self.table_, self.model_, self.opt_, self.sizing_.params, torch,
                                     steps=self.sizing_.steps,
                                     seed=self.seed, clock=self.clock_, identity=self.job_identity(),
                                     checkpoint_dir=context.checkpoint_dir, predict_rows=context.predict_rows,
                                     points=points, compiled=self.compiled_)
        self.time_points_ = points.state_times()
        self.point_weights_ = {point: weights for point, (_, weights) in points.kept.items()}
        self.run_ = trained.run
        self.resumed_fit_seconds_ = self.run_.earlier_seconds
        self.resumed_cpu_seconds_ = self.run_.earlier_cpu_seconds
        self._fill_info(trained, torch, context.time_budget_s)
        self._record_compile_seconds()
        self.compiled_ = self.compile_record_ = None  # a fitted estimator holds no compiled function (pickling)
        return self

    def _build(self, params, X, y, X_val, y_val, X_unlabelled, torch):
        """The table, the model (initialised from the job's seed) and the optimiser at ``params``."""
        self.table_ = self._table(params, X, y, X_val, y_val, X_unlabelled)
        torch.manual_seed(self.seed)  # the same initial weights however many rungs were built before
        self._build_model_and_optimiser(params, torch)

    def _resolve(self, X, y, X_val, y_val, X_unlabelled, torch, context: JobContext):
        """``sizing_`` (cost.Sizing: the fit's params and steps), and the table, the model and the optimiser at them.

        ``steps: "auto"`` and ``size: "budget"`` are resolved by ``cost.sizing``, the rule ``tabbench plan`` uses too,
        at this machine's calibrated speed (speed.py: stored once per machine and shape, or measured here in CPU
        seconds and stored). What a job resolved is kept in its checkpoint folder
        (``checkpoints.save_resolution``): an attempt that continues the job takes it again, so that its checkpoint
        stays this run's."""
        from tabbench.clock import CPU
        from tabbench.spec import SplitSizes

        from tabbench_plugins.npt import checkpoints
        from tabbench_plugins.npt.cost import Sizing, SpeedBook, sizing
        from tabbench_plugins.npt.speed import calibrated_slowdown

        budget, folder = context.time_budget_s, context.checkpoint_dir
        self.compiled_, compile_chosen = None, {}  # compile_chosen: the size's params -> compiled or not
        self.compile_record_ = None  # (speed book, sizes): where this fit's compile seconds are recorded
        self.speed_load_ = None  # the speed book's ``load`` of the size taken (speed.py), where it holds one
        self.measure_s_ = 0.0  # seconds this fit spent measuring speeds (speed.py): not counted against its steps
        on_cpu = self.device_.type == "cpu"
        if self.params["steps"] != "auto":
            self.resolution_resumed_ = None
            self.sizing_ = Sizing(dict(self.params), int(self.params["steps"]), None)
            self._build(self.params, X, y, X_val, y_val, X_unlabelled, torch)
            self._compile_if(on_cpu and self.params["compile"] is True)
            return
        by_budget = self.params["size"] == "budget"
        if not budget:
            raise ValueError('npt: size "budget" needs the job\'s time budget (the suite\'s budget.time_s); none '
                             'was given: set budget.time_s, or give the size (size "given")' if by_budget else
                             'npt: steps "auto" needs the job\'s time budget (the suite\'s budget.time_s, given '
                             "to fit as context.time_budget_s); none was given: set budget.time_s, or give "
                             "steps a number")
        n_unlabelled = len(X_unlabelled) if X_unlabelled is not None else 0
        identity = {**SPEC.key_params(self.params), "seed": self.seed, "budget_s": budget, "shape": list(X.shape),
                    "val_rows": 0 if X_val is None else len(X_val), "unlabelled_rows": n_unlabelled}
        saved = checkpoints.saved_resolution(folder, identity)
        self.resolution_resumed_ = saved is not None
        if saved is not None:  # compiled where asked for (auto's choice is not kept: the steps are)
            self.sizing_ = Sizing.from_saved(self.params, saved)
            self._build(self.sizing_.params, X, y, X_val, y_val, X_unlabelled, torch)
            self._compile_if(on_cpu and self.params["compile"] is True)
        else:
            sizes = SplitSizes(len(X), 0 if X_val is None else len(X_val), n_unlabelled)
            book, built = SpeedBook(), [None]

            def measured(params, compiled: bool):
                p = {**params, "compile": compiled}
                stored = book.lookup(self.meta, sizes, p) if on_cpu else None
                if stored is not None:  # the rung need not be built to be asked
                    return stored, "stored"
                start = self.clock_.now()
                self._build(params, X, y, X_val, y_val, X_unlabelled, torch)
                built[0] = params
                self._compile_if(compiled)
                compile_before = self.compiled_.seconds if self.compiled_ is not None else 0.0
                result = calibrated_slowdown(book, self.table_, self.model_, torch, self.meta, sizes, p,
                                             self.clock_.remaining(), self.compiled_)
                compiled_s = (self.compiled_.seconds if self.compiled_ is not None else 0.0) - compile_before
                self.measure_s_ += self.clock_.now() - start - max(0.0, compiled_s)
                return result

            def slowdown_of(params):
                setting = params["compile"] if on_cpu else False
                chosen = setting is True or (setting == "auto"
                                             and self._compile_pays(book, sizes, params, measured, budget))
                compile_chosen[_size_key(params)] = chosen
                slowdown, speed = measured(params, chosen)
                if chosen and speed == "stored":  # the compile comes after sizing: its recorded seconds as slowdown
                    slowdown *= _with_compile(self._training_left(budget),
                                              _compile_s(book, self.meta, sizes, params))
                return slowdown, speed

            def spent_s():  # of the training share, before training: the table and the model, not the measuring
                # (the machine's calibration of a shape, made once: a job that reads it stored plans the same steps;
                # a compile's seconds stay spent, as a stored compiled speed counts them)
                return max(0.0, AUTO_BUDGET_SHARE * budget - self._training_left(budget) - self.measure_s_)

            on_cpu_clock = context.clock == CPU and self.device_.type == "cpu"
            self.sizing_ = sizing(self.meta, sizes, self.params, budget, slowdown_of, spent_s=spent_s,
                                  predict_rows=context.predict_rows, n_points=len(context.budget_points_s),
                                  cores=1.0 if on_cpu_clock else None)  # cpu clock: CPU seconds, every thread's
            if built[0] != self.sizing_.params:
                self._build(self.sizing_.params, X, y, X_val, y_val, X_unlabelled, torch)
            self._compile_if(compile_chosen.get(_size_key(self.sizing_.params), False))
            self.compile_record_ = book, sizes
            self.speed_load_ = (book.entry(self.meta, sizes, self.sizing_.params) or {}).get("load") if on_cpu else None
            checkpoints.save_resolution(folder, identity, self.sizing_.saved())
        if context.predict_rows and self.sizing_.reserve_s:
            self.clock_.reserve(self.sizing_.reserve_s)
        # the sizing decided the steps: the clock only guards against a machine slower than the speed it used
        left = self.clock_.remaining()
        self.clock_.guard_only(left / self.sizing_.steps if left is not None and self.sizing_.steps >= 1 else None)
        if self.sizing_.steps < 1:
            what = f'size "budget": not one training step of the smallest rung ({self.sizing_.rung})' if by_budget \
                else 'steps "auto": not one training step'
            raise ValueError(f"npt: {what} fits in the time budget of {budget:g} s")

    def _training_left(self, budget: float) -> float:
        """Seconds of the training share left on the job's clock (all of it when the clock has no deadline)."""
        left = self.clock_.remaining()
        return AUTO_BUDGET_SHARE * budget if left is None else left

    def _compile_if(self, compiled: bool) -> None:
        """``compiled_``: the training step's forward pass and loss compiled (compiled.CompiledLoss) for the model
        built last, when ``compiled``; else None. Made once per model; it compiles at its first call."""
        from tabbench_plugins.npt.compiled import CompiledLoss

        if not compiled:
            self.compiled_ = None
        elif self.compiled_ is None or self.compiled_.model is not self.model_:
            table = self.table_
            self.compiled_ = CompiledLoss(self.model_, table.cards, table.n_patches, table.patch_dim, self.amp_,
                                          self.device_.type)

    def _record_compile_seconds(self) -> None:
        """A fit sized by its budget that compiled: its compile's seconds (CPU seconds of its process, on the job's
        clock) replace those the speed book holds for the compiled pass of its size, so that ``compile: auto``
        weighs what the next fit of that size will pay, from the cache this one filled."""
        compiled = self.compiled_
        if self.compile_record_ is None or compiled is None or compiled.failure:
            return
        book, sizes = self.compile_record_
        params = {**self.sizing_.params, "compile": True}
        from tabbench_plugins.npt.cost import estimate_cpu_seconds

        rows = estimate_cpu_seconds(self.meta, sizes, {**params, "steps": 0})["rows"]
        entry = book.entry(self.meta, sizes, params)
        if entry is not None:
            kept = {k: v for k, v in entry.items() if k not in ("slowdown", "measured_at", "compile_s")}
            book.store(book.key(self.meta, sizes, params, rows), float(entry["slowdown"]), compile_s=compiled.seconds,
                       **kept)

    def _compile_pays(self, book, sizes, params, measured, budget: float) -> bool:
        """``compile: auto`` for a size: the book holds a compiled calibration of it (so this machine compiled it,
        and its kernels are in the cache), and its speed, with the compile's recorded seconds spent first, trains
        more steps in the training time left than the eager speed (measured here if not stored)."""
        entry = book.entry(self.meta, sizes, {**params, "compile": True})
        if entry is None or entry.get("compile_s") is None:
            return False
        eager, _ = measured(params, False)
        return entry["slowdown"] * _with_compile(self._training_left(budget), entry["compile_s"]) < eager

    def _table(self, P, X, y, X_val, y_val, X_unlabelled):
        """This fit's table (``table.Table``) under the params ``P``: which rows join it, how it is batched, which
        labels evaluation shows."""
        from tabbench_plugins.npt.table import Table

        return Table.fit(
            self.meta, X, y, X_val, y_val, X_unlabelled, transductive=bool(P["transductive"]),
            patch_order=self.patch_order_ if P["n_patches"] else None, device=self.device_, amp=self.amp_,
            seed=self.seed, batch_size=P["batch_size"], eval_batch_size=P["eval_batch_size"],
            # class-stratified minibatches: with class_balance, and by default (batch_size "auto")
            stratified=self.meta.is_classification and bool(P["class_balance"] or P["batch_size"] == "auto"),
            context_labels=P["p_target"] < 1 if P["context_labels"] == "auto" else bool(P["context_labels"]))

    def _build_model_and_optimiser(self, params, torch):
        from tabbench_plugins.npt.model import NPT as Model
        from tabbench_plugins.npt.model import NPTConfig
        from tabbench_plugins.npt.optimiser import Lamb, Lookahead

        P, table = params.__getitem__, self.table_
        cfg = NPTConfig(
            cards=table.cards, e=P("e"), n_layers=P("n_layers"), n_heads=P("n_heads"), dropout=P("dropout"),
            att_dropout=P("att_dropout"), ln_kv=P("ln_kv"), temperature=P("temperature"),
            residual=P("residual"), attention=P("attention"), checkpointing=P("checkpointing"),
            n_patches=table.n_patches, patch_dim=table.patch_dim)
        self.model_ = Model(cfg).to(self.device_)
        fused = fused_optimizer(P("fused_optimizer"), self.device_.type, self.model_.n_params(),
                                budgeted=self.clock_.end is not None)
        value_clip = P("clip") if P("clip") and P("clip_mode") == "value" else None
        self.opt_ = Lookahead(Lamb(list(self.model_.parameters()), lr=P("lr"), betas=(0.9, 0.999), eps=1e-6,
                                   weight_decay=P("weight_decay"), grad_clamp=value_clip, fused=fused),
                              alpha=P("lookahead_alpha"), k=P("lookahead_k"))

    def _fill_info(self, trained, torch, budget: float | None):
        run, steps, dev, has_val = self.run_, self.run_.steps, self.device_, self.table_.has_val
        self.info_ = {
            "n_params": self.model_.n_params(),
            "best_step": int(run.best_step) if has_val else steps,
            "best_val_loss": float(run.best_loss) if has_val else None,
            "steps": steps,
            "steps_run": int(run.step),  # fewer than steps only when the time budget stopped training
            "stopped_by_time_budget": self.clock_.stopped,
            "batch_rows": math.ceil(len(self.table_) / self.table_.batches_per_epoch),  # rows per batch, at most
            "final_train_loss": float(run.last_loss) if run.last_loss is not None else None,
            "device": str(dev),
            "amp": self.amp_,
            "deterministic": dev.type == "cpu" or (dev.type == "cuda" and bool(self._param("deterministic"))),
            "fused_optimizer": self.opt_.base.fused,
            "cuda_graph": trained.cuda_graph,  # "off", "replayed", "eager" (too few steps) or "failed: <why>"
            # the step's forward pass and loss compiled (compiled.py): "off", or its compile's CPU seconds on the
            # job's clock, the C++ compiler's (its child processes), the shapes compiled, and a failure if any
            "compile": "off" if self.compiled_ is None else self.compiled_.summary(),
            "threads": torch.get_num_threads() if dev.type == "cpu" else None,
            "resumed_from_step": trained.checkpointer.resumed_from,
            "checkpoint_ignored": trained.checkpointer.ignored,
        }
        sized = self.sizing_
        if self.params["size"] == "budget":  # the rung taken, and the steps each rung asked could train
            self.info_.update(size_rung=sized.rung, rungs_tried=sized.rungs_tried)
        if self.params["steps"] == "auto":  # the steps planned (above) came from this budget at this speed
            self.info_["steps_from_budget_s"] = budget
            self.info_["slowdown_vs_cost_model"] = sized.slowdown
            self.info_["speed"] = sized.speed  # the machine's calibration: stored, measured (speed.py) or resumed
            if self.speed_load_ is not None:  # how much slower the reference pass ran than stored, when measured
                self.info_["speed_load"] = self.speed_load_
            if self.measure_s_:  # spent measuring the speed of a shape, beside the steps planned
                self.info_["speed_measure_s"] = self.measure_s_
        if self.resolution_resumed_ is not None:  # taken from an earlier attempt of the job, or timed by this one
            self.info_["resolution_resumed"] = self.resolution_resumed_

    # --- step budgets: what a shorter run would have predicted ---------------------------------------

    @property
    def budgets_(self) -> list:
        """The step budgets below ``steps`` at which this run kept its best-so-far weights."""
        return sorted(self.run_.snapshots)

    def at_budget(self, budget: int) -> "NPT":
        """This estimator with the weights a run of ``budget`` steps would have used (best
        validation loss up to that step), for scoring the budget curve. Shares everything else."""
        best_step, weights = self.run_.snapshots[budget]
        return self._with_weights(weights, {"steps": budget, "best_step": best_step})

    def _with_weights(self, weights, info: dict) -> "NPT":
        """A copy of this estimator whose model holds ``weights`` (host tensors, in parameter order)."""
        import copy

        import torch

        other = copy.copy(self)
        other.model_ = copy.deepcopy(self.model_)
        with torch.no_grad():
            for p, w in zip(other.model_.parameters(), weights):
                p.copy_(w)
        other.info_ = info
        return other

    def at_time(self, point_s: float) -> "NPT":
        """This estimator with the best validation weights it had at budget point ``point_s`` (seconds of the
        job's elapsed time; ``time_points_``), for scoring the budget points. Shares everything else."""
        return self._with_weights(self.point_weights_[point_s], {"state_s": self.time_points_[point_s]})

    # --- predict ------------------------------------------------------------------------------------

    def predict_with_context(self, X, context_X, context_y):
        """Row i of X predicted with block i of the context as the table in place of the fitted one
        (tabbench/spec.py): the block's labelled rows (finite ``context_y``) are the table's labelled rows,
        its NaN-target rows its unlabelled ones (a transductive fit's validation and other test rows), and
        row i is appended as a query with its target masked, as inductive prediction appends a row
        (``table.Table.context_outputs``). Cost: one forward pass per test row over its table plus the row;
        where the table is evaluated in chunks (larger than one batch), over the one chunk the row falls in,
        as predict would."""
        return self.table_.encoder.decode(self.table_.context_outputs(self.model_, X, context_X, context_y))

    def predict_proba(self, X):
        if not self.meta.is_classification:
            raise AttributeError("predict_proba is only defined for classification")
        return self.table_.encoder.decode(self.table_.outputs(self.model_, X))  # sums to 1 in float64

    def predict_values(self, X):
        return self.table_.encoder.decode(self.table_.outputs(self.model_, X))


SPEC = ModelSpec(
    name="npt", factory=NPT, search_space={},
    cpus=lambda p: p["cpus"], gpus=lambda p: 1 if p.get("device") == "cuda" else 0,
    transductive=lambda p: bool(p["transductive"]),
    requires=("torch",), extra="torch",
    deterministic=False,  # seeded torch training: last digits differ across CPUs
    check=check_cost, estimate=estimate_seconds,
    # The budget ladder's smallest NPT (e 8, 2 layers, 2 heads) for a few hundred steps; lambda starts at 0.5 so
    # that the short run spends half its loss on the targets (the paper's runs anneal from 1 over thousands of
    # steps). On one Xeon core: breast cancer 23 s (AUROC 0.997), concrete 14 s (RMSE 8.5), against 33 s and 17 s
    # (0.998, 8.9) for the e 16 model of 300 steps it replaced.
    quick_params={"e": 8, "n_layers": 2, "n_heads": 2, "steps": 450, "lambda_init": 0.5},
    info_keys=frozenset({"device", "n_params", "steps", "best_step", "best_val_loss", "final_train_loss"}),
    description="Non-Parametric Transformer (Kossen et al. 2021): attention between rows and columns. "
                "CPU cost of the defaults (e 32, 8 layers, 500 steps, batches of at most 2,048 rows): per step "
                "about 0.4 CPU-s per 1,000 rows at 10 features, 2.2 s at 25, 10 s at 54; a job over the suite's "
                "budget.time_s (else 48 CPU-hours) is refused before the run",
)
