"""Gradient-boosted tree baselines of the NPT paper: XGBoost, CatBoost, LightGBM.

Categorical columns are handled natively by each library: XGBoost ``enable_categorical`` on pandas
categoricals, CatBoost ``cat_features`` (the category code as an integer, -1 for missing), LightGBM's
pandas-categorical support. Numeric columns go in unscaled, missing values as NaN (all three learn a
default direction for them).

Early stopping: the validation split is the eval set (log-loss for classification, RMSE for
regression), training stops after ``early_stopping_rounds`` rounds without improvement, and the best
iteration is kept for prediction and recorded in ``info_["best_iteration"]`` (0-based: the index of
the last tree used). ``n_estimators`` is then
a cap on the number of trees, not the number trained.

Time budget: under a job's time budget each library's own callback mechanism ends training when one more
iteration would pass the training deadline (tabbench/estimator.py, ``TrainingClock``): an XGBoost
``TrainingCallback`` (``before_iteration`` returning True, so that early stopping has scored every tree
built), a LightGBM callback raising ``EarlyStopException`` with the best iteration so far, a CatBoost
callback whose ``after_iteration`` returns False. The trees up to the best iteration are then used as after
early stopping (the last one built without a validation split), and ``info_["stopped_by_time_budget"]``
says so. CatBoost takes no user callbacks on the GPU: a CUDA CatBoost fit is not time limited.

Budget points (``JobContext.budget_points_s``; tabbench/estimator.py, ``Estimator.time_points_``): the same
callbacks record when each iteration ended (its validation scored), on the job's clock. A point's state is the
trees up to the validation-best iteration among those that ended before it (the library's own rule: the first
strictly best value of the early-stopping metric; without early stopping, every tree built by then), so
``at_time`` predicts with fewer trees of the one fitted model (XGBoost ``iteration_range``, LightGBM
``num_iteration``, CatBoost ``ntree_end``). Cost: one clock reading per iteration during training, no copies;
after it, the harness's predictions of each point's state. A CUDA CatBoost fit (no callbacks) keeps no points.

Devices: ``device`` is ``auto`` (CUDA when visible), ``cpu`` or ``cuda``. On CUDA XGBoost trains with
``device="cuda"`` and CatBoost with ``task_type="GPU"``, and the spec asks Ray for one GPU. LightGBM's
PyPI wheel has no CUDA support: it always trains on the CPU and asks for no GPU (``device`` is
accepted so that a suite can set it for every model).

One-hot input: ``one_hot: true`` (LightGBM and CatBoost; default false) turns every categorical column
into one 0/1 column per level (a missing value is all zeros) before the library sees it, and CatBoost
then gets no ``cat_features``: the encoding the NPT authors' baselines used (they read the NPT data
encoding; see baselines/utils/baseline_hyper_tuner.py at commit a399360). Numeric columns are still
passed unscaled. suites/uci-small-yacht-froude.yaml compares both encodings on Yacht.

Search spaces: the paper's grid for all three (the authors' ``baselines/sklearn_models.py``),
48 configurations: learning_rate {1e-3, 1e-2, 0.1, 0.3} x max_depth {3, 5, 10} x n_estimators
{50, 100, 500, 1000}. The paper trained exactly ``n_estimators`` trees; with early stopping on, each
value is a cap, so the 500 and 1000 configurations often stop at the same tree. Set
``early_stopping_rounds: null`` in a suite to reproduce the paper's protocol exactly. LightGBM keeps
its default ``num_leaves=31`` as in the paper, so ``max_depth`` only limits trees of at most 31 leaves.
"""

from __future__ import annotations

import inspect

import bisect
import copy
from typing import Annotated, Optional

import numpy as np
import pandas as pd
from pydantic import Field

import tabbench
from tabbench.estimator import Estimator, JobContext, TimePoints, TrainingClock
from tabbench.params import Params, param
from tabbench.preprocess import TabularEncoder
from tabbench.spec import CATEGORICAL, ModelSpec
from tabbench_plugins.devices import Device, gpus_for, resolve_device
from tabbench_plugins.labels import SeenClasses, validation

# The paper's 48-configuration grid, shared by XGBoost, LightGBM and CatBoost (and sklearn's GB).
PAPER_BOOSTING_GRID = {
    "learning_rate": [1e-3, 1e-2, 0.1, 0.3],
    "max_depth": [3, 5, 10],
    "n_estimators": [50, 100, 500, 1000],
}


