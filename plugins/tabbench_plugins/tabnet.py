"""TabNet baseline (pytorch-tabnet's TabNetClassifier / TabNetRegressor), used the way it has to be.

Used naively (raw features, the library's fit defaults) TabNet scores at or below chance level on
breast cancer: test AUROC 0.51-0.76 over seeds 0-2 on the holdout split, and the recorded training
loss is 0.0 at every epoch. The causes, and what this plugin does instead:

* ``fit(batch_size=1024, drop_last=True)`` are the library defaults: on a training split smaller
  than one batch (breast cancer: 398 rows) every batch is dropped, so the network is never trained
  and predicts with its random initial weights. Here the batch is at most the training split and only
  a last batch that would leave ghost batch norm a one-row chunk (an error in training) is dropped.
* Raw features of very different scales (breast cancer areas in the thousands next to fractions)
  go into the initial batch norm; here numeric columns are mean-imputed and standardised on the
  training split. (With ``drop_last=False`` alone, raw features still gave AUROC 0.49-0.90.)
* ``max_epochs=100, patience=10`` stop long before TabNet's attention masks settle; the paper's
  small-data protocol trains for up to 3000 epochs with patience 100, which are our defaults
  (test AUROC 0.99 on the same split).
* The early-stopping metric is a log-loss over all classes the training split holds (the library's
  own ``logloss`` fails when a validation split lacks a class, a bug the NPT authors also patched).

Categorical columns go in as their category code + 1 (0 = missing) with ``cat_idxs`` / ``cat_dims``
from the dataset metadata, so TabNet learns an embedding per column (``cat_emb_dim``). Regression
targets are standardised for training and predictions mapped back to the original units. The best
epoch on the validation split is restored after training (the library's own early stopping). Under a
job's time budget a pytorch-tabnet callback also ends training when one more epoch would pass the
training deadline (tabbench/estimator.py, ``TrainingClock``; ``info_["stopped_by_time_budget"]``).

Budget points (``JobContext.budget_points_s``; tabbench/estimator.py, ``Estimator.time_points_``): a second
pytorch-tabnet callback, after the library's early stopping at each epoch's end, gives every point passed during
that epoch the best weights validated before it (early stopping's copy as it stood after the previous epoch);
``at_time`` predicts with a copy of the network holding them. Cost: no time; in memory, the state dict each
point holds (early stopping's own copy, on the CPU already there), at most one per point. Without early stopping
(``patience: 0`` or no validation rows) the last epoch is used and the points passed in training have no state.

Search space: the paper's small-data grid (the authors' ``SMALL_DATA_TABNET_HYPERS``), 48
configurations: n_d {8, 16} x n_a {8, 16} x batch_size {16, 32, 64, 128} x virtual_batch_size
{4, 8, 16}, with n_steps 3, gamma 1.3, lambda_sparse 1e-4, momentum 0.02, Adam lr 2e-2 decayed by
0.95 every 10 epochs, up to 3000 epochs with patience 100 (all defaults here). For large data the
authors used the TabNet paper's published per-dataset configurations instead; set them in a suite.
"""

from __future__ import annotations

import contextlib
import copy
import io
import warnings

import numpy as np

import tabbench
from tabbench.estimator import Estimator, JobContext, epoch_shape
from tabbench.params import Params, param
from tabbench.preprocess import TabularEncoder, TargetScaler
from tabbench.spec import CATEGORICAL, ModelSpec
from tabbench_plugins.devices import Device, gpus_for, resolve_device
from tabbench_plugins.labels import SeenClasses, validation
from tabbench_plugins.torch_training import torch_seeded, torch_threads

_LOGLOSS = None


def all_class_logloss():
    """A pytorch-tabnet Metric: log-loss with the label set taken from the score matrix's columns.

    Created once: pytorch-tabnet finds custom metrics by name among ``Metric.__subclasses__()``.
    """
    global _LOGLOSS
    if _LOGLOSS is None:
        from pytorch_tabnet.metrics import Metric
        from sklearn.metrics import log_loss

        class AllClassLogLoss(Metric):
            def __init__(self):
                self._name = "tabbench_logloss"
                self._maximize = False

            def __call__(self, y_true, y_score):
                return log_loss(y_true, y_score, labels=np.arange(y_score.shape[1]))

        _LOGLOSS = AllClassLogLoss
    return _LOGLOSS


def time_limit(clock, max_epochs: int, shape: dict):
    """A pytorch-tabnet Callback that ends training (the trainer's ``_stop_training`` flag, which its own
    early stopping sets) when ``clock`` says one more epoch would pass the deadline, or after the epochs it
    planned for this fit's ``shape`` (``TrainingClock.plan_epochs``); the early-stopping callback still restores
    the best epoch's weights at the end of training."""
    from pytorch_tabnet.callbacks import Callback

    class TimeLimit(Callback):
        def on_train_begin(self, logs=None):
            clock.plan_epochs(shape)

        def on_train_end(self, logs=None):
            clock.keep_epoch_time()

        def on_epoch_end(self, epoch, logs=None):
            if epoch + 1 < max_epochs and not self.trainer._stop_training and clock.out_of_time():
                self.trainer._stop_training = True

    return TimeLimit()


