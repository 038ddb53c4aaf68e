"""tabbench.estimator.Estimator: parameters declared once, unknown ones refused, predict from predict_proba."""

import numpy as np
import pytest

from tabbench.estimator import Estimator
from tabbench.params import Params, param
from tabbench.spec import MULTICLASS, REGRESSION, DatasetMeta, ModelSpec
from tabbench.testing import contract_data


class Prior(Estimator):
    class Params(Params):
        smoothing: float = param(1.0, "added to each class count", ge=0)

    def fit(self, X, y, X_val=None, y_val=None):
        if self.meta.is_classification:
            counts = np.bincount(y, minlength=self.meta.n_classes) + self.params["smoothing"]
            self.prior_ = counts / counts.sum()
        else:
            self.mean_ = float(np.mean(y))
        return self

    def predict_proba(self, X):
        return np.tile(self.prior_, (len(X), 1))

    def predict_values(self, X):
        return np.full(len(X), self.mean_)


def test_defaults_are_declared_once_on_the_class():
    spec = ModelSpec(name="prior", factory=Prior)
    assert spec.default_params == {"smoothing": 1.0}
    assert spec.build(DatasetMeta("d", REGRESSION, "y", ()), 0, {"smoothing": 2.0}).params == {"smoothing": 2.0}


def test_an_unknown_param_is_refused_by_name():
    with pytest.raises(TypeError, match=r"unknown params \['smooth'\].*smoothing"):
        Prior(DatasetMeta("d", REGRESSION, "y", ()), 0, smooth=2.0)


def test_a_value_is_checked_against_its_declaration_and_kept_as_given():
    meta = DatasetMeta("d", REGRESSION, "y", ())
    with pytest.raises(ValueError, match=r"^Prior: smoothing must be a number >= 0, got -1$"):
        Prior(meta, 0, smoothing=-1)
    with pytest.raises(ValueError, match=r"smoothing must be a number >= 0, got '2'"):
        Prior(meta, 0, smoothing="2")  # strict: a string is not a number
    smoothing = Prior(meta, 0, smoothing=2).params["smoothing"]
    assert smoothing == 2 and type(smoothing) is int  # not converted to 2.0: a job key hashes the value as given


@pytest.mark.parametrize("task", [MULTICLASS, REGRESSION])
def test_predict_is_the_argmax_of_predict_proba_or_the_values(task):
    dataset, split = contract_data(task)
    X, y = dataset.X.iloc[split.train], dataset.y[split.train]
    model = Prior(dataset.meta, 0).fit(X, y)
    if task == MULTICLASS:
        assert (model.predict(X) == np.bincount(y).argmax()).all()
    else:
        np.testing.assert_allclose(model.predict(X), y.mean())
