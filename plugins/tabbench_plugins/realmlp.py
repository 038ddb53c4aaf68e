"""RealMLP (Holzmüller, Grinsztajn and Steinwart, "Better by Default: Strong Pre-Tuned MLPs and Boosted
Trees on Tabular Data", NeurIPS 2024), through pytabkit's RealMLP_TD_Classifier / RealMLP_TD_Regressor.

Defaults: RealMLP-TD, the paper's tuned defaults (pytabkit's ``DefaultParams.RealMLP_TD_CLASS`` and
``RealMLP_TD_REG``): 3 x 256 hidden units, PBLD numeric embeddings, robust scaling + smooth clipping,
256 epochs with a cosine-log learning-rate schedule. A param left at None takes that default for the
task (e.g. lr 0.04 for classification, 0.2 for regression). pytabkit keeps the weights of the epoch
with the best validation score (classification error, or RMSE), measured on OUR validation split
(plugins/pytabkit_wrapper.py passes it as ``X_val``); ``use_early_stopping`` also stops the run once
the validation score has not improved for 2 x best epoch + 20 epochs (pytabkit's patience rule).
Under a job's time budget its epochs end on the job's clock, planned from the epoch time the machine stored
for the same fit (plugins/pytabkit_wrapper.py, ``budget_stop``, as TabR's): the best epoch so far is kept,
and ``info_["stopped_by_time_budget"]`` records it. (Until 2026-11-29 pytabkit's ``time_to_fit_in_seconds``
limited it: Lightning's ``max_time``, a wall clock, also in jobs recorded under the cpu clock.)

Budget points (``JobContext.budget_points_s``; plugins/pytabkit_wrapper.py): a Lightning callback, called at each
validation's end before pytabkit's module weighs that epoch, gives the points passed during the epoch a CPU copy
of pytabkit's best-epoch checkpoint as it stands (its ``ModelCheckpointCallback``, which it overwrites in place
and restores at the end of training); the epoch's validation time is recorded for each epoch, the state's time
is its best epoch's. Cost: one copy of the weights per point passed (a few MB at the defaults), no time else.
Before the first validation there is no state (pytabkit's checkpoint then holds the untrained weights).

Search space: the paper's RealMLP-HPO space (its appendix table of the HPO search space; in pytabkit
``RealMLPParamSampler``, ``hpo_space_name='default'``, pytabkit/models/alg_interfaces/nn_interfaces.py),
with its continuous ranges on grids: num_emb_type {none, pbld, pl, plr}, add_front_scale {True,
False}, lr log-uniform [2e-2, 3e-1] -> {0.02, 0.04, 0.07, 0.15, 0.3}, p_drop {0, 0.15, 0.3}, wd
{0, 0.02}, plr_sigma log-uniform [0.05, 0.5] -> {0.05, 0.1, 0.2, 0.5}, act {relu, selu, mish},
hidden_sizes {3 x 256, 5 x 64, 1 x 512}. Its classification-only label smoothing axis (ls_eps) is
left at the TD default, as one space serves all three tasks here.
"""

from __future__ import annotations

from typing import Annotated, Optional

from pydantic import Field

import tabbench
from tabbench.params import Params, param
from tabbench.spec import ModelSpec
from tabbench_plugins.devices import Device, gpus_for
from tabbench_plugins.pytabkit_wrapper import PytabkitEstimator

REQUIRES = ("pytabkit",)


