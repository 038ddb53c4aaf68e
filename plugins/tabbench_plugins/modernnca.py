"""ModernNCA: neighbourhood components analysis with a deep embedding, for tabular data.

Ye, Yin, Zhan. "Revisiting Nearest Neighbor for Tabular Data: A Deep Tabular Baseline Two Decades Later".
ICLR 2025, arXiv 2407.03257. Written from the paper: no maintained package on the registries ships it
(pytabkit has none; TALENT, the authors' toolbox, is on PyPI only as ``talent-pytorch`` 0.0.1 of March
2025, which was not taken up), so this is one module.

    numeric columns ── mean-impute, quantile -> normal ── PLR(lite) periodic embeddings (rtdl_num_embeddings)
    categorical     ── one-hot (a missing value is its own level) ──────────────────┐
                                                                   concat -> x (n, d_in)
    embed      phi(x) = Linear(d_in -> dim), then n_blocks residual MLP blocks
               [BatchNorm, Linear(dim -> d_block), ReLU, Dropout, Linear(d_block -> dim)] and a
               final BatchNorm (n_blocks = 0: the paper's linear projection)
    neighbours for a row q and candidate rows c_1..c_m (TRAINING rows only):
               w_j = softmax_j(-||phi(q) - phi(c_j)||_2 / temperature)
               classification: p(class) = sum_j w_j onehot(y_j)  -> log p, trained with NLL
               regression:     yhat     = sum_j w_j y_j (standardised) -> trained with MSE
    training   stochastic neighbourhood sampling: each step draws a random ``sample_rate`` share of
               the training rows as candidates; a batch row never counts as its own neighbour
    predicting every training row is a candidate

Inductive: the candidates are the training split's rows, at training and at prediction time; the
validation rows only score epochs (early stopping on the validation loss, patience 16 epochs, the
best epoch's weights restored; under a job's time budget also stopped when one more epoch would pass the
training deadline, tabbench/estimator.py ``TrainingClock``, ``info_["stopped_by_time_budget"]``) and the
test rows are never seen in fit. The authors' toolbox stops otherwise (TALENT/model/methods/modernNCA.py,
``validate``: on validation accuracy for classification and MAE for regression, after 20 epochs without a
result at least as good); this module keeps the loss criterion every record of it was made with (a switch
would rerun every ModernNCA job: about one CPU-hour on the committed suites).

Defaults. The paper tunes every dataset and publishes no single default configuration; ours lie inside
its search space and keep a CPU fit short: dim 128, one block of 256, dropout 0.1, temperature 1,
sample_rate 0.5, AdamW lr 1e-3, weight decay 1e-5, batch 256, at most 200 epochs, PLR(lite) with 48 frequencies of scale
0.1 and embedding size 24.

Search space: the paper's (its appendix table of ModernNCA's hyper-parameter ranges), ranges on grids:
dim [64, 1024] -> {64, 128, 256, 512}, d_block [64, 1024] -> {64, 256, 512, 1024}, n_blocks {0, 1, 2},
dropout U[0, 0.5] -> {0, 0.1, 0.25, 0.5}, sample_rate U[0.05, 0.6] -> {0.1, 0.3, 0.5}, lr log-uniform
[1e-5, 1e-1] -> {1e-4, 3e-4, 1e-3, 3e-3, 1e-2}, weight_decay {0, log-uniform [1e-6, 1e-3]} ->
{0, 1e-6, 1e-5, 1e-4, 1e-3}, PLR n_frequencies [16, 96] -> {16, 48, 96}, frequency_scale log-uniform
[5e-3, 10] -> {0.01, 0.1, 1, 10}, d_embedding [16, 64] -> {16, 32, 64}.

Budget points (``JobContext.budget_points_s``; tabbench/estimator.py, ``Estimator.time_points_``): at each
epoch's end, a point passed during that epoch gets the best epoch's weights validated before it
(``torch_training.EarlyStopping``); ``at_time`` predicts with a copy of the network holding them. Cost: no time;
the state dict each point holds (one early-stopping copy, never an extra one on the CPU), at most one per point.

Determinism: the fit runs under its own seeded generators (the caller's random state is left alone)
on ``n_jobs`` threads; the same seed gives the same predictions on the CPU.
"""

