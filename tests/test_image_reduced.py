"""The reduced image suites (suites/image-reduced.yaml, image-reduced-npt.yaml) on the offline MNIST and CIFAR-10
copies: the splits their published records hold, and the image path run end to end through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tabbench.cli import main
from tabbench.suite import load_suite
from tests.conftest import SHARED

ROOT = Path(__file__).resolve().parents[1]
SUITES = [ROOT / "suites" / "image-reduced.yaml", ROOT / "suites" / "image-reduced-npt.yaml"]
RECORDS = ROOT / "results" / "image-reduced" / "records" / "records.jsonl"
needs_images = pytest.mark.real_data("image")

#: dataset -> (train, val, test) rows: MNIST's 5,000 training images (12.5% validate) and the official test set;
#: CIFAR-10's 10,000 test images as the mirror's stratified holdout (test 0.1667, then 10% of the rest)
SIZES = {"mnist": (4375, 625, 10000), "cifar10": (7499, 834, 1667)}


def test_both_suites_write_one_folder_and_label_their_npt_as_a_cpu_budget_with_the_papers_patches():
    """The NPT suite adds its method to the baselines' folder; every NPT method says it is a CPU budget and
    embeds the images with the paper's linear patches (49 of 4x4 for MNIST, 64 of 4x4x3 for CIFAR-10)."""
    suites = [load_suite(path) for path in SUITES]
    assert {s.name for s in suites} == {"image-reduced"}
    assert [[(d.name, d.source, d.split) for d in s.datasets] for s in suites] == \
        [[(d.name, d.source, d.split) for d in suites[0].datasets]] * 2
    npt = [(s, m) for s in suites for m in s.models if m.model == "npt"]
    assert [m.label for _, m in npt] == ["npt-cpu-budget", "npt-cpu-900s"]
    for s, m in npt:
        patches = {d.name: (d.model_params[m.label]["n_patches"], d.model_params[m.label]["image_shape"])
                   for d in s.datasets}
        assert patches == {"mnist": (49, [1, 28, 28]), "cifar10": (64, [3, 32, 32])}
        assert m.params["e"] == 16 and m.params["steps"] == "auto"
    assert [s.budget.time_s for s in suites] == [420, 900]


@needs_images
@pytest.mark.parametrize("path", SUITES, ids=lambda p: p.stem)
def test_the_offline_copies_split_as_the_published_records_say(path, capsys):
    assert main(["datasets", str(path), "--json", "--mirror", str(SHARED)]) == 0
    described = {d["name"]: d for d in map(json.loads, capsys.readouterr().out.splitlines())}
    assert {name: d["location"] for name, d in described.items()} == {"mnist": "stand-in", "cifar10": "stand-in"}
    for name, d in described.items():
        split, = d["splits"]
        assert (split["train"], split["val"], split["test"]) == SIZES[name], name
        assert d["columns"] == {"mnist": 785, "cifar10": 3073}[name] and d["classes"] == [str(c) for c in range(10)]
    if RECORDS.is_file():  # every published record was made on exactly these rows
        recorded = {(r["dataset"], r["dataset_fingerprint"], r["split_fingerprint"])
                    for r in map(json.loads, RECORDS.read_text().splitlines())}
        assert recorded == {(n, d["fingerprint"], d["splits"][0]["fingerprint"]) for n, d in described.items()}


@needs_images
def test_a_baseline_runs_on_the_real_mnist_files_end_to_end(tmp_path):
    """suites/image-reduced.yaml through `tabbench run` (k-NN on MNIST, one process): an ok record whose
    accuracy on the official 10,000 test images is far above chance, labelled with the mirror's subset."""
    assert main(["run", str(SUITES[0]), "--mirror", str(SHARED), "--results", str(tmp_path), "--no-ray",
                 "--no-progress", "--tables-only", "--models", "knn", "--datasets", "mnist"]) == 0
    record, = map(json.loads, (tmp_path / "image-reduced" / "records" / "records.jsonl").read_text().splitlines())
    assert (record["method"], record["dataset"], record["status"]) == ("knn", "mnist", "ok")
    assert record["metrics"]["test"]["accuracy"] > 0.85
    assert record["subset"].startswith("mnist-5k:")
    assert (tmp_path / "image-reduced" / "leaderboard.md").is_file()
