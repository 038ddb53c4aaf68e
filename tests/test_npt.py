"""The NPT plugin (plugins/tabbench_plugins/npt/: estimator, model, optimiser, training): properties the paper relies on, on real data.

Runs on the CPU with one torch thread (two threads collapse when the two cores are shared) and small
models, so the file takes a few minutes; the budgets are stated where a test trains.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import SHARED, need

torch = need("torch")

from sklearn.metrics import roc_auc_score  # noqa: E402

from tabbench.data.cache import DataPaths  # noqa: E402
from tabbench.data.dataset import DatasetConfig, SplitConfig, load_dataset  # noqa: E402
from tabbench.data.sources.sklearn import Sklearn  # noqa: E402
from tabbench.data.splits import make_splits  # noqa: E402
from tabbench.estimator import JobContext  # noqa: E402
from tabbench.params import defaults  # noqa: E402
from tabbench.plugins import load_models  # noqa: E402
from tabbench_plugins.npt import NPT  # noqa: E402
from tabbench_plugins.npt import model as nm  # noqa: E402
from tabbench_plugins.npt import optimiser as no  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
POKER = SHARED / "uci" / "poker" / "poker-hand-training-true.data"
SMALL = {"e": 16, "n_layers": 2, "n_heads": 4}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def breast_cancer(tmp_path_factory):
    split_cfg = SplitConfig("kfold", k=10, val_fraction=2 / 9)
    ds = load_dataset(DatasetConfig("bc", Sklearn(id="breast_cancer"), split=split_cfg),
                      DataPaths.from_env(cache=tmp_path_factory.mktemp("cache")))
    return ds, make_splits(ds, split_cfg)[0]


@pytest.fixture(scope="module")
def bc_model(breast_cancer):
    """The reduced Breast Cancer run: whole table, e=16, 2 layers, 4 heads, 150 steps (paper: e=32,
    8 layers, 8 heads, 2000 steps, lr 5e-4), everything else at the plugin's defaults."""
    ds, sp = breast_cancer
    model = NPT(ds.meta, 0, **SMALL, steps=150, device="cpu")
    return model.fit(ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val])


def bc_tensors(n=120):
    """Real rows: the first n rows of Breast Cancer, standardised, with the class as the last column."""
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    X = (X[:n] - X.mean(0)) / X.std(0)
    x = torch.tensor(np.c_[X, y[:n]], dtype=torch.float32)
    return x, (0,) * X.shape[1] + (2,)


# --- registration ---------------------------------------------------------------------------------


def test_registered_with_every_param_and_listing_imports_no_torch():
    spec = load_models()["npt"].spec
    assert spec.params is NPT.Params and dict(spec.default_params) == defaults(NPT.Params)
    assert spec.resources({**spec.default_params, "device": "cuda"})["num_gpus"] == 1
    assert spec.resources({**spec.default_params, "device": "cpu"})["num_gpus"] == 0
    code = "import sys; from tabbench.plugins import load_models; load_models(); assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)



def test_recorded_jobs_keep_their_keys_when_params_are_added():
    """Params added later (``added_as``: lr_schedule, warmup_fraction, ...) are left out of a job's key at the
    value that reproduces the earlier code, so the published records' jobs are still found done and a
    killed run resumes from its checkpoint folder (named by the key; the checkpoint's fingerprint holds
    the same params). Checked on every committed npt record made by the code just before them."""
    import json

    from tabbench.run.jobs import job_key
    from tabbench_plugins.npt import SPEC

    before = set(SPEC.default_params) - set(SPEC.added_params)
    checked = 0
    for path in sorted(REPO.glob("results/*/records/records.jsonl")):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if r.get("model") != "npt" or set(r["params"]) != before:
                continue
            params = SPEC.key_params({**SPEC.default_params, **r["params"]})
            assert not set(SPEC.added_params) & set(params)
            key = job_key(r["method"], r["model"], params, r["dataset_fingerprint"], r["split_fingerprint"],
                          r["fold"], r["repeat"], r["seed"])
            assert key == r["key"], (path, r["method"], r["dataset"], r["fold"])
            checked += 1
    assert checked >= 10  # the paper-budget runs of results/uci-small-npt-paper among them
    # a value other than the earlier behaviour's is part of the key
    assert SPEC.key_params({**SPEC.default_params, "lr_schedule": "cosine_cyclic"})["lr_schedule"] == "cosine_cyclic"


def test_unknown_param_is_rejected(breast_cancer):
    ds, sp = breast_cancer
    with pytest.raises(TypeError, match=r"unknown params \['embedding'\]"):
        NPT(ds.meta, 0, embedding=8)


# --- the model --------------------------------------------------------------------------------------


def test_paper_architecture_and_parameter_count():
    """8 layers ABD/ABA alternating, ABD on d*e, ABA on e, rFF 4h with GELU; the count matches the
    authors' 51.3M for Breast Cancer (31 columns, e=32) and 168.0M for Boston (14 columns, e=128)."""
    bc = nm.NPT(nm.NPTConfig(cards=(0,) * 30 + (2,), e=32))
    kinds = [type(b).__name__ for b in bc.blocks]
    assert kinds == ["ABD", "ABA"] * 4
    assert bc.blocks[0].rff[0].weight.shape == (4 * 31 * 32, 31 * 32)
    assert isinstance(bc.blocks[0].rff[1], torch.nn.GELU)
    assert bc.blocks[1].att.qkv.weight.shape == (3 * 32, 32)
    assert round(bc.n_params() / 1e6, 1) == 51.3
    boston = nm.NPT(nm.NPTConfig(cards=(0, 0, 0, 2, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0), e=128))
    assert round(boston.n_params() / 1e6, 1) == 168.0


def test_row_permutation_equivariance():
    torch.manual_seed(0)
    x, cards = bc_tensors()
    model = nm.NPT(nm.NPTConfig(cards=cards, **SMALL)).eval()
    m = torch.zeros_like(x, dtype=torch.bool)
    m[::3] = torch.rand(m[::3].shape) < 0.3  # some masked entries, targets included
    x = torch.where(m, 0.0, x)
    perm = torch.randperm(len(x))
    with torch.no_grad():
        out, out_p = model(x, m), model(x[perm], m[perm])
    for j in out:
        torch.testing.assert_close(out_p[j], out[j][perm], atol=1e-5, rtol=1e-4)
    # ... and the rows really interact: changing one row changes the others' predictions
    x2 = x.clone()
    x2[0, :5] += 3.0
    with torch.no_grad():
        assert not torch.allclose(model(x2, m)[30][1:], out[30][1:])


def test_estimator_predictions_are_row_permutation_equivariant(breast_cancer, bc_model):
    ds, sp = breast_cancer
    X_test = ds.X.iloc[sp.test]
    perm = np.random.default_rng(0).permutation(len(X_test))
    # the estimator runs under bf16 autocast on this CPU (amp=True): equal up to bf16 rounding
    np.testing.assert_allclose(bc_model.predict_proba(X_test.iloc[perm]), bc_model.predict_proba(X_test)[perm],
                               atol=3e-3)



@pytest.fixture(scope="module")
def diabetes(tmp_path_factory):
    """scikit-learn's diabetes regression set (442 rows x 10 features, targets 25-346), fold 0 of 5."""
    split_cfg = SplitConfig("kfold", k=5, val_fraction=0.2)
    ds = load_dataset(DatasetConfig("diabetes", Sklearn(id="diabetes"), split=split_cfg),
                      DataPaths.from_env(cache=tmp_path_factory.mktemp("cache")))
    return ds, make_splits(ds, split_cfg)[0]


