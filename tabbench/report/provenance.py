"""Where and when a results folder's records were made, computed from the records alone (never written by hand).

- **Machines**: each record's hardware fingerprint (``environment.hardware``, tabbench/measure.py), named by its
  CPU's model (``machine_names``; the fingerprint id is added where two machines share a model name). A record
  without one (made before the fingerprint was recorded, or a job killed from outside, whose parent writes the
  record) is "not recorded"; a killed job's machine is then read off the records that finished just before and
  after it in the same folder, where both name one (``_neighbour``), and said to be inferred.
- **Clocks**: the clock a record's time budget counted on (tabbench/clock.py ``clock_of``: records without the
  field counted wall time).
- **Dates**: the first and last ``finished_at`` of the records the tables rank (the newest per job key).
- **Re-runs**: the store is append-only and the newest record of a job key wins (tabbench/store.py), so a job
  key with more than one record was run again. A re-run record made by ``tabbench run --force/--retry-failed``
  names its reason and the record it replaced (``rerun``, tabbench/run/runner.py); an older one says "reason not
  recorded", and the record it replaced is read from the records themselves (its status and machine).
- **Speed across machines**: where the same job (one key) finished on two machines, the ratio of its fit seconds
  on one to the other's (``speed_ratios``): how much more or less work a time budget buys there.

``provenance_block`` is the README block ``provenance``; ``comparison_note`` is what a comparison of times (the
cost section, Elo against budget, the ``job-times`` block) says when its records come from several machines or
clocks, naming the methods it touches.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from pathlib import Path

from tabbench.clock import clock_of, spent_seconds
from tabbench.measure import short_name

NOT_RECORDED = "not recorded"


def _hardware(record) -> dict | None:
    environment = record.get("environment")
    hardware = environment.get("hardware") if isinstance(environment, dict) else None
    return hardware if isinstance(hardware, dict) and hardware.get("id") else None


def hardware_id(record) -> str | None:
    """A record's hardware fingerprint id (None: not recorded). ``record``: a dict or a row of a records frame."""
    hardware = _hardware(record)
    return hardware["id"] if hardware else None


def machine_names(records) -> dict:
    """fingerprint id -> a short name: the CPU's model (and GPU's), with the id where two machines share it."""
    hardware = {}
    for record in records:
        h = _hardware(record)
        if h:
            hardware.setdefault(h["id"], h)
    names = {hid: short_name(h) for hid, h in hardware.items()}
    shared = Counter(names.values())
    return {hid: (f"{name} [{hid}]" if shared[name] > 1 else name) for hid, name in sorted(names.items())}


def _signature(sources) -> tuple:
    files = []
    for source in sources:
        folder = Path(source) / "records"
        if folder.is_dir():
            files += [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.glob("records*.jsonl*"))]
    return tuple(files)


_CACHE: dict = {}


def all_records(sources) -> list[dict]:
    """Every record of the result folders ``sources``, superseded ones included, in the order read (each with
    ``source``, its folder's name); read once per state of the files."""
    from tabbench.store import Store

    signature = _signature(sources)
    if signature not in _CACHE:
        out = []
        for source in sources:
            out += [{**r, "source": Path(source).name} for r in Store(source).records()]
        _CACHE.clear()
        _CACHE[signature] = out
    return _CACHE[signature]


def _neighbour(record, ordered: list, index: int) -> str | None:
    """The machine of the records finished just before and after ``ordered[index]`` in its folder, where both name
    the same one (None otherwise)."""
    def find(step):
        i = index + step
        while 0 <= i < len(ordered):
            if ordered[i].get("source") == record.get("source") and hardware_id(ordered[i]):
                return hardware_id(ordered[i])
            i += step
        return None

    before, after = find(-1), find(1)
    return before if before is not None and before == after else None


