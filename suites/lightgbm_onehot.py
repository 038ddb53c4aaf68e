"""lightgbm_onehot: LightGBM fed one-hot columns for the categorical features, as the NPT authors' baselines
were (their baselines read the NPT data encoding: every categorical column one-hot, numeric columns
standardised; see baselines/utils/baseline_hyper_tuner.py at commit a399360), instead of LightGBM's native
categorical splits that tabbench's `lightgbm` uses. Everything else is tabbench's `lightgbm`: the same
params, grid and early stopping. Used by suites/uci-small-yacht-froude.yaml to test whether the paper's
LightGBM number on Yacht comes from a one-hot Froude number.
"""

from dataclasses import replace

import pandas as pd

import tabbench
from tabbench.preprocess import TabularEncoder
from tabbench_plugins.boosters import LightGBM


class OneHotLightGBM(LightGBM):
    def fit(self, X, y, X_val=None, y_val=None):
        self.encoder_ = TabularEncoder(self.meta, categorical="onehot", standardize=False).fit(X)
        return super().fit(X, y, X_val, y_val)

    def _frame(self, X):
        return pd.DataFrame(self.encoder_.transform(X)).add_prefix("f")


@tabbench.hookimpl
def register_models(register):
    import tabbench_plugins.boosters as boosters

    specs = []
    boosters.register_models(specs.append)  # tabbench's own lightgbm spec: params, grid, requirements
    lightgbm = next(spec for spec in specs if spec.name == "lightgbm")
    register(replace(lightgbm, name="lightgbm_onehot", factory=OneHotLightGBM,
                     description="LightGBM on one-hot encoded categoricals (the NPT authors' baseline input)"))
