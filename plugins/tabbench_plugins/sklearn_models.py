"""The scikit-learn baselines of the NPT paper: k-NN, Random Forest, Gradient Boosting.

Numeric columns are mean-imputed and standardised, categorical columns one-hot encoded (both fitted
on the training split). k-NN needs the scaling; the tree ensembles are indifferent to it. k-NN's
``scaler: quantile`` maps each numeric column through its training quantiles onto a normal
distribution instead (scikit-learn's QuantileTransformer), as TabArena's k-NN may
(tabarena/models/knn: its search space tries standard and quantile scaling): a skewed column, such as
Concrete's age in days, then spreads its rows evenly instead of crowding them at one end.

Gradient Boosting, the one iterative model here, stops adding trees when one more would pass a job's
training deadline (tabbench/estimator.py, ``TrainingClock``), through scikit-learn's ``fit(monitor=...)``;
it then predicts with the trees it has and records ``info_["stopped_by_time_budget"]``.

Budget points (``JobContext.budget_points_s``; tabbench/estimator.py, ``Estimator.time_points_``): Gradient
Boosting's monitor also notes when each tree ended, on the job's clock; a point's state is every tree ended by
then (it selects nothing on validation: all trees are used), and ``at_time`` predicts with those first trees of
the one fitted model. Cost: one clock reading per tree, no copies. k-NN and Random Forest keep no points: they
fit in seconds, and the harness gives points after their fit their final metrics.
"""

from __future__ import annotations

import bisect
import copy
from typing import Annotated, Literal, Optional, Union

import numpy as np
from pydantic import Field

import tabbench
from tabbench.estimator import Estimator, JobContext
from tabbench.params import Params, param
from tabbench.preprocess import TabularEncoder, full_proba
from tabbench.spec import ModelSpec


class SklearnModel(Estimator):
    """Wraps a scikit-learn estimator class pair (classifier, regressor) in the tabbench contract.

    Its ``Params`` are the scikit-learn keyword arguments the model passes on (plus ``random_state``
    from the seed where the estimator is ``seeded``).
    """

    classifier: str = ""
    regressor: str = ""
    seeded: bool = True
    own_params: tuple = ()  # params that are ours, not the scikit-learn estimator's

    def _estimator(self):
        import importlib

        path = self.classifier if self.meta.is_classification else self.regressor
        module, name = path.rsplit(".", 1)
        cls = getattr(importlib.import_module(module), name)
        params = {k: v for k, v in self.params.items() if k not in self.own_params}
        if self.seeded:
            params["random_state"] = self.seed
        return cls(**params)

    def _encoder(self):
        """What turns a typed frame into the estimator's matrix (fitted on the training rows)."""
        return TabularEncoder(self.meta, categorical="onehot", standardize=True)

    def fit(self, X, y, X_val=None, y_val=None, *, context: JobContext = JobContext(), **fit_params):
        self.encoder_ = self._encoder()
        self.model_ = self._estimator().fit(self.encoder_.fit_transform(X), y, **fit_params)
        return self

    def predict_values(self, X):
        return self.model_.predict(self.encoder_.transform(X))

    def predict_proba(self, X):
        proba = self.model_.predict_proba(self.encoder_.transform(X))
        return full_proba(proba, self.model_.classes_, self.meta.n_classes)


class QuantileEncoder:
    """TabularEncoder's matrix with its numeric columns mapped through their training quantiles onto a normal
    distribution (one-hot columns stay 0/1): k-NN's ``scaler: quantile``."""

    def __init__(self, meta):
        self.meta = meta
        self.encoder = TabularEncoder(meta, categorical="onehot", standardize=True)

    def fit_transform(self, X):
        from sklearn.preprocessing import QuantileTransformer

        matrix = self.encoder.fit_transform(X)
        self.numeric_ = [i for i, name in enumerate(self.encoder.feature_names_)
                         if name in {c.name for c in self.meta.numeric}]
        self.quantiles_ = QuantileTransformer(output_distribution="normal", n_quantiles=min(1000, len(X)),
                                              random_state=0)
        if self.numeric_:
            matrix[:, self.numeric_] = self.quantiles_.fit_transform(matrix[:, self.numeric_])
        return matrix

    def transform(self, X):
        matrix = self.encoder.transform(X)
        if self.numeric_:
            matrix[:, self.numeric_] = self.quantiles_.transform(matrix[:, self.numeric_])
        return matrix