def history(records: list[dict]) -> dict:
    """key -> its records, oldest first (``finished_at``, then the order read: tabbench.store.newer's order)."""
    by_key = defaultdict(list)
    for i, record in enumerate(records):
        by_key[record["key"]].append((str(record.get("finished_at") or ""), i, record))
    return {k: [r for _, _, r in sorted(v, key=lambda x: x[:2])] for k, v in by_key.items()}


def speed_ratios(records: list[dict]) -> dict:
    """(method, machine id, other machine id) -> the ratios of a job's seconds on the first to those on the
    second (``tabbench.clock.spent_seconds``: on the clock of its budget), over the job keys that finished
    (``ok``) on both on one clock (the newest record of each machine)."""
    out = defaultdict(list)
    for runs in history(records).values():
        last = {}
        for r in runs:
            if r.get("status") == "ok" and hardware_id(r) and (spent_seconds(r) or 0) > 0:
                last[hardware_id(r)] = r
        for a in last:
            for b in last:
                if a < b and clock_of(last[a]) == clock_of(last[b]):
                    ratio = spent_seconds(last[a]) / spent_seconds(last[b])
                    out[(last[a]["method"], a, b)].append(ratio)
                    out[(last[a]["method"], b, a)].append(1 / ratio)
    return dict(out)


def _counts(counter: Counter) -> str:
    return ", ".join(f"{name} {n:,}" for name, n in sorted(counter.items(), key=lambda x: (-x[1], x[0])))


def _where(counter: Counter) -> str:
    """'Intel Xeon' for one machine, else 'Intel Xeon 46, AMD EPYC 3'."""
    return next(iter(counter)) if len(counter) == 1 else _counts(counter)


def _rerun_text(runs_by_key: dict, names: dict, ordered: list, position: dict) -> str:
    """One method's re-runs: how many keys, why, and what each replaced (status, machine)."""
    rerun = {k: v for k, v in runs_by_key.items() if len(v) > 1}
    if not rerun:
        return "none"
    reasons, replaced, times = Counter(), Counter(), Counter(len(v) for v in rerun.values())
    steps, same = [], []
    for runs in rerun.values():
        for old, new in zip(runs, runs[1:]):
            field = new.get("rerun") if isinstance(new.get("rerun"), dict) else None
            reasons[(field.get("reason") or "no reason given") if field else "reason not recorded"] += 1
            hid = hardware_id(old)
            where = names.get(hid) if hid else None
            if where is None:
                guess = _neighbour(old, ordered, position[id(old)])
                where = (f"{names[guess]} (inferred: it carries no fingerprint, the records finished just before "
                         "and after it ran there)" if guess else f"a machine {NOT_RECORDED}")
            replaced[(old.get("status") or "?", where)] += 1
            a, b = ((r.get("info") or {}).get("steps_run") if isinstance(r.get("info"), dict) else None
                    for r in (old, new))
            if a and b:
                steps.append(b / a)
            if old.get("status") == new.get("status") == "ok":
                compared = _same_test_metrics(old, new)
                if compared is not None:
                    same.append(compared)
    by_status = defaultdict(Counter)
    for (status, where), n in replaced.items():
        by_status[status][where] += n
    why = (next(iter(reasons)) if len(reasons) == 1 else "; ".join(
        f"{n:,} {reason}" for reason, n in sorted(reasons.items(), key=lambda x: (-x[1], x[0]))))
    text = f"{len(rerun):,} ({why}), replacing " + "; ".join(
        f"{sum(c.values()):,} {status} on {_where(c)}" for status, c in
        sorted(by_status.items(), key=lambda x: (-sum(x[1].values()), x[0])))
    more = {n: k for n, k in times.items() if n > 2}
    if more:
        text += "; " + ", ".join(f"{k:,} ran {n} times" for n, k in sorted(more.items()))
    if steps:
        text += (f"; trained a median {statistics.median(steps):.2f} times the steps of the record it replaced "
                 f"({len(steps)} with steps on both)")
    if same:
        text += f"; the same test metrics on {sum(same):,} of {len(same):,}"
    return text