@pytest.mark.parametrize("transductive", [False, True], ids=["inductive", "transductive"])
@pytest.mark.parametrize("amp", [False, True], ids=["fp32", "bf16"])
def test_predictions_through_fit_and_predict_are_row_permutation_equivariant(diabetes, transductive, amp):
    """predict(X[perm]) == predict(X)[perm] through the public API. Inductive: the rows to predict are
    appended to the table in another order: equal to float noise (fp32) or within bf16's rounding.
    Transductive: each row is found in the table by its content and read from the table's own outputs,
    so equal exactly, in any order, and for any subset of the rows. (Inductively a subset is another
    input: the appended rows attend to each other, so its predictions may differ.)"""
    ds, sp = diabetes
    X_test = ds.X.iloc[sp.test]
    model = NPT(ds.meta, 0, **SMALL, steps=20, eval_every=5, amp=amp, transductive=transductive, device="cpu")
    model.fit(ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val],
              **({"X_unlabelled": X_test} if transductive else {}))
    if amp and not model.info_["amp"]:
        pytest.skip("this CPU has no bf16 matrix instructions: amp falls back to fp32")
    perm = np.random.default_rng(0).permutation(len(X_test))
    base = model.predict(X_test)
    permuted = model.predict(X_test.iloc[perm])
    gap = np.abs(permuted - base[perm]).max()
    print(f"{'transductive' if transductive else 'inductive'} {'bf16' if amp else 'fp32'}: max |f(PX) - P f(X)| "
          f"= {gap:.3g} (targets' std {np.std(ds.y):.0f})")
    if transductive:
        np.testing.assert_array_equal(permuted, base[perm])
        half = perm[: len(perm) // 2]
        np.testing.assert_array_equal(model.predict(X_test.iloc[half]), base[half])
    elif not amp:  # float noise: measured 1.3e-05 (targets of std 77, values about 150)
        np.testing.assert_allclose(permuted, base[perm], rtol=0, atol=1e-6 * np.std(ds.y))
    else:  # within bf16's rounding, 2^-8 of the value (bf16 keeps 8 significant bits): measured 0.15
        np.testing.assert_allclose(permuted, base[perm], rtol=2**-8, atol=0)
    assert np.std(base) > 1.0  # the predictions differ between rows: the test is not comparing constants


def test_transductive_predict_of_rows_the_table_lacks_appends_them_and_says_so(diabetes, seen):
    """Rows fit was not given (here: two training rows, whose labels the table holds) are predicted as
    new rows appended to the table, with a warning; the table's own rows still come from the table."""
    ds, sp = diabetes
    X_test, X_train = ds.X.iloc[sp.test], ds.X.iloc[sp.train]
    model = NPT(ds.meta, 0, **SMALL, steps=4, eval_every=2, device="cpu", transductive=True)
    model.fit(X_train, ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val], X_unlabelled=X_test)
    base = model.predict(X_test)
    mixed = pd.concat([X_test.iloc[:5], X_train.iloc[:2], X_test.iloc[:5]])  # duplicates too
    seen.clear()
    with pytest.warns(UserWarning, match=r"2 of the 12 rows to predict are not among the table's unlabelled rows"):
        out = model.predict(mixed)
    np.testing.assert_array_equal(out[:5], base[:5])
    np.testing.assert_array_equal(out[7:], base[:5])
    n_table = len(sp.train) + len(sp.val) + len(sp.test)
    assert [len(x) for _, x, _ in seen] == [n_table, n_table + 2]  # the table; the table + the 2 new rows
    assert seen[1][2][n_table:, -1].all()  # the new rows' targets are masked though the table has them


