"""The models that came after NPT, the ``modern`` extra's (plugins/tabbench_plugins/tabm.py, realmlp.py, tabr.py,
modernnca.py; ``MODERN``: every built-in model whose spec names that extra), on real data, with small
budgets.

* the estimator contract (check_model's checks) runs for every registered model, these four included, in
  tests/test_conformance.py;
* Concrete (suites/uci-small.yaml's, the paper's fold 0, from ../shared/datasets; skipped when absent):
  each model learns (test RMSE far below the target's spread) and early stopping restored an epoch
  chosen on the validation split;
* TabR and ModernNCA retrieve from training rows only: a test row's prediction does not depend on the
  other test rows predicted with it;
* device: ``cuda`` asks Ray for a GPU, and is a clear error on a machine without one (tests/test_conformance.py,
  for every built-in model with a ``device`` param);
* listing the models imports none of their libraries.

Budgets (each spec's ``quick_params``) keep the file to a few minutes on two CPU cores; they are far below the
defaults, whose cost benchmarks/modern_fit_cost.py measures.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tabbench.testing import fit_checked
from tests.conftest import SHARED, models_of_extra, quick_params, registered_spec, registry, require_shared

REPO = Path(__file__).resolve().parents[1]
#: The ``modern`` extra's models (their spec's ``extra``): TabM, RealMLP, TabR and ModernNCA today.
MODERN = models_of_extra("modern")
#: Those that retrieve from other rows (TabR's and ModernNCA's candidates).
RETRIEVAL = [name for name in MODERN if registry()[name].spec.uses_other_rows]
LIBRARIES = {"torch", "pytabkit", "tabm", "rtdl_num_embeddings", "faiss", "skorch", "pytorch_lightning"}



def spec(name):
    return registered_spec(name)


def concrete():
    return uci_small_fold0("concrete")


@functools.lru_cache(maxsize=None)
def uci_small_fold0(name):
    """suites/uci-small.yaml's dataset ``name`` and its fold 0, through the offline mirror."""
    require_shared(f"uci/{name}")
    import tempfile

    from tabbench.data.cache import DataPaths
    from tabbench.run.runner import load_data
    from tabbench.suite import load_suite

    suite = load_suite(REPO / "suites" / "uci-small.yaml")
    paths = DataPaths.from_env(cache=tempfile.mkdtemp(prefix="tabbench-test-"), mirrors=[SHARED.resolve()],
                               base=suite.path.parent)
    _, dataset, splits = load_data(suite, paths, only=(name,))[name]
    return dataset, next(s for s in splits if s.fold == 0)


@functools.lru_cache(maxsize=None)
def fitted_on_concrete(name):
    dataset, split = concrete()
    return fit_checked(spec(name), dataset, split, params={**quick_params(name), "device": "cpu"})


@pytest.mark.parametrize("name", MODERN)
def test_learns_concrete_and_keeps_a_validated_epoch(name):
    """Concrete's compressive strength has a spread of 16.7 MPa; k-NN reaches 8.5 in the paper, the tuned
    models 4.3-5.9. A model that learns from the training rows lands well under 10 even on a small budget."""
    dataset, split = concrete()
    model = fitted_on_concrete(name)
    test = split.test
    rmse = float(np.sqrt(np.mean((model.predict(dataset.X.iloc[test]) - dataset.y[test]) ** 2)))
    print(f"{name} concrete fold 0 RMSE {rmse:.2f}")
    assert rmse < 10.0, f"{name}: Concrete fold 0 test RMSE {rmse:.2f}"
    info = model.info_
    if "best_epoch" in info:  # our own training loops: the restored epoch is one that ran
        assert 0 <= info["best_epoch"] < info["epochs"], info


def test_tabm_stops_on_the_leaderboard_metric_not_the_loss():
    """As the authors' training loop, TabM keeps the epoch with the best validation metric (here the
    leaderboard's: AUROC on Breast Cancer), not the best loss: the error it recorded for its best epoch is
    1 - AUROC of the restored model on the validation rows (the ensemble's log loss would be another number)."""
    from sklearn.metrics import roc_auc_score

    dataset, split = uci_small_fold0("breast_cancer")
    model = fit_checked(spec("tabm"), dataset, split, params={**quick_params("tabm"), "device": "cpu"})
    assert model.info_["stopped_on"] == "auroc", model.info_
    auroc = roc_auc_score(dataset.y[split.val], model.predict_proba(dataset.X.iloc[split.val])[:, 1])
    assert model.info_["best_val_loss"] == pytest.approx(1.0 - auroc, abs=1e-9), (model.info_, auroc)