#: two records' test metrics count as the same within this relative difference (a seeded job on another CPU or
#: torch build differs in its last digits; a deterministic one does not differ at all)
SAME_METRIC = 1e-6


def _same_test_metrics(old: dict, new: dict) -> bool | None:
    """Whether a re-run's test metrics are the replaced record's (each within SAME_METRIC, relative); None where
    either has none, or they name different metrics."""
    a, b = ((r.get("metrics") or {}).get("test") if isinstance(r.get("metrics"), dict) else None for r in (old, new))
    if not isinstance(a, dict) or not isinstance(b, dict) or not a or set(a) != set(b):
        return None
    try:
        return all(math.isclose(float(a[m]), float(b[m]), rel_tol=SAME_METRIC, abs_tol=1e-12) for m in a)
    except (TypeError, ValueError):
        return None


def provenance_block(ctx) -> list:
    """The README block ``provenance``: the folder's machines, then per method its results, the machines and clocks
    they ran on, when they finished and which jobs were re-run and why, from every record of its folders."""
    from tabbench.measure import hardware_label
    from tabbench.report.format import markdown_table

    records = all_records(ctx.sources)
    ordered = sorted(records, key=lambda r: str(r.get("finished_at") or ""))
    position = {id(r): i for i, r in enumerate(ordered)}
    names = machine_names(records)
    latest = ctx.records
    labels = {}
    for record in records:
        hid = hardware_id(record)
        if hid and hid not in labels:
            labels[hid] = hardware_label(_hardware(record), torch=False)
    several = len(ctx.sources) > 1
    by_method = defaultdict(dict)
    for key, runs in history(records).items():
        by_method[(runs[-1].get("source"), runs[-1]["method"])][key] = runs
    rows = []
    for (source, method), runs_by_key in sorted(by_method.items(), key=lambda x: (str(x[0][0]), x[0][1])):
        newest = [v[-1] for v in runs_by_key.values()]
        machines = Counter(names.get(hardware_id(r), NOT_RECORDED) for r in newest)
        clocks = Counter(clock_of(r) for r in newest)
        dates = sorted(str(r.get("finished_at"))[:10] for r in newest if r.get("finished_at"))
        failed = Counter(r.get("status") for r in newest if r.get("status") != "ok")
        rows.append(([source] if several else []) + [
            ctx.show.get(method, method), f"{len(newest):,}" + (f" ({_counts(failed)})" if failed else ""),
            _counts(machines), _counts(clocks), f"{dates[0]} to {dates[-1]}" if dates else "–",
            _rerun_text(runs_by_key, names, ordered, position)])
    header = (["folder"] if several else []) + ["method", "results (failed)", "machines", "clock",
                                                "finished (UTC dates)", "re-run"]
    unrecorded = sum(1 for r in latest.to_dict("records") if not hardware_id(r)) if len(latest) else 0
    out = [f"{len(records):,} records, {len(latest):,} job keys (the newest record of each is the one the tables "
           "rank). The machines, by each record's hardware fingerprint (`environment.hardware`):", ""]
    out += [f"- **{names[hid]}**: {labels[hid]}" for hid in sorted(labels, key=lambda h: names[h])]
    if unrecorded:
        out.append(f"- **{NOT_RECORDED}**: {unrecorded:,} of the ranked records carry no fingerprint (made before it "
                   "was recorded, or a job killed from outside, whose record its parent writes)")
    out += ["", markdown_table(header, rows), "",
            "Results: the newest record of each job key. Clock: what its time budget counted (`clock`; a record "
            "without one counted wall seconds). Re-run: job keys with more than one record; the reason is the "
            "re-run record's `rerun.reason` (`tabbench run --rerun-reason`; 'no reason given': a --retry-failed "
            "without one), and the replaced record's status and machine are its own; 'reason not recorded': "
            "re-runs made before the field existed. Steps: "
            "`info.steps_run`. The same test metrics: of the re-runs where both it and the record it replaced "
            f"finished, those whose every test metric is the replaced record's within {SAME_METRIC:g} (relative; "
            "a deterministic model's re-run on another CPU gives the same, a seeded network's last digits may "
            "differ and grow over its epochs). Generated from the records by `tabbench report` "
            "(tabbench/report/provenance.py)."]
    return out