@pytest.mark.real_data(POKER)
def test_the_heads_grouped_by_width_score_every_entry_as_one_head_a_column_does():
    """Over every column (training) the heads of one output width run as one product, and their losses are put
    back in table order; a prediction of some columns runs each column's own head. Both give the same per-entry
    losses and gradients, on real Poker Hand rows (categorical columns of 4 and 13 classes alternating, so the
    groups are out of table order) and on Breast Cancer's (numeric, then the class)."""
    raw = torch.tensor(np.loadtxt(POKER, delimiter=",", max_rows=64), dtype=torch.float32)
    raw[:, :10] -= 1  # suits 1-4, ranks 1-13 -> class indices
    for x, cards in ((raw, (4, 13) * 5 + (10,)), bc_tensors(64)):
        torch.manual_seed(0)
        model = nm.NPT(nm.NPTConfig(cards=cards, dropout=0.0, att_dropout=0.0, **SMALL))
        m = torch.zeros_like(x, dtype=torch.bool)
        m[::3] = True  # some entries masked, every column among them
        losses, grads = [], []
        for columns in (None, range(len(cards))):
            model.zero_grad()
            loss = nm.entry_losses(model(torch.where(m, 0.0, x), m, columns=columns), x, cards)
            (loss * m).sum().backward()
            losses.append(loss.detach())
            grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
        torch.testing.assert_close(losses[0], losses[1], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(grads[0], grads[1], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("flags", [{}, {"ln_kv": True, "temperature": "head", "residual": "identity"}])
def test_fused_and_explicit_attention_agree(flags):
    torch.manual_seed(0)
    x, cards = bc_tensors()
    m = torch.zeros_like(x, dtype=torch.bool)
    m[:, -1] = True
    x = torch.where(m, 0.0, x)
    cfg = nm.NPTConfig(cards=cards, dropout=0.0, att_dropout=0.0, **SMALL, **flags)
    fused = nm.NPT(cfg)
    explicit = nm.NPT(replace(cfg, attention="explicit"))
    explicit.load_state_dict(fused.state_dict())
    outs, grads = [], []
    for model in (fused, explicit):
        out = model(x, m)
        loss = nm.masked_mean(nm.entry_losses(out, bc_tensors()[0], cards), torch.ones_like(m))
        loss.backward()
        outs.append(torch.stack([out[j] for j in range(len(cards) - 1)], 1))
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    torch.testing.assert_close(outs[0], outs[1], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(grads[0], grads[1], atol=1e-5, rtol=1e-3)
    # attention maps come only from the explicit path: (rows x rows) for ABD, (cols x cols) for ABA
    _, maps = fused.eval()(x, m, return_attention=True)
    assert maps[0].shape == (1, 4, len(x), len(x)) and maps[1].shape == (len(x), 4, len(cards), len(cards))
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(1, 4, len(x)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_cpu_dropout_zeroes_p_of_the_entries_and_scales_the_rest(dtype):
    torch.manual_seed(0)
    x = (torch.rand(400, 1000) + 0.5).to(dtype).requires_grad_()
    y = nm.dropout(x, 0.1, True)
    y.float().sum().backward()
    dropped = y == 0
    # 400,000 draws: the zero share is within 5 standard errors (0.0024) of p
    assert abs(dropped.float().mean().item() - 0.1) < 5 * (0.1 * 0.9 / x.numel()) ** 0.5
    kept = ~dropped
    # scaled by 1 / (1 - p), p kept to 1 / 65,536 (fp32, fp64) or to the half types' rounding
    rtol = 1e-4 if dtype in (torch.float32, torch.float64) else 1e-2
    torch.testing.assert_close(y[kept].float(), x.detach()[kept].float() / 0.9, rtol=rtol, atol=0)
    # the gradient is the same mask: 1 / (1 - p) where kept, 0 where dropped
    assert (x.grad[dropped] == 0).all()
    torch.testing.assert_close(x.grad[kept].float(), torch.full((int(kept.sum()),), 1 / 0.9), rtol=1e-2, atol=0)
    assert nm.dropout(x, 0.1, False) is x and nm.dropout(x, 0.0, True) is x


def test_activation_checkpointing_gives_the_same_gradients():
    torch.manual_seed(0)
    x, cards = bc_tensors(60)
    m = torch.zeros_like(x, dtype=torch.bool)
    m[:, -1] = True
    grads = []
    for ckpt in (False, True):
        torch.manual_seed(1)
        model = nm.NPT(nm.NPTConfig(cards=cards, dropout=0.0, att_dropout=0.0, checkpointing=ckpt, **SMALL))
        model(torch.where(m, 0.0, x), m, columns=[30])[30].logsumexp(-1).sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    torch.testing.assert_close(grads[0], grads[1])


# --- masking ------------------------------------------------------------------------------------------


def test_masking_rates_match_p_feature_and_p_target():
    x1, cards = bc_tensors(569)
    x = x1.repeat(20, 1)  # 11,380 real rows x 31 columns
    n, d = x.shape
    missing = torch.zeros(n, d, dtype=torch.bool)
    missing[::7, 2] = True  # missing entries: always masked, never scored
    p = torch.tensor([0.15] * (d - 1) + [0.5])
    g = torch.Generator().manual_seed(0)
    c = nm.corrupt(torch.where(missing, 0.0, x), missing, ~missing, p, torch.tensor(cards, dtype=torch.float32), g)

    def close(rate, expected, count):  # within 5 standard errors
        assert abs(rate - expected) < 5 * (expected * (1 - expected) / count) ** 0.5, (rate, expected)

    feat_cand = (~missing[:, :-1]).sum().item()
    close(c.scored[:, :-1].sum().item() / feat_cand, 0.15, feat_cand)
    close(c.scored[:, -1].float().mean().item(), 0.5, n)
    # BERT-style: ~10% of the selected entries get a random value and no mask bit
    randomised = c.scored & ~c.m
    close(randomised.sum().item() / c.scored.sum().item(), 0.1, c.scored.sum().item())
    assert (c.x[randomised[:, -1], -1] >= 0).all() and (c.x[:, -1] <= 1).all()  # random classes are classes
    assert (c.x[c.m] == 0).all() and c.m[missing].all() and not c.scored[missing].any()
    unselected = ~c.scored & ~missing
    assert torch.equal(c.x[unselected], x[unselected]) and not c.m[unselected].any()
    # p = 1 (the paper's p_target for small data) masks every target and randomises none
    c1 = nm.corrupt(x, torch.zeros_like(missing), ~missing, torch.tensor([0.0] * (d - 1) + [1.0]),
                    torch.tensor(cards, dtype=torch.float32), g)
    assert c1.m[:, -1].all() and c1.scored[:, -1].all() and (c1.x[:, -1] == 0).all()
    assert not c1.m[:, :-1].any()


@pytest.fixture
def seen(monkeypatch):
    """Every (training, x, m) the model's forward receives while the test runs."""
    calls = []
    forward = nm.NPT.forward

    def spy(self, x, m, *args, **kwargs):
        calls.append((self.training, x.detach().clone(), m.clone()))
        return forward(self, x, m, *args, **kwargs)

    monkeypatch.setattr(nm.NPT, "forward", spy)
    return calls


def test_validation_and_test_targets_are_never_visible(breast_cancer, seen):
    """Record every input the model gets during fit and predict: the rows being evaluated always have
    their target masked (mask bit set, value zeroed); training batches hold training rows only."""
    ds, sp = breast_cancer
    n_tr, n_val = len(sp.train), len(sp.val)
    model = NPT(ds.meta, 0, **SMALL, steps=6, eval_every=3, p_target=0.5, device="cpu")
    model.fit(ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val])
    train_inputs = [(x, m) for training, x, m in seen if training]
    eval_inputs = [(x, m) for training, x, m in seen if not training]
    assert len(train_inputs) == 6 and len(eval_inputs) == 2
    for x, m in train_inputs:
        assert len(x) == n_tr
    for x, m in eval_inputs:  # [training rows as context | validation rows]
        assert len(x) == n_tr + n_val
        assert m[n_tr:, -1].all() and (x[n_tr:, -1] == 0).all()
        assert not m[:n_tr, -1].any()  # p_target < 1: the training labels are the context
    seen.clear()
    model.predict_proba(ds.X.iloc[sp.test])
    (_, x, m), = seen
    assert len(x) == n_tr + len(sp.test) and m[n_tr:, -1].all() and (x[n_tr:, -1] == 0).all()
    # p_target = 1: the model never saw a label as input during training, nor does it at evaluation
    model.params["p_target"] = 1.0
    seen.clear()
    model.fit(ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val])
    assert all(m[:, -1].all() for _, _, m in seen)


def test_transductive_fit_sees_test_features_never_test_targets(breast_cancer, seen):
    """Transductive: every training batch is [training rows | validation rows | test rows], the
    unlabelled rows' targets zeroed with the mask bit set and never scored; predicting the test rows
    reads them from that table (no duplicate rows), and numeric columns are standardised over all rows."""
    ds, sp = breast_cancer
    n_tr, n_val, n_te = len(sp.train), len(sp.val), len(sp.test)
    model = NPT(ds.meta, 0, **SMALL, steps=4, eval_every=2, p_target=0.5, device="cpu", transductive=True)
    X_test = ds.X.iloc[sp.test]
    model.fit(ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val], X_unlabelled=X_test)
    for training, x, m in seen:
        assert len(x) == n_tr + n_val + n_te
        assert m[n_tr:, -1].all() and (x[n_tr:, -1] == 0).all()
    assert not model.table_.m[:n_tr, -1].any()
    col = ds.meta.columns[0].name
    all_rows = np.concatenate([ds.X[col].iloc[idx] for idx in (sp.train, sp.val, sp.test)])
    assert model.table_.encoder.mean[0] == pytest.approx(all_rows.mean())
    seen.clear()
    model.predict_proba(X_test)
    (_, x, m), = seen
    assert len(x) == n_tr + n_val + n_te  # the test rows are the table's, not appended again


@pytest.mark.slow
def test_transductive_breast_cancer_fold0_auroc(breast_cancer):
    ds, sp = breast_cancer
    model = NPT(ds.meta, 0, **SMALL, steps=150, device="cpu", transductive=True)
    X_test = ds.X.iloc[sp.test]
    model.fit(ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val], X_unlabelled=X_test)
    auroc = roc_auc_score(ds.y[sp.test], model.predict_proba(X_test)[:, 1])
    print(f"npt transductive breast cancer fold 0 AUROC {auroc:.4f}")
    assert auroc >= 0.98


