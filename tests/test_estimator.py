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

    def fit(self, X, y, X_val=None, y_val=None, *, context=None):
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


def test_optional_capabilities_have_the_documented_defaults_on_the_base_class_and_for_a_plain_class():
    """A model that provides none of the optional capabilities has the base class's defaults: it records nothing,
    keeps no budget curve, resumed nothing and cannot be handed other rows; the harness reads a plain factory's
    estimator (not derived from Estimator) with the same defaults."""
    from tabbench.estimator import optional

    dataset, split = contract_data(REGRESSION)
    model = Prior(dataset.meta, 0).fit(dataset.X.iloc[split.train], dataset.y[split.train])

    class Plain:
        pass

    for estimator in (model, Plain()):
        assert dict(optional(estimator, "info_")) == {}
        assert list(optional(estimator, "budgets_")) == []
        assert optional(estimator, "resumed_fit_seconds_") == optional(estimator, "resumed_cpu_seconds_") == 0.0
        assert optional(estimator, "predict_with_context") is None
    with pytest.raises(ValueError, match="keeps no budget curve"):
        model.at_budget(10)
    with pytest.raises(TypeError):  # the default info_ is shared by every instance: it cannot be written into
        model.info_["n_params"] = 1


def test_a_fit_outside_the_harness_gets_a_context_without_budget_or_checkpoint_folder():
    from tabbench.estimator import JobContext

    context = JobContext()
    assert (context.time_budget_s, context.checkpoint_dir, context.cpus, context.gpus) == (None, None, None, None)
    clock = context.training_clock()
    assert clock.deadline is None and not clock.out_of_time()