def comparison_note(runs, show: dict, sources=(), what: str = "") -> list:
    """When the records of one comparison of times (``runs``: a records frame) come from more than one machine or
    clock, a paragraph saying so, which methods ran where or on which clock, and, where the same job finished on
    two machines (every record of ``sources``), how much longer it took on one; [] otherwise."""
    if runs is None or len(runs) == 0:
        return []
    rows = runs.to_dict("records")
    names = machine_names(rows)
    machines = defaultdict(Counter)
    clocks = defaultdict(Counter)
    for r in rows:
        machines[r["method"]][names.get(hardware_id(r), NOT_RECORDED)] += 1
        clocks[r["method"]][clock_of({k: v for k, v in r.items() if k == "clock" and isinstance(v, str)})] += 1
    all_machines = {m for c in machines.values() for m in c} - {NOT_RECORDED}  # an unrecorded one may be either
    all_clocks = {c for v in clocks.values() for c in v}
    if len(all_machines) < 2 and len(all_clocks) < 2:
        return []
    # the machine and clock of most records (a recorded machine where any is), said once; the rest named per method
    usual_machine = (sum(machines.values(), Counter()) - Counter({NOT_RECORDED: len(rows)}) or
                     Counter({NOT_RECORDED: 1})).most_common(1)[0][0]
    usual_clock = sum(clocks.values(), Counter()).most_common(1)[0][0]
    odd = defaultdict(list)  # what differs -> the methods it differs for
    for method in sorted(machines):
        parts = []
        if set(machines[method]) != {usual_machine}:
            parts.append(_counts(machines[method]))
        if set(clocks[method]) != {usual_clock}:
            parts.append(_counts(Counter({f"{c} clock": n for c, n in clocks[method].items()})))
        if parts:
            odd["; ".join(parts)].append(show.get(method, method))
    odd = [f"{', '.join(methods)} ({'each ' if len(methods) > 1 else ''}{parts})" for parts, methods in odd.items()]
    kinds = []
    if len(all_machines) > 1:
        kinds.append(f"{len(all_machines)} machines")
    if len(all_clocks) > 1:
        kinds.append(f"{len(all_clocks)} clocks")
    text = (f"**Mixed {' and '.join(kinds)}{' ' + what if what else ''}.** The records compared here come from "
            f"{' and '.join(kinds)}: every method's ran on "
            f"{'a machine not recorded' if usual_machine == NOT_RECORDED else usual_machine} under the {usual_clock} "
            "clock but for "
            + "; ".join(odd) + ".")
    if len(all_machines) > 1:
        text += (" A time budget, a budget point or a fit time is a different amount of work on each machine, so "
                 "these methods' times and budget-limited results do not compare like for like with the others'.")
    if len(all_clocks) > 1:
        text += (" A CPU-clock budget counts the job's own CPU seconds, a wall-clock one elapsed seconds: on a busy "
                 "machine a wall-clock job gets less work done in the same budget.")
    ratios = speed_ratios(all_records(sources)) if sources else {}
    odd_methods = {m for m in machines if len(machines[m]) > 1 or set(machines[m]) != {usual_machine}}
    known = []
    for (method, a, b), values in sorted(ratios.items()):
        if method in odd_methods and names.get(a) == usual_machine and b in names:
            known.append(f"{show.get(method, method)} took a median {statistics.median(values):.2f} times as long "
                         f"on {names[a]} as on {names[b]} ({len(values)} jobs)")
    if known:
        text += " Where the same job finished on both machines: " + "; ".join(known) + "."
    return [text, ""]