def budget_points(points):
    """A pytorch-tabnet Callback that keeps, for each of the job's budget points (``TimePoints``), the best
    weights validated before it: at each epoch's end, after the library's early stopping (asked first), the
    points passed during the epoch get early stopping's best weights as they stood after the previous epoch."""
    from pytorch_tabnet.callbacks import Callback, EarlyStopping

    from tabbench_plugins.torch_training import on_host

    class BudgetPoints(Callback):
        def on_train_begin(self, logs=None):
            stopping = [c for c in self.trainer._callback_container.callbacks if isinstance(c, EarlyStopping)]
            self.stopping = stopping[0] if stopping else None
            self.best = (None, None)  # (elapsed time it was validated at, weights) after the previous epoch

        def _selected(self, epoch, now):
            if self.stopping is None or self.stopping.best_weights is None:
                return None, None
            if self.stopping.best_epoch == epoch:  # this epoch is the new best: validated by now
                return now, on_host(self.stopping.best_weights)
            return self.best

        def on_epoch_end(self, epoch, logs=None):
            now = points.elapsed()
            if points.passed(now):
                points.keep(*self.best, now)
            self.best = self._selected(epoch, now)

        def on_train_end(self, logs=None):
            points.keep(*self.best)  # the points passed since the last epoch's end: the final selection

    return BudgetPoints()


def _last_batch_breaks_batch_norm(n: int, batch_size: int, virtual_batch_size: int) -> bool:
    """Whether the last, partial batch would give ghost batch norm a chunk of one row (an error in training).

    TabNet splits a batch of b rows into ceil(b / virtual_batch_size) chunks with torch.chunk; only
    such a last batch is dropped (the library's default drops every partial batch, or all of the
    data when the training split is smaller than a batch).
    """
    rest = n % batch_size
    if rest == 0:
        return False
    n_chunks = int(np.ceil(rest / virtual_batch_size))
    size = int(np.ceil(rest / n_chunks))
    return rest == 1 or rest - size * (int(np.ceil(rest / size)) - 1) == 1