def test_tabm_mixed_precision_only_where_bf16_is_native():
    """``amp`` (the default) trains and predicts under bf16 autocast on a CPU with native bf16 (AVX-512 BF16 or
    AMX), keeping fp32 weights; ``amp: false``, or a CPU without it, is fp32 throughout. Where bf16 ran, the
    two fits' predictions differ (the autocast is real); both learn Concrete (the test above)."""
    import torch

    from tabbench_plugins.torch_training import native_bf16

    dataset, split = concrete()
    mixed = fitted_on_concrete("tabm")
    fp32 = fit_checked(spec("tabm"), dataset, split, params={**quick_params("tabm"), "device": "cpu", "amp": False})
    assert fp32.info_["amp"] is False
    assert mixed.info_["amp"] is native_bf16("cpu")
    assert all(t.dtype == torch.float32 for t in mixed.network_.parameters())
    X = dataset.X.iloc[split.test]
    if mixed.info_["amp"]:
        assert not np.allclose(mixed.predict(X), fp32.predict(X), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", RETRIEVAL)
def test_retrieval_uses_training_rows_only(name):
    """Inductive: the model is not transductive, and predicting test rows one at a time gives what predicting
    them together gives (no test row is a neighbour of another)."""
    assert not spec(name).is_transductive(spec(name).default_params)
    assert "TRAINING rows" in spec(name).description
    dataset, split = concrete()
    model = fitted_on_concrete(name)
    X = dataset.X.iloc[split.test[:12]]
    together = model.predict(X)
    alone = np.concatenate([model.predict(X.iloc[[i]]) for i in range(len(X))])
    np.testing.assert_allclose(alone, together, rtol=1e-4, atol=1e-4)


def test_tabr_names_the_faiss_build_it_needs_on_a_gpu():
    """pytabkit's TabR on CUDA uses faiss's GPU index; with the extra's faiss-cpu a CUDA fit is refused with the
    fix (found on an H200: AttributeError: module 'faiss' has no attribute 'GpuIndexFlatConfig')."""
    registered_spec("tabr")
    import faiss

    from tabbench_plugins.tabr import faiss_gpu_problem

    if hasattr(faiss, "GpuIndexFlatConfig"):
        assert faiss_gpu_problem() is None
    else:
        assert "faiss-gpu" in faiss_gpu_problem() and "device: cpu" in faiss_gpu_problem()


def test_tabr_auto_device_stays_on_the_cpu_where_faiss_cannot_search_on_the_gpu(monkeypatch):
    """With the extra's faiss-cpu, ``device: auto`` on a GPU machine runs TabR on the CPU (and its job asks Ray
    for no GPU), where it used to resolve to CUDA and be refused; every other model takes the GPU. The
    harness's resolution is given the GPU as an argument; the estimator's own (outside the harness) reads the
    machine, so a CUDA device is simulated there, the one thing this CPU machine cannot provide."""
    registered_spec("tabr")
    import faiss

    from tabbench_plugins import devices, tabr

    if hasattr(faiss, "GpuIndexFlatConfig"):
        pytest.skip("this faiss searches on the GPU: auto may pick CUDA")
    params = spec("tabr").resolve({"device": "auto"}, gpu_available=True)
    assert params["device"] == "cpu" and spec("tabr").resources(params)["num_gpus"] == 0
    assert spec("mlp").resolve({"device": "auto"}, gpu_available=True)["device"] == "cuda"
    for module in (devices, tabr):
        monkeypatch.setattr(module, "cuda_available", lambda: True)
    estimator = spec("tabr").build(concrete()[0].meta, 0, {"device": "auto"})
    assert estimator.resolve_device("auto") == "cpu"
    with pytest.raises(ValueError, match="faiss-gpu"):
        estimator.resolve_device("cuda")


@pytest.mark.parametrize("name, model", [("tabm", "TabM"), ("modernnca", "ModernNCA")])
def test_early_stopping_without_validation_rows_is_a_clear_error(name, model):
    """Our own training loops stop on the validation split: without one, or with none of its rows scorable,
    the error names the model and the dataset before any training."""
    dataset, split = concrete()
    X, y = dataset.X.iloc[split.train], dataset.y[split.train]
    estimator = spec(name).build(dataset.meta, 0, {**quick_params(name), "device": "cpu"})
    with pytest.raises(ValueError, match=f"{model} on concrete: no validation rows"):
        estimator.fit(X, y, X.iloc[:0], y[:0])


def test_listing_models_imports_none_of_their_libraries():
    code = ("import sys; from tabbench.plugins import load_models; m = load_models(); "
            f"assert set({MODERN!r}) <= set(m), sorted(m); "
            f"heavy = {LIBRARIES!r} & set(sys.modules); assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
