"""NPT's compiled training step (param ``compile``, plugins/tabbench_plugins/npt/compiled.py): the dropout masks it
is fed are the eager step's, and a compiled fit trains as an eager one does."""

from __future__ import annotations

import operator
import os

import pytest

from tests.conftest import need

torch = need("torch")

from tabbench_plugins.npt import model as nm  # noqa: E402
from tabbench_plugins.npt import optimiser as no  # noqa: E402
from tabbench_plugins.npt.compiled import CompiledLoss  # noqa: E402
from tabbench_plugins.npt.training import TrainStep  # noqa: E402
from tests.test_npt import bc_tensors, breast_cancer, one_thread  # noqa: E402, F401
from tests.test_npt_step_speed import BF16  # noqa: E402


#: The model of the two compiled fits: one shape, so that the second compile of a session finds the first's kernels
#: in inductor's cache (every job's, the data cache's npt-compile/: about a minute cold, seconds warm)
TINY = {"e": 8, "n_layers": 2, "n_heads": 2}


def steps(x, cards, amp, compiled_loss=None, n=4):
    """``n`` training steps of a fresh e 8 model (seeded) on the rows ``x``; the parameters after them."""
    torch.manual_seed(0)
    model = nm.NPT(nm.NPTConfig(cards=cards, e=8, n_layers=2, n_heads=2))
    opt = no.Lookahead(no.Lamb(list(model.parameters()), lr=1e-3, grad_clamp=1.0))
    if compiled_loss is not None:
        compiled_loss = compiled_loss(model)
    d = len(cards)
    step = TrainStep(model, opt, x, torch.zeros(x.shape, dtype=torch.bool), torch.tensor([0.15] * (d - 1) + [1.0]),
                     cards, torch.Generator().manual_seed(0), amp=amp, compiled_loss=compiled_loss)
    model.train()
    losses = [float(step(1e-3, 0.5)) for _ in range(n)]
    return losses, [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("amp", [False, True])
def test_the_masks_fed_to_a_traced_step_are_the_eager_steps_to_the_last_bit(amp):
    """The step traced by dynamo, run by the eager backend (the same operators, no inductor kernels), with its
    dropout masks drawn ahead by ``keep_mask`` and fed in (``model.FED``), trains bit for bit as the eager step: the
    masks are the same, drawn in the same order from the same generator, and the random stream after them too."""
    if amp and not BF16:
        pytest.skip("this CPU has no bf16 matrix instructions: autocast would run fp32")
    x, cards = bc_tensors(60)
    eager_losses, eager = steps(x, cards, amp)
    traced_losses, fed = steps(x, cards, amp, traced(cards, amp))
    assert traced_losses == eager_losses
    assert all(torch.equal(a, b) for a, b in zip(eager, fed))


def traced(cards, amp, backend="eager"):
    """A ``compiled_loss`` for :func:`steps`: the step's loss traced by dynamo and run by ``backend``."""
    def build(model):
        loss = CompiledLoss(model, cards, amp=amp)
        loss.fn = torch.compile(loss._loss, backend=backend)
        return loss
    return build


def few_columns(keep=6):
    """Breast Cancer's first ``keep`` features and its class (60 rows): ABA attends over fewer than FEW_KEYS keys."""
    x, cards = bc_tensors(60)
    return x[:, list(range(keep)) + [-1]], cards[:keep] + cards[-1:]


def test_a_compiled_step_over_few_columns_sums_abas_products_instead_of_multiplying_matrices(monkeypatch):
    """Under FEW_KEYS keys the traced pass has two matrix products fewer for each ABA block (its scores and its
    weighted values, computed as broadcast products summed over the short axis, model.FEW_KEYS); ABD's, over the
    rows, stay matrix products."""
    def matmuls(few_keys):
        monkeypatch.setattr(nm, "FEW_KEYS", few_keys)
        torch._dynamo.reset()
        graphs = []

        def backend(gm, inputs):
            graphs.append(gm)
            return gm.forward

        x, cards = few_columns()
        steps(x, cards, False, traced(cards, False, backend), n=1)
        return sum(node.op == "call_function" and node.target is operator.matmul
                   for gm in graphs for node in gm.graph.nodes)

    n_aba = sum(isinstance(m, nm.ABA) for m in nm.NPT(nm.NPTConfig(cards=few_columns()[1], **TINY)).modules())
    assert n_aba > 0
    assert matmuls(nm.FEW_KEYS) == matmuls(0) - 2 * n_aba


@pytest.mark.parametrize("amp", [False, True])
def test_a_compiled_step_over_few_columns_trains_as_the_eager_step_to_rounding(amp):
    """The broadcast products sum in another order than the eager step's matrix products: the same losses and
    parameters after four steps, to float rounding (the masks are the eager step's, as above)."""
    if amp and not BF16:
        pytest.skip("this CPU has no bf16 matrix instructions: autocast would run fp32")
    x, cards = few_columns()
    assert x.shape[1] < nm.FEW_KEYS
    eager_losses, eager = steps(x, cards, amp)
    traced_losses, fed = steps(x, cards, amp, traced(cards, amp))
    assert traced_losses == pytest.approx(eager_losses, rel=1e-5)
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in zip(eager, fed))