#: one_hot came after the published lightgbm/catboost records: at false (``added_as``) a job's key leaves it out, so
#: they are found done
ONE_HOT = "every categorical column as 0/1 columns, one per level, instead of the library's own handling"


class Booster(Estimator):
    """The shared part: seen-class bookkeeping, the eval set, predictions over all classes."""

    class Params(Params):  # the params every booster takes; each class adds its library's own
        n_estimators: int = param(1000, "the most boosting rounds (trees)", ge=1)
        learning_rate: float = param(0.1, "each tree's shrinkage", gt=0)
        early_stopping_rounds: Optional[Annotated[int, Field(ge=1)]] = param(
            50, "rounds without a better validation score before training stops (null: all n_estimators, as the "
            "paper)")
        n_jobs: int = param(1, "the library's threads")
        device: Device = param("auto", "auto: CUDA where a GPU is visible (and the library can use it), else the CPU")

    # -- subclass hooks -----------------------------------------------------------------------------
    def _frame(self, X: pd.DataFrame) -> pd.DataFrame:
        """X as the library wants it (column names the library accepts, categoricals its way)."""
        if self.params.get("one_hot"):
            return pd.DataFrame(self.encoder_.transform(X)).add_prefix("f")
        out = X.copy()
        out.columns = [f"f{i}" for i in range(X.shape[1])]
        return out

    def _device(self) -> str:
        return resolve_device(self.params["device"])

    def _fit(self, X, y, val, n_seen: int, device: str, clock: TrainingClock, ended):
        """Train ``self.model_``; the library's callbacks call ``ended`` (None: nothing) after each iteration, its
        validation scored."""
        raise NotImplementedError

    def _best_iteration(self):
        raise NotImplementedError

    def _validation_curve(self) -> list:
        """The early-stopping metric on the validation rows after each iteration (lower is better)."""
        raise NotImplementedError

    def _limited(self, n_trees: int) -> dict:
        """The library's predict arguments that use only the first ``n_trees`` iterations."""
        raise NotImplementedError

    def _keep_points(self, points: TimePoints, ended: list, selects: bool) -> None:
        """``time_points_`` from the iterations' end times: per point passed while trees were built, the trees up
        to the best validation iteration among those ended by then (``selects``: early stopping picks the best;
        else every tree built by then). Points after the last iteration take the final trees: not kept."""
        curve = self._validation_curve() if selects else None
        self.time_points_, self.point_trees_ = {}, {}
        for point in points.points:
            if not ended or point > ended[-1]:
                break
            n = bisect.bisect_right(ended, point)  # iterations ended by the point
            if n == 0:
                self.time_points_[point] = None
                continue
            best = int(np.argmin(curve[:n])) if curve is not None else n - 1  # argmin: the first best, as the libraries
            self.time_points_[point], self.point_trees_[point] = ended[best], best + 1

    def at_time(self, point_s: float) -> "Booster":
        """This fit predicting with the trees it had selected at budget point ``point_s``."""
        other = copy.copy(self)
        other.trees_ = self.point_trees_[point_s]
        other.info_ = {"best_iteration": other.trees_ - 1}
        return other

    # -- the estimator contract ---------------------------------------------------------------------
    trees_ = None  # predict with every tree the library keeps (at_time: only the first trees_)

    def fit(self, X, y, X_val=None, y_val=None, *, context: JobContext = JobContext()):
        clock, points = context.training_clock(), context.time_points()
        self.time_points_ = {}  # every point after the fit (a single class: nothing trained)
        if self.params.get("one_hot"):  # one 0/1 column per level, numeric columns as they are
            self.encoder_ = TabularEncoder(self.meta, categorical="onehot", standardize=False).fit(X)
        self.device_ = self._device()
        self.seen_ = SeenClasses(y, self.meta.n_classes) if self.meta.is_classification else None
        y_fit = self.seen_.encode(y) if self.seen_ is not None else np.asarray(y, dtype=np.float64)
        self.model_ = None
        if self.seen_ is not None and len(self.seen_) < 2:  # a single class: nothing to learn
            self.info_ = {"device": self.device_, "single_class": True}
            return self
        val = validation(X_val, y_val, self.seen_)
        val = (self._frame(val[0]), val[1]) if val is not None else None
        ended = []  # the job's elapsed time at the end of each iteration, for the budget points

        def note():
            ended.append(points.elapsed())

        self._fit(self._frame(X), y_fit, val, len(self.seen_) if self.seen_ is not None else 0, self.device_, clock,
                  note if points.points else None)
        self.iteration_ends_s_ = ended
        self._keep_points(points, ended, selects=val is not None and bool(self.params["early_stopping_rounds"]))
        self.info_ = {"device": self.device_, "best_iteration": self._best_iteration(),
                      "stopped_by_time_budget": clock.stopped}
        return self

    def _limit(self) -> dict:
        return {} if self.trees_ is None else self._limited(self.trees_)

    def predict_values(self, X):
        return np.asarray(self.model_.predict(self._frame(X), **self._limit()), dtype=np.float64).reshape(-1)

    def predict_proba(self, X):
        if self.model_ is None:
            return self.seen_.constant(len(X))
        return self.seen_.widen(self.model_.predict_proba(self._frame(X), **self._limit()))


