"""A multi-layer perceptron baseline in PyTorch (the paper used scikit-learn's MLPClassifier/Regressor).

Inputs: numeric columns mean-imputed and standardised, categorical columns one-hot encoded (missing =
all zeros), both fitted on the training split. Regression targets are standardised for training and
predictions mapped back to the original units.

Network: ``n_layers`` blocks of Linear(hidden_size) -> ReLU -> Dropout, then a Linear head (one logit
per class of the dataset, or one value). Trained with AdamW on cross-entropy / squared error in
minibatches; after every epoch the validation loss is measured, training stops after ``patience``
epochs without improvement, and the weights of the best epoch are restored. Under a job's time budget
training also stops when one more epoch would pass the training deadline (tabbench/estimator.py,
``TrainingClock``), recorded as ``info_["stopped_by_time_budget"]``.

Budget points (``JobContext.budget_points_s``; tabbench/estimator.py, ``Estimator.time_points_``): at each
epoch's end, a point passed during that epoch gets the best epoch's weights validated before it
(``torch_training.EarlyStopping``); ``at_time`` predicts with a copy of the network holding them. Cost: no time;
the state dict each point holds (one early-stopping copy, never an extra one on the CPU), at most one per point.

Determinism: the fit runs under its own seeded torch generator (the caller's random state is left
alone) on ``n_jobs`` threads, so the same seed gives identical predictions on the CPU.

Search space: the paper's small-data grid has 11,340 configurations of scikit-learn's MLP
(hidden layers (25..500) x 1..3 layers, L2 alpha 0..1, batch 32..256, three learning-rate schedules,
nine initial learning rates) and 270 on medium/large data. We keep its axes that mean the same for an
AdamW network with early stopping, at the medium-data resolution: hidden_size {100, 250, 500} x
n_layers {1, 2, 3} x lr {1e-4, 1e-3, 1e-2} x weight_decay {0, 1e-4, 1e-2} x batch_size {64, 256} =
162 configurations. The schedule axis is dropped (early stopping on validation loss replaces it) and
dropout stays at its default.
"""

from __future__ import annotations

import numpy as np

import tabbench
from tabbench.estimator import Estimator, JobContext, epoch_shape
from tabbench.params import Params, param
from tabbench.preprocess import TabularEncoder, TargetScaler
from tabbench.spec import ModelSpec
from tabbench_plugins.devices import Device, gpus_for, resolve_device
from tabbench_plugins.torch_training import EarlyStopping, EpochStates, torch_seeded, torch_threads, train_epochs

PREDICT_CHUNK = 8192  # rows per forward pass at prediction time


def build_network(n_in: int, n_out: int, hidden_size: int, n_layers: int, dropout: float):
    import torch.nn as nn

    layers, width = [], n_in
    for _ in range(n_layers):
        layers += [nn.Linear(width, hidden_size), nn.ReLU(), nn.Dropout(dropout)]
        width = hidden_size
    layers.append(nn.Linear(width, n_out))
    return nn.Sequential(*layers)