class KNN(SklearnModel):
    classifier = "sklearn.neighbors.KNeighborsClassifier"
    regressor = "sklearn.neighbors.KNeighborsRegressor"
    seeded = False
    own_params = ("scaler",)

    class Params(Params):
        n_neighbors: int = param(5, "neighbours that vote (more than the training rows: all of them)", ge=1)
        weights: Literal["uniform", "distance"] = param("uniform", "uniform votes, or votes weighted by 1/distance")
        p: float = param(2, "the Minkowski distance's power: 1 Manhattan, 2 Euclidean", gt=0)
        # came after the published records: at standard (``added_as``) a job's key leaves it out, so they are found done
        scaler: Literal["standard", "quantile"] = param(
            "standard", "numeric columns standardised, or mapped through their training quantiles onto a normal "
            "distribution", added_as="standard")

    def _encoder(self):
        return QuantileEncoder(self.meta) if self.params["scaler"] == "quantile" else super()._encoder()

    def _estimator(self):
        estimator = super()._estimator()
        # The paper's grid reaches k=100, more rows than some training splits hold: then use them all.
        estimator.n_neighbors = min(estimator.n_neighbors, self.n_train_)
        self.info_ = {"n_neighbors": estimator.n_neighbors}
        return estimator

    def fit(self, X, y, X_val=None, y_val=None, *, context: JobContext = JobContext()):
        self.n_train_ = len(X)
        return super().fit(X, y, X_val, y_val)

    def predict_with_context(self, X, context_X, context_y):
        """Row i of X predicted with block i of the context as its neighbour candidates (see Estimator).
        Cost per row: one fit of the same scikit-learn model (the neighbour index) on its block, then one
        query: O(block rows x encoded columns)."""
        from sklearn.base import clone

        n = len(context_X) // len(X)
        assert n * len(X) == len(context_X) == len(context_y), (
            f"knn: context of {len(context_X)} rows is not {len(X)} blocks of equal size")
        assert not np.isnan(context_y).any(), "knn: every context row needs its target (no unlabelled rows)"
        queries, candidates = self.encoder_.transform(X), self.encoder_.transform(context_X)
        y = context_y.astype(np.int64) if self.meta.is_classification else context_y
        out = []
        for i in range(len(X)):
            model = clone(self.model_).fit(candidates[i * n:(i + 1) * n], y[i * n:(i + 1) * n])
            if self.meta.is_classification:
                out.append(full_proba(model.predict_proba(queries[i:i + 1]), model.classes_, self.meta.n_classes))
            else:
                out.append(model.predict(queries[i:i + 1]))
        return np.concatenate(out)


class RandomForest(SklearnModel):
    classifier = "sklearn.ensemble.RandomForestClassifier"
    regressor = "sklearn.ensemble.RandomForestRegressor"

    class Params(Params):
        n_estimators: int = param(100, "trees", ge=1)
        max_depth: Optional[Annotated[int, Field(ge=1)]] = param(None, "the deepest a tree grows (null: until pure)")
        max_features: Union[Literal["sqrt", "log2"], Annotated[int, Field(ge=1)], Annotated[float, Field(gt=0, le=1)],
                            None] = param("sqrt", "features tried per split: a rule, a count, a share, or null: all")
        n_jobs: int = param(1, "scikit-learn's threads (-1: every core)")