_RESUMABLE_FIT = """
import sys, torch
from pathlib import Path
torch.set_num_threads(1)
from tabbench.data.cache import DataPaths
from tabbench.estimator import JobContext
from tabbench.data.dataset import DatasetConfig, SplitConfig, load_dataset
from tabbench.data.sources.sklearn import Sklearn
from tabbench.data.splits import make_splits
from tabbench_plugins.npt import NPT
cfg = SplitConfig("kfold", k=10, val_fraction=2 / 9)
ds = load_dataset(DatasetConfig("bc", Sklearn(id="breast_cancer"), split=cfg), DataPaths.from_env(cache=sys.argv[2]))
sp = make_splits(ds, cfg)[0]
model = NPT(ds.meta, 0, **{params})
model.fit(ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val],
          context=JobContext(checkpoint_dir=Path(sys.argv[1])))
"""


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device"))])
def test_a_killed_fit_resumes_from_its_checkpoint_to_the_same_result(breast_cancer, tmp_path, device):
    """A fit killed (SIGKILL) mid-training continues from its last checkpoint when run again, and ends
    with exactly the weights, predictions and budget snapshots of a run that was never interrupted (on CUDA:
    the checkpoint is loaded onto the GPU, and the generators' states go back to the CPU tensors torch wants)."""
    import signal
    import time

    from tabbench_plugins.npt.checkpoints import CHECKPOINT_FILE

    ds, sp = breast_cancer
    params = dict(SMALL, steps=24, eval_every=3, dropout=0.1, budgets=[8, 16], checkpoint_minutes=0, device=device)
    fit_args = (ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val])
    whole = NPT(ds.meta, 0, **params).fit(*fit_args)

    folder = tmp_path / "ckpt"
    script = tmp_path / "fit.py"
    script.write_text(_RESUMABLE_FIT.replace("{params}", repr(params)))
    proc = subprocess.Popen([sys.executable, str(script), str(folder), str(tmp_path / "cache")])
    deadline = time.time() + 600
    while not (folder / CHECKPOINT_FILE).exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (folder / CHECKPOINT_FILE).exists(), "the fit wrote no checkpoint before it was killed"

    resumed = NPT(ds.meta, 0, **params)
    resumed.fit(*fit_args, context=JobContext(checkpoint_dir=folder))
    assert 1 <= resumed.info_["resumed_from_step"] < 24
    X_test = ds.X.iloc[sp.test]
    assert_same_fit(whole, resumed, X_test, budgets=[8, 16])

    # the same job with other run params (threads, checkpoint interval) continues the same checkpoint
    again = NPT(ds.meta, 0, **{**params, "cpus": 2, "checkpoint_minutes": 30})
    again.fit(*fit_args, context=JobContext(checkpoint_dir=folder))
    assert again.info_["resumed_from_step"] is not None and again.info_["checkpoint_ignored"] is None

    # a resumed job with budget points: its best weights were validated before this attempt, and a point passed
    # now gets them, dated the attempt's start (once it got no state here, and a KeyError where the attempt had
    # validated without a better loss: attrition fold 2, resumed after a kill)
    pointed = NPT(ds.meta, 0, **params)
    pointed.fit(*fit_args, context=JobContext(checkpoint_dir=folder, budget_points_s=(1e-9,)))
    assert pointed.info_["resumed_from_step"] is not None and pointed.time_points_ == {1e-9: 0.0}
    np.testing.assert_array_equal(pointed.at_time(1e-9).predict_proba(X_test), whole.predict_proba(X_test))

    # a job resumed by the harness records the whole fit's time and the whole job's CPU time: the checkpoint's
    # part plus its own (the killed attempt's CPU seconds, to its checkpoint, kept in the checkpoint)
    from tabbench.run.execute import execute
    from tabbench.run.jobs import Job

    assert whole.resumed_fit_seconds_ == whole.resumed_cpu_seconds_ == 0.0
    saved = torch.load(folder / CHECKPOINT_FILE, weights_only=False)["run"]
    earlier, earlier_cpu = saved["seconds"], saved["cpu_seconds"]
    assert earlier > 0 and resumed.resumed_fit_seconds_ > 0 and earlier_cpu > 0
    job = Job("k", "s", "npt", "npt", params, None, "bc", "binary", 0, 0, 0, ds.fingerprint, sp.fingerprint)
    record = execute(job, NPT, ds.meta, ds.X, ds.y, sp, checkpoint_dir=folder)
    assert record["status"] == "ok", record.get("traceback")
    assert record["fit_seconds_before_resume"] == earlier
    assert record["fit_seconds"] > earlier
    assert record["wall_seconds"] > record["fit_seconds"]  # the whole job's too (tabbench plan's basis)
    assert record["cpu_seconds_before_resume"] == earlier_cpu and record["cpu_seconds"] > earlier_cpu

    # a checkpoint of another run (here: another learning rate) is never loaded, and the fit says why
    other = NPT(ds.meta, 0, **{**params, "lr": 5e-4})
    with pytest.warns(UserWarning, match="not resumed"):
        other.fit(*fit_args, context=JobContext(checkpoint_dir=folder))
    assert other.info_["resumed_from_step"] is None
    assert "made by another run" in other.info_["checkpoint_ignored"]
    assert str(folder) not in other.info_["checkpoint_ignored"]  # a record names no folder of this machine


def assert_same_fit(whole, resumed, X_test, budgets):
    """A fit resumed from its checkpoint ends bit-equal to the fit that ran whole: its weights, its predictions
    and those at each budget point, its best step; and it did not ignore the checkpoint."""
    for a, b in zip(whole.model_.parameters(), resumed.model_.parameters()):
        assert torch.equal(a, b)
    np.testing.assert_array_equal(whole.predict_proba(X_test), resumed.predict_proba(X_test))
    assert whole.budgets_ == resumed.budgets_ == budgets
    for b in budgets:
        np.testing.assert_array_equal(whole.at_budget(b).predict_proba(X_test),
                                      resumed.at_budget(b).predict_proba(X_test))
    assert whole.info_["best_step"] == resumed.info_["best_step"]
    assert resumed.info_["checkpoint_ignored"] is None


def test_budget_snapshots_are_the_best_weights_up_to_each_budget(breast_cancer):
    """The weights kept at budget b are the ones a run stopped at b would use: the best validation
    loss among the evaluations up to step b (here: the same run's best_step, capped at b)."""
    ds, sp = breast_cancer
    fit_args = (ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val])
    model = NPT(ds.meta, 0, **SMALL, steps=30, eval_every=2, budgets=[6, 30, 50], device="cpu").fit(*fit_args)
    assert model.budgets_ == [6]  # only budgets below the run's steps
    short = NPT(ds.meta, 0, **SMALL, steps=30, eval_every=2, device="cpu")
    # a run of the same schedule observed only up to step 6 picks its best among steps 2, 4, 6
    assert model.at_budget(6).info_["best_step"] in (2, 4, 6)
    assert short._param("budgets") is None


def test_class_balanced_minibatches_keep_class_proportions(breast_cancer):
    ds, sp = breast_cancer
    y = ds.y[sp.train]
    model = NPT(ds.meta, 0, **SMALL, class_balance=True, batch_size=50, steps=0, device="cpu")
    model.fit(ds.X.iloc[sp.train], y)
    batches = model.table_.epoch(torch.Generator().manual_seed(0))
    assert len(batches) == 8 and sorted(torch.cat(batches).tolist()) == list(range(len(y)))
    share = y.mean()
    for chunk in batches:  # 8 batches of ~50 rows: each within one row of the share
        assert abs(y[chunk.numpy()].sum() - share * len(chunk)) <= 1.0


# --- the optimiser ---------------------------------------------------------------------------------


def test_lamb_matches_the_cybertronai_rule_and_lookahead_pulls_back():
    torch.manual_seed(0)
    w = [torch.randn(5, 3, requires_grad=True), torch.zeros(4, requires_grad=True)]  # a zero-norm weight
    ref = [p.detach().clone() for p in w]
    m, v = [torch.zeros_like(p) for p in ref], [torch.zeros_like(p) for p in ref]
    opt = no.Lamb(w, lr=0.1, eps=1e-6)
    for _ in range(3):
        grads = [torch.randn_like(p) for p in ref]
        for p, g in zip(w, grads):
            p.grad = g.clone()
        opt.step()
        for i, g in enumerate(grads):  # the rule, one parameter at a time, no bias correction
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g * g
            step = m[i] / (v[i].sqrt() + 1e-6)
            wn, sn = ref[i].norm().clamp(0, 10), step.norm()
            ratio = wn / sn if wn > 0 and sn > 0 else 1.0
            ref[i] = ref[i] - 0.1 * ratio * step
    for p, r in zip(w, ref):
        torch.testing.assert_close(p.detach(), r)

    # Lookahead, k = 2: the fast weights move 0 -> 1 -> 2, then are pulled halfway back to the slow
    # weights (0): 1; then 1 -> 2 -> 3, pulled halfway back to the slow weights (now 1): 2
    p = torch.zeros(3, requires_grad=True)
    la = no.Lookahead(torch.optim.SGD([p], lr=1.0), alpha=0.5, k=2)
    for expected in (1.0, 1.0, 2.0, 2.0):
        p.grad = -torch.ones(3)
        la.step()
        assert torch.allclose(p.detach(), torch.full((3,), expected)), (p, expected)