class TabNet(Estimator):
    class Params(Params):  # the paper's small-data protocol (the module docstring)
        n_d: int = param(8, "width of the decision layer", ge=1)
        n_a: int = param(8, "width of the attention layer", ge=1)
        n_steps: int = param(3, "decision steps", ge=1)
        gamma: float = param(1.3, "feature reuse across steps (1: each feature used once)", ge=1)
        lambda_sparse: float = param(1e-4, "weight of the sparsity loss", ge=0)
        momentum: float = param(0.02, "batch normalisation momentum", gt=0, lt=1)
        cat_emb_dim: int = param(1, "embedding size of each categorical column", ge=1)
        lr: float = param(2e-2, "Adam's learning rate", gt=0)
        scheduler_step: int = param(10, "epochs between learning-rate decays", ge=1)
        scheduler_gamma: float = param(0.95, "the learning rate's factor at each decay", gt=0, le=1)
        batch_size: int = param(128, "training rows per step (the library's default, with drop_last)", ge=1)
        virtual_batch_size: int = param(16, "rows per ghost batch normalisation", ge=1)
        max_epochs: int = param(3000, "the most epochs trained", ge=1)
        patience: int = param(100, "epochs without a better validation score before training stops", ge=0)
        n_jobs: int = param(1, "torch threads", ge=1)
        device: Device = param("auto", "auto: CUDA where a GPU is visible, else the CPU")

    def _matrix(self, X) -> np.ndarray:
        out = self.encoder_.transform(X)
        out[:, self.cat_idxs_] += 1.0  # code -1 (missing) -> 0, code k -> k + 1
        return out.astype(np.float32)

    def fit(self, X, y, X_val=None, y_val=None, *, context: JobContext = JobContext()):
        import torch
        from pytorch_tabnet.tab_model import TabNetClassifier, TabNetRegressor

        p = self.params
        clock, points = context.training_clock(), context.time_points()
        self.device_ = resolve_device(p["device"])
        self.encoder_ = TabularEncoder(self.meta, categorical="ordinal", standardize=True).fit(X)
        self.cat_idxs_ = list(self.encoder_.categorical_indices_)
        cat_dims = [len(c.categories) + 1 for c in self.meta.columns if c.kind == CATEGORICAL]
        x_train = self._matrix(X)
        if self.meta.is_classification:
            self.seen_ = SeenClasses(y, self.meta.n_classes)
            y_train = self.seen_.encode(y)
        else:
            self.seen_ = None
            self.target_ = TargetScaler().fit(y)
            y_train = self.target_.transform(y).reshape(-1, 1)
        self.model_, self.time_points_, self.point_states_ = None, {}, {}
        if self.seen_ is not None and len(self.seen_) < 2:  # a single class: nothing to learn
            self.info_ = {"device": self.device_, "single_class": True}
            return self
        val = validation(X_val, y_val, self.seen_)
        eval_set = None
        if val is not None:
            y_eval = val[1] if self.seen_ is not None else self.target_.transform(val[1]).reshape(-1, 1)
            eval_set = [(self._matrix(val[0]), y_eval)]

        n = len(x_train)
        batch_size = min(p["batch_size"], n)
        virtual_batch_size = min(p["virtual_batch_size"], batch_size)
        cls = TabNetClassifier if self.meta.is_classification else TabNetRegressor
        with torch_threads(p["n_jobs"]), torch_seeded(self.seed, self.device_), warnings.catch_warnings(), \
                contextlib.redirect_stdout(io.StringIO()):  # "Early stopping occurred ..." is printed
            warnings.simplefilter("ignore")  # "Device used", "best weights restored", ...
            self.model_ = cls(
                n_d=p["n_d"], n_a=p["n_a"], n_steps=p["n_steps"], gamma=p["gamma"],
                lambda_sparse=p["lambda_sparse"], momentum=p["momentum"], cat_idxs=self.cat_idxs_,
                cat_dims=cat_dims, cat_emb_dim=p["cat_emb_dim"], optimizer_fn=torch.optim.Adam,
                optimizer_params={"lr": p["lr"]}, scheduler_fn=torch.optim.lr_scheduler.StepLR,
                scheduler_params={"step_size": p["scheduler_step"], "gamma": p["scheduler_gamma"]},
                seed=self.seed, device_name=self.device_, verbose=0,
            )
            metric = [all_class_logloss()] if self.meta.is_classification else ["mse"]
            self.model_.fit(
                x_train, y_train, eval_set=eval_set, eval_metric=metric if eval_set else None,
                max_epochs=p["max_epochs"], patience=p["patience"] if eval_set else 0,
                batch_size=batch_size, virtual_batch_size=virtual_batch_size,
                drop_last=_last_batch_breaks_batch_norm(n, batch_size, virtual_batch_size),
                num_workers=0, pin_memory=self.device_ == "cuda", compute_importance=False,
                callbacks=[time_limit(clock, p["max_epochs"], epoch_shape(self, n, len(eval_set[0][1]) if eval_set else 0)),
                           *([budget_points(points)] if points.points else [])],
            )
        self.time_points_ = points.state_times()
        self.point_states_ = {point: state for point, (_, state) in points.kept.items()}
        history = self.model_.history.history
        self.info_ = {
            "device": self.device_,
            "n_params": int(sum(t.numel() for t in self.model_.network.parameters())),
            "epochs": len(history.get("loss", [])),
            "best_epoch": int(self.model_.best_epoch) if eval_set else None,
            "cat_idxs": list(self.cat_idxs_),
            "cat_dims": cat_dims,
            "stopped_by_time_budget": clock.stopped,
            **({"epoch_plan": clock.epoch_plan} if clock.epoch_plan else {}),
        }
        return self

    def at_time(self, point_s: float) -> "TabNet":
        """This fit predicting with the weights it had selected at budget point ``point_s``."""
        other = copy.copy(self)
        other.model_ = copy.copy(self.model_)
        other.model_.network = copy.deepcopy(self.model_.network)
        other.model_.network.load_state_dict(self.point_states_[point_s])
        other.model_.network.eval()
        other.info_ = {"state_s": self.time_points_[point_s]}
        return other

    def _predict_raw(self, X):
        with torch_threads(self.params["n_jobs"]):
            if self.meta.is_classification:
                return self.model_.predict_proba(self._matrix(X))
            return self.model_.predict(self._matrix(X))

    def predict_values(self, X):
        return self.target_.inverse_transform(np.asarray(self._predict_raw(X), dtype=np.float64).reshape(-1))

    def predict_proba(self, X):
        if self.model_ is None:
            return self.seen_.constant(len(X))
        return self.seen_.widen(self._predict_raw(X))


@tabbench.hookimpl
def register_models(register):
    register(ModelSpec(
        name="tabnet", factory=TabNet, requires=("torch", "pytorch_tabnet"),
        extra="torch",
        deterministic=False,  # seeded torch training: last digits differ across CPUs
        search_space={"n_d": [8, 16], "n_a": [8, 16], "batch_size": [16, 32, 64, 128],
                      "virtual_batch_size": [4, 8, 16]},
        gpus=gpus_for,
        description="TabNet (pytorch-tabnet) with standardised numerics, categorical embeddings, early stopping",
        quick_params={"max_epochs": 100, "patience": 20, "batch_size": 128, "virtual_batch_size": 32},
        info_keys=frozenset({"device", "n_params", "epochs", "best_epoch", "cat_idxs", "cat_dims"}),
    ))
