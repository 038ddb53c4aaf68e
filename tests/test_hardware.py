"""The hardware fingerprint (tabbench.measure): read from this machine, written into records, and used by
`tabbench compare` and the leaderboard's cost section to tell results made on different hardware apart."""

import copy
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tabbench.compare import FLAGGED, NO_BAND, compare, report
from tabbench.measure import KERNEL_FLAGS, fingerprint, hardware_label, parse_cpuinfo
from tabbench.store import Store
from tests.conftest import ROOT

linux = pytest.mark.skipif(not Path("/proc/cpuinfo").is_file(), reason="no /proc/cpuinfo (not Linux)")


def _lscpu() -> dict:
    if shutil.which("lscpu") is None:
        pytest.skip("lscpu is not installed")
    out = subprocess.run(["lscpu"], capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"}, check=True)
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.stdout.splitlines())}


@linux
def test_the_fingerprint_names_this_machines_cpu_cores_and_memory():
    hardware = fingerprint()
    cpu = hardware["cpu"]
    assert len(hardware["id"]) == 12 and int(hardware["id"], 16) >= 0
    assert cpu["vendor"] and cpu["model_name"]
    assert cpu["physical_cores"] >= 1 and cpu["logical_cpus"] >= cpu["physical_cores"]
    assert 1 <= cpu["usable_cpus"] <= cpu["logical_cpus"]
    assert cpu["memory_bytes"] > 2**28
    assert set(cpu["kernel_flags"]) <= set(KERNEL_FLAGS)
    if platform.machine() in ("x86_64", "AMD64"):
        assert all(isinstance(cpu[k], int) for k in ("family", "model", "stepping"))
    assert cpu["model_name"] in hardware_label(hardware) and hardware["id"] in hardware_label(hardware)
    assert json.loads(json.dumps(hardware)) == hardware  # stored as JSON in every record


@linux
def test_parsing_this_machines_cpuinfo_agrees_with_lscpu():
    """The parser on the real /proc/cpuinfo text, checked against util-linux's own reading of it."""
    parsed = parse_cpuinfo(Path("/proc/cpuinfo").read_text())
    lscpu = _lscpu()
    if "Vendor ID" not in lscpu or "Flags" not in lscpu:
        pytest.skip("lscpu reports no vendor or flags on this architecture")
    assert parsed["vendor"] == lscpu["Vendor ID"]
    assert parsed["model_name"] == lscpu["Model name"]
    for ours, theirs in (("family", "CPU family"), ("model", "Model"), ("stepping", "Stepping")):
        assert str(parsed[ours]) == lscpu[theirs]
    assert parsed["kernel_flags"] == [f for f in KERNEL_FLAGS if f in lscpu["Flags"].split()]


@linux
def test_parsing_reads_the_first_processor_and_only_the_kernel_flags():
    text = Path("/proc/cpuinfo").read_text()
    first = text.split("\n\n")[0]
    real = parse_cpuinfo(first)["kernel_flags"]
    removed = {"avx512_bf16", "amx_bf16"}
    edited = " ".join(f for f in first.replace("\t", " ").split(" ") if f not in removed)
    parsed = parse_cpuinfo(edited + "\n\nprocessor\t: 1\nflags\t\t: avx512_bf16 amx_bf16\n")
    assert parsed["kernel_flags"] == [f for f in real if f not in removed]
    assert {k: v for k, v in parsed.items() if k != "kernel_flags"} == {
        k: v for k, v in parse_cpuinfo(first).items() if k != "kernel_flags"}