class XGBoost(Booster):
    class Params(Booster.Params):
        max_depth: int = param(6, "the deepest a tree grows", ge=0)
        min_child_weight: float = param(1.0, "the least hessian weight in a leaf", ge=0)
        subsample: float = param(1.0, "the share of training rows each tree sees", gt=0, le=1)
        colsample_bytree: float = param(1.0, "the share of features each tree sees", gt=0, le=1)
        reg_lambda: float = param(1.0, "L2 regularisation of the leaf weights", ge=0)
        max_cat_to_onehot: int = param(4, "categorical columns with at most this many levels split one-hot", ge=1)

    def _fit(self, X, y, val, n_seen, device, clock, ended):
        import xgboost

        p = self.params
        if not self.meta.is_classification:
            cls, metric = xgboost.XGBRegressor, "rmse"
        else:
            cls, metric = xgboost.XGBClassifier, ("logloss" if n_seen == 2 else "mlogloss")
        self.model_ = cls(
            n_estimators=p["n_estimators"], learning_rate=p["learning_rate"], max_depth=p["max_depth"],
            min_child_weight=p["min_child_weight"], subsample=p["subsample"],
            colsample_bytree=p["colsample_bytree"], reg_lambda=p["reg_lambda"],
            max_cat_to_onehot=p["max_cat_to_onehot"], tree_method="hist", enable_categorical=True,
            device=device, n_jobs=p["n_jobs"], random_state=self.seed, verbosity=0, eval_metric=metric,
            early_stopping_rounds=p["early_stopping_rounds"] if val is not None else None,
            callbacks=[xgboost_time_limit(clock, ended)],  # first: asked before early stopping
        )
        self.model_.fit(X, y, eval_set=[val] if val is not None else None, verbose=False)

    def _best_iteration(self):
        if self.model_ is None:
            return None
        try:
            return int(self.model_.best_iteration)
        except AttributeError:  # no early stopping: every tree is used
            return int(self.model_.get_booster().num_boosted_rounds()) - 1

    def _validation_curve(self):
        return list(self.model_.evals_result()["validation_0"].values())[-1]  # the metric early stopping reads

    def _limited(self, n_trees):
        return {"iteration_range": (0, n_trees)}


def xgboost_time_limit(clock, ended=None):
    """An XGBoost TrainingCallback that stops before an iteration when ``clock`` says it would pass the
    deadline. Before, not after: XGBoost asks its callbacks in turn and stops at the first True, so a stop after
    an iteration would keep early stopping (called after ours) from scoring that iteration's tree. ``ended``
    (None, or a function that notes the time): called after each iteration, its validation scored."""
    import xgboost

    class TimeLimit(xgboost.callback.TrainingCallback):
        def before_iteration(self, model, epoch, evals_log) -> bool:
            return epoch > 0 and clock.out_of_time()  # epoch 0: nothing built yet

        def after_iteration(self, model, epoch, evals_log) -> bool:
            if ended is not None:
                ended()
            return False

    return TimeLimit()


