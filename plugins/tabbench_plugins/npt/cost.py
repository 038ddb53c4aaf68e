"""NPT's batching rule, the CPU cost model of its pre-run check (``check_cost``), the cost model's per-machine
calibration (``SpeedBook``, measured by speed.py) and the one rule that sizes a job to its budget (``sizing``).

What the defaults cost on a CPU (e = 32, 8 layers, 500 steps; one core of an AMD EPYC with bf16,
benchmarks/npt_default_cost.py). The model has about 4 x 13 x (e x columns)^2 parameters (ABD's width
is e times the columns, target included): 6.4M for a 10-feature table, 36M for 25 features, 161M for
Covertype's 54. A training step costs about 6 operations per parameter per row, at about 1e11 per
CPU-second, plus attention between rows (4 rows^2 x width per ABD layer, forward): per 1,000 rows of
its batch about 0.4 s at 10 features, 2.2 s at 25 and 10 s at 54, plus the weights' update (0.3 s at
161M parameters). Every ``eval_every`` (6) steps a forward pass over the training and validation rows
costs a third of that per row. So ``npt: {}`` on a 15,000-row table of 54 features (10,584 training
rows in a 5-fold split) trains on 6 stratified batches of 1,764 rows, about 20 CPU-s a step, about 4
CPU-hours a job with its evaluations; on the whole table (``batch_size: null``) about 200 s a step,
30 CPU-hours. Before a run, ``check_cost`` (ModelSpec.check) refuses a CPU job whose estimate exceeds
the suite's ``budget.time_s`` (wall time: the estimate divided over ``cpus``), or MAX_CPU_HOURS (48)
when the suite sets no budget, naming the params to set. fp32 (``amp: false``) costs 1.6 times more.

No torch here: the check runs before any job, in the process that plans the run.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Union

from tabbench.estimator import PREDICT_SLOWDOWN, TRAINING_SHARE
from tabbench.machine_book import MachineBook, torch_version

#: ``batch_size: "auto"``: the whole table up to this many rows (the paper trains on whole tables up to
#: Concrete's 1,030 rows), above it class-stratified minibatches of at most this many rows, as equal as
#: can be (the paper's rule for large tables: minibatches of a few thousand rows that keep the class
#: proportions). A step's CPU time grows about linearly with its rows up to here (attention between
#: rows is a small share of it): benchmarks/npt_default_cost.py.
AUTO_BATCH_ROWS = 2048

#: The CPU cost model of the pre-run check (``check_cost``): a pass over a batch costs ``pass_flops``
#: floating-point operations, done at CPU_FLOPS per CPU-second (one core, bf16 autocast), and every
#: training step adds the LAMB + Lookahead update, UPDATE_SECONDS per parameter. Measured with
#: benchmarks/npt_default_cost.py (AMD EPYC, the defaults on Covertype: 100-127 GFLOP/s per core).
CPU_FLOPS = 1.0e11
UPDATE_SECONDS = 2e-9

#: fp32 (``amp: false``) runs this many times slower than bf16 autocast on the CPU (benchmarks/README.md).
FP32_SLOWDOWN = 1.6

#: Without a suite budget (``budget.time_s``) a job estimated above this many CPU-hours (two CPU-days)
#: is refused: far beyond what a CPU benchmark job should take (the paper-budget runs of
#: suites/uci-small-npt-paper.yaml, 10,000 whole-table steps, are estimated at up to 24).
MAX_CPU_HOURS = 48


def n_batches(n: int, batch_size) -> int:
    """Training batches per epoch over a table of ``n`` rows: 1 = the whole table. ``"auto"``: batches
    of at most AUTO_BATCH_ROWS rows; a number: about that many rows each (the table split evenly)."""
    if batch_size == "auto":
        return math.ceil(n / AUTO_BATCH_ROWS)
    return 1 if not batch_size or batch_size >= n else max(1, round(n / batch_size))


def eval_chunks(n: int, eval_batch_size, batch_size) -> int:
    """Prediction passes over ``n`` rows (context and queries): at most eval_batch_size (else batch_size;
    AUTO_BATCH_ROWS for "auto") rows each; 1 when that is unset or covers all rows."""
    size = eval_batch_size or (AUTO_BATCH_ROWS if batch_size == "auto" else batch_size)
    return 1 if not size or size >= n else math.ceil(n / size)


def _n_params(d: int, e: int, n_layers: int, residual: str) -> int:
    """Parameters of the attention blocks (all but a few thousand): ABD blocks of width d*e, ABA of e."""
    def block(h):
        return 12 * h * h + 13 * h + (h * h + h if residual == "linear" else 0)

    return (n_layers + 1) // 2 * block(d * e) + n_layers // 2 * block(e)


def pass_flops(n_params: int, rows: float, width: int, abd_layers: int, backward: bool = False) -> float:
    """Floating-point operations of one pass over a batch of ``rows`` rows: 2 per parameter per row
    (every row goes through every weight), attention between rows 4 * rows^2 * width per ABD layer
    (width = d * e); a training pass (backward) costs three forward passes."""
    forward = 2 * n_params * rows + 4 * rows * rows * width * abd_layers
    return 3 * forward if backward else forward


def estimate_cpu_seconds(meta, sizes, params) -> dict:
    """CPU seconds (one core) a fit with these params is expected to take on a table with ``sizes``
    (tabbench.spec.SplitSizes): training steps plus validation passes (CPU_FLOPS). Returns the
    estimate and what it was computed from (rows per batch, parameters, seconds per step)."""
    d = (params.get("n_patches") or len(meta.columns)) + 1
    e, layers = params["e"], params["n_layers"]
    n_params = _n_params(d, e, layers, params["residual"])
    transductive = bool(params["transductive"])
    table = sizes.train + (sizes.val + sizes.test if transductive else 0)
    abd = (layers + 1) // 2
    speed = CPU_FLOPS / (1 if params["amp"] else FP32_SLOWDOWN)
    rows = math.ceil(table / n_batches(table, params["batch_size"]))
    training_pass = pass_flops(n_params, rows, d * e, abd, backward=True) / speed  # forward and backward
    step = UPDATE_SECONDS * n_params + training_pass
    steps = int(params["steps"])
    evals = steps // max(1, int(params["eval_every"])) + 2 if sizes.val else 2
    evaluated = table if transductive else table + sizes.val  # context plus validation rows
    chunks = eval_chunks(evaluated, params["eval_batch_size"], params["batch_size"])
    evaluation = chunks * pass_flops(n_params, evaluated / chunks, d * e, abd) / speed
    return {"seconds": steps * step + evals * evaluation, "rows": rows, "table": table, "whole": rows == table,
            "n_params": n_params, "step_s": step, "pass_s": training_pass, "eval_s": evaluation, "evals": evals,
            "steps": steps, "d": d}


def pass_seconds_at(est: dict, params, rows: int) -> float:
    """The cost model's seconds of one training pass over ``rows`` rows for the fit ``est`` describes (what
    ``estimate_cpu_seconds`` returned for ``params``), whose batches have ``est["rows"]`` rows."""
    width, abd = est["d"] * params["e"], (params["n_layers"] + 1) // 2
    return est["pass_s"] * (pass_flops(est["n_params"], rows, width, abd)
                            / pass_flops(est["n_params"], est["rows"], width, abd))


#: ``steps: "auto"``: the steps whose estimated CPU time (``estimate_cpu_seconds``) fills the training share of
#: the job's time budget that every iterative model gets (tabbench.estimator.TRAINING_SHARE); the rest is left
#: for prediction and the budget curve's scoring. A fit scales the estimate by one timed pass on its machine
#: (``auto_steps``'s ``slowdown``); ``tabbench plan`` cannot, and assumes the reference CPU's speed.
AUTO_BUDGET_SHARE = TRAINING_SHARE


def auto_steps(meta, sizes, params, budget_s: float, slowdown: float = 1.0, available_s: float | None = None,
               cores: float | None = None) -> int:
    """``steps: "auto"`` resolved: the most steps whose estimated CPU time (``estimate_cpu_seconds``, the
    evaluations included) fits in the training time: ``available_s`` seconds of the job's clock (default
    AUTO_BUDGET_SHARE of a job budget of ``budget_s``) spanning ``cores`` cores (default the ``cpus`` param: wall
    seconds on that many; 1 for CPU seconds), on a machine ``slowdown`` times slower than the cost model (the
    machine's calibration: ``speed.py``; the reference CPU: 1); 0 when not one step fits."""
    available = AUTO_BUDGET_SHARE * budget_s if available_s is None else available_s
    limit = available * max(1.0, float(params["cpus"] if cores is None else cores)) / slowdown

    def seconds(steps):
        return estimate_cpu_seconds(meta, sizes, {**params, "steps": steps})["seconds"]

    base = estimate_cpu_seconds(meta, sizes, {**params, "steps": 0})  # the passes every fit makes
    per_step = base["step_s"] + (base["eval_s"] / max(1, int(params["eval_every"])) if sizes.val else 0.0)
    steps = max(0, math.floor((limit - base["seconds"]) / per_step))  # a lower bound: evaluations come in whole
    while seconds(steps + 1) <= limit:  # at most eval_every more
        steps += 1
    return steps


@dataclass(frozen=True)
class Rung:
    """One size of ``size: "budget"``'s ladder: the params it sets (the rest stay as the method gives them)."""

    name: str
    e: int
    n_layers: int
    n_heads: int
    batch_size: Union[int, str]  # rows per step, as the ``batch_size`` param ("auto": whole tables up to 2,048)

    @property
    def params(self) -> dict:
        return {"e": self.e, "n_layers": self.n_layers, "n_heads": self.n_heads, "batch_size": self.batch_size}


#: ``size: "budget"``: the sizes NPT chooses among for a job's time budget, cheapest step first (each rung's step
#: costs about 4 to 8 times the one before on a table of ~20 columns: parameters grow with (e x columns)^2 and the
#: layers). The largest is the paper's base configuration (breadth's ``npt``); the smallest also takes row batches
#: of about 512, for tables too wide or long for thousands of steps otherwise. suites/npt-budget-meta.yaml runs
#: every rung on the meta-training tables; docs/npt.md says how the rule was chosen.
LADDER = (
    Rung("e8-l2-b512", e=8, n_layers=2, n_heads=2, batch_size=512),
    Rung("e8-l2", e=8, n_layers=2, n_heads=2, batch_size="auto"),
    Rung("e16-l4", e=16, n_layers=4, n_heads=4, batch_size="auto"),
    Rung("e32-l4", e=32, n_layers=4, n_heads=8, batch_size="auto"),
    Rung("e32-l8", e=32, n_layers=8, n_heads=8, batch_size="auto"),
)

#: ``size: "budget"``'s one free number: a rung qualifies when it can train at least this many steps in the job's
#: budget, and the largest that qualifies is taken. Chosen by benchmarks/npt_budget_rule.py from the VALIDATION
#: metrics of suites/npt-budget-meta.yaml's records (tests/test_npt_budget_rule.py re-derives it from them).
MIN_STEPS = 1500


def choose_rung(steps_of: Callable[[Rung], Optional[int]]) -> tuple[Rung, dict]:
    """The rule of ``size: "budget"``: the largest rung of LADDER whose ``steps_of(rung)`` (the steps it can train
    in the job's budget; None: out of reach, not counted) reaches MIN_STEPS, else the smallest. Rungs are asked
    from the largest down and no further than the one taken. Returns it and what each rung asked answered."""
    tried = {}
    for rung in reversed(LADDER):
        tried[rung.name] = steps_of(rung)
        if (tried[rung.name] or 0) >= MIN_STEPS:
            return rung, tried
    return LADDER[0], tried


def prediction_reserve(val_pass_s: float, table_rows: int, n_val: int, predict_rows: int, kept: int) -> float:
    """Seconds to keep after training for predicting ``predict_rows`` rows (test and validation) with the final
    weights and with each of ``kept`` budget snapshots: a validation pass took ``val_pass_s`` over the table's
    ``table_rows`` rows plus its ``n_val`` validation rows, and each prediction appends its rows to the same
    table (the test rows in one prediction, the validation rows in another). After training the job predicts them
    in the same budget (and scores the weights kept at each step budget the same way), on a machine that may be
    busier by then: ``PREDICT_SLOWDOWN`` times that (tabbench/estimator.py)."""
    predict_s = val_pass_s * (2 * table_rows + predict_rows) / max(1, table_rows + n_val)
    return PREDICT_SLOWDOWN * predict_s * (1 + kept)


@dataclass(frozen=True)
class Sizing:
    """What ``steps: "auto"`` and ``size: "budget"`` resolved for one job: one value, made by ``sizing`` alone, for
    ``tabbench plan``, the pre-run check and the fit (``NPT.fit`` keeps it as ``sizing_``).

    ``params``: the fit's params (at ``size: "budget"`` the method's with the rung's size); ``steps``: the steps
    they train; ``slowdown``: the speed they were sized at, times the cost model's seconds (the machine's stored
    calibration, speed.py; 1: the reference CPU's), and ``speed`` where it came from; ``reserve_s``: the seconds kept after training for predicting
    (``TrainingClock.reserve``); ``rung`` and ``rungs_tried`` (rung -> the steps it could train; None: out of
    reach, not asked its speed): at ``size: "budget"``."""

    params: dict
    steps: int
    slowdown: Optional[float]  # None: steps given, not sized
    reserve_s: float = 0.0
    rung: Optional[str] = None
    rungs_tried: Optional[dict] = field(default=None)
    speed: Optional[str] = None  # where slowdown came from: "stored", "measured", "reference", "resumed"

    def saved(self) -> dict:
        """What a checkpoint folder keeps of it (``checkpoints.save_resolution``)."""
        return {"steps": self.steps, "slowdown": self.slowdown, "reserve_s": self.reserve_s, "rung": self.rung,
                "rungs_tried": self.rungs_tried}

    @classmethod
    def from_saved(cls, params: dict, saved: dict) -> "Sizing":
        """The sizing an earlier attempt saved (``saved``), for the method's ``params``."""
        rung = next((r for r in LADDER if r.name == saved.get("rung")), None)
        return cls({**params, **(rung.params if rung else {})}, saved["steps"], saved.get("slowdown") or 1.0,
                   saved.get("reserve_s") or 0.0, saved.get("rung"), saved.get("rungs_tried"), "resumed")


def sizing(meta, sizes, params, budget_s: float, slowdown_of: Callable[[dict], tuple], *, spent_s=0.0,
           predict_rows: int | None = None, n_points: int = 0, cores: float | None = None) -> Sizing:
    """The one rule that resolves ``steps: "auto"`` (and ``size: "budget"``'s rung) for a job of ``budget_s``
    seconds on the job's clock, ``spent_s`` of them already spent (the fit's setup, a function read after each
    speed is known; 0 for a plan).

    ``slowdown_of(params)``: (how many times the cost model's seconds a training pass at those params takes on
    the machine, where that came from): the machine's calibration (``SpeedBook``, measured by speed.py once per
    machine and shape and kept; ``tabbench plan`` reads the stored one, else 1: the reference CPU). Each rung asked (from the largest down, ``choose_rung``) is first
    checked at twice the reference speed: one that cannot reach MIN_STEPS even so is passed over without asking
    its speed. ``predict_rows`` (the job's test and validation rows) and ``n_points`` (its budget points): the
    seconds kept after training for predicting them (``prediction_reserve``) come off the training time first.
    ``cores``: the cores ``budget_s`` spans (``auto_steps``)."""
    from tabbench_plugins.npt.checkpoints import step_budgets

    def share() -> float:  # of the training share, what is left
        return AUTO_BUDGET_SHARE * budget_s - (spent_s() if callable(spent_s) else spent_s)

    def resolve(p) -> Sizing:
        slowdown, speed = slowdown_of(p)
        left = share()
        steps = auto_steps(meta, sizes, p, budget_s, slowdown, left, cores)
        reserve = 0.0
        if predict_rows:  # keep time for predicting after training, then fit the steps in what is left
            est = estimate_cpu_seconds(meta, sizes, {**p, "steps": 0})
            per_core = max(1.0, float(p["cpus"] if cores is None else cores))
            val_pass_s = slowdown * est["pass_s"] / per_core / 3 * (est["table"] + sizes.val) / est["rows"]
            kept = sum(b < steps for b in step_budgets(p)) + n_points
            reserve = prediction_reserve(val_pass_s, est["table"], sizes.val, predict_rows, kept)
            left = min(left, left + (1 - AUTO_BUDGET_SHARE) * budget_s - reserve)  # the job's end, less it
            steps = auto_steps(meta, sizes, p, budget_s, slowdown, left, cores)
        return Sizing(p, steps, slowdown, reserve, speed=speed)

    if params.get("size") != "budget":
        return resolve(params)
    asked = {}

    def steps_of(rung):
        p = {**params, **rung.params}
        if auto_steps(meta, sizes, p, budget_s, 0.5, share(), cores) < MIN_STEPS:
            return None  # out of reach even at twice the reference speed
        asked[rung.name] = resolve(p)
        return asked[rung.name].steps

    rung, tried = choose_rung(steps_of)
    if rung.name not in asked:  # the smallest, taken when none qualified, was out of reach unasked
        asked[rung.name] = resolve({**params, **rung.params})
        tried[rung.name] = asked[rung.name].steps
    taken = asked[rung.name]
    return Sizing(taken.params, taken.steps, taken.slowdown, taken.reserve_s, rung.name, tried, taken.speed)


#: The rows a fit may time (speed.py): a probe's, and at most this many of a batch.
PROBE_ROWS, TIMED_ROWS = 64, 512
#: The params that change what a training pass computes or how, besides the table's shape (they are in the key).
SHAPE_PARAMS = ("e", "n_layers", "n_heads", "residual", "attention", "checkpointing", "amp", "n_patches", "cpus",
                "device")


class SpeedBook(MachineBook):
    """The cost model's per-machine calibration (speed.py measures it): the slowdowns measured on this kind of
    machine, a ``tabbench.machine_book.MachineBook`` (default folder: the data cache's ``npt-speed/``), pass
    shape -> slowdown."""

    def __init__(self, folder: Path | None = None):
        super().__init__("npt-speed", folder)

    # --- keys ----------------------------------------------------------------------------------------------

    @staticmethod
    def rows_to_time(batch_rows: int) -> list[int]:
        """The rows a fit may time, in the order it prefers them: a whole batch, TIMED_ROWS, the probe's."""
        return list(dict.fromkeys([batch_rows, min(batch_rows, TIMED_ROWS), min(batch_rows, PROBE_ROWS)]))

    def key(self, meta, sizes, params, rows: int) -> str:
        """The pass shape a calibration holds for: the params of SHAPE_PARAMS, the table's columns and the rows
        timed, with torch's version and device (the machine is the file), and ``scale``: measured against the
        machine's reference pass (speed.py; entries from before it had none, and are measured again)."""
        est = estimate_cpu_seconds(meta, sizes, {**params, "steps": 0})
        device = params.get("device", "cpu")
        shape = {**{k: params.get(k) for k in SHAPE_PARAMS}, "device": "cpu" if device == "auto" else device,
                 "columns": est["d"], "rows": int(rows), "torch": torch_version(), "scale": "reference pass",
                 **({"compile": True} if params.get("compile") is True else {})}  # a compiled pass (compiled.py)
        return json.dumps(shape, sort_keys=True)

    # --- reading and writing --------------------------------------------------------------------------------

    def lookup(self, meta, sizes, params) -> float | None:
        """The stored slowdown for a pass at ``params`` on this table shape, or None where none is stored."""
        entry = self.entry(meta, sizes, params)
        return None if entry is None else float(entry["slowdown"])

    def entry(self, meta, sizes, params) -> dict | None:
        """What is stored for a pass at ``params`` on this table shape (its ``slowdown``; a compiled pass's also
        ``compile_s``, the seconds the last fit to compile that shape took to), or None where nothing is."""
        book = self.read()
        if not book:
            return None
        rows = estimate_cpu_seconds(meta, sizes, {**params, "steps": 0})["rows"]
        for timed in self.rows_to_time(rows):
            entry = book.get(self.key(meta, sizes, params, timed))
            if entry is not None:
                return entry
        return None

    def store(self, key: str, slowdown: float, **more) -> None:
        """Keep one calibration (``MachineBook.put``)."""
        self.put(key, {"slowdown": slowdown, **more})


def planned_speed(meta, sizes, params) -> tuple:
    """``tabbench plan``'s speed for a training pass at ``params``: this machine's stored calibration where a fit
    has made one (speed.py), else the reference CPU's (1)."""
    stored = SpeedBook().lookup(meta, sizes, params)
    return (1.0, "reference") if stored is None else (stored, "stored")


def budget_sizing(meta, sizes, params, budget_s: float) -> Sizing:
    """``steps: "auto"`` and ``size: "budget"`` resolved by ``sizing`` as a plan sees the job (``planned_speed``,
    the test and validation rows predicted after training)."""
    return sizing(meta, sizes, params, budget_s, lambda p: planned_speed(meta, sizes, p),
                  predict_rows=sizes.val + sizes.test)


def budget_sized(meta, sizes, params, budget_s: float) -> dict:
    """``params`` with ``steps: "auto"`` and ``size: "budget"`` resolved (``budget_sizing``); other params
    unchanged."""
    if params.get("steps") != "auto":
        return params
    sized = budget_sizing(meta, sizes, params, budget_s)
    return {**sized.params, "steps": sized.steps}


#: ``tabbench plan --gpus``: the rate a GPU runs NPT's operations at and a fixed cost per pass (kernel launches,
#: the step's small operations), fitted to the training steps measured on an H100 (bf16, fused attention,
#: benchmarks/README.md): Boston e 128 31 ms (0.53 TFLOP), Breast Cancer e 32 43 ms (0.19 TFLOP), the Higgs
#: shape e 64 53 ms (5.9 TFLOP); the fit gives 38, 37 and 53 ms. Small tables are bound by the fixed cost.
GPU_FLOPS = 3.5e14
GPU_PASS_OVERHEAD_S = 0.036


def estimate_seconds(meta, sizes, params, budget_s=None) -> float:
    """One fit's seconds on the device its params name (ModelSpec.estimate, for ``tabbench plan``): CPU-seconds
    of one core by ``estimate_cpu_seconds``; on a GPU (``device: cuda``) the same operations at GPU_FLOPS plus
    GPU_PASS_OVERHEAD_S a pass (an H100's rates: see there). ``steps: "auto"`` is resolved from ``budget_s``: on the
    CPU at the reference CPU's rates; on a GPU the fit times its own steps and trains for the budget's
    AUTO_BUDGET_SHARE, whatever the GPU (steps resolved at the CPU's rates would finish in seconds there)."""
    if params["steps"] == "auto" and params["device"] == "cuda" and budget_s:
        return AUTO_BUDGET_SHARE * budget_s
    if params["steps"] == "auto":
        params = budget_sized(meta, sizes, params, budget_s) if budget_s else {**params, "steps": 0}
    est = estimate_cpu_seconds(meta, sizes, params)
    if params["device"] != "cuda":
        return est["seconds"]
    return est["seconds"] * CPU_FLOPS / GPU_FLOPS + (est["steps"] + est["evals"]) * GPU_PASS_OVERHEAD_S


def _on_gpu(params) -> bool:
    if params["device"] != "auto":
        return params["device"] == "cuda"
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def check_cost(meta, sizes, params, budget_s=None) -> str | None:
    """Refuse (a message naming the params to set) a CPU fit whose estimated time exceeds the suite's
    per-job budget, or MAX_CPU_HOURS when the suite sets none. ModelSpec.check for ``npt``.
    ``steps: "auto"`` needs the budget, and at least one step must fit in it; its steps are estimated at the speed
    they were sized at (this machine's stored calibration, else the reference CPU's), as the fit trains them."""
    slowdown = 1.0
    if params["steps"] == "auto":
        if not budget_s:
            return ('npt: steps "auto" takes its step count from the suite\'s budget.time_s, and this suite sets '
                    "none: set budget.time_s, or give steps a number")
        if _on_gpu(params):  # a GPU fit times its own steps (estimate_seconds); the CPU's rates do not bound it
            return None
        sized = budget_sizing(meta, sizes, params, budget_s)
        params, slowdown = {**sized.params, "steps": sized.steps}, sized.slowdown
        if params["steps"] < 1:
            return (f'npt: steps "auto": not one training step fits in {AUTO_BUDGET_SHARE:.0%} of the suite\'s '
                    f"budget.time_s of {budget_s:,.0f} s with cpus {params['cpus']:g} (estimated, one core of this "
                    f"project's reference CPU); raise budget.time_s or cpus, or shrink the model (e, n_layers)")
    est = estimate_cpu_seconds(meta, sizes, params)
    cpus = max(1.0, float(params["cpus"]))
    cpu_limit = budget_s * cpus if budget_s else MAX_CPU_HOURS * 3600  # CPU-seconds: the budget is wall time
    if est["seconds"] * slowdown <= cpu_limit or _on_gpu(params):
        return None
    hours = est["seconds"] * slowdown / 3600
    batches = "the whole table" if est["whole"] else f"minibatches of {est['rows']:,} rows"
    over = (f"over the suite's budget.time_s of {budget_s:,.0f} s with cpus {params['cpus']:g}" if budget_s else
            f"over the {MAX_CPU_HOURS} CPU-hours a job may take without a budget (set budget.time_s to allow more)")
    per_step = (est["step_s"] + est["eval_s"] * (est["evals"] / max(1, est["steps"]))) * slowdown
    where = "one core of this project's reference CPU" if slowdown == 1 else "one core of this machine"
    fits = int(cpu_limit / per_step)
    auto = n_batches(est["table"], "auto") > 1
    hint = (f"batch_size (e.g. \"auto\": minibatches of at most {AUTO_BATCH_ROWS:,} rows; now {batches}), "
            if est["whole"] and auto else "batch_size, ")
    return (f"npt would train {est['n_params'] / 1e6:.0f}M parameters (e {params['e']} x {est['d']} columns, "
            f"{params['n_layers']} layers) on {batches} of a {est['table']:,}-row table: about {est['steps']:,} "
            f"steps x {per_step:,.1f} CPU-s = {hours:,.1f} CPU-hours (estimated, {where}), {over}. Set in the "
            f"suite's npt params: steps (about {fits:,} fit), {hint}e or "
            f"n_layers (parameters grow with (e x columns)^2), eval_every, cpus, or device: cuda"
            + ("; or raise budget.time_s" if budget_s else ""))
