"""What the plugins' PyTorch training shares: torch threads, seeding, bf16 and deterministic kernels (every plugin
that trains with torch: mlp.py, tabm.py, modernnca.py, tabnet.py, pytabkit_wrapper.py, npt/), and the plugins' own
training loop (mlp.py, tabm.py, modernnca.py): inputs and targets as tensors, the task's loss and early-stopping
criterion, and one epoch loop with early stopping (``train_epochs``).

What a fit needs whatever its library sits beside it, free of torch: the device (devices.py) and the training
split's classes and validation rows (labels.py). Nothing here imports torch at module level either: ``tabbench
models`` imports every plugin module, and listing models must stay fast.
"""

from __future__ import annotations

import contextlib
import copy
import os

import numpy as np

from tabbench.preprocess import TargetScaler
from tabbench_plugins.labels import SeenClasses, validation


@contextlib.contextmanager
def torch_threads(n: int):
    """Run torch on ``n`` intra-op threads, then restore the previous setting."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(max(1, int(n)))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def native_bf16(device: str) -> bool:
    """Whether bf16 matrix products run natively on ``device``: a CUDA GPU with bf16 support, or a CPU whose
    oneDNN has bf16 kernels (AVX-512 BF16 or AMX). Elsewhere bf16 is emulated and slower than fp32."""
    import torch

    if device == "cuda":  # compute capability 8.0 on (Ampere); older GPUs emulate bf16
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    return torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()


def bf16_autocast(device: str, enabled: bool, cache: bool = True):
    """Mixed precision for a forward pass: bf16 matrix products under ``torch.autocast`` when ``enabled``.
    ``cache=False``: no cache of the weights' bf16 copies (a CUDA graph must cast the current weights)."""
    import torch

    return torch.autocast(device, dtype=torch.bfloat16, enabled=enabled, cache_enabled=cache)


@contextlib.contextmanager
def deterministic_algorithms(device: str, enabled: bool):
    """Bitwise-repeatable CUDA training while the block runs: torch's deterministic algorithms (among them
    the deterministic backward of flash and memory-efficient attention, and sorted, not atomic, index
    accumulation, as in an embedding's backward) and cuBLAS's fixed workspace, which torch asks for, set
    before its first call; the caller's setting is restored after. An op without a deterministic kernel is
    an error, not a silent difference. On the CPU nothing changes: its kernels repeat already."""
    import torch

    if not enabled or device != "cuda":
        yield
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    before = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])


@contextlib.contextmanager
def torch_seeded(seed: int, device: str):
    """Seed torch's global generators for a fit without disturbing the caller's random state."""
    import torch

    devices = [torch.cuda.current_device()] if device == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def on_host(state: dict) -> dict:
    """A state dict whose tensors are on the CPU: the same tensors where they are there already (no copy)."""
    return {name: value.to("cpu") for name, value in state.items()}