def test_fused_lamb_equals_the_multi_tensor_kernels():
    """The compiled one-kernel-per-parameter LAMB (gradient clamp fused in) makes the same updates as
    the multi-tensor path, to float rounding (the norms are summed in another order)."""
    if no.fused_lamb() is None:
        pytest.skip("torch.compile cannot build kernels on this machine (no C++ compiler)")
    torch.manual_seed(0)
    shapes = [(33, 7), (5,), (1,), (64, 64)]
    start = [torch.randn(s) for s in shapes]
    runs = []
    for fused in (False, True):
        w = [p.clone().requires_grad_() for p in start]
        opt = no.Lamb(w, lr=0.05, grad_clamp=0.5, fused=fused)
        assert opt.fused == fused
        g = torch.Generator().manual_seed(1)
        for _ in range(4):
            for p in w:
                p.grad = torch.randn(p.shape, generator=g)
            opt.step()
        runs.append([p.detach() for p in w])
    for eager, fused in zip(*runs):
        torch.testing.assert_close(fused, eager, rtol=1e-5, atol=1e-6)


def test_the_compiled_lamb_is_chosen_on_the_cpu_only():
    """``fused_optimizer: auto``: the compiled per-parameter LAMB for large models on the CPU outside a time budget;
    on CUDA the
    multi-tensor kernels, since one compiled call per parameter is bound by its dispatch there (an H100:
    165 ms a Boston e 128 step against 31 ms, benchmarks/README.md). An explicit setting is kept."""
    from tabbench_plugins.npt.estimator import FUSED_MIN_PARAMS, fused_optimizer

    large = 168_000_000
    assert fused_optimizer("auto", "cpu", large) and not fused_optimizer("auto", "cpu", FUSED_MIN_PARAMS - 1)
    assert not fused_optimizer("auto", "cuda", large)
    assert fused_optimizer(True, "cuda", large) and not fused_optimizer(False, "cpu", large)
    assert not fused_optimizer("auto", "cpu", large, budgeted=True)  # the compilation would come out of the budget
    assert fused_optimizer(True, "cpu", large, budgeted=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_fit_uses_the_multi_tensor_lamb(breast_cancer):
    ds, sp = breast_cancer
    model = NPT(ds.meta, 0, e=32, n_layers=8, steps=2, budgets=[], device="cuda")  # 51 M parameters
    model.fit(ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val])
    assert model.device_.type == "cuda" and model.opt_.base.fused is False


def test_cuda_graphs_are_chosen_on_cuda_over_whole_tables_and_refused_where_they_cannot_run(breast_cancer):
    from tabbench_plugins.npt.training import use_cuda_graph

    assert use_cuda_graph("auto", "cuda", 1) and use_cuda_graph(True, "cuda", 1)
    assert not use_cuda_graph("auto", "cuda", 4) and not use_cuda_graph("auto", "cpu", 1)
    assert not use_cuda_graph(False, "cuda", 1)
    ds, sp = breast_cancer
    with pytest.raises(ValueError, match="cuda_graph: true needs device cuda.*device cpu"):
        NPT(ds.meta, 0, **SMALL, steps=2, budgets=[], device="cpu", cuda_graph=True).fit(
            ds.X.iloc[sp.train], ds.y[sp.train])
    with pytest.raises(ValueError, match="cuda_graph must be 'auto', true or false, got 'yes'"):
        NPT(ds.meta, 0, **SMALL, steps=2, device="cpu", cuda_graph="yes").fit(ds.X.iloc[sp.train], ds.y[sp.train])
    model = NPT(ds.meta, 0, **SMALL, steps=2, budgets=[], device="cpu").fit(ds.X.iloc[sp.train], ds.y[sp.train])
    assert model.info_["cuda_graph"] == "off"


def test_observe_keeps_the_best_weights_in_the_same_tensors_as_a_replayed_graph_needs():
    """A CUDA graph replays the validation's bookkeeping on the tensors it was captured with: ``observe``
    must update the best loss, step and weights in place, with the step given as an int or a tensor."""
    from tabbench_plugins.npt.checkpoints import Run

    model = torch.nn.Linear(3, 1)
    run = Run(model, None, None, steps=10)
    where = [run.best_loss.data_ptr(), run.best_step.data_ptr()] + [b.data_ptr() for b in run.best]
    with torch.no_grad():
        run.observe(torch.tensor(0.5), torch.tensor(3))
        kept = [p.detach().clone() for p in model.parameters()]
        model.weight.add_(1.0)
        run.observe(torch.tensor(0.7), 6)  # worse: nothing kept
        assert [torch.equal(b, k) for b, k in zip(run.best, kept)] == [True, True]
        assert (float(run.best_loss), int(run.best_step)) == (0.5, 3)
        run.observe(torch.tensor(0.2), torch.tensor(9))  # better: these weights
    assert [torch.equal(b, p) for b, p in zip(run.best, model.parameters())] == [True, True]
    assert (float(run.best_loss), int(run.best_step)) == pytest.approx((0.2, 9))
    assert [run.best_loss.data_ptr(), run.best_step.data_ptr()] + [b.data_ptr() for b in run.best] == where


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_replayed_captures_once_then_replays_with_inputs_refreshed_in_place():
    from tabbench_plugins.npt.graphs import Replayed

    total, increment = torch.zeros(4, device="cuda"), torch.zeros((), device="cuda")
    replayed = Replayed(lambda: total.add_(increment), enabled=True, warmup=1)
    for k in range(1, 6):  # 1 eager, 1 captured (and run), 3 replayed
        increment.fill_(k)
        out = replayed()
    assert replayed.status == "replayed" and out is total
    assert total.tolist() == [15.0] * 4


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_step_that_cannot_be_captured_runs_eagerly_and_says_why():
    from tabbench_plugins.npt.graphs import Replayed

    x = torch.zeros((), device="cuda")

    def fn():
        torch.Generator(device="cuda")  # a generator of its own: refused during capture
        return x.add_(torch.rand((), device="cuda") + 1).clone()

    replayed = Replayed(fn, enabled=True, warmup=1)
    with pytest.warns(RuntimeWarning, match="CUDA graph capture failed"):
        got = [float(replayed()) for _ in range(3)]
    assert got == sorted(got) and 3 < got[-1] < 6 and replayed.status.startswith("failed: ")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_capture_that_breaks_the_random_generator_stops_the_run_with_the_remedy():
    """A host read during capture invalidates it, and torch then leaves the device's default generator unusable
    for the process: Replayed says so (with cuda_graph: false as the remedy) instead of training on. In a
    process of its own, since the generator stays broken."""
    script = (
        "import torch, warnings\n"
        "from tabbench_plugins.npt.graphs import Replayed\n"
        "x = torch.zeros((), device='cuda')\n"
        "replayed = Replayed(lambda: float(x.add_(torch.rand((), device='cuda'))), enabled=True, warmup=1)\n"
        "warnings.simplefilter('ignore')\n"
        "try:\n"
        "    [replayed() for _ in range(3)]\n"
        "    print('eager:', replayed.status)\n"
        "except RuntimeError as exc:\n"
        "    print('stopped:', exc)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    # either torch recovered its generator (the run goes on eagerly) or the remedy is named
    assert out.stdout.startswith("eager: failed: ") or "run it with cuda_graph: false" in out.stdout, out.stdout


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_graphed_cuda_fit_replays_the_eager_fit(breast_cancer):
    """The whole-table step and the validation captured as CUDA graphs compute what the eager fit does:
    the same masks (the default generator's stream, replayed), the same kernels (deterministic: true)."""
    ds, sp = breast_cancer
    fits = {graph: NPT(ds.meta, 0, **SMALL, steps=40, budgets=[], device="cuda", cuda_graph=graph).fit(
        ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val]) for graph in (False, True)}
    assert fits[True].info_["cuda_graph"] == "replayed" and fits[False].info_["cuda_graph"] == "off"
    assert fits[True].info_["best_step"] == fits[False].info_["best_step"]
    graphed, eager = (fits[g].predict_proba(ds.X.iloc[sp.test]) for g in (True, False))
    np.testing.assert_allclose(graphed, eager, atol=1e-5)