class CatBoost(Booster):
    class Params(Booster.Params):
        max_depth: int = param(6, "the depth of each (symmetric) tree", ge=1, le=16)
        l2_leaf_reg: float = param(3.0, "L2 regularisation of the leaf values", ge=0)
        one_hot: bool = param(False, ONE_HOT, added_as=False)

    def _frame(self, X):
        if self.params["one_hot"]:
            return super()._frame(X)
        out = {}
        for i, col in enumerate(self.meta.columns):
            if col.kind == CATEGORICAL:  # CatBoost wants int or str categories; -1 stands for missing
                out[f"f{i}"] = X[col.name].cat.codes.to_numpy().astype(np.int64)
            else:
                out[f"f{i}"] = X[col.name].to_numpy(dtype=np.float64)
        return pd.DataFrame(out, index=X.index)

    def _cat_features(self) -> list:
        """Positions of the columns CatBoost treats as categorical (its target statistics)."""
        if self.params["one_hot"]:
            return []  # the one-hot columns are numbers to CatBoost
        return [i for i, c in enumerate(self.meta.columns) if c.kind == CATEGORICAL]

    def _fit(self, X, y, val, n_seen, device, clock, ended):
        import catboost

        p = self.params
        cat_features = self._cat_features()
        if not self.meta.is_classification:
            cls, loss = catboost.CatBoostRegressor, "RMSE"
        else:
            cls, loss = catboost.CatBoostClassifier, ("Logloss" if n_seen == 2 else "MultiClass")
        gpu = {"task_type": "GPU", "devices": "0"} if device == "cuda" else {"task_type": "CPU"}
        self.model_ = cls(
            iterations=p["n_estimators"], learning_rate=p["learning_rate"], depth=p["max_depth"],
            l2_leaf_reg=p["l2_leaf_reg"], loss_function=loss, eval_metric=loss, random_seed=self.seed,
            thread_count=p["n_jobs"], allow_writing_files=False, verbose=False, **gpu,
        )
        pool = catboost.Pool(X, y, cat_features=cat_features)
        # CatBoost takes no user callbacks on the GPU ("not supported for GPU"): there the fit is not time limited
        callbacks = {"callbacks": [CatBoostTimeLimit(clock, p["n_estimators"], ended)]} if device != "cuda" else {}
        if val is not None:
            eval_pool = catboost.Pool(val[0], val[1], cat_features=cat_features)
            self.model_.fit(pool, eval_set=eval_pool, early_stopping_rounds=p["early_stopping_rounds"],
                            use_best_model=bool(p["early_stopping_rounds"]), **callbacks)
        else:
            self.model_.fit(pool, **callbacks)

    def _best_iteration(self):
        if self.model_ is None:
            return None
        return int(self.model_.tree_count_) - 1  # use_best_model has already cut the trees after the best

    def _validation_curve(self):
        return self.model_.get_evals_result()["validation"][self.model_.get_params()["eval_metric"]]

    def _limited(self, n_trees):
        return {"ntree_end": n_trees}


class CatBoostTimeLimit:
    """A CatBoost callback (``fit(callbacks=...)``): ``after_iteration`` returning False ends training when
    ``clock`` says one more iteration would pass the deadline; ``use_best_model`` then keeps the best one.
    ``ended`` (None, or a function that notes the time): called after each iteration, its validation scored."""

    def __init__(self, clock, n_estimators: int, ended=None):
        self.clock, self.n_estimators, self.ended = clock, n_estimators, ended

    def after_iteration(self, info) -> bool:
        if self.ended is not None:
            self.ended()
        return not (info.iteration < self.n_estimators and self.clock.out_of_time())  # info.iteration: 1-based


class LightGBMTimeLimit:
    """A LightGBM callback that ends training when ``clock`` says one more iteration would pass the deadline,
    by raising ``EarlyStopException`` with the best iteration so far: on the first validation metric (as
    ``early_stopping(first_metric_only=True)`` judges it) when ``track_best``, else the last one built.
    ``ended`` (None, or a function that notes the time): called after each iteration, its validation scored
    (not after the one at which early stopping, asked first, ends training: that one is never the best)."""

    def __init__(self, clock, track_best: bool, ended=None):
        self.clock, self.track_best, self.ended = clock, track_best, ended
        # after lightgbm.early_stopping (order 30): when that one stops, this one is not asked. An instance
        # attribute: LightGBM gives a callback without one its position in the list, before early stopping.
        self.order = 40
        self.best_iteration, self.best_score, self.best_results = -1, -np.inf, []

    def __call__(self, env):
        import lightgbm

        if self.ended is not None:
            self.ended()
        results = env.evaluation_result_list or []
        if not self.track_best or not results:
            self.best_iteration, self.best_results = env.iteration, results
        else:
            _, _, value, higher_is_better = results[0][:4]
            score = value if higher_is_better else -value
            if score > self.best_score:
                self.best_iteration, self.best_score, self.best_results = env.iteration, score, results
        if env.iteration + 1 < env.end_iteration and self.clock.out_of_time():
            raise lightgbm.callback.EarlyStopException(self.best_iteration, self.best_results)