class EarlyStopping:
    """Which epochs ``train_epochs`` runs, and the weights it keeps.

    It keeps the weights of the epoch with the best validation loss and ends training after ``patience``
    epochs without a better one, after ``max_epochs`` (None: no cap), or when the job's training clock
    (``tabbench.estimator.TrainingClock``) says one more epoch would pass its deadline. Without validation rows
    (``validated`` False), or when no epoch's loss was finite, the last epoch's weights stay::

        stopping = EarlyStopping(network, patience, max_epochs, clock)
        for epoch in stopping:
            ...                        # train one epoch
            stopping.update(val_loss)  # after it
        stopping.restore()             # the best epoch's weights

    ``points`` (``tabbench.estimator.TimePoints``, or None): the job's budget points. At each ``update`` the
    points passed since the last one get the best weights so far, before the epoch just validated may replace
    them (it ended after the point), and ``restore`` gives the final ones to the points passed in the last
    epoch. Cost: none in time; in memory, each point holds the best-so-far state dict of its moment, the very
    object early stopping made (a CPU copy where the network lives on a GPU), so at most one state dict per point
    stays alive beyond the fit's own. Without validation rows no state is selected: the points passed during
    training have none.
    """

    def __init__(self, network, patience: int, max_epochs: int | None, clock, validated: bool = True, points=None,
                 shape=None):
        self.network, self.patience, self.max_epochs, self.clock = network, patience, max_epochs, clock
        self.validated, self.points, self.shape = validated, points, shape
        self.epoch, self.best_epoch, self.best_loss, self.best_state = -1, -1, np.inf, None
        self.best_s = None  # the job's elapsed time when the best epoch was validated (with points only)

    def __iter__(self):
        if self.shape is not None:  # the epochs the budget allows, decided before the first (TrainingClock)
            self.clock.plan_epochs(self.shape)
        epoch = 0
        while self.max_epochs is None or epoch < self.max_epochs:
            self.epoch = epoch
            yield epoch
            waited = epoch - self.best_epoch
            if self.validated and waited > 0 and waited >= self.patience:
                break
            last = self.max_epochs is not None and epoch + 1 >= self.max_epochs
            if not last and self.clock.out_of_time():
                break
            epoch += 1
        self.clock.keep_epoch_time()

    def _keep_points(self) -> float | None:
        """The points passed by now get the best state so far; returns now (None without points)."""
        if self.points is None:
            return None
        now = self.points.elapsed()
        if self.points.passed(now):
            self.points.keep(self.best_s, on_host(self.best_state) if self.best_state is not None else None, now)
        return now

    def update(self, loss: float) -> None:
        """The validation loss of the epoch that just ran: its weights are kept when it is the best so far."""
        now = self._keep_points()  # the points passed during this epoch: the best before it
        if loss < self.best_loss:
            self.best_loss, self.best_epoch = loss, self.epoch
            self.best_state = copy.deepcopy(self.network.state_dict())
            self.best_s = now  # validated by then: a point after it may have this state

    def restore(self) -> None:
        """Load the best epoch's weights (none kept, e.g. no validation rows: the last epoch's stay)."""
        self._keep_points()  # the points passed since the last validation: the final selection
        if self.best_state is not None:
            self.network.load_state_dict(self.best_state)

    def point_states(self) -> tuple[dict, dict]:
        """(``time_points_``, point -> its state dict): what a model trained by ``train_epochs`` offers
        (``EpochStates``)."""
        if self.points is None:
            return {}, {}
        return self.points.state_times(), {p: state for p, (_, state) in self.points.kept.items()}

    def info(self) -> dict:
        """What the fit records: epochs run, the best epoch and its loss, whether the time budget stopped it."""
        return {"epochs": self.epoch + 1,
                "best_epoch": self.best_epoch if self.validated else self.epoch,
                "best_val_loss": float(self.best_loss) if self.validated else None,
                "stopped_by_time_budget": self.clock.stopped,
                **({"epoch_plan": self.clock.epoch_plan} if self.clock.epoch_plan else {})}


def train_epochs(stopping: EarlyStopping, optimizer, batch_loss, n_rows: int, batch_size: int, seed: int, device,
                 validation_loss=None, clip_norm: float | None = None) -> None:
    """The epoch loop of the plugins' own PyTorch training (mlp.py, tabm.py, modernnca.py): minibatches of the
    ``n_rows`` training rows in a fresh order each epoch, from a generator of the loop's own seeded with ``seed``;
    after each epoch the validation loss, for as many epochs as ``stopping`` allows; then the best epoch's weights,
    the network in eval mode.

    ``batch_loss(rows, generator)``: the loss of the batch of training rows ``rows`` (a tensor of row indices on
    ``device``), or None to skip the batch; ``generator`` is the loop's, for a model that draws more per batch
    (ModernNCA's candidates). ``validation_loss()``: what early stopping minimises after an epoch (None: no
    validation rows, the last epoch stays). ``clip_norm``: the gradients' norm is clipped to it before each step.
    """
    import torch

    network = stopping.network
    generator = torch.Generator().manual_seed(seed)
    batch_size = min(batch_size, n_rows)
    for _ in stopping:
        network.train()
        order = torch.randperm(n_rows, generator=generator).to(device)
        for start in range(0, n_rows, batch_size):
            loss = batch_loss(order[start:start + batch_size], generator)
            if loss is None:
                continue
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if clip_norm:
                torch.nn.utils.clip_grad_norm_(network.parameters(), clip_norm)
            optimizer.step()
        if validation_loss is not None:
            stopping.update(validation_loss())
    stopping.restore()
    network.eval()


class EpochStates:
    """The budget points of a plugin trained by ``train_epochs`` (mlp.py, tabm.py, modernnca.py; its network is
    ``network_``): ``fit`` sets ``time_points_, point_states_ = stopping.point_states()`` after training, and
    ``at_time`` predicts with a copy of the network holding a point's state (tabbench/estimator.py,
    ``Estimator.time_points_``)."""

    point_states_: dict = {}

    def at_time(self, point_s: float):
        import torch  # noqa: F401 - load_state_dict's tensors

        other = copy.copy(self)
        other.network_ = copy.deepcopy(self.network_)
        other.network_.load_state_dict(self.point_states_[point_s])
        other.network_.eval()
        other.info_ = {"state_s": self.time_points_[point_s]}
        return other