class TensorsFromHostData:
    """Records the tensors made from Python data (``aten.lift_fresh``) while it is active: on a GPU each is a copy
    from the host, which a CUDA graph's capture refuses (the capture fails and the run goes on eagerly, several
    times slower), so the work a graph captures must make none. Seen on the CPU as well, where no graph is. A
    number (``m[:, t] = True``) is left out: its 0-d tensor is filled in on the device, not copied."""

    def __enter__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        made = self.made = []

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                if func is torch.ops.aten.lift_fresh.default and args[0].dim():
                    made.append(tuple(args[0].shape))
                return func(*args, **(kwargs or {}))

        self.mode = Mode()
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        self.mode.__exit__(*exc)


def test_the_work_a_cuda_graph_captures_makes_no_tensor_from_host_data(breast_cancer, monkeypatch):
    """What ``graphs.Replayed`` captures on a GPU (the whole-table step and the validation) makes no tensor from
    Python data, checked on the CPU: the validations of a fit through the estimator on Breast Cancer (a fit gives
    them to Replayed on every device; here each runs under the recorder), and a training step on real Poker Hand
    rows, whose categorical columns of 4 and 13 classes alternate (the heads' groups then are out of table order,
    and their losses are put back in it). Without dropout: the CPU's dropout mask comes from numpy (on a GPU the
    step calls ``F.dropout``)."""
    from tabbench_plugins.npt import graphs
    from tabbench_plugins.npt.training import TrainStep

    made = []

    def recorded(replayed):
        with TensorsFromHostData() as rec:
            out = replayed.fn()
        made.extend(rec.made)
        return out

    monkeypatch.setattr(graphs.Replayed, "__call__", recorded)
    ds, sp = breast_cancer
    NPT(ds.meta, 0, **SMALL, steps=4, eval_every=2, budgets=[], device="cpu").fit(
        ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val])
    assert made == []

    from tests.conftest import require_shared

    rows = torch.tensor(np.loadtxt(require_shared("uci/poker/poker-hand-training-true.data"), delimiter=",", max_rows=200), dtype=torch.float32)
    rows[:, :10] -= 1  # suits 1-4, ranks 1-13 -> class indices
    cards = (4, 13) * 5 + (10,)
    model = nm.NPT(nm.NPTConfig(cards=cards, dropout=0.0, att_dropout=0.0, **SMALL))
    opt = no.Lookahead(no.Lamb(model.parameters(), lr=1e-3))
    m = torch.zeros_like(rows, dtype=torch.bool)
    step = TrainStep(model, opt, rows, m, torch.tensor([0.15] * 10 + [1.0]), cards, torch.Generator())
    with TensorsFromHostData() as rec:
        loss = step._step(step.lr_t.fill_(1e-3), step.w_target_t.fill_(0.5), step.w_feature_t.fill_(0.5),
                          step.x, step.m, step.cand)
    assert rec.made == [] and torch.isfinite(loss)


def test_deterministic_algorithms_hold_for_a_cuda_fit_only_and_are_restored_after(monkeypatch):
    """``deterministic: true`` (the default): torch's deterministic algorithms and cuBLAS's fixed workspace
    while a CUDA fit runs, the caller's setting back afterwards, even after an error; on the CPU, or with
    ``deterministic: false``, nothing is touched. The flags are torch's own and need no GPU to set; that a
    CUDA fit then repeats bit for bit is test_conformance.py's same-seed check, run on a GPU."""
    from tabbench_plugins.torch_training import deterministic_algorithms

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    before = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(False)  # a library an earlier test ran (Lightning) may have left it on
    try:
        for device, enabled in (("cpu", True), ("cuda", False)):
            with deterministic_algorithms(device, enabled):
                assert not torch.are_deterministic_algorithms_enabled()
        assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
        with pytest.raises(RuntimeError, match="inside"), deterministic_algorithms("cuda", True):
            assert torch.are_deterministic_algorithms_enabled()
            assert not torch.is_deterministic_algorithms_warn_only_enabled()
            assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
            raise RuntimeError("inside")
        assert not torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True, warn_only=True)  # a caller's own setting survives
        with deterministic_algorithms("cuda", True):
            assert not torch.is_deterministic_algorithms_warn_only_enabled()
        assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])


def test_schedules():
    lr = [no.flat_then_anneal(s, 100, 0.5) for s in range(101)]
    assert lr[:50] == [1.0] * 50 and lr[100] == 0.0 and all(a >= b for a, b in zip(lr[50:], lr[51:]))
    assert no.flat_then_anneal(75, 100, 0.5) == pytest.approx(0.5)
    lam = [no.cosine_tradeoff(s, 100, 1.0) for s in range(101)]
    assert lam[0] == 1.0 and lam[50] == pytest.approx(0.5) and lam[100] == 0.0



def test_cosine_cyclic_schedule_values():
    """fairseq's cosine schedule as the authors configure it, 2,000 steps, lr 1e-3, warm-up fraction 0.2:
    W = 400 warm-up steps from 1e-7; cycle 0 = steps 400-1199 (2W), cycle 1 = 1200-2799 (twice as long),
    each cycle's peak and floor half the previous one's. The expected values are worked out by hand."""
    lr = lambda step: no.cosine_cyclic(step, 2000, 1e-3, 0.2)  # noqa: E731
    expected = {
        0: 1e-7,  # the warm-up's start
        200: 1e-7 + 200 * (1e-3 - 1e-7) / 400,  # half-way up: 5.0005e-4
        400: 1e-3,  # the first peak
        800: (1e-3 + 1e-7) / 2,  # half-way through cycle 0 (cos = 0)
        1200: 5e-4,  # cycle 1 starts at half the peak
        2000: (5e-4 + 5e-8) / 2,  # half-way through cycle 1 (800 of its 1,600 steps)
    }
    for step, value in expected.items():
        assert lr(step) == pytest.approx(value, rel=1e-9), step
    assert lr(1199) == pytest.approx(1e-7 + (1e-3 - 1e-7) / 2 * (1 + np.cos(np.pi * 799 / 800)), rel=1e-9)
    assert lr(1199) < 1e-6 < lr(1200)  # the end of cycle 0 is near its floor, then the restart
    warm = [lr(s) for s in range(401)]
    assert all(b > a for a, b in zip(warm, warm[1:]))  # rising through the warm-up
    cycle0 = [lr(s) for s in range(400, 1200)]
    assert all(b < a for a, b in zip(cycle0, cycle0[1:]))  # falling through a cycle