class RealMLP(PytabkitEstimator):
    classifier = "RealMLP_TD_Classifier"
    regressor = "RealMLP_TD_Regressor"
    time_limited = True
    class Params(Params):  # null: RealMLP-TD's value for the task
        n_epochs: int = param(256, "epochs trained (the best validation epoch is kept)", ge=1)
        use_early_stopping: bool = param(False, "pytabkit's early stopping on the validation rows")
        num_emb_type: Optional[str] = param(None, "numeric embeddings: none, pl, plr, pbld, ... (pytabkit's names)")
        add_front_scale: Optional[bool] = param(None, "a learnable scale per input feature")
        lr: Optional[Annotated[float, Field(gt=0)]] = param(None, "the learning rate")
        p_drop: Optional[Annotated[float, Field(ge=0, lt=1)]] = param(None, "dropout")
        wd: Optional[Annotated[float, Field(ge=0)]] = param(None, "weight decay")
        plr_sigma: Optional[Annotated[float, Field(gt=0)]] = param(None, "scale of the PLR embeddings' frequencies")
        act: Optional[str] = param(None, "the activation: relu, selu, mish, ... (pytabkit's names)")
        hidden_sizes: Optional[list[Annotated[int, Field(ge=1)]]] = param(None, "units of each hidden layer")
        n_jobs: int = param(1, "torch threads", ge=1)
        device: Device = param("auto", "auto: CUDA where a GPU is visible, else the CPU")

    trainer_module = "pytabkit.models.alg_interfaces.nn_interfaces"

    def point_callback(self, points):
        """At each validation's end, before pytabkit's module counts the epoch (Lightning calls callbacks' hooks
        before the module's), the points passed get pytabkit's best checkpoint so far, and the epoch is dated."""
        from pytabkit.models.alg_interfaces import nn_interfaces

        epoch_s = {}  # pytabkit's epoch number (from 1) -> the job's elapsed time its validation had ended by

        class KeepAtPoints(nn_interfaces.pl.Callback):
            def _keep(self, module, now):
                if not points.passed(now):
                    return
                checkpoint = list(module.ckpt_callbacks.values())[-1]  # the last one restores last: the final
                name = checkpoint.val_metric_name
                epoch = (module.best_mean_val_epochs[name][0] if checkpoint.use_best_mean_epoch
                         else module.best_val_epochs[name][0][0])
                state = None
                if epoch > 0:  # 0: no epoch validated yet
                    saved = checkpoint.ckpt
                    assert len(saved.ckpt_params) == 1, "realmlp: budget points expect one training split"
                    state = ([c.detach().to("cpu", copy=True) for c in saved.ckpt_params[0]],
                             [c.detach().to("cpu", copy=True) for c in saved.ckpt_buffers[0]])
                points.keep(epoch_s.get(epoch) if state else None, state, now)

            def on_validation_epoch_end(self, trainer, pl_module):
                now = points.elapsed()
                self._keep(pl_module, now)
                epoch_s[pl_module.progress.epoch + 1] = now  # the epoch the module is about to count

            def on_fit_end(self, trainer, pl_module):  # before pytabkit's module drops its checkpoints
                self._keep(pl_module, points.elapsed())

        return KeepAtPoints()

    def _network(self):
        return self.model_.cv_alg_interface_.model.model

    def current_state(self):
        network = self._network()
        return ([p.detach().to("cpu", copy=True) for p in network.parameters()],
                [b.detach().to("cpu", copy=True) for b in network.buffers()])

    def restore_state(self, state) -> None:
        """The weights in pytabkit's network, as its ``ParamCheckpointer.restore`` puts them (one training split:
        the leading rows of each tensor)."""
        import torch

        network = self._network()
        with torch.no_grad():
            for saved, values in zip(state, (network.parameters(), network.buffers())):
                for c, v in zip(saved, values):
                    v[:len(c)] = c.to(v.device)


@tabbench.hookimpl
def register_models(register):
    register(ModelSpec(
        name="realmlp", factory=RealMLP, requires=REQUIRES, extra="modern",
        deterministic=False,  # seeded torch training: last digits differ across CPUs
        search_space={
            "num_emb_type": ["none", "pbld", "pl", "plr"], "add_front_scale": [True, False],
            "lr": [0.02, 0.04, 0.07, 0.15, 0.3], "p_drop": [0.0, 0.15, 0.3], "wd": [0.0, 0.02],
            "plr_sigma": [0.05, 0.1, 0.2, 0.5], "act": ["relu", "selu", "mish"],
            "hidden_sizes": [[256, 256, 256], [64, 64, 64, 64, 64], [512]],
        },
        gpus=gpus_for,
        description="RealMLP-TD (Holzmüller et al., NeurIPS 2024; pytabkit), tuned defaults, best epoch on "
                    "validation; not in the NPT paper",
        quick_params={"n_epochs": 60},
        info_keys=frozenset({"device", "library"}),
    ))