class LightGBM(Booster):
    class Params(Booster.Params):
        max_depth: int = param(-1, "the deepest a tree grows (<= 0: unlimited)")
        num_leaves: int = param(31, "the most leaves of a tree", ge=2)
        min_child_samples: int = param(20, "the fewest training rows in a leaf", ge=0)
        subsample: float = param(1.0, "the share of training rows each tree sees", gt=0, le=1)
        colsample_bytree: float = param(1.0, "the share of features each tree sees", gt=0, le=1)
        reg_lambda: float = param(0.0, "L2 regularisation of the leaf values", ge=0)
        one_hot: bool = param(False, ONE_HOT, added_as=False)

    def _fit(self, X, y, val, n_seen, device, clock, ended):
        import lightgbm

        p = self.params
        cls = lightgbm.LGBMClassifier if self.meta.is_classification else lightgbm.LGBMRegressor
        self.model_ = cls(
            n_estimators=p["n_estimators"], learning_rate=p["learning_rate"], max_depth=p["max_depth"],
            num_leaves=p["num_leaves"], min_child_samples=p["min_child_samples"],
            subsample=p["subsample"], subsample_freq=1 if p["subsample"] < 1 else 0,
            colsample_bytree=p["colsample_bytree"], reg_lambda=p["reg_lambda"],
            random_state=self.seed, n_jobs=p["n_jobs"], deterministic=True, force_col_wise=True, verbose=-1,
        )
        callbacks = []
        early_stopping = val is not None and bool(p["early_stopping_rounds"])
        if early_stopping:
            callbacks.append(lightgbm.early_stopping(p["early_stopping_rounds"], first_metric_only=True,
                                                     verbose=False))
        callbacks.append(LightGBMTimeLimit(clock, track_best=early_stopping, ended=ended))
        # pandas categorical columns are LightGBM categorical features (categorical_feature="auto")
        if val is None:
            self.model_.fit(X, y, callbacks=callbacks)
        elif "eval_X" in inspect.signature(cls.fit).parameters:  # LightGBM >= 4.6 renamed eval_set
            self.model_.fit(X, y, eval_X=(val[0],), eval_y=(val[1],), callbacks=callbacks)
        else:
            self.model_.fit(X, y, eval_set=[val], callbacks=callbacks)

    def _device(self):
        return "cpu"  # no CUDA in LightGBM's wheel, whatever was asked for (see the module docstring)

    def _best_iteration(self):
        if self.model_ is None:
            return None
        best = self.model_.best_iteration_
        return int(best) - 1 if best else int(self.model_.n_estimators) - 1

    def _validation_curve(self):
        return next(iter(self.model_.evals_result_["valid_0"].values()))  # the first metric, early stopping's

    def _limited(self, n_trees):
        return {"num_iteration": n_trees}


#: A small training budget for tests (``ModelSpec.quick_params``): a few hundred trees at most.
QUICK = {"n_estimators": 300, "early_stopping_rounds": 20}
#: What every booster's ``info_`` holds after a fit (``ModelSpec.info_keys``).
RECORDS = frozenset({"device", "best_iteration"})


@tabbench.hookimpl
def register_models(register):
    register(ModelSpec(
        name="xgboost", factory=XGBoost, requires=("xgboost",), extra="boosters",
        search_space=PAPER_BOOSTING_GRID, gpus=gpus_for,
        description="XGBoost (hist trees, native categoricals, early stopping on the validation split)",
        quick_params=QUICK, info_keys=RECORDS,
    ))
    register(ModelSpec(
        name="catboost", factory=CatBoost, requires=("catboost",), extra="boosters",
        search_space=PAPER_BOOSTING_GRID, gpus=gpus_for,
        description="CatBoost (cat_features for categoricals, or one_hot; early stopping on the validation split)",
        quick_params=QUICK, info_keys=RECORDS,
    ))
    register(ModelSpec(
        name="lightgbm", factory=LightGBM, requires=("lightgbm",), extra="boosters",
        search_space=PAPER_BOOSTING_GRID, gpus=0,
        description="LightGBM (native categoricals, or one_hot; early stopping on the validation split; CPU only)",
        quick_params=QUICK, info_keys=RECORDS,
    ))