def test_the_fingerprint_never_imports_torch_and_adds_it_once_the_job_has():
    code = ("import sys, json; from tabbench.measure import environment; e = environment(); "
            "assert 'torch' not in sys.modules, 'imported torch'; "
            "import torch; torch.set_num_threads(1); f = environment()['hardware']; "
            "print(json.dumps([e['hardware'], f]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    before, after = json.loads(out.stdout)
    assert before["torch"] is None and "torch_threads" not in before["cpu"]
    assert after["torch"] and after["cpu"]["torch_threads"] == 1 and after["cpu"]["torch_cpu_capability"]
    assert after["id"] == before["id"]  # the hardware, not what the process imported


def test_a_torch_jobs_record_carries_the_fingerprint():
    """A real job (the MLP plugin, torch, on scikit-learn's breast cancer data) run by tabbench.run.execute."""
    from tabbench.data.cache import DataPaths
    from tabbench.data.dataset import DatasetConfig, SplitConfig, load_dataset
    from tabbench.data.sources.sklearn import Sklearn
    from tabbench.data.splits import make_splits
    from tabbench.run.execute import execute
    from tabbench.run.jobs import Job
    from tabbench.plugins import load_models

    cfg = SplitConfig("holdout")
    ds = load_dataset(DatasetConfig("bc", Sklearn(id="breast_cancer"), split=cfg), DataPaths.from_env())
    split = make_splits(ds, cfg)[0]
    spec = load_models()["mlp"].spec
    params = {**spec.default_params, "max_epochs": 2}
    job = Job("k", "s", "mlp", "mlp", params, None, "bc", "binary", 0, 0, 0, ds.fingerprint, split.fingerprint)
    record = execute(job, spec.factory, ds.meta, ds.X, ds.y, split)
    assert record["status"] == "ok", record.get("error_message")
    hardware = record["environment"]["hardware"]
    assert hardware["id"] == fingerprint()["id"] and hardware["cpu"]["model_name"] == fingerprint()["cpu"]["model_name"]
    # the same release (a CUDA build's torch.__version__ may carry "+cu130" where its package metadata does not)
    assert hardware["torch"].split("+")[0] == record["environment"]["packages"]["torch"].split("+")[0]
    assert hardware["cpu"]["torch_threads"] >= 1 and hardware["cpu"]["torch_cpu_capability"]


# --- compare and the leaderboard's cost section -----------------------------------------------------

QUICKSTART = ROOT / "results" / "quickstart"


def _folder(tmp_path: Path, name: str, hardware: dict | None, shift: float = 0.0, info: dict | None = None) -> Path:
    """A copy of the published quickstart records with the given fingerprint in every record's environment,
    ``info`` added to every record's info, and the seeded MLP's test metrics moved by ``shift``."""
    if not (QUICKSTART / "records").is_dir():
        pytest.skip("results/quickstart has no records")
    folder = tmp_path / name
    store = Store(folder)
    for record in Store(QUICKSTART).latest().values():
        record = copy.deepcopy(record)
        if hardware is not None:
            record["environment"]["hardware"] = hardware
        if info:
            record["info"] = {**(record.get("info") or {}), **info}
        if record["method"] == "mlp" and shift:
            record["metrics"]["test"] = {k: v + shift for k, v in record["metrics"]["test"].items()}
        store.append(record)
    return folder


def _other_cpu(hardware: dict) -> dict:
    other = copy.deepcopy(hardware)
    other["cpu"]["model_name"], other["id"] = "Another CPU", "0123456789ab"
    return other


def test_compare_expects_a_seeded_model_to_repeat_exactly_on_the_same_hardware(tmp_path):
    here = fingerprint()
    ours, theirs = _folder(tmp_path, "ours", here, shift=1e-4), _folder(tmp_path, "theirs", here)
    table = compare(ours, theirs).set_index(["method", "dataset"])
    mlp = table.loc["mlp"]
    assert (mlp["kind"] == "seeded, same hardware").all() and (mlp["verdict"] == FLAGGED).all()
    assert (table.drop(index="mlp")["verdict"] == "identical").all()
    text = report(compare(ours, theirs), ours, theirs)
    assert here["id"] in text and "different hardware" not in text


def test_compare_holds_runs_without_deterministic_kernels_to_the_band_on_the_same_hardware(tmp_path):
    """A GPU suite may set NPT's deterministic: false (its records say so in info): two runs on the same GPU then
    differ in the last digits, so the band judges them, not float noise."""
    here = fingerprint()
    ours = _folder(tmp_path, "ours", here, shift=1e-4, info={"deterministic": False})
    theirs = _folder(tmp_path, "theirs", here)
    mlp = compare(ours, theirs).set_index(["method", "dataset"]).loc["mlp"]
    assert (mlp["kind"] == "seeded").all() and FLAGGED not in set(mlp["verdict"])
    assert mlp["note"].str.contains("deterministic: false").all()


def test_compare_holds_a_seeded_model_to_the_band_on_other_hardware(tmp_path):
    here = fingerprint()
    ours, theirs = _folder(tmp_path, "ours", here, shift=1e-4), _folder(tmp_path, "theirs", _other_cpu(here))
    table = compare(ours, theirs)
    mlp = table[table["method"] == "mlp"]
    assert (mlp["kind"] == "seeded").all() and (mlp["verdict"] == "within band").sum() == 3
    assert set(mlp["verdict"]) == {"within band", NO_BAND}  # quickstart's holdout dataset: one run, no band
    assert mlp["note"].str.contains(f"different hardware \\({here['id']} / 0123456789ab\\)").all()
    text = report(table, ours, theirs)
    assert "Another CPU" in text and "The two folders were made on different hardware" in text


def test_compare_keeps_the_band_for_records_made_before_the_fingerprint(tmp_path):
    ours, theirs = _folder(tmp_path, "ours", fingerprint(), shift=1e-4), _folder(tmp_path, "theirs", None)
    mlp = compare(ours, theirs).query("method == 'mlp'")
    assert set(mlp["verdict"]) == {"within band", NO_BAND} and mlp["note"].str.contains("not recorded in theirs").all()


def cost_section(out_dir: Path, sources: list, runs: pd.DataFrame) -> str:
    """The cost section of a leaderboard of ``runs`` (made from ``sources``), as leaderboard.md shows it."""
    from tabbench.report.leaderboard import make_context
    from tabbench.report.sections import CostAgainstQuality

    return "\n".join(CostAgainstQuality().markdown(make_context(out_dir, sources, runs, report=True)))


def test_the_cost_section_names_the_machines_when_records_come_from_several(tmp_path):
    here = fingerprint()
    a, b = _folder(tmp_path, "a", here), _folder(tmp_path, "b", _other_cpu(here))
    runs = pd.concat([Store(a).frame().assign(source=str(a)), Store(b).frame().assign(source=str(b))])
    note = cost_section(tmp_path / "board", [a, b], runs)
    assert "2 different machines" in note and "Another CPU" in note and hardware_label(here, torch=False) in note
    assert f"`{a}`" in note and f"`{b}`" in note
    per_method = ", ".join(f"{m} {n}" for m, n in Store(b).frame()["method"].value_counts(sort=False).items())
    other_row, = [line for line in note.splitlines() if line.startswith("|") and "Another CPU" in line]
    assert "**Mixed 2 machines in these costs.**" in note  # and which methods that touches (provenance.py)
    assert f"| {per_method} |" in other_row  # which methods each machine ran, with their record counts
    one = cost_section(tmp_path / "board", [a], Store(a).frame().assign(source=str(a)))
    assert "machine" not in one  # one machine: nothing to say
    published = cost_section(tmp_path / "board", [QUICKSTART], Store(QUICKSTART).frame())
    assert "machine" not in published  # published records, before the fingerprint
