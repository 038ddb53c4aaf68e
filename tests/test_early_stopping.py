"""The epoch loop the plugins' own PyTorch training shares (plugins/tabbench_plugins/torch_training.py
``train_epochs`` and its ``EarlyStopping``, used by mlp.py, tabm.py and modernnca.py): patience counted from the
best epoch, the best epoch's weights restored, ``max_epochs`` and the job's training clock obeyed, no validation
rows meaning the last weights stay, and every training row once per epoch in an order drawn from the seed."""

from __future__ import annotations

import math

import pytest

from tests.conftest import need

torch = need("torch")

from tabbench.estimator import TrainingClock  # noqa: E402
from tabbench_plugins.torch_training import EarlyStopping, train_epochs  # noqa: E402


def run(losses, patience=2, max_epochs=None, clock=None, validated=True):
    """Train a one-weight network whose weight is set to the epoch number; ``losses[epoch]`` is that epoch's
    validation loss. Returns the epochs that ran, the weight left after ``restore`` and the loop's info."""
    network = torch.nn.Linear(1, 1, bias=False)
    stopping = EarlyStopping(network, patience, max_epochs, clock or TrainingClock(None), validated=validated)
    ran = []
    for epoch in stopping:
        ran.append(epoch)
        with torch.no_grad():
            network.weight.fill_(float(epoch))
        if validated:
            stopping.update(losses[epoch])
    stopping.restore()
    return ran, float(network.weight.detach()), stopping.info()


def test_stops_after_patience_epochs_without_a_better_loss_and_restores_the_best():
    ran, weight, info = run([5.0, 3.0, 4.0, 3.5, 1.0, 9.0], patience=2)
    assert ran == [0, 1, 2, 3]  # epoch 1 is the best; 2 and 3 are not better: stop
    assert weight == 1.0
    assert info == {"epochs": 4, "best_epoch": 1, "best_val_loss": 3.0, "stopped_by_time_budget": False}


def test_a_better_loss_resets_the_patience():
    ran, weight, _ = run([5.0, 6.0, 4.0, 7.0, 8.0, 0.5], patience=2)
    assert ran == [0, 1, 2, 3, 4]
    assert weight == 2.0


def test_max_epochs_caps_the_loop():
    ran, weight, info = run([5.0, 4.0, 3.0, 2.0, 1.0], patience=10, max_epochs=3)
    assert ran == [0, 1, 2] and weight == 2.0 and info["epochs"] == 3


def test_the_clock_stops_training_and_keeps_the_best_epoch():
    clock = TrainingClock(1e-9)  # the deadline has passed: no second epoch fits
    ran, weight, info = run([2.0, 1.0], patience=10, max_epochs=5, clock=clock)
    assert ran == [0] and weight == 0.0 and info["stopped_by_time_budget"] is True


def test_without_validation_the_last_weights_stay():
    ran, weight, info = run(None, patience=1, max_epochs=4, validated=False)
    assert ran == [0, 1, 2, 3] and weight == 3.0
    assert info["best_epoch"] == 3 and info["best_val_loss"] is None


def test_losses_that_are_never_finite_keep_the_last_weights():
    ran, weight, info = run([math.nan] * 10, patience=3, max_epochs=10)
    assert ran == [0, 1, 2] and weight == 2.0 and info["best_epoch"] == -1


def test_train_epochs_batches_every_row_once_per_epoch_in_a_seeded_order_and_keeps_the_best_epoch():
    """10 rows in batches of 4: each epoch is one permutation drawn from the loop's generator seeded with the
    seed, cut into 4 + 4 + 2; a batch whose loss is None (here the short one) takes no step. The loss is the sum
    of the one weight over the batch, so each step lowers the weight by lr x 4; the validation losses make
    epoch 1 the best, and after patience 2 the weights of epoch 1 are back, the network in eval mode."""
    network = torch.nn.Linear(1, 1, bias=False)
    start = float(network.weight.detach())
    optimizer = torch.optim.SGD(network.parameters(), lr=0.1)
    batches = []

    def batch_loss(rows, generator):
        batches.append(rows.tolist())
        return network(torch.ones(len(rows), 1)).sum() if len(rows) == 4 else None

    losses = iter([3.0, 1.0, 2.0, 5.0, 4.0])
    stopping = EarlyStopping(network, 2, 10, TrainingClock(None))
    train_epochs(stopping, optimizer, batch_loss, 10, 4, 7, "cpu", validation_loss=lambda: next(losses))

    assert stopping.info()["epochs"] == 4 and stopping.info()["best_epoch"] == 1
    assert [len(b) for b in batches] == [4, 4, 2] * 4
    generator = torch.Generator().manual_seed(7)
    for epoch in range(4):
        assert sum(batches[3 * epoch:3 * epoch + 3], []) == torch.randperm(10, generator=generator).tolist()
    assert float(network.weight.detach()) == pytest.approx(start - 2 * 2 * 0.1 * 4)  # two steps in each of 2 epochs
    assert not network.training
