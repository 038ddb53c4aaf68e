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

Search space: the TabR paper's space for TabR-S (its appendix, "hyperparameter tuning" table; in
pytabkit ``RandomParamsTabRAlgInterface``, ``hpo_space_name='tabr'``,
pytabkit/models/alg_interfaces/tabr_interface.py), its continuous ranges on grids and without its
numeric-embedding axes (TabR-S has none): d_main [96, 384] -> {96, 192, 265, 384}, context_dropout
and dropout0 U[0, 0.6] -> {0, 0.2, 0.4, 0.6}, encoder_n_blocks {0, 1}, predictor_n_blocks {1, 2},
lr log-uniform [3e-5, 1e-3] -> {3e-5, 1e-4, 3e-4, 1e-3}, weight_decay {0, 1e-6, 1e-5, 1e-4}.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

import tabbench
from tabbench.spec import ModelSpec
from tabbench_plugins.baseline_utils import gpus_for
from tabbench_plugins.pytabkit_wrapper import PytabkitEstimator

# skorch and faiss: imported inside pytabkit's TabR (its test-set Dataset class, its neighbour search)
REQUIRES = ("pytabkit", "faiss", "skorch")
INSTALL_HINT = "pip install 'tabbench-harness[modern]'"


class TabR(PytabkitEstimator):
    classifier = "TabR_S_D_Classifier"
    regressor = "TabR_S_D_Regressor"
    defaults = {
        "patience": 16, "n_epochs": None,  # None: until early stopping (the paper's "infinite" budget)
        # None: TabR-S-D's value
        "d_main": None, "context_dropout": None, "dropout0": None, "encoder_n_blocks": None,
        "predictor_n_blocks": None, "context_size": None, "lr": None, "weight_decay": None,
        "n_jobs": 1, "device": "auto",
    }

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
        name="tabr", factory=TabR, requires=REQUIRES, install_hint=INSTALL_HINT,
        # it reads the training rows at predict time, but pytabkit keeps them inside its Lightning module
        # (TabrLightning.train_dataset, preprocessed) with no way to hand it others: no predict_with_context,
        # so the corruption probe reports it as not probed (docs/probe.md)
        uses_other_rows=True,
        deterministic=False,  # seeded torch training: last digits differ across CPUs
        search_space={
            "d_main": [96, 192, 265, 384], "context_dropout": [0.0, 0.2, 0.4, 0.6], "dropout0": [0.0, 0.2, 0.4, 0.6],
            "encoder_n_blocks": [0, 1], "predictor_n_blocks": [1, 2], "lr": [3e-5, 1e-4, 3e-4, 1e-3],
            "weight_decay": [0.0, 1e-6, 1e-5, 1e-4],
        },
        gpus=gpus_for,
        description="TabR-S-D (Gorishniy et al., ICLR 2024; pytabkit): attention over the nearest TRAINING rows "
                    "(inductive retrieval), early stopping on validation; not in the NPT paper",
    ))