from __future__ import annotations

import numpy as np

import tabbench
from tabbench.estimator import Estimator, JobContext, epoch_shape
from tabbench.params import Params, param
from tabbench.spec import ModelSpec
from tabbench_plugins.devices import Device, gpus_for, resolve_device
from tabbench_plugins.torch_training import (EarlyStopping, EpochStates, TabularTensors, task_loss, torch_seeded,
                                            torch_threads, train_epochs, training_targets)

CANDIDATE_CHUNK = 1024  # query rows per distance computation at prediction time
REQUIRES = ("torch", "rtdl_num_embeddings")


def build_network(n_numeric: int, cardinalities: list, p: dict):
    """phi: PLR(lite) numeric embeddings + one-hot categoricals -> Linear -> residual MLP blocks."""
    import rtdl_num_embeddings
    import torch
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.BatchNorm1d(p["dim"]), nn.Linear(p["dim"], p["d_block"]), nn.ReLU(),
                                      nn.Dropout(p["dropout"]), nn.Linear(p["d_block"], p["dim"]))

        def forward(self, x):
            return x + self.body(x)

    class Embedding(nn.Module):
        def __init__(self):
            super().__init__()
            self.numeric = None
            d_in = sum(cardinalities)
            if n_numeric:
                self.numeric = rtdl_num_embeddings.PeriodicEmbeddings(
                    n_numeric, p["d_embedding"], n_frequencies=p["n_frequencies"],
                    frequency_init_scale=p["frequency_scale"], activation=True, lite=True)
                d_in += n_numeric * p["d_embedding"]
            assert d_in > 0, "ModernNCA needs at least one non-constant numeric or one categorical column"
            self.cardinalities = list(cardinalities)
            self.project = nn.Linear(d_in, p["dim"])
            blocks = [Block() for _ in range(p["n_blocks"])]
            self.blocks = nn.Sequential(*blocks, nn.BatchNorm1d(p["dim"])) if blocks else nn.Identity()

        def forward(self, x_num, x_cat):
            parts = []
            if self.numeric is not None:
                parts.append(self.numeric(x_num).flatten(1))  # (n, n_numeric, d_embedding) -> (n, n_numeric*d)
            if self.cardinalities:
                parts += [nn.functional.one_hot(x_cat[:, j], card).float()
                          for j, card in enumerate(self.cardinalities)]
            return self.blocks(self.project(torch.cat(parts, dim=1)))  # (n, dim)

    return Embedding()


def neighbour_output(query, candidates, candidate_targets, temperature: float, exclude_self=None):
    """sum_j softmax_j(-dist(q, c_j) / T) * target_j: (n_query, n_out). ``candidate_targets`` (m, n_out) holds
    one-hot classes or standardised values; ``exclude_self`` (n_query, m) bool marks pairs that must not count."""
    import torch

    distance = torch.cdist(query, candidates)  # (n_query, m), Euclidean as in the paper
    logits = -distance / temperature
    if exclude_self is not None:
        logits = logits.masked_fill(exclude_self, float("-inf"))
    return torch.softmax(logits, dim=1) @ candidate_targets