@pytest.mark.parametrize("schedule", ["flat_anneal", "cosine_cyclic"])
def test_fit_steps_with_the_learning_rate_of_its_schedule(breast_cancer, monkeypatch, schedule):
    ds, sp = breast_cancer
    used = []
    step = no.Lamb.step

    def spy(self, closure=None):
        used.append(self.param_groups[0]["lr"])
        return step(self, closure)

    monkeypatch.setattr(no.Lamb, "step", spy)
    NPT(ds.meta, 0, **SMALL, steps=10, lr=2e-3, lr_schedule=schedule, budgets=[], device="cpu").fit(
        ds.X.iloc[sp.train], ds.y[sp.train])
    if schedule == "cosine_cyclic":  # W = 2 steps: 1e-7, then the peak at step 2, cycle 0 over steps 2-5
        expected = [no.cosine_cyclic(s, 10, 2e-3, 0.2) for s in range(10)]
        assert used[0] == 1e-7 and used[2] == pytest.approx(2e-3) and used[6] == pytest.approx(1e-3)
    else:  # whole table: flat for half the steps
        expected = [2e-3 * no.flat_then_anneal(s, 10, 0.5) for s in range(10)]
        assert used[:5] == [2e-3] * 5
    assert used == expected


def test_label_masking_shows_about_half_the_training_labels_never_a_validation_or_test_label(breast_cancer, seen):
    """p_target 0.5 (the paper's "label mask 0.5" variant), transductive as in the authors' code: in each
    training step about half of the training labels are inputs (mask bit unset, the true value; a tenth of
    the masked ones get a random class and no mask bit, half of which is the true class: 0.5 + 0.025
    expected); at evaluation every training label is; the validation and test labels never are."""
    ds, sp = breast_cancer
    n_tr, n_val, n_te = len(sp.train), len(sp.val), len(sp.test)
    model = NPT(ds.meta, 0, **SMALL, steps=6, eval_every=3, p_target=0.5, device="cpu", transductive=True)
    X_test = ds.X.iloc[sp.test]
    model.fit(ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val], X_unlabelled=X_test)
    model.predict_proba(X_test)
    y_train = torch.tensor(ds.y[sp.train], dtype=torch.float32)
    train_inputs = [(x, m) for training, x, m in seen if training]
    eval_inputs = [(x, m) for training, x, m in seen if not training]
    assert len(train_inputs) == 6 and len(eval_inputs) == 3  # 2 validations, 1 prediction
    shares = []
    for x, m in train_inputs + eval_inputs:
        assert len(x) == n_tr + n_val + n_te  # [training | validation | test rows]
        assert m[n_tr:, -1].all() and (x[n_tr:, -1] == 0).all(), "a validation or test label is visible"
    for x, m in train_inputs:
        visible = ~m[:n_tr, -1] & (x[:n_tr, -1] == y_train)
        shares.append(visible.float().mean().item())
    share, count = float(np.mean(shares)), 6 * n_tr
    assert abs(share - 0.525) < 5 * (0.525 * 0.475 / count) ** 0.5, share
    assert all(0.35 < s < 0.7 for s in shares), shares  # every step, not only on average
    for x, m in eval_inputs:  # evaluation: the training labels are the context
        assert not m[:n_tr, -1].any() and torch.equal(x[:n_tr, -1], y_train)


# --- behaviour on real data -------------------------------------------------------------------------


@pytest.mark.slow
def test_breast_cancer_fold0_auroc(breast_cancer, bc_model):
    ds, sp = breast_cancer
    proba = bc_model.predict_proba(ds.X.iloc[sp.test])
    auroc = roc_auc_score(ds.y[sp.test], proba[:, 1])
    print(f"npt breast cancer fold 0 AUROC {auroc:.4f}; info {bc_model.info_}")
    assert auroc >= 0.98
    assert bc_model.info_["n_params"] == sum(p.numel() for p in bc_model.model_.parameters())
    assert 1 <= bc_model.info_["best_step"] <= 150


def test_same_seed_same_predictions_other_seed_differs(breast_cancer):
    ds, sp = breast_cancer
    X, y, Xv, yv = ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val]
    fit = lambda seed: NPT(ds.meta, seed, **SMALL, steps=8, batch_size=128, device="cpu").fit(X, y, Xv, yv)  # noqa
    a, b, c = fit(3), fit(3), fit(4)
    X_test = ds.X.iloc[sp.test]
    np.testing.assert_array_equal(a.predict_proba(X_test), b.predict_proba(X_test))
    assert not np.array_equal(a.predict_proba(X_test), c.predict_proba(X_test))


@pytest.mark.slow
@pytest.mark.real_data(POKER)
def test_lookup_npt_copies_visible_duplicates_an_mlp_cannot():
    """After the paper's semi-synthetic experiment (section 4.1): each table is real Poker Hand rows plus
    a copy of them whose class is visible; the originals' classes are masked and predicted.

    Training rows A, test rows B (disjoint). To make the lookup the only route at this scale (a few
    thousand tiny steps instead of the paper's long runs), the training classes are shuffled across
    rows every step, so they cannot be memorised from the cards. Evaluated on B: NPT reads the copies
    (near-perfect accuracy, and it follows the copies when their classes are changed), while an MLP
    trained on A's true classes gets the majority-class accuracy of a 300-row poker sample.
    """
    from sklearn.neural_network import MLPClassifier

    raw = np.loadtxt(POKER, delimiter=",")[:450]
    raw[:, :10] -= 1  # suits 1-4, ranks 1-13 -> class indices
    A, B = torch.tensor(raw[:300], dtype=torch.float32), torch.tensor(raw[300:], dtype=torch.float32)
    cards, t = (4, 13) * 5 + (10,), 10
    torch.manual_seed(0)
    model = nm.NPT(nm.NPTConfig(cards=cards, dropout=0.0, att_dropout=0.0, **SMALL))
    opt = no.Lookahead(no.Lamb(model.parameters(), lr=1e-2))
    p = torch.tensor([0.0] * t + [1.0])
    cards_t = torch.tensor(cards, dtype=torch.float32)
    g = torch.Generator().manual_seed(0)

    def with_copies(rows, copies):
        x = torch.cat([rows, copies])
        cand = torch.zeros_like(x, dtype=torch.bool)
        cand[: len(rows), t] = True  # the originals' classes are masked (p = 1) and scored
        return x, nm.corrupt(x, torch.zeros_like(cand), cand, p, cards_t, g)

    steps = 2000
    for step in range(steps):
        rows = A[torch.randperm(len(A), generator=g)[:32]].clone()
        rows[:, t] = rows[torch.randperm(len(rows), generator=g), t]
        x, c = with_copies(rows, rows)
        loss = nm.masked_mean(nm.entry_losses(model(c.x, c.m, columns=range(11)), x, cards), c.scored)
        opt.zero_grad()
        loss.backward()
        for q in model.parameters():
            if q.grad is not None:
                q.grad.clamp_(-1, 1)
        for group in opt.param_groups:
            group["lr"] = 1e-2 * no.flat_then_anneal(step, steps, 0.5)
        opt.step()

    def npt_accuracy(copies):
        _, c = with_copies(B, copies)
        with torch.no_grad():
            pred = model.eval()(c.x, c.m, columns=[t])[t][: len(B)].argmax(-1)
        return (pred == copies[:, t]).float().mean().item()

    intervened = B.clone()
    intervened[:, t] = B[torch.randperm(len(B), generator=g), t]
    onehot = lambda T: np.eye(13)[T[:, :10].long().numpy()].reshape(len(T), -1)  # noqa: E731
    mlp = MLPClassifier((64, 64), max_iter=500, random_state=0).fit(onehot(A), A[:, t].numpy())
    mlp_acc = (mlp.predict(onehot(B)) == B[:, t].numpy()).mean()
    acc, acc_intervened = npt_accuracy(B), npt_accuracy(intervened)
    print(f"lookup: NPT {acc:.3f} (copies' classes changed: {acc_intervened:.3f}), MLP {mlp_acc:.3f}")
    assert acc >= 0.9 and acc_intervened >= 0.9
    assert mlp_acc <= 0.75


