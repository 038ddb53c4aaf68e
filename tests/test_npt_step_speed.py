"""NPT's CPU step at the budget ladder's sizes, made faster (issue 61): what trains bit for bit as before, and what
rounds differently.

The reference is the code before the change, read from git history (``BEFORE``: main before issue 61): its
``model.py`` and ``optimiser.py``, imported beside this tree's and trained on the same table from the same weights
with the same random draws. Without that history (an archive, a shallow clone) the comparison is skipped.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import load_module, need

torch = need("torch")

from tabbench_plugins.npt import model as nm  # noqa: E402
from tabbench_plugins.npt import optimiser as no  # noqa: E402
from tabbench_plugins.npt.training import TrainStep  # noqa: E402
from tests.test_npt import bc_tensors, one_thread  # noqa: E402, F401 (one_thread: autouse, as a budgeted job runs)

REPO = Path(__file__).resolve().parents[1]
BEFORE = "2e1ebca09fc791ca06f1dbb74ad8a142a8262179"  # main before issue 61's changes to model.py and optimiser.py
BF16 = torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()


@pytest.fixture(scope="module")
def before(tmp_path_factory):
    """The model and optimiser modules of commit BEFORE, imported under names of their own."""
    folder = tmp_path_factory.mktemp("before")
    modules = []
    for name in ("model", "optimiser"):
        try:
            text = subprocess.run(["git", "show", f"{BEFORE}:plugins/tabbench_plugins/npt/{name}.py"], cwd=REPO,
                                  capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            pytest.skip(f"commit {BEFORE[:7]} is not in this checkout's git history")
        path = folder / f"{name}.py"
        path.write_text(text)
        modules.append(load_module(path, f"npt_{name}_before_issue_61"))
    return modules


def train(model, opt, x, cards, amp, steps=7):
    """``steps`` training steps (a Lookahead pull at the sixth) on the rows ``x``, every random draw seeded per
    step: the masks from a generator of their own, dropout from torch's."""
    d = len(cards)
    step = TrainStep(model, opt, x, torch.zeros(x.shape, dtype=torch.bool), torch.tensor([0.15] * (d - 1) + [1.0]),
                     cards, torch.Generator().manual_seed(0), amp=amp)
    for i in range(steps):
        torch.manual_seed(i)
        step(1e-3, 0.5)
    return [p.detach() for p in model.parameters()]


@pytest.mark.parametrize("e, layers, heads, amp", [(8, 2, 2, True), (8, 2, 2, False), (16, 4, 4, True)])
def test_the_model_and_the_multi_tensor_lamb_train_bit_for_bit_as_before(before, e, layers, heads, amp):
    """The split query and key-value weights and the one-pass gradient clamp compute what the code before them
    did, to the last bit, in bf16 autocast and in fp32. The fused-Adam LAMB rounds differently: the same
    comparison tells it apart (a test of the comparison), by a rounding's worth."""
    if amp and not BF16:
        pytest.skip("this CPU has no bf16 matrix instructions: autocast would run fp32")
    old_model, old_opt = before
    x, cards = bc_tensors(120)
    cfg = nm.NPTConfig(cards=cards, e=e, n_layers=layers, n_heads=heads)
    torch.manual_seed(0)
    start = nm.NPT(cfg).state_dict()

    def ours(adam_kernel):
        model = nm.NPT(cfg)
        model.load_state_dict(start)
        return train(model, no.Lookahead(no.Lamb(list(model.parameters()), lr=1e-3, grad_clamp=1.0,
                                                 adam_kernel=adam_kernel)), x, cards, amp)

    theirs = old_model.NPT(old_model.NPTConfig(cards=cards, e=e, n_layers=layers, n_heads=heads))
    theirs.load_state_dict(start)
    reference = train(theirs, old_opt.Lookahead(old_opt.Lamb(list(theirs.parameters()), lr=1e-3, grad_clamp=1.0)),
                      x, cards, amp)
    assert all(torch.equal(a, b) for a, b in zip(ours(adam_kernel=False), reference))
    rounded = ours(adam_kernel=True)
    assert not all(torch.equal(a, b) for a, b in zip(rounded, reference))
    for a, b in zip(rounded, reference):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)


def test_lamb_from_the_adam_kernel_equals_the_multi_tensor_kernels():
    """LAMB's moments and update from torch's fused Adam kernel (the CPU default without weight decay) make the
    multi-tensor path's updates to float rounding, gradient clamp and a zero-norm weight (trust ratio 1)
    included; with weight decay the default is the multi-tensor path."""
    torch.manual_seed(0)
    start = [torch.randn(s) for s in ((33, 7), (5,), (1,), (300, 200))] + [torch.zeros(4)]
    runs = {}
    for adam_kernel, weight_decay in ((False, 0.0), (True, 0.0), (None, 0.0), (False, 0.01), (None, 0.01)):
        w = [p.clone().requires_grad_() for p in start]
        opt = no.Lamb(w, lr=0.05, grad_clamp=0.5, weight_decay=weight_decay, adam_kernel=adam_kernel)
        g = torch.Generator().manual_seed(1)
        for _ in range(4):
            for p in w:
                p.grad = torch.randn(p.shape, generator=g)
            opt.step()
        runs[adam_kernel, weight_decay] = [p.detach() for p in w]
    for eager, adam in zip(runs[False, 0.0], runs[True, 0.0]):
        torch.testing.assert_close(adam, eager, rtol=1e-5, atol=1e-6)
    assert not all(torch.equal(a, b) for a, b in zip(runs[False, 0.0], runs[True, 0.0]))
    assert all(torch.equal(a, b) for a, b in zip(runs[True, 0.0], runs[None, 0.0]))  # the CPU default
    assert all(torch.equal(a, b) for a, b in zip(runs[False, 0.01], runs[None, 0.01]))