class ModernNCA(EpochStates, Estimator):
    class Params(Params):  # the paper's search space's centre, kept short on a CPU (the module docstring)
        dim: int = param(128, "size of the embedding the distances are measured in", ge=1)
        d_block: int = param(256, "units of each residual block", ge=1)
        n_blocks: int = param(1, "residual MLP blocks of the embedding", ge=0)
        dropout: float = param(0.1, "dropout in each block", ge=0, lt=1)
        temperature: float = param(1.0, "the softmax temperature over negative distances", gt=0)
        sample_rate: float = param(0.5, "the share of training rows drawn as candidates each step", gt=0, le=1)
        n_frequencies: int = param(48, "PLR(lite) frequencies per numeric column", ge=1)
        frequency_scale: float = param(0.1, "scale of PLR's initial frequencies", gt=0)
        d_embedding: int = param(24, "size of each numeric column's embedding", ge=1)
        lr: float = param(1e-3, "AdamW's learning rate", gt=0)
        weight_decay: float = param(1e-5, "AdamW's weight decay", ge=0)
        batch_size: int = param(256, "training rows per step", ge=1)
        patience: int = param(16, "epochs without a better validation score before training stops", ge=0)
        max_epochs: int = param(200, "the most epochs trained", ge=1)
        n_jobs: int = param(1, "torch threads", ge=1)
        device: Device = param("auto", "auto: CUDA where a GPU is visible, else the CPU")

    def fit(self, X, y, X_val=None, y_val=None, *, context: JobContext = JobContext()):
        import torch

        p = self.params
        clock, points = context.training_clock(), context.time_points()
        assert 0 < p["sample_rate"] <= 1, f"sample_rate must be in (0, 1], got {p['sample_rate']}"
        assert p["temperature"] > 0, f"temperature must be positive, got {p['temperature']}"
        self.device_ = resolve_device(p["device"])
        self.seen_, X_val, t_train, t_val, self.target_ = training_targets("ModernNCA", self.meta, y, X_val, y_val,
                                                                           self.device_)
        if self.target_ is None:  # candidates carry one-hot labels over the seen classes: (n_train, n_seen)
            self.candidate_targets_ = torch.nn.functional.one_hot(t_train, len(self.seen_)).float()
        else:
            self.candidate_targets_ = t_train[:, None]  # (n_train, 1)
        self.inputs_ = TabularTensors(self.meta, self.seed).fit(X)
        self.x_train_ = self.inputs_.transform(X, self.device_)
        x_val = self.inputs_.transform(X_val, self.device_)
        n = len(t_train)
        assert n >= 2, f"ModernNCA needs at least two training rows (a row is never its own neighbour), got {n}"

        n_candidates = max(2, int(round(p["sample_rate"] * n)))

        def batch_loss(rows, generator):
            # stochastic neighbourhood sampling: this step's candidates, a random share of the training rows
            sampled = torch.randperm(n, generator=generator)[:n_candidates].to(self.device_)
            if len(rows) < 2:  # BatchNorm needs two rows; a last batch of one is skipped
                return None
            embedded = self._embed(self._rows(self.x_train_, torch.cat([rows, sampled])))
            query, candidates = embedded[:len(rows)], embedded[len(rows):]
            out = neighbour_output(query, candidates, self.candidate_targets_[sampled], p["temperature"],
                                   exclude_self=rows[:, None] == sampled[None, :])
            return self._loss(out, t_train[rows])

        with torch_threads(p["n_jobs"]), torch_seeded(self.seed, self.device_):
            self.network_ = build_network(self.inputs_.n_numeric, self.inputs_.cardinalities_, p).to(self.device_)
            optimizer = torch.optim.AdamW(self.network_.parameters(), lr=p["lr"], weight_decay=p["weight_decay"])
            stopping = EarlyStopping(self.network_, p["patience"], p["max_epochs"], clock, points=points,
                                     shape=epoch_shape(self, n, len(t_val)))
            train_epochs(stopping, optimizer, batch_loss, n, p["batch_size"], self.seed, self.device_,
                         validation_loss=lambda: float(self._loss(self._predict_output(x_val), t_val)))
        self.time_points_, self.point_states_ = stopping.point_states()
        self.info_ = {"device": self.device_, "n_params": int(sum(t.numel() for t in self.network_.parameters())),
                      **stopping.info(), "retrieval": "inductive (training rows only)"}
        return self

    @staticmethod
    def _rows(x, rows):
        return tuple(None if part is None else part[rows] for part in x)

    def _embed(self, x):
        return self.network_(*x)

    def _loss(self, out, target):
        import torch

        if self.meta.is_classification:  # out: neighbour-weighted class probabilities
            return torch.nn.functional.nll_loss(torch.log(out.clamp_min(1e-12)), target)
        return task_loss(self.meta, out, target)

    def _predict_output(self, x):
        """Every training row a candidate: (rows, n_seen) probabilities or (rows, 1) standardised values."""
        import torch

        self.network_.eval()
        with torch.no_grad():
            candidates = self._embed(self.x_train_)
            query = self._embed(x)
            return torch.cat([neighbour_output(query[i:i + CANDIDATE_CHUNK], candidates, self.candidate_targets_,
                                               self.params["temperature"])
                              for i in range(0, len(query), CANDIDATE_CHUNK)])

    def predict_with_context(self, X, context_X, context_y):
        """Row i of X predicted with block i of the context as its candidates in place of the training rows
        (see Estimator). Cost per row: one embedding pass over its block (eval mode: BatchNorm uses its
        running statistics, so blocks embedded together do not affect each other) and one distance row."""
        import torch

        n = len(context_X) // len(X)
        assert n * len(X) == len(context_X) == len(context_y), (
            f"modernnca: context of {len(context_X)} rows is not {len(X)} blocks of equal size")
        assert not np.isnan(context_y).any(), "modernnca: every context row needs its target (no unlabelled rows)"
        if self.meta.is_classification:
            codes = torch.as_tensor(self.seen_.encode(context_y.astype(np.int64)), device=self.device_)
            targets = torch.nn.functional.one_hot(codes, len(self.seen_)).float()
        else:
            targets = torch.as_tensor(self.target_.transform(context_y), dtype=torch.float32,
                                      device=self.device_)[:, None]
        self.network_.eval()
        with torch_threads(self.params["n_jobs"]), torch.no_grad():
            query = self._embed(self.inputs_.transform(X, self.device_))
            x_ctx = self.inputs_.transform(context_X, self.device_)
            out = []
            for i in range(len(X)):
                candidates = self._embed(self._rows(x_ctx, slice(i * n, (i + 1) * n)))
                out.append(neighbour_output(query[i:i + 1], candidates, targets[i * n:(i + 1) * n],
                                            self.params["temperature"]))
            out = torch.cat(out).double().cpu().numpy()
        if self.meta.is_classification:
            return self.seen_.widen(out)
        return self.target_.inverse_transform(out[:, 0])

    def predict_proba(self, X):
        with torch_threads(self.params["n_jobs"]):
            proba = self._predict_output(self.inputs_.transform(X, self.device_)).double().cpu().numpy()
        return self.seen_.widen(proba)

    def predict_values(self, X):
        with torch_threads(self.params["n_jobs"]):
            out = self._predict_output(self.inputs_.transform(X, self.device_)).squeeze(1)
        return self.target_.inverse_transform(out.cpu().numpy())