def test_inductor_caches_in_the_data_cache_unless_the_user_names_a_folder(monkeypatch, tmp_path):
    """Every job on a machine shares one inductor cache, the data cache's ``npt-compile/``, also after importing
    inductor has set its own default; a folder the user set stays."""
    from tabbench_plugins.npt.compiled import cache_folder, configure
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    monkeypatch.setenv("TABBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())
    configure(torch)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(cache_folder()) == str(tmp_path / "cache" / "npt-compile")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    configure(torch)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")


@pytest.mark.slow
def test_a_compiled_fit_reaches_the_losses_of_an_eager_fit(breast_cancer):
    """The same tiny fit (Breast Cancer, TINY, 60 steps) with the step compiled by inductor and eagerly: the same
    masks, other kernels, so the losses differ by rounding only: close, not equal. The record says the compile ran
    (its seconds, one shape) or that it is off."""
    from tabbench_plugins.npt import NPT

    ds, sp = breast_cancer
    fits = {}
    for compile_ in (False, True):
        model = NPT(ds.meta, 0, **TINY, steps=60, eval_every=20, device="cpu", compile=compile_)
        fits[compile_] = model.fit(ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val])
    eager, compiled = fits[False].info_, fits[True].info_
    assert eager["compile"] == "off"
    assert compiled["compile"]["failed"] is None and compiled["compile"]["shapes"] == 1
    assert compiled["compile"]["seconds"] > 0
    assert compiled["final_train_loss"] == pytest.approx(eager["final_train_loss"], rel=0.05)
    assert compiled["best_val_loss"] == pytest.approx(eager["best_val_loss"], rel=0.05)
    assert compiled["final_train_loss"] != eager["final_train_loss"]  # the kernels did change: a compiled fit


@pytest.mark.slow
def test_auto_compiles_where_the_stored_compiled_calibration_trains_more_steps(breast_cancer, monkeypatch, tmp_path):
    """``compile: true`` in a budgeted fit times the compiled pass for its sizing and stores it in the speed book
    with its compile's seconds. ``compile: auto`` then compiles where that stored speed, after those seconds, trains
    more steps than the eager one, and not where it trains fewer (the book's compiled entry set to each side of the
    eager one: the rule, not this machine's speed, decides here)."""
    import json

    from tabbench.estimator import JobContext
    from tabbench_plugins.npt import NPT
    from tabbench_plugins.npt.cost import SpeedBook

    from tabbench_plugins.npt.compiled import cache_folder

    # the speed book apart, the kernels of the fits above kept: TINY's compile is warm after them (a minute cold)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache_folder()))
    monkeypatch.setenv("TABBENCH_CACHE", str(tmp_path))
    ds, sp = breast_cancer

    def fit(compile_, budget_s):
        model = NPT(ds.meta, 0, **TINY, steps="auto", device="cpu", compile=compile_)
        model.fit(ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val],
                  context=JobContext(time_budget_s=budget_s, clock="cpu"))
        return model.info_

    compiled = fit(True, 20.0)  # room for a warm compile and the timing of its pass
    assert compiled["compile"]["failed"] is None and compiled["speed"] == "measured"
    book = SpeedBook()
    entries = book.read()
    key = next(k for k in entries if json.loads(k).get("compile"))
    assert entries[key]["compile_s"] > 0
    eager = json.dumps({k: v for k, v in json.loads(key).items() if k != "compile"}, sort_keys=True)
    book.store(eager, 1.0)  # the eager pass at the cost model's speed
    for compiled_slowdown, chosen in ((0.5, True), (2.0, False)):
        book.store(key, compiled_slowdown, compile_s=1.0)
        info = fit("auto", 4.0)  # the choice reads the book: a short fit decides it as a long one would
        assert isinstance(info["compile"], dict) is chosen, (compiled_slowdown, info["compile"])