class TabularTensors:
    """Numeric columns (mean-imputed, quantile-normalised, constant ones dropped) and categorical codes
    (a missing value is one more level), fitted on the training rows: TabM's and ModernNCA's inputs."""

    def __init__(self, meta, seed: int):
        self.meta = meta
        self.seed = seed

    def fit(self, X):
        from sklearn.preprocessing import QuantileTransformer

        numeric = X[[c.name for c in self.meta.numeric]].to_numpy(dtype=np.float64)
        with np.errstate(all="ignore"):
            self.mean_ = np.nan_to_num(np.nanmean(numeric, axis=0)) if numeric.size else np.zeros(numeric.shape[1])
        numeric = np.where(np.isnan(numeric), self.mean_, numeric)
        self.keep_ = np.array([len(np.unique(numeric[:, j])) > 1 for j in range(numeric.shape[1])], dtype=bool)
        self.quantile_ = None
        if self.keep_.any():
            # the TabM paper's quantile transform, with a little noise so that ties do not pile up on one quantile
            kept = numeric[:, self.keep_]
            noise = np.random.default_rng(self.seed).normal(0.0, 1e-5, kept.shape) * kept.std(axis=0)
            self.quantile_ = QuantileTransformer(
                output_distribution="normal", n_quantiles=max(min(len(kept) // 30, 1000), 10),
                subsample=10**9, random_state=self.seed).fit(kept + noise)
        self.cardinalities_ = [len(c.categories) + 1 for c in self.meta.categorical]  # + missing
        return self

    @property
    def n_numeric(self) -> int:
        return int(self.keep_.sum())

    def transform(self, X, device):
        """(numeric float32 tensor or None, categorical int64 tensor or None) on ``device``."""
        import torch

        x_num = x_cat = None
        if self.n_numeric:
            numeric = X[[c.name for c in self.meta.numeric]].to_numpy(dtype=np.float64)
            numeric = np.where(np.isnan(numeric), self.mean_, numeric)[:, self.keep_]
            x_num = torch.as_tensor(self.quantile_.transform(numeric), dtype=torch.float32, device=device)
        if self.cardinalities_:
            codes = np.stack([X[c.name].cat.codes.to_numpy().astype(np.int64) for c in self.meta.categorical], 1)
            codes = np.where(codes < 0, np.array(self.cardinalities_) - 1, codes)
            x_cat = torch.as_tensor(codes, dtype=torch.long, device=device)
        return x_num, x_cat


def training_targets(model: str, meta, y, X_val, y_val, device):
    """The fit's targets as tensors (TabM's and ModernNCA's): class codes over the classes the training
    rows hold (validation rows of any other class cannot be scored and are dropped, with their X rows), or
    regression values standardised on the training rows. Returns (seen classes or None, X_val, t_train, t_val,
    the regression target's ``TargetScaler`` or None); ``model`` names the model in the errors."""
    import torch

    if X_val is None or len(X_val) == 0:
        raise ValueError(f"{model} on {meta.name}: no validation rows for early stopping; use a split with a "
                         "validation part")
    seen = SeenClasses(y, meta.n_classes) if meta.is_classification else None
    val = validation(X_val, y_val, seen)  # drops validation rows of a class the training rows lack
    if val is None:
        raise ValueError(f"{model} on {meta.name}: no validation row has a class the training rows hold, so "
                         "early stopping has nothing to score; use a split whose validation part shares classes")
    X_val, v = val
    if seen is not None:
        scale = None
        t_train, t_val = (torch.as_tensor(c, device=device) for c in (seen.encode(y), v))
    else:
        scale = TargetScaler().fit(y)
        t_train, t_val = (torch.as_tensor(scale.transform(c), dtype=torch.float32, device=device) for c in (y, v))
    return seen, X_val, t_train, t_val, scale


def task_loss(meta, out, target):
    """Cross-entropy (classification) or squared error (regression, standardised target) of one output."""
    import torch.nn.functional as F

    if meta.is_classification:
        return F.cross_entropy(out, target)
    return F.mse_loss(out.squeeze(-1), target)


def stopping_criterion(meta, t_val) -> str:
    """The leaderboard's metric for the task, or "log_loss" where it is undefined on these validation rows
    (AUROC needs both classes, and a fit whose training rows hold one class has one output)."""
    from tabbench.metrics import PRIMARY

    metric = PRIMARY[meta.task][0]
    if metric == "auroc" and len(t_val.unique()) < 2:
        return "log_loss"
    return metric
