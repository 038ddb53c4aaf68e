"""NPT's speed on this machine: a per-machine calibration of the cost model, measured once and kept.

``steps: "auto"`` and ``size: "budget"`` size a fit from the cost model's seconds (cost.py) times how much slower
than it a training pass runs here (the *slowdown*). A fit used to time that pass at its start, under whatever load
the machine had at that moment: beside another busy process one credit_card fold measured itself 6.3 times slower
than its siblings and took another size. Now the pass is timed in CPU seconds of the job's own process (another
process on the core takes wall time from it, not CPU time), the least of ``TIMED_PASSES`` after a warm-up, once
per kind of machine (tabbench.measure.fingerprint's ``id``), torch version and threads, device and the pass's
shape (the model's size, the table's columns, the rows timed); it is kept in cost.py's ``SpeedBook`` (a folder of
the data cache, ``npt-speed/``), and every later fit of that shape on that kind of machine, and ``tabbench plan``, read the
same number: the same job takes the same size and steps alone or beside a CPU hog. Each record says which
(``info.speed``: the slowdown, whether this fit measured or read it, the machine's id).

The moment still moves CPU seconds (a core shared with another busy process costs a job CPU time too, through its
caches; in breadth's runs the same steps took up to 1.45 times the CPU seconds with other jobs on the other core),
and most shapes are measured by the fold that meets them first, under whatever the machine does then. So each
measurement is taken against the machine's *reference pass* (``ReferencePass``: the ladder's e8-l2 over a
fixed table, timed in ROUNDS rounds alternating with the fit's own passes): the first measurement on a kind of
machine stores the reference's time (``REFERENCE``), and each measurement scales its slowdown by that stored time
over the reference's time now, so that what the moment does to both passes cancels (the book's ``load`` and the record's
``info.speed_load``: how much slower the reference ran than stored). The slowdowns of one machine then share one
scale, its first reference, measured once.

Which rows are timed: a probe of PROBE_ROWS rows, then a whole batch, or else TIMED_ROWS rows, where the probe
says ``TIMED_PASSES + 1`` such passes cost at most TIMING_SHARE of the job's training time (each scaled by the cost
model to a whole batch): a whole batch of a large model takes tens of seconds. A lookup tries those rows in the
same order. Delete the folder (or set $TABBENCH_CACHE elsewhere) to measure again, say after a BIOS or kernel
change that the fingerprint does not see.
"""

from __future__ import annotations

import time

from tabbench_plugins.npt.cost import PROBE_ROWS, SpeedBook, estimate_cpu_seconds, pass_seconds_at

TIMING_SHARE = 0.1
#: Passes timed after one warm-up pass (``least_seconds``); the least is kept.
TIMED_PASSES = 2
#: The reference pass: the ladder's e8-l2 (e 8, 2 layers, 2 heads) over REF_ROWS rows of REF_COLUMNS numeric
#: columns (fixed values, about a seventh masked): 33 ms a pass on one core of this project's Xeon.
REF_COLUMNS, REF_ROWS = 16, 512
#: The book's key of the reference pass's time (with torch's version, its threads and the autocast).
REFERENCE = "reference pass"
#: On the CPU a measurement times the reference pass and the fit's own in this many alternate rounds (each a warm-up
#: and TIMED_PASSES) and keeps the least of each: one interrupted pass does not decide a shape's speed (beside a
#: busy loop, one of three attrition fits measured 3 times its siblings' slowdown with a single round).
ROUNDS = 3


def least_seconds(one_pass, clock=time.process_time, sync=None) -> float:
    """One warm-up call of ``one_pass`` (which pays one-off allocations, or a compile), then the least of
    TIMED_PASSES timed calls, in seconds of ``clock``; ``sync``: called before each reading stops (a device's
    synchronisation)."""
    best = float("inf")
    for attempt in range(TIMED_PASSES + 1):
        start = clock()
        one_pass()
        if sync is not None:
            sync()
        if attempt:
            best = min(best, clock() - start)
    return best


def timed_pass_seconds(table, model, torch, rows: int, compiled=None) -> float:
    """Seconds of one training pass (forward and backward) of ``model`` over the ``table``'s first ``rows`` rows
    under the table's autocast (``least_seconds``): CPU seconds of this process on the CPU, wall seconds with the
    device synchronised on CUDA. ``compiled``: the pass through that ``compiled.CompiledLoss`` of the model (its
    loss over every observed entry), which the warm-up pass compiles. The weights, their gradients, every random
    generator and the train/eval mode are left as they were."""
    from tabbench_plugins.npt.model import entry_losses

    xb, mb = table.x[:rows], table.m[:rows]
    cuda = table.device.type == "cuda"

    def one_pass():
        if compiled is not None:
            compiled(xb, mb, xb, ~mb, 0.5, 0.5).backward()
        else:
            with table.autocast():
                out = model(xb, mb)
            entry_losses(out, xb, table.cards, table.n_patches, table.patch_dim).mean().backward()

    mode = model.training
    with torch.random.fork_rng(devices=[table.device.index or 0] if cuda else []):
        model.train()
        best = least_seconds(one_pass, *((time.perf_counter, lambda: torch.cuda.synchronize(table.device))
                                         if cuda else ()))
    for p in model.parameters():
        p.grad = None
    model.train(mode)
    return best


