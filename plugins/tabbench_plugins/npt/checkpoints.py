"""One NPT training run as an object that can be saved and resumed: ``Run``.

A run of the paper's length can outlive the machine it runs on (CPU machines here are reclaimed
after a few hours; cloud machines are pre-empted), so everything the training loop changes lives
in one place and is written to a checkpoint every few minutes:

    the model's weights, LAMB's moments, Lookahead's slow weights and counter, the generator that
    draws masks and batches (on CUDA the device's default one, which dropout shares), torch's global
    generator (dropout on the CPU), the next step, the batches left in
    the current epoch, the best-validation weights so far, their snapshots at each step budget, and
    the fit time spent so far (so that a resumed job's recorded fit time is the whole fit's).

The budget points' weights (``keep_at_points``) are not in a checkpoint: a resumed run keeps those its own
attempt passed, on its own clock.

On the CPU a resumed run is bit for bit the run that was not interrupted (tested in
tests/test_npt.py). Checkpoints are written atomically (a temporary file, then a rename), and a
checkpoint whose fingerprint (data, params and model layout) differs from the run's is ignored, never
loaded; the run then starts over and says why (``Checkpointer.ignored``, the record's
``info.checkpoint_ignored``), and its first checkpoint replaces the one it could not use.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from pathlib import Path

import torch

#: The step budgets at which the best-validation-so-far weights are kept, so that one long run also
#: gives the test metric a shorter run would have reached (a budget curve). Those below ``steps`` are used.
BUDGET_LADDER = (100, 300, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000)



def step_budgets(params) -> tuple:
    """The step budgets a run keeps its best-so-far weights at: the ``budgets`` param, else BUDGET_LADDER."""
    return BUDGET_LADDER if params["budgets"] is None else tuple(params["budgets"])


CHECKPOINT_FILE = "npt-checkpoint.pt"
#: What a job at ``steps: "auto"`` or ``size: "budget"`` resolved before training (its steps, its rung, the measured
#: slowdown), kept beside its checkpoint: an attempt that resumes the job takes it instead of timing the machine
#: again, whose answer would differ and make the checkpoint another run's.
RESOLUTION_FILE = "npt-resolution.json"


def saved_resolution(folder, identity: dict) -> dict | None:
    """The resolution an earlier attempt of this job saved in ``folder`` (``save_resolution``), if it was saved
    under the same ``identity`` (the job's params, seed, budget and table shape) and left a checkpoint to continue;
    else None. Without a checkpoint (an attempt stopped before its first) there is nothing to keep consistent with,
    and the job times the machine again: a resolution timed beside other load would otherwise cost it steps (seen:
    breadth's babies fold 0 trained 277 steps from an interrupted attempt's timing, its other folds about 690)."""
    path = Path(folder) / RESOLUTION_FILE if folder else None
    if path is None or not path.exists() or not (path.parent / CHECKPOINT_FILE).exists():
        return None
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # a damaged file: the job times the machine again
    return saved["resolution"] if saved.get("identity") == json.loads(json.dumps(identity)) else None


def save_resolution(folder, identity: dict, resolution: dict) -> None:
    """Keep ``resolution`` in ``folder`` for a later attempt of the job (written atomically)."""
    if not folder:
        return
    path = Path(folder) / RESOLUTION_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"identity": identity, "resolution": resolution}))
    os.replace(tmp, path)


def fingerprint(*arrays, params: dict, model=None) -> str:
    """What a checkpoint must match to be resumed: the training table, every param, and the model's
    parameter names and shapes (a checkpoint from another version of the model is not loaded)."""
    digest = hashlib.sha256(repr(sorted(params.items())).encode())
    if model is not None:
        digest.update(repr([(name, tuple(p.shape)) for name, p in model.state_dict().items()]).encode())
    for a in arrays:
        digest.update(a.tobytes())
    return digest.hexdigest()[:24]


class Run:
    """The mutable state of one training run (see the module docstring)."""

    def __init__(self, model, optimizer, generator, steps: int, budgets=()):
        self.model, self.opt, self.gen = model, optimizer, generator
        self.params = list(model.parameters())
        self.steps = steps
        self.step = 0  # the next step to run
        self.batches = []  # index tensors left in the current epoch (None: the whole table)
        dev = self.params[0].device
        self.best = [p.detach().clone() for p in self.params]
        self.best_loss = torch.tensor(float("inf"), device=dev)
        self.best_step = torch.tensor(steps, device=dev)
        self.budgets = tuple(b for b in budgets if b < steps)
        self.snapshots = {}  # budget -> (best_step at that budget, weights on the host)
        self.last_loss = None
        self.earlier_seconds = 0.0  # fit time of the attempts this run was resumed from (their checkpoint's)
        self.earlier_cpu_seconds = 0.0  # and their CPU time (every thread), to the checkpoint
        self.started, self.started_cpu = time.perf_counter(), time.process_time()

    # --- best-so-far and budget snapshots -------------------------------------------------------

    def observe(self, val_loss, step):
        """Keep the weights if this validation loss, taken after ``step`` (an int or a device tensor), is the
        best so far: no host sync (torch.where), and every tensor updated in place (a CUDA graph replays it)."""
        improved = val_loss < self.best_loss
        self.best_loss.copy_(torch.where(improved, val_loss, self.best_loss))
        self.best_step.copy_(torch.where(improved, step, self.best_step))
        with torch.no_grad():
            for b, p in zip(self.best, self.params):
                b.copy_(torch.where(improved, p.detach(), b))

    def snapshot_if_budget(self, has_val: bool):
        """After step ``self.step``: at a budget, keep the weights a run of that length would have used."""
        if self.step not in self.budgets:
            return
        weights = self.best if has_val else self.params
        step = int(self.best_step) if has_val else self.step
        self.snapshots[self.step] = (step, [w.detach().to("cpu", copy=True) for w in weights])

    def point_state(self, has_val: bool, validated_s: dict) -> tuple:
        """(the elapsed time the best validation so far ended at, a host copy of its weights), or (None, None)
        where none was validated (``validated_s``: validated step -> seconds) or there are no validation rows."""
        if not has_val or not validated_s:
            return None, None
        step = int(self.best_step)  # a host sync: at budget points only
        return validated_s[step], [w.detach().to("cpu", copy=True) for w in self.best]

    def keep_at_points(self, points, has_val: bool, validated_s: dict):
        """The job's budget points passed since the last call (``points``, tabbench.estimator.TimePoints) get
        ``point_state``: the best weights validated before them."""
        if points is not None and points.due:
            points.keep(*self.point_state(has_val, validated_s))

    def use_best(self):
        with torch.no_grad():
            for b, p in zip(self.best, self.params):
                p.copy_(b)

    # --- checkpoints ----------------------------------------------------------------------------

    def state_dict(self) -> dict:
        return {
            "model": self.model.state_dict(), "opt": self.opt.state_dict(), "gen": self.gen.get_state(),
            "torch_rng": torch.get_rng_state(), "step": self.step, "batches": self.batches,
            "best": self.best, "best_loss": self.best_loss, "best_step": self.best_step,
            "snapshots": self.snapshots, "last_loss": self.last_loss,
            "seconds": self.earlier_seconds + time.perf_counter() - self.started,
            "cpu_seconds": self.earlier_cpu_seconds + time.process_time() - self.started_cpu,
        }

    def load_state_dict(self, state: dict):
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        # generator states are CPU byte tensors wherever the generator lives; the checkpoint was loaded onto the
        # run's device
        self.gen.set_state(state["gen"].cpu())
        torch.set_rng_state(state["torch_rng"].cpu())
        self.step, self.batches = state["step"], state["batches"]
        with torch.no_grad():
            for b, saved in zip(self.best, state["best"]):
                b.copy_(saved)
            self.best_loss.copy_(state["best_loss"])
            self.best_step.copy_(state["best_step"])
        self.snapshots, self.last_loss = state["snapshots"], state["last_loss"]
        self.earlier_seconds = state.get("seconds", 0.0)  # checkpoints written before it was kept: unknown
        self.earlier_cpu_seconds = state.get("cpu_seconds", 0.0)  # likewise


class Checkpointer:
    """Saves a ``Run`` to ``folder`` every ``minutes`` of wall time; loads it back when it matches."""

    def __init__(self, folder, minutes: float, fingerprint: str):
        self.path = Path(folder) / CHECKPOINT_FILE if folder else None
        self.interval = minutes * 60
        self.fingerprint = fingerprint
        self.last = time.monotonic()
        self.resumed_from = None
        self.ignored = None  # why a checkpoint that was there was not loaded

    def resume(self, run: Run) -> bool:
        if self.path is None or not self.path.exists():
            return False
        try:
            state = torch.load(self.path, map_location=run.params[0].device, weights_only=False)
        except Exception as exc:  # noqa: BLE001 - a damaged checkpoint is not worth a failed job: start over
            return self._ignore(f"it is unreadable ({type(exc).__name__}); starting over")
        if state.get("fingerprint") != self.fingerprint:
            return self._ignore(f"it (step {state.get('run', {}).get('step')}) was made by another run: its training "
                                "table, params or model layout differ (another version of the code, or, at "
                                "steps: auto or size: budget, another measured rate that chose other steps or "
                                "size); starting over")
        run.load_state_dict(state["run"])
        self.resumed_from = run.step
        return True

    def _ignore(self, why: str) -> bool:
        self.ignored = why  # recorded: no path, which would name this machine's folders
        warnings.warn(f"npt checkpoint {self.path} not resumed: {why}", stacklevel=3)
        return False

    def maybe_save(self, run: Run, force: bool = False):
        if self.path is None or not (force or time.monotonic() - self.last >= self.interval):
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        torch.save({"fingerprint": self.fingerprint, "run": run.state_dict()}, tmp)
        os.replace(tmp, self.path)
        self.last = time.monotonic()
