"""TabM (Gorishniy, Kotelnikov and Babenko, "TabM: Advancing Tabular Deep Learning with Parameter-Efficient
Ensembling", ICLR 2025), with the authors' packages: ``tabm`` (the model) and ``rtdl_num_embeddings``
(the piecewise-linear numeric embeddings the paper recommends, "TabM with PLE").

    numeric columns ── mean-impute ── quantile -> normal (fitted on train) ── PiecewiseLinearEmbeddings
    categorical     ── code, missing = one more level ──────────────────────── one-hot (inside TabM)
                                                                                     │
                           TabM: k = 32 MLPs sharing weights (BatchEnsemble), n_blocks x d_block
                                                                                     │
                        (batch, k, n_classes or 1) ── train: mean of the k losses; predict: mean of
                        the k probabilities (classification) or of the k values (regression)

Training follows the paper's recipe (the package's example.ipynb and the paper's experiment configs,
exp/tabm/*/0-evaluation/*.toml in yandex-research/tabm): AdamW, batch 256, gradient norm clipped at 1.0, every
one of the k members sees the same batch (the example's recommended default, ``share_training_batches =
True``), regression targets standardised, bf16 mixed precision (the configs' ``amp = true``; see below);
after every epoch the ensemble is scored on OUR validation split, training stops after ``patience`` (16) epochs
without a better score and the best epoch's weights are restored. The score is a metric, not the loss, as in
the authors' bin/model.py (early stopping on ``metrics['val']['score']``, their per-dataset metric): here the
leaderboard's metric for the task (tabbench.metrics.PRIMARY: AUROC for binary, accuracy for multi-class, RMSE
for regression), minimised as an error (1 - AUROC, 1 - accuracy, RMSE in standardised units). A binary
validation part with one class has no AUROC: that fit stops on the ensemble's log loss, and
``info_["stopped_on"]`` records which criterion a fit used. ``max_epochs`` (None: no cap, as
in the paper) bounds it, and so does a job's time budget: training stops when one more epoch would pass the
training deadline (tabbench/estimator.py, ``TrainingClock``), keeping the best epoch so far
(``info_["stopped_by_time_budget"]``).

Defaults: the paper's / package's (``TabM.make``'s defaults with embeddings: k 32, 2 blocks of 512,
dropout 0.1; lr 2e-3, weight decay 3e-4, 48 bins, embedding size 16; clipping 1.0).

Precision: ``amp`` (default True) runs the forward passes under bf16 autocast where bf16 is native (a CUDA GPU
with bf16; a CPU with AVX-512 BF16 or AMX), as the paper's experiments did on their GPUs; losses, softmax and
the optimiser stay fp32. Elsewhere, or with ``amp: false``, everything is fp32. On one core of an AMD EPYC
with AVX-512 BF16 a default TabM epoch is 1.6-1.9x faster in bf16, with no loss in test error on three UCI
sets (benchmarks/README.md, "TabM in bf16"); ``info_["amp"]`` records what a fit used.

Search space: the paper's TabM space (its appendix hyperparameter-tuning table; also pytabkit's
``RandomParamsTabMAlgInterface``, pytabkit/models/alg_interfaces/tabm_interface.py), ranges on grids:
lr log-uniform [1e-4, 3e-3] -> {1e-4, 3e-4, 1e-3, 2e-3, 3e-3}, weight_decay {0, log-uniform [1e-4, 1e-1]}
-> {0, 1e-4, 1e-3, 1e-2, 1e-1}, n_blocks {1, 2, 3, 4}, d_block [64, 1024] -> {64, 128, 256, 512, 1024},
dropout {0, U[0, 0.5]} -> {0, 0.1, 0.25, 0.5}, d_embedding [8, 32] -> {8, 16, 24, 32}, n_bins [2, 128]
-> {2, 8, 16, 48, 128}.

Budget points (``JobContext.budget_points_s``; tabbench/estimator.py, ``Estimator.time_points_``): at each
epoch's end, a point passed during that epoch gets the best epoch's weights validated before it
(``torch_training.EarlyStopping``); ``at_time`` predicts with a copy of the network holding them. Cost: no time;
the state dict each point holds (one early-stopping copy, never an extra one on the CPU), at most one per point.

Determinism: the fit runs under its own seeded generators (the caller's random state is left alone)
on ``n_jobs`` threads; the same seed gives the same predictions on the CPU.
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import Field

import tabbench
from tabbench.estimator import Estimator, JobContext, epoch_shape
from tabbench.params import Params, param
from tabbench.spec import ModelSpec
from tabbench_plugins.devices import Device, gpus_for, resolve_device
from tabbench_plugins.torch_training import (EarlyStopping, EpochStates, TabularTensors, bf16_autocast, native_bf16,
                                            stopping_criterion, task_loss, torch_seeded, torch_threads, train_epochs,
                                            training_targets)

PREDICT_CHUNK = 4096  # rows per forward pass at prediction time
REQUIRES = ("torch", "tabm", "rtdl_num_embeddings")


class TabM(EpochStates, Estimator):
    class Params(Params):  # the paper's / package's defaults (the module docstring)
        k: int = param(32, "ensemble members (MLPs sharing weights, BatchEnsemble)", ge=1)
        n_blocks: int = param(2, "MLP blocks", ge=1)
        d_block: int = param(512, "units of each block", ge=1)
        dropout: float = param(0.1, "dropout in each block", ge=0, lt=1)
        arch_type: Literal["tabm", "tabm-mini", "tabm-packed"] = param("tabm", "the tabm package's architecture")
        n_bins: int = param(48, "piecewise-linear embedding bins per numeric column (at most the rows - 1)", ge=2)
        d_embedding: int = param(16, "size of each numeric column's embedding", ge=1)
        lr: float = param(2e-3, "AdamW's learning rate", gt=0)
        weight_decay: float = param(3e-4, "AdamW's weight decay", ge=0)
        batch_size: int = param(256, "training rows per step", ge=1)
        gradient_clipping_norm: Optional[Annotated[float, Field(gt=0)]] = param(
            1.0, "the gradient norm is clipped to this (null: not clipped)")
        patience: int = param(16, "epochs without a better validation score before training stops", ge=0)
        max_epochs: Optional[Annotated[int, Field(ge=1)]] = param(None, "the most epochs trained (null: no cap)")
        amp: bool = param(True, "bf16 autocast where bf16 is native (the module docstring)")
        n_jobs: int = param(1, "torch threads", ge=1)
        device: Device = param("auto", "auto: CUDA where a GPU is visible, else the CPU")

    def fit(self, X, y, X_val=None, y_val=None, *, context: JobContext = JobContext()):
        import torch

        p = self.params
        clock, points = context.training_clock(), context.time_points()
        self.device_ = resolve_device(p["device"])
        self.amp_ = bool(p["amp"]) and native_bf16(self.device_)
        self.seen_, X_val, t_train, t_val, self.target_ = training_targets("TabM", self.meta, y, X_val, y_val,
                                                                           self.device_)
        self.stopped_on_ = stopping_criterion(self.meta, t_val)
        n_out = len(self.seen_) if self.seen_ is not None else 1
        self.inputs_ = TabularTensors(self.meta, self.seed).fit(X)
        x_train, x_val = self.inputs_.transform(X, self.device_), self.inputs_.transform(X_val, self.device_)

        def batch_loss(rows, _):
            with bf16_autocast(self.device_, self.amp_):
                out = self.network_(*(None if x is None else x[rows] for x in x_train))  # (batch, k, n_out)
            k = out.shape[1]
            # each of the k members is trained on the batch: the loss is their mean
            return task_loss(self.meta, out.float().flatten(0, 1), t_train[rows].repeat_interleave(k))

        with torch_threads(p["n_jobs"]), torch_seeded(self.seed, self.device_):
            self.network_ = self._network(x_train[0], n_out).to(self.device_)
            optimizer = torch.optim.AdamW(self.network_.parameters(), lr=p["lr"], weight_decay=p["weight_decay"])
            stopping = EarlyStopping(self.network_, p["patience"], p["max_epochs"], clock, points=points,
                                     shape=epoch_shape(self, len(t_train), len(t_val)))
            train_epochs(stopping, optimizer, batch_loss, len(t_train), p["batch_size"], self.seed, self.device_,
                         validation_loss=lambda: self._validation_error(x_val, t_val),
                         clip_norm=p["gradient_clipping_norm"])
        self.time_points_, self.point_states_ = stopping.point_states()
        self.info_ = {"device": self.device_, "amp": self.amp_, "n_params": int(sum(t.numel() for t in self.network_.parameters())),
                      "stopped_on": self.stopped_on_, **stopping.info()}
        return self

    def _network(self, x_num, n_out: int):
        import rtdl_num_embeddings
        import tabm

        p = self.params
        embeddings = None
        if x_num is not None:
            bins = rtdl_num_embeddings.compute_bins(x_num.cpu(), n_bins=min(p["n_bins"], len(x_num) - 1))
            embeddings = rtdl_num_embeddings.PiecewiseLinearEmbeddings(bins, p["d_embedding"], activation=False,
                                                                       version="B")
        return tabm.TabM.make(n_num_features=self.inputs_.n_numeric, cat_cardinalities=self.inputs_.cardinalities_,
                              d_out=n_out, num_embeddings=embeddings, k=p["k"], n_blocks=p["n_blocks"],
                              d_block=p["d_block"], dropout=p["dropout"], arch_type=p["arch_type"])

    def _outputs(self, x_num, x_cat):
        """The k members' outputs, (rows, k, n_out): probabilities for classification, standardised values else."""
        import torch

        self.network_.eval()
        n = len(x_num) if x_num is not None else len(x_cat)
        parts = []
        with torch.no_grad():
            for start in range(0, n, PREDICT_CHUNK):
                chunk = [None if x is None else x[start:start + PREDICT_CHUNK] for x in (x_num, x_cat)]
                with bf16_autocast(self.device_, self.amp_):
                    out = self.network_(*chunk).float()
                parts.append(torch.softmax(out.double(), dim=-1) if self.meta.is_classification else out)
        return torch.cat(parts)

    def _validation_error(self, x_val, t_val) -> float:
        """What early stopping minimises (``stopping_criterion``), from the ensemble's mean output."""
        import torch
        import torch.nn.functional as F

        mean = self._outputs(*x_val).mean(dim=1)
        if self.stopped_on_ == "auroc":
            from sklearn.metrics import roc_auc_score

            return 1.0 - float(roc_auc_score(t_val.cpu().numpy(), mean[:, 1].cpu().numpy()))
        if self.stopped_on_ == "accuracy":
            return 1.0 - float((mean.argmax(dim=1) == t_val).double().mean())
        if self.stopped_on_ == "log_loss":
            return float(F.nll_loss(torch.log(mean.clamp_min(1e-12)), t_val))
        return float(torch.sqrt(F.mse_loss(mean.squeeze(-1), t_val)))  # rmse, standardised units

    def predict_proba(self, X):
        with torch_threads(self.params["n_jobs"]):
            proba = self._outputs(*self.inputs_.transform(X, self.device_)).mean(dim=1).cpu().numpy()
        return self.seen_.widen(proba)

    def predict_values(self, X):
        with torch_threads(self.params["n_jobs"]):
            out = self._outputs(*self.inputs_.transform(X, self.device_)).mean(dim=1).squeeze(-1)
        return self.target_.inverse_transform(out.cpu().numpy())


@tabbench.hookimpl
def register_models(register):
    register(ModelSpec(
        name="tabm", factory=TabM, requires=REQUIRES, extra="modern",
        deterministic=False,  # seeded torch training: last digits differ across CPUs
        search_space={
            "lr": [1e-4, 3e-4, 1e-3, 2e-3, 3e-3], "weight_decay": [0.0, 1e-4, 1e-3, 1e-2, 1e-1],
            "n_blocks": [1, 2, 3, 4], "d_block": [64, 128, 256, 512, 1024], "dropout": [0.0, 0.1, 0.25, 0.5],
            "d_embedding": [8, 16, 24, 32], "n_bins": [2, 8, 16, 48, 128],
        },
        gpus=gpus_for,
        description="TabM (Gorishniy et al., ICLR 2025; tabm + piecewise-linear embeddings): k = 32 weight-sharing "
                    "MLPs, early stopping on the validation metric; not in the NPT paper",
        quick_params={"k": 8, "d_block": 128, "max_epochs": 30, "patience": 5},  # far below the defaults
        info_keys=frozenset({"device", "amp", "n_params", "epochs", "best_epoch", "best_val_loss", "stopped_on"}),
    ))
