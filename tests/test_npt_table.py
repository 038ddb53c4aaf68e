"""NPT's table and its training loop meet through public faces (plugins/tabbench_plugins/npt/table.py,
training.py): the loop takes no private name of the estimator, and moving the table out of the estimator
left the checkpoints that runs write as they were, so a run killed before the move resumes after it.

That training is bit for bit what it was before the move was checked once, outside the suite, on thirteen
CPU configurations (predictions, losses, final weights and budget snapshots equal with torch.equal); the
checks that keep it so are test_npt.py's (same seed, same predictions; a killed fit resumes to the same
weights) and the fingerprint below.
"""

from __future__ import annotations

import ast
from pathlib import Path


from tests.conftest import need

torch = need("torch")

from tabbench.data.cache import DataPaths  # noqa: E402
from tabbench.data.dataset import DatasetConfig, SplitConfig, load_dataset  # noqa: E402
from tabbench.data.sources.sklearn import Sklearn  # noqa: E402
from tabbench.data.splits import make_splits  # noqa: E402
from tabbench.estimator import JobContext, TrainingClock  # noqa: E402
from tabbench_plugins.npt import NPT  # noqa: E402
from tabbench_plugins.npt.checkpoints import CHECKPOINT_FILE  # noqa: E402
from tests.test_npt import assert_same_fit  # noqa: E402

NPT_DIR = Path(__file__).resolve().parents[1] / "plugins" / "tabbench_plugins" / "npt"


def _estimator_names():
    """The estimator's private methods (a leading underscore) and the state ``fit`` sets on it (``self.x = ...``)."""
    tree = ast.parse((NPT_DIR / "estimator.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "NPT")
    private = {f.name for f in cls.body if isinstance(f, ast.FunctionDef)
               and f.name.startswith("_") and not f.name.startswith("__")}
    state = {n.attr for n in ast.walk(cls) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
             and isinstance(n.value, ast.Name) and n.value.id == "self"}
    return private, state


def test_the_training_loop_uses_no_private_name_of_the_estimator():
    """training.py gets the table, the model and the optimiser as arguments and uses their public faces, as
    nanoGPT's train.py uses its model: it imports no estimator, names none of the estimator's private methods
    nor the state its fit keeps (``model_``, ``table_``, ...), and reaches a private name (``._x``) on no object
    but its own (``self``)."""
    private, state = _estimator_names()
    assert {"_patch_order", "_table", "_resolve"} <= private and {"table_", "model_", "run_"} <= state
    tree = ast.parse((NPT_DIR / "training.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "NPT" not in imported and "estimator" not in imported and "tabbench_plugins.npt.estimator" not in modules
    reached = [(n.lineno, n.attr) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and (
        n.attr in private or n.attr in state
        or (n.attr.startswith("_") and not n.attr.startswith("__")
            and not (isinstance(n.value, ast.Name) and n.value.id == "self")))]
    assert reached == [], f"training.py reaches into the estimator or another object's private names: {reached}"


class _StopsAfter(TrainingClock):
    """A training clock that runs out after ``steps`` steps: the fit stops there, its checkpoint left behind
    as a killed run's would be (the checkpoint of a step is written before the clock is asked)."""

    def __init__(self, steps: int):
        super().__init__(None)
        self.steps, self.asked = steps, 0

    def out_of_time(self) -> bool:
        self.asked += 1
        self.stopped = self.asked >= self.steps
        return self.stopped


class _ContextStoppingAt17(JobContext):
    """A job's context whose training clock runs out after 17 steps (``_StopsAfter``)."""

    def training_clock(self, share=None):
        return _StopsAfter(17)


#: The fingerprint the code before table.py (commit bbad529) wrote into this job's checkpoint: the training
#: table's bytes, the job's params and seed, and the model's parameter names and shapes. Were it to change,
#: every checkpoint on disk would be ignored and its run started over.
FINGERPRINT = "a168c08753a4cdc98b310683"

#: What a checkpoint holds (checkpoints.Run.state_dict), as written before table.py.
RUN_STATE = {"model", "opt", "gen", "torch_rng", "step", "batches", "best", "best_loss", "best_step", "snapshots",
             "last_loss", "seconds", "cpu_seconds"}  # cpu_seconds: kept since resumed jobs count every attempt's CPU


def test_a_checkpoint_keeps_the_format_of_the_runs_written_before_the_table_moved(tmp_path):
    """A fit stopped at step 17 leaves the checkpoint the code before the move would have written for this
    job (its fingerprint and fields); a new fit resumes it and ends with exactly the weights, predictions and
    budget snapshots of a fit never stopped."""
    torch.set_num_threads(1)
    cfg = SplitConfig("kfold", k=10, val_fraction=2 / 9)
    ds = load_dataset(DatasetConfig("bc", Sklearn(id="breast_cancer"), split=cfg),
                      DataPaths.from_env(cache=tmp_path / "cache"))
    sp = make_splits(ds, cfg)[0]
    params = dict(e=16, n_layers=2, n_heads=4, steps=40, eval_every=3, budgets=[10, 20], checkpoint_minutes=0,
                  device="cpu")
    fit_args = (ds.X.iloc[sp.train], ds.y[sp.train], ds.X.iloc[sp.val], ds.y[sp.val])
    whole = NPT(ds.meta, 0, **params).fit(*fit_args)

    stopped = NPT(ds.meta, 0, **params)
    stopped.fit(*fit_args, context=_ContextStoppingAt17(checkpoint_dir=tmp_path / "ckpt"))
    assert stopped.info_["steps_run"] == 17
    saved = torch.load(tmp_path / "ckpt" / CHECKPOINT_FILE, weights_only=False)
    assert set(saved) == {"fingerprint", "run"} and set(saved["run"]) == RUN_STATE
    assert saved["fingerprint"] == FINGERPRINT and saved["run"]["step"] == 17
    del saved["run"]["cpu_seconds"]  # as the runs before it was kept wrote it: it still resumes
    torch.save(saved, tmp_path / "ckpt" / CHECKPOINT_FILE)

    resumed = NPT(ds.meta, 0, **params)
    resumed.fit(*fit_args, context=JobContext(checkpoint_dir=tmp_path / "ckpt"))
    assert resumed.info_["resumed_from_step"] == 17
    assert_same_fit(whole, resumed, ds.X.iloc[sp.test], budgets=[10, 20])
