"""TabR (Gorishniy et al., "TabR: Tabular Deep Learning Meets Nearest Neighbors", ICLR 2024), through
pytabkit's TabR_S_D_Classifier / TabR_S_D_Regressor (a port of the authors' code; faiss finds the
neighbours).

Inductive retrieval: every prediction attends over the ``context_size`` nearest TRAINING rows
(pytabkit keeps the training split as the candidate set; validation and test rows are never
candidates, and the test rows are never seen in fit). Like NPT it predicts from other rows, unlike
NPT the other rows are labelled training rows only.

Defaults: TabR-S-D, the paper's default configuration (pytabkit's ``DefaultParams.TABR_S_D_CLASS`` /
``TABR_S_D_REG``): d_main 265, context 96 neighbours, no numeric embeddings, quantile-transformed
inputs, AdamW lr 3.1e-4; training stops after ``patience`` (16) epochs without a better validation
score (accuracy, or loss for regression) on OUR validation split, and the best epoch's weights are
kept. A param left at None takes that default.

Device: on CUDA, pytabkit's TabR searches the neighbours with faiss's GPU index, which the modern extra's
faiss-cpu lacks. So ``device: auto`` means CUDA only where faiss has that index (else the CPU: the spec's
``cuda_problem``, which the harness asks when it resolves ``auto``), and ``device: cuda`` without it is refused
with the fix named.

Predicting from other rows (``predict_with_context``, the corruption probe): pytabkit's
``TabR_S_D_*`` estimator holds a ``SingleSplitWrapperAlgInterface`` whose one ``TabRSubSplitInterface`` holds
the Lightning module ``TabrLightning``; its ``dataset`` (a ``TabrDataset``, built in that interface's ``fit``)
holds the candidates as tensors: ``X_num`` (quantile-transformed), ``X_bin`` (codes 1, 2 recoded 0, 1),
``X_cat`` (re-encoded by the fitted ordinal encoder; none here, ``_frame`` leaves only binary columns) and ``Y``
(class positions, or the target standardised by the training rows' mean and std). Every predict step reads
the candidates from there and encodes them anew (no cached keys); in eval mode the query is not excluded
from them. The context rows go through the same fitted steps, and each row's block replaces that dataset
for the one predict call (restored afterwards).

Time budget: a Lightning callback in pytabkit's trainer (plugins/pytabkit_wrapper.py, ``budget_stop``, RealMLP's
too) ends training on the job's clock after each epoch and each batch, and keeps time for predicting the job's
test and validation rows at the rate its validation passes ran, so that the job ends by itself, its best
checkpoint loaded, also on a machine that turns busy mid-run (tests/test_time_budget.py runs it beside a busy
loop on its core).

Budget points (plugins/pytabkit_wrapper.py): a second callback, run before Lightning's ``ModelCheckpoint`` (which
Lightning runs last), gives each point passed during an epoch the best checkpoint so far, read from its file
(model weights only, on the CPU: one copy per point); the state's time is the end of that best epoch's validation.
A point's predictions swap its weights into the fitted module and the final ones back. Cost: one file read per
point passed, no time otherwise.

Search space: the TabR paper's space for TabR-S (its appendix, "hyperparameter tuning" table; in
pytabkit ``RandomParamsTabRAlgInterface``, ``hpo_space_name='tabr'``,
pytabkit/models/alg_interfaces/tabr_interface.py), its continuous ranges on grids and without its
numeric-embedding axes (TabR-S has none): d_main [96, 384] -> {96, 192, 265, 384}, context_dropout
and dropout0 U[0, 0.6] -> {0, 0.2, 0.4, 0.6}, encoder_n_blocks {0, 1}, predictor_n_blocks {1, 2},
lr log-uniform [3e-5, 1e-3] -> {3e-5, 1e-4, 3e-4, 1e-3}, weight_decay {0, 1e-6, 1e-5, 1e-4}.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Annotated, Optional

import numpy as np
import pandas as pd
from pydantic import Field

import tabbench
from tabbench.params import Params, param
from tabbench.spec import ModelSpec
from tabbench_plugins.devices import Device, cuda_available, gpus_for, resolve_device
from tabbench_plugins.pytabkit_wrapper import PytabkitEstimator

# skorch and faiss: imported inside pytabkit's TabR (its test-set Dataset class, its neighbour search)
REQUIRES = ("pytabkit", "faiss", "skorch")


def faiss_gpu_problem() -> str | None:
    """Why TabR cannot run on a GPU here, or None: pytabkit's TabR on CUDA searches the neighbours with faiss's
    GPU index, which the faiss-cpu build (the modern extra's) lacks."""
    import faiss

    if hasattr(faiss, "GpuIndexFlatConfig"):
        return None
    return (f"tabr on cuda: pytabkit's TabR searches its neighbours with faiss's GPU index, and the installed faiss "
            f"({faiss.__version__}, the modern extra's faiss-cpu) has none: install a GPU build of faiss in its place "
            "(e.g. pip install faiss-gpu-cu12), or give tabr device: cpu")


class TabR(PytabkitEstimator):
    classifier = "TabR_S_D_Classifier"
    regressor = "TabR_S_D_Regressor"
    class Params(Params):  # null: TabR-S-D's value
        patience: int = param(16, "epochs without a better validation score before training stops", ge=0)
        n_epochs: Optional[Annotated[int, Field(ge=1)]] = param(
            None, "the most epochs (null: until early stopping, the paper's \"infinite\" budget)")
        d_main: Optional[Annotated[int, Field(ge=1)]] = param(None, "the width of the encoder and predictor")
        context_dropout: Optional[Annotated[float, Field(ge=0, lt=1)]] = param(None, "dropout of the context's weights")
        dropout0: Optional[Annotated[float, Field(ge=0, lt=1)]] = param(None, "dropout of the first block")
        encoder_n_blocks: Optional[Annotated[int, Field(ge=0)]] = param(None, "blocks of the encoder")
        predictor_n_blocks: Optional[Annotated[int, Field(ge=1)]] = param(None, "blocks of the predictor")
        context_size: Optional[Annotated[int, Field(ge=1)]] = param(None, "neighbours retrieved per row")
        lr: Optional[Annotated[float, Field(gt=0)]] = param(None, "AdamW's learning rate")
        weight_decay: Optional[Annotated[float, Field(ge=0)]] = param(None, "AdamW's weight decay")
        n_jobs: int = param(1, "torch threads", ge=1)
        device: Device = param("auto", "auto: CUDA where a GPU and a GPU build of faiss are there, else the CPU")

    time_limited = True

    def resolve_device(self, asked: str) -> str:
        """``auto`` means CUDA only where faiss can search there too (else the CPU), as the harness resolves it
        (``ModelSpec.auto_device``); ``cuda`` without a GPU build of faiss is refused with the fix named."""
        if asked == "auto":
            asked = "cuda" if cuda_available() and faiss_gpu_problem() is None else "cpu"
        device = resolve_device(asked)
        problem = faiss_gpu_problem() if device == "cuda" else None
        if problem:
            raise ValueError(problem)
        return device

    trainer_module = "pytabkit.models.alg_interfaces.tabr_interface"

    def point_callback(self, points):
        """After each epoch, before Lightning's ``ModelCheckpoint`` (Lightning runs checkpoint callbacks last)
        weighs it: the points passed during the epoch get the best checkpoint so far, read from its file (the
        weights pytabkit would load had training stopped before this epoch), and when the checkpoint changes,
        the epoch before this one became the best: its validation's time is the state's."""
        import torch
        from pytabkit.models.alg_interfaces import tabr_interface

        class KeepAtPoints(tabr_interface.pl.Callback):
            path, best_s, previous_s = "", None, None

            def _checkpoint(self, trainer):
                (checkpoint,) = [c for c in trainer.callbacks if isinstance(c, tabr_interface.ModelCheckpoint)]
                assert trainer.callbacks.index(checkpoint) > trainer.callbacks.index(self), (
                    "tabr: the budget points must see the checkpoint before it weighs the epoch")
                return checkpoint

            def _keep(self, checkpoint, now):
                if checkpoint.best_model_path != self.path:  # the last epoch weighed became the best
                    self.path, self.best_s = checkpoint.best_model_path, self.previous_s
                if points.passed(now):
                    weights = torch.load(self.path, map_location="cpu", weights_only=False)["state_dict"] \
                        if self.path else None
                    points.keep(self.best_s if self.path else None, weights, now)

            def on_train_epoch_end(self, trainer, pl_module):
                now = points.elapsed()
                self._keep(self._checkpoint(trainer), now)
                self.previous_s = now  # this epoch was validated by then

            def on_train_end(self, trainer, pl_module):  # the last epoch weighed too: the final selection
                self._keep(self._checkpoint(trainer), points.elapsed())

        return KeepAtPoints()

    def current_state(self):
        weights = self._interface().model.state_dict()
        return {name: value.detach().to("cpu", copy=True) for name, value in weights.items()}

    def restore_state(self, state) -> None:
        """The weights (a checkpoint's ``state_dict``) in the Lightning module, as ``load_from_checkpoint`` does."""
        self._interface().model.load_state_dict(state)

    def _frame(self, X):
        """Each categorical column one-hot encoded, as the TabR paper encodes them (a missing value: all zeros),
        each indicator a two-level categorical, which pytabkit's TabR takes as a binary feature. (pytabkit's own
        path for columns of more than two levels fails with scikit-learn 1.9: its SimpleImputer(strategy="constant",
        fill_value=nan) drops every column.)"""
        X = super()._frame(X)
        for column in self.meta.categorical:
            codes = X.pop(column.name).cat.codes.to_numpy()
            for code, level in enumerate(column.categories):
                X[f"{column.name}={level}"] = pd.Categorical.from_codes((codes == code).astype(np.int8), [0, 1])
        return X

    def predict_with_context(self, X, context_X, context_y):
        """Row i of X predicted with block i of the context as its candidates in place of the training rows
        (see Estimator). Cost per row: one pytabkit predict (a Lightning predict loop over the one row), which
        encodes the block's rows as keys and searches them with faiss for the ``context_size`` nearest."""
        n = len(context_X) // len(X)
        assert n * len(X) == len(context_X) == len(context_y), (
            f"tabr: context of {len(context_X)} rows is not {len(X)} blocks of equal size")
        assert not np.isnan(context_y).any(), "tabr: every context row needs its target (no unlabelled rows)"
        if self.model_ is None:
            return self.seen_.constant(len(X))
        candidates = self._candidates(context_X, context_y)
        predict = self.predict_proba if self.meta.is_classification else self.predict_values
        out = []
        for i in range(len(X)):
            with self._candidates_replaced({key: value[i * n:(i + 1) * n] for key, value in candidates.items()}):
                out.append(predict(X.iloc[i:i + 1]))
        return np.concatenate(out)

    def _interface(self):
        """pytabkit's fitted TabRSubSplitInterface (its ``model``: the TabrLightning module)."""
        return self.model_.alg_interface_.sub_split_interfaces[0]

    def _candidates(self, X, y) -> dict:
        """Rows and targets as pytabkit's fit stores its training rows for retrieval (the ``TabrDataset``'s
        ``data``), through the fitted converter, transforms, encoders and target standardisation; on the
        Lightning module's device."""
        import torch

        interface = self._interface()
        ds = interface.tfm.forward_ds(self.model_.x_converter_.transform(self._frame(X)))
        cat_sizes = ds.tensor_infos["x_cat"].get_cat_sizes() - 1  # pytabkit's sizes count a "missing" code
        x_bin = ds.tensors["x_cat"][:, cat_sizes == 2]
        x_cat = ds.tensors["x_cat"][:, cat_sizes > 2]
        if x_cat.shape[1] > 0:
            x_cat = interface.replace_zero_by_nans.transform(x_cat.float())  # code 0 (missing) -> NaN
            x_cat = torch.from_numpy(interface.ord_enc.transform(x_cat))
        if x_bin.shape[1] > 0:
            x_bin = x_bin - 1  # codes 1, 2 -> 0, 1; a missing value (code 0) -> -1 -> 0.5, as fit recodes it
            x_bin[x_bin == -1] = 0.5
        if self.meta.is_classification:
            target = torch.as_tensor(self.model_.y_encoder_.transform(pd.DataFrame(self.seen_.encode(y))),
                                     dtype=torch.long)
        else:
            target = torch.as_tensor(np.asarray(y, dtype=np.float32)[:, None])
            if interface.transformer_mean is not None:
                target = (target - interface.transformer_mean) / interface.transformer_std
        data = {"Y": target.reshape(-1), "X_num": ds.tensors["x_cont"].float(), "X_bin": x_bin.long(),
                "X_cat": x_cat.long()}
        device = interface.model.device
        return {key: value.to(device) for key, value in data.items() if key == "Y" or value.shape[1] > 0}

    @contextlib.contextmanager
    def _candidates_replaced(self, data: dict):
        """pytabkit's candidates replaced by ``data`` (as ``_candidates`` returns it), the training rows restored
        afterwards, also on an exception. ``TabrLightning.setup`` renumbers the candidates (``train_indices``)."""
        lightning = self._interface().model
        training = lightning.dataset
        replaced = copy.copy(training)
        replaced.data, replaced.size = data, len(data["Y"])
        lightning.dataset = replaced
        try:
            lightning.setup()
            yield
        finally:
            lightning.dataset = training
            lightning.setup()

    def library_params(self) -> dict:
        """lr and weight_decay go into pytabkit's ``optimizer`` dict (AdamW, TabR-S-D's values otherwise)."""
        from pytabkit.models.sklearn.default_params import DefaultParams

        out = super().library_params()
        optimizer = dict(DefaultParams.TABR_S_D_CLASS["optimizer"])
        for name in ("lr", "weight_decay"):
            if name in out:
                optimizer[name] = out.pop(name)
        return {**out, "optimizer": optimizer}


@tabbench.hookimpl
def register_models(register):
    register(ModelSpec(
        name="tabr", factory=TabR, requires=REQUIRES, extra="modern",
        deterministic=False,  # seeded torch training: last digits differ across CPUs
        search_space={
            "d_main": [96, 192, 265, 384], "context_dropout": [0.0, 0.2, 0.4, 0.6], "dropout0": [0.0, 0.2, 0.4, 0.6],
            "encoder_n_blocks": [0, 1], "predictor_n_blocks": [1, 2], "lr": [3e-5, 1e-4, 3e-4, 1e-3],
            "weight_decay": [0.0, 1e-6, 1e-5, 1e-4],
        },
        gpus=gpus_for, cuda_problem=faiss_gpu_problem,
        description="TabR-S-D (Gorishniy et al., ICLR 2024; pytabkit): attention over the nearest TRAINING rows "
                    "(inductive retrieval), early stopping on validation; not in the NPT paper",
        # on the CPU on a GPU machine too: TabR on CUDA needs a GPU build of faiss, the extra installs faiss-cpu;
        # its own patience (16): with 4, wine's 124 training rows stop it at chance accuracy
        quick_params={"n_epochs": 40, "patience": 16, "d_main": 96, "context_size": 32, "device": "cpu"},
        info_keys=frozenset({"device", "library"}),
    ))