class GradientBoosting(SklearnModel):
    classifier = "sklearn.ensemble.GradientBoostingClassifier"
    regressor = "sklearn.ensemble.GradientBoostingRegressor"

    class Params(Params):
        n_estimators: int = param(100, "boosting rounds (trees), all trained: no early stopping", ge=1)
        learning_rate: float = param(0.1, "each tree's shrinkage", ge=0)
        max_depth: Optional[Annotated[int, Field(ge=1)]] = param(3, "the deepest a tree grows (null: unlimited)")
        subsample: float = param(1.0, "the share of training rows each tree sees", gt=0, le=1)

    def fit(self, X, y, X_val=None, y_val=None, *, context: JobContext = JobContext()):
        clock, points = context.training_clock(), context.time_points()
        ended = []  # the job's elapsed time at the end of each tree, for the budget points

        def monitor(i, model, _locals) -> bool:  # after tree i; True: stop (scikit-learn keeps trees 0..i)
            if points.points:
                ended.append(points.elapsed())
            return i + 1 < model.n_estimators and clock.out_of_time()

        super().fit(X, y, X_val, y_val, monitor=monitor)
        self.info_ = {"stopped_by_time_budget": clock.stopped}
        self.time_points_, self.point_trees_ = {}, {}
        for point in points.points:  # those after the last tree take the final model: not kept
            if not ended or point > ended[-1]:
                break
            n = bisect.bisect_right(ended, point)  # trees ended by the point: all of them are its state
            self.time_points_[point] = ended[n - 1] if n else None
            if n:
                self.point_trees_[point] = n
        return self

    def at_time(self, point_s: float) -> "GradientBoosting":
        """This fit predicting with the trees it had at budget point ``point_s``: the first ones of the model."""
        other = copy.copy(self)
        other.model_ = copy.copy(self.model_)  # shares the trees; predicts with the first ones only
        other.model_.estimators_ = self.model_.estimators_[:self.point_trees_[point_s]]
        other.info_ = {"trees": self.point_trees_[point_s]}
        return other


@tabbench.hookimpl
def register_models(register):
    register(ModelSpec(
        name="knn", factory=KNN, requires=("sklearn.neighbors",),
        # The paper's small-data grid (480) is n_neighbors x weights x p x algorithm {ball_tree, kd_tree,
        # brute} x leaf_size {10, 30, 50, 100}; the last two only change the speed of an exact search,
        # not its answer, so its 40 distinct models are these.
        search_space={"n_neighbors": [2, 5, 7, 10, 20, 30, 40, 50, 75, 100], "weights": ["uniform", "distance"],
                      "p": [1, 2]},
        description="k-nearest neighbours (scikit-learn) on standardised, one-hot encoded features",
        info_keys=frozenset({"n_neighbors"}),
    ))
    register(ModelSpec(
        name="random_forest", factory=RandomForest, requires=("sklearn.ensemble",),
        # 24 configurations, as in the paper. Its grid was criterion {gini, entropy} (regression: {mae,
        # mse}) x n_estimators x max_features {auto, sqrt, log2}. A criterion axis cannot be shared by
        # classification and regression here (scikit-learn names differ), so max_depth {None, 10}
        # takes its place; "auto" meant sqrt (classification) or all features (regression): 1.0.
        search_space={"n_estimators": [50, 100, 500, 1000], "max_features": ["sqrt", "log2", 1.0],
                      "max_depth": [None, 10]},
        description="Random Forest (scikit-learn)",
        quick_params={"n_estimators": 100},
        info_keys=frozenset(),  # it trains exactly what its params say
    ))
    register(ModelSpec(
        name="gradient_boosting", factory=GradientBoosting, requires=("sklearn.ensemble",),
        # The paper's 48-configuration grid (no early stopping: n_estimators trees are trained).
        search_space={"learning_rate": [1e-3, 1e-2, 0.1, 0.3], "max_depth": [3, 5, 10],
                      "n_estimators": [50, 100, 500, 1000]},
        description="Gradient Boosting (scikit-learn GradientBoosting*, not the histogram variant)",
        quick_params={"n_estimators": 100},
        info_keys=frozenset(),  # it trains exactly what its params say (unless the time budget stops it)
    ))