class MLP(EpochStates, Estimator):
    class Params(Params):
        hidden_size: int = param(256, "units of each hidden layer", ge=1)
        n_layers: int = param(2, "hidden layers (0: a linear model)", ge=0)
        dropout: float = param(0.1, "dropout after each hidden layer", ge=0, lt=1)
        lr: float = param(1e-3, "AdamW's learning rate", gt=0)
        weight_decay: float = param(1e-4, "AdamW's weight decay", ge=0)
        batch_size: int = param(128, "training rows per step", ge=1)
        max_epochs: int = param(500, "the most epochs trained", ge=1)
        patience: int = param(20, "epochs without a better validation loss before training stops", ge=0)
        n_jobs: int = param(1, "torch threads", ge=1)
        device: Device = param("auto", "auto: CUDA where a GPU is visible, else the CPU")

    def fit(self, X, y, X_val=None, y_val=None, *, context: JobContext = JobContext()):
        import torch

        p = self.params
        clock, points = context.training_clock(), context.time_points()
        self.device_ = resolve_device(p["device"])
        self.encoder_ = TabularEncoder(self.meta, categorical="onehot", standardize=True).fit(X)
        if not self.meta.is_classification:
            self.target_ = TargetScaler().fit(y)
        x_train, t_train = self._tensors(X, y)
        has_val = X_val is not None and y_val is not None and len(y_val) > 0
        x_val, t_val = self._tensors(X_val, y_val) if has_val else (None, None)
        n_out = self.meta.n_classes if self.meta.is_classification else 1

        with torch_threads(p["n_jobs"]), torch_seeded(self.seed, self.device_):
            self.network_ = build_network(x_train.shape[1], n_out, p["hidden_size"], p["n_layers"],
                                          p["dropout"]).to(self.device_)
            optimizer = torch.optim.AdamW(self.network_.parameters(), lr=p["lr"], weight_decay=p["weight_decay"])
            stopping = EarlyStopping(self.network_, p["patience"], p["max_epochs"], clock, validated=has_val,
                                     points=points, shape=epoch_shape(self, len(x_train), len(t_val) if has_val else 0))
            train_epochs(stopping, optimizer, lambda rows, _: self._loss(self.network_(x_train[rows]), t_train[rows]),
                         len(x_train), p["batch_size"], self.seed, self.device_,
                         validation_loss=(lambda: self._evaluate(x_val, t_val)) if has_val else None)
        self.time_points_, self.point_states_ = stopping.point_states()
        self.info_ = {"device": self.device_, "n_params": int(sum(t.numel() for t in self.network_.parameters())),
                      **stopping.info()}
        return self

    def _tensors(self, X, y):
        import torch

        x = torch.as_tensor(self.encoder_.transform(X), dtype=torch.float32, device=self.device_)
        if self.meta.is_classification:
            t = torch.as_tensor(np.asarray(y, dtype=np.int64), device=self.device_)
        else:
            t = torch.as_tensor(self.target_.transform(y), dtype=torch.float32, device=self.device_)
        return x, t

    def _loss(self, out, target):
        import torch.nn.functional as F

        if self.meta.is_classification:
            return F.cross_entropy(out, target)
        return F.mse_loss(out.squeeze(1), target)

    def _forward(self, x):
        import torch

        self.network_.eval()
        with torch.no_grad():
            return torch.cat([self.network_(x[i:i + PREDICT_CHUNK]) for i in range(0, len(x), PREDICT_CHUNK)])

    def _evaluate(self, x, t) -> float:
        return float(self._loss(self._forward(x), t))

    def _output(self, X):
        import torch

        x = torch.as_tensor(self.encoder_.transform(X), dtype=torch.float32, device=self.device_)
        with torch_threads(self.params["n_jobs"]):
            return self._forward(x)

    def predict_values(self, X):
        out = self._output(X).squeeze(1).cpu().numpy().astype(np.float64)
        return self.target_.inverse_transform(out)

    def predict_proba(self, X):
        import torch

        proba = torch.softmax(self._output(X).double(), dim=1).cpu().numpy()
        return proba / proba.sum(axis=1, keepdims=True)


@tabbench.hookimpl
def register_models(register):
    register(ModelSpec(
        name="mlp", factory=MLP, requires=("torch",),
        extra="torch",
        deterministic=False,  # seeded torch training: last digits differ across CPUs
        search_space={"hidden_size": [100, 250, 500], "n_layers": [1, 2, 3], "lr": [1e-4, 1e-3, 1e-2],
                      "weight_decay": [0.0, 1e-4, 1e-2], "batch_size": [64, 256]},
        gpus=gpus_for,
        description="PyTorch MLP (AdamW, dropout, early stopping on validation loss), one-hot + standardised inputs",
        quick_params={"max_epochs": 60, "patience": 10},
        info_keys=frozenset({"device", "n_params", "epochs", "best_epoch", "best_val_loss"}),
    ))
