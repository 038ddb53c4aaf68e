"""lightgbm_onehot and catboost_onehot: the boosters fed one-hot columns for the categorical features, as the
NPT authors' baselines were (their baselines read the NPT data encoding: every categorical column one-hot,
numeric columns standardised; see baselines/utils/baseline_hyper_tuner.py at commit a399360), instead of
the categorical handling tabbench's `lightgbm` (native categorical splits) and `catboost` (ordered target
statistics, `cat_features`) use. Everything else is tabbench's model: the same params, grid and early
stopping. Used by suites/uci-small-yacht-froude.yaml to test whether the paper's LightGBM and CatBoost
numbers on Yacht come from a one-hot Froude number.
"""

from dataclasses import replace

import pandas as pd

import tabbench
from tabbench.preprocess import TabularEncoder
from tabbench_plugins.boosters import CatBoost, LightGBM


class OneHotInput:
    """Mixin for a tabbench booster: every categorical column becomes one 0/1 column per level."""

    def fit(self, X, y, X_val=None, y_val=None):
        self.encoder_ = TabularEncoder(self.meta, categorical="onehot", standardize=False).fit(X)
        return super().fit(X, y, X_val, y_val)

    def _frame(self, X):
        return pd.DataFrame(self.encoder_.transform(X)).add_prefix("f")


class OneHotLightGBM(OneHotInput, LightGBM):
    pass


class OneHotCatBoost(OneHotInput, CatBoost):
    def _cat_features(self):
        return []  # the one-hot columns are numbers to CatBoost


@tabbench.hookimpl
def register_models(register):
    import tabbench_plugins.boosters as boosters

    specs = []
    boosters.register_models(specs.append)  # tabbench's own specs: params, grid, requirements
    for name, factory in (("lightgbm", OneHotLightGBM), ("catboost", OneHotCatBoost)):
        spec = next(spec for spec in specs if spec.name == name)
        register(replace(spec, name=f"{name}_onehot", factory=factory,
                         description=f"{spec.description.split(' (')[0]} on one-hot encoded categoricals (the NPT "
                                     "authors' baseline input)"))