@tabbench.hookimpl
def register_models(register):
    register(ModelSpec(
        name="modernnca", factory=ModernNCA, requires=REQUIRES, extra="modern",
        deterministic=False,  # seeded torch training: last digits differ across CPUs
        search_space={
            "dim": [64, 128, 256, 512], "d_block": [64, 256, 512, 1024], "n_blocks": [0, 1, 2],
            "dropout": [0.0, 0.1, 0.25, 0.5], "sample_rate": [0.1, 0.3, 0.5],
            "lr": [1e-4, 3e-4, 1e-3, 3e-3, 1e-2], "weight_decay": [0.0, 1e-6, 1e-5, 1e-4, 1e-3],
            "n_frequencies": [16, 48, 96], "frequency_scale": [0.01, 0.1, 1.0, 10.0], "d_embedding": [16, 32, 64],
        },
        gpus=gpus_for,
        description="ModernNCA (Ye et al., ICLR 2025; written from the paper): soft nearest neighbours over "
                    "the TRAINING rows in a learned embedding (inductive retrieval), early stopping on "
                    "validation; not in the NPT paper",
        quick_params={"max_epochs": 30, "patience": 5},
        info_keys=frozenset({"device", "n_params", "epochs", "best_epoch", "best_val_loss"}),
    ))