class ReferencePass:
    """The machine's reference pass (REF_COLUMNS, REF_ROWS; forward and backward under bf16 autocast when ``amp``),
    its model and table made once, under a forked random state (the fit's generators are left as they were);
    ``seconds()``: its CPU seconds now (``least_seconds``, from gradients cleared, as a new model's)."""

    def __init__(self, torch, amp: bool):
        from tabbench_plugins.npt.model import NPT, NPTConfig

        self.torch, self.amp, self.cards = torch, amp, (0,) * REF_COLUMNS
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            self.model = NPT(NPTConfig(cards=self.cards, e=8, n_layers=2, n_heads=2)).train()
            self.m = torch.rand(REF_ROWS, REF_COLUMNS) < 0.15
            self.x = torch.randn(REF_ROWS, REF_COLUMNS).masked_fill(self.m, 0.0)

    def _pass(self) -> None:
        from tabbench_plugins.npt.model import entry_losses
        from tabbench_plugins.torch_training import bf16_autocast

        with bf16_autocast("cpu", self.amp):
            out = self.model(self.x, self.m)
        entry_losses(out, self.x, self.cards).mean().backward()

    def seconds(self) -> float:
        for p in self.model.parameters():
            p.grad = None
        with self.torch.random.fork_rng(devices=[]):
            return least_seconds(self._pass)


def reference_key(torch, amp: bool) -> str:
    """The book's key of the reference pass for a fit with this autocast (``amp``) on this many threads."""
    import json

    from tabbench.machine_book import torch_version

    return json.dumps({"pass": REFERENCE, "amp": bool(amp), "threads": torch.get_num_threads(),
                       "torch": torch_version()}, sort_keys=True)


def calibrated_slowdown(book: SpeedBook, table, model, torch, meta, sizes, params, left_s: float | None,
                        compiled=None):
    """(slowdown, "stored" or "measured") for a training pass at ``params`` over this fit's ``table``: the book's,
    else measured here (``timed_pass_seconds`` against the cost model's seconds for the same rows, the rows chosen
    as the module docstring says, ``left_s``: the training time left) and stored. On a GPU the pass is timed each
    fit and never stored: the book is the CPU's (its jobs count CPU time; a GPU job counts wall time).
    ``compiled`` (``params["compile"]`` true): the pass is that ``compiled.CompiledLoss``'s, timed over a whole batch
    only (each number of rows is a compile), and the seconds its compile took are stored with it (``compile_s``)."""
    on_cpu = table.device.type == "cpu"
    stored = book.lookup(meta, sizes, params) if on_cpu else None
    if stored is not None:
        return stored, "stored"
    est = estimate_cpu_seconds(meta, sizes, {**params, "steps": 0})
    cores = 1.0 if table.device.type == "cpu" else max(1.0, float(params["cpus"]))  # CPU seconds: every thread's
    rounds = ROUNDS if on_cpu else 1
    ref = ReferencePass(torch, table.amp) if on_cpu else None
    reference = []  # the reference pass's seconds in the rounds of the rows kept

    def slowdown(rows):  # the pass over ``rows``, and on the CPU the reference, in alternate rounds: the least of each
        passes, reference[:] = [], []
        for _ in range(rounds):
            if on_cpu:
                reference.append(ref.seconds())
            passes.append(timed_pass_seconds(table, model, torch, rows, compiled))
        return min(passes) / (pass_seconds_at(est, params, rows) / cores)

    if compiled is not None:
        timed, value, more = est["rows"], slowdown(est["rows"]), {"compile_s": compiled.seconds}
    else:
        probe, more = min(est["rows"], PROBE_ROWS), {}
        timed, value = probe, slowdown(probe)
        for rows in SpeedBook.rows_to_time(est["rows"])[:2]:
            cost = rounds * (TIMED_PASSES + 1) * value * pass_seconds_at(est, params, rows) / cores
            if rows > probe and (left_s is None or cost < TIMING_SHARE * left_s):
                timed, value = rows, slowdown(rows)
                break
    if on_cpu:  # against the machine's reference pass: what the moment does to both cancels
        now_s = min(reference)
        key = reference_key(torch, table.amp)
        stored = book.get(key)
        if stored is None:
            book.put(key, {"seconds": now_s})
        load = 1.0 if stored is None else now_s / float(stored["seconds"])
        value /= load
        book.store(book.key(meta, sizes, params, timed), value, load=load, **more)
    return value, "measured"