# --- the linear patch encoder (images, paper section 4.2) ------------------------------------------

CIFAR_TAR = SHARED / "image" / "cifar10" / "cifar10-test-jpeg.tar"
needs_images = pytest.mark.real_data("image")


@pytest.fixture(scope="module")
def mnist(tmp_path_factory):
    """The image suite's MNIST, loaded through the offline mirror (5,000 training + 10,000 test images)."""
    from tabbench.suite import load_suite

    cfg, = [d for d in load_suite(REPO / "suites" / "image.yaml").datasets if d.name == "mnist"]
    paths = DataPaths(cache=tmp_path_factory.mktemp("cache"), mirrors=(SHARED.resolve(),), base=REPO)
    return load_dataset(cfg, paths)


def cifar_images(n=12):
    """The first n CIFAR-10 test JPEGs of the offline copy, decoded, as (n, 3, 32, 32) and an image table."""
    import io
    import tarfile

    from PIL import Image

    from tabbench.data.images import image_table

    with tarfile.open(CIFAR_TAR) as tar:
        names = sorted(m.name for m in tar.getmembers() if m.name.endswith(".jpg"))[:n]
        pixels = np.stack([np.asarray(Image.open(io.BytesIO(tar.extractfile(name).read()))) for name in names])
    pixels = pixels.transpose(0, 3, 1, 2)  # (n, 32, 32, 3) -> channel-major (n, 3, 32, 32)
    return pixels, image_table(pixels, [0, 1] * (n // 2), prefix="a", start=0)


def image_meta(table):
    from tabbench.spec import NUMERIC, Column, DatasetMeta

    columns = tuple(Column(c, NUMERIC) for c in table.columns[:-1])
    return DatasetMeta("cifar", "binary", "class", columns, ("0", "1"))


@needs_images
def test_cifar_patches_are_4x4x3_blocks_in_grid_order():
    """64 patches of a 32x32x3 image: patch g*8+h holds rows 4g..4g+3 and columns 4h..4h+3 of all three
    channels; the estimator's input table holds exactly those (standardised) pixels, then the label."""
    pixels, table = cifar_images()
    X, y = table.drop(columns="class"), table["class"].to_numpy()
    model = NPT(image_meta(table), 0, **SMALL, steps=0, n_patches=64, image_shape=[3, 32, 32], device="cpu")
    model.fit(X, y)
    order = model.patch_order_
    assert order.shape == (64, 48)
    flat = X.to_numpy(dtype=np.float64)
    for g, h in [(0, 0), (2, 5), (7, 7)]:
        block = pixels[:, :, 4 * g:4 * g + 4, 4 * h:4 * h + 4].reshape(len(pixels), -1)
        np.testing.assert_array_equal(flat[:, order[8 * g + h]], block)
    encoder = model.table_.encoder
    x, missing = encoder.encode(X, y)
    assert x.shape == (len(X), 64 * 48 + 1) and missing.shape == (len(X), 65) and not missing.any()
    mean, scale = np.array([encoder.mean[j] for j in range(3072)]), np.array([encoder.scale[j] for j in range(3072)])
    np.testing.assert_allclose(x[:, :-1], ((flat - mean) / scale)[:, order.reshape(-1)], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(x[:, -1], y)


@needs_images
@pytest.mark.parametrize("params, message", [
    ({"n_patches": 64}, "needs image_shape"),
    ({"n_patches": 60, "image_shape": [3, 32, 32]}, "square grid"),
    ({"n_patches": 49, "image_shape": [1, 28, 28]}, "784 numeric pixel columns"),
])
def test_patch_params_are_checked_against_the_table(params, message):
    _, table = cifar_images(2)
    with pytest.raises(ValueError, match=message):
        NPT(image_meta(table), 0, **params).fit(table.drop(columns="class"), table["class"].to_numpy())


@needs_images
def test_a_patch_is_masked_as_one_entry(mnist):
    x = torch.tensor(mnist.X.to_numpy()[:2000] / 255.0, dtype=torch.float32)
    order = torch.tensor(np.arange(784).reshape(7, 4, 7, 4).transpose(0, 2, 1, 3).reshape(49, 16))
    x = torch.cat([x[:, order.reshape(-1)], torch.tensor(mnist.y[:2000, None], dtype=torch.float32)], 1)
    n = len(x)
    none = torch.zeros(n, 50, dtype=torch.bool)
    p = torch.tensor([0.15] * 49 + [0.0])
    cards = torch.tensor([0.0] * 49 + [10.0])
    c = nm.corrupt(x, none, ~none, p, cards, torch.Generator().manual_seed(0), 0.1, n_patches=49, patch_dim=16)
    assert c.m.shape == c.scored.shape == (n, 50) and c.x.shape == x.shape
    rate = c.scored[:, :49].float().mean().item()
    assert abs(rate - 0.15) < 5 * (0.15 * 0.85 / (n * 49)) ** 0.5
    pix = c.x[:, :784].reshape(n, 49, 16)
    orig = x[:, :784].reshape(n, 49, 16)
    assert (pix[c.m[:, :49]] == 0).all()  # a masked patch: all its pixels zeroed
    kept = ~c.scored[:, :49]
    assert torch.equal(pix[kept], orig[kept])  # an unselected patch: every pixel untouched
    randomised = c.scored[:, :49] & ~c.m[:, :49]  # ~10% of the selected patches: N(0, 1) noise, no mask bit
    assert randomised.any() and (pix[randomised] != orig[randomised]).all(-1).all()
    assert torch.equal(c.x[:, -1], x[:, -1]) and not c.m[:, -1].any()


@needs_images
def test_patch_encoder_learns_mnist(mnist):
    """49 linear 4x4 patches (the paper's MNIST encoder) on real digits: 1,500 training images,
    batches of 128, 200 steps, e=8, 2 layers (paper: 60,000 images, 500k steps) beats chance (0.1)
    by far on 500 of the official test images (0.60 here; e=16, 0.69 in 2.6 times the time)."""
    X, y = mnist.X, mnist.y
    rows = np.random.default_rng(0).permutation(5000)  # the 5,000 training images are sorted by class
    tr, va, te = rows[:1500], rows[1500:1700], np.arange(5000, 5500)
    model = NPT(mnist.meta, 0, **{**SMALL, "e": 8}, steps=200, batch_size=128, lr=3e-3, lambda_init=0.5,
                eval_every=25, p_target=0.15, n_patches=49, image_shape=[1, 28, 28], amp=False, device="cpu")
    model.fit(X.iloc[tr], y[tr], X.iloc[va], y[va])
    assert model.model_.cfg.d == 50 and model.model_.cfg.patch_dim == 16
    accuracy = (model.predict(X.iloc[te]) == y[te]).mean()
    print(f"npt mnist patches: accuracy {accuracy:.3f} on 500 test images, info {model.info_}")
    assert accuracy > 0.5
