#!/usr/bin/env bash
# The GPU steps of issue 26, run on the lent machine from the repository root (after benchmarks/gpu/prepare.sh
# here), each writing its figures under $OUT:
#   device run: bash benchmarks/gpu/session.sh tests|step|small|higgs      carry: [".whl", ".gpu-data"]
#   tests  the test suite on the GPU (Ray, the boosters and TabNet are absent there: those tests skip)
#   step   benchmarks/npt_step.py: fused vs explicit attention, bf16 vs fp32, Boston / Breast Cancer / Higgs shapes
#   small  the paper's base NPT config on the four small UCI sets, all ten folds, in-process (--no-ray), cuda
#   higgs  a few hundred minibatch steps of the real Higgs subset at the paper's batch size and e 64
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TABBENCH_MIRROR=$PWD/.gpu-data
python3 -c "from tabbench.measure import fingerprint; import json, torch; torch.cuda.is_available() and torch.cuda.init(); print(json.dumps(fingerprint()))" \
    | tee "$OUT/machine.json"
case "${1:?say which step: tests, step, small or higgs}" in
  tests) mkdir -p ../shared && ln -sfn "$PWD/.gpu-data" ../shared/datasets
         python3 -m pytest -q -rs -p no:cacheprovider --durations=15 2>&1 | tee "$OUT/tests.log" ;;
  step)  python3 benchmarks/npt_step.py --device cuda --configs boston,breast-cancer,higgs 2>&1 | tee "$OUT/npt_step.log" ;;
  small) python3 -m tabbench.cli run suites/uci-small-npt-paper.yaml --no-ray --models npt-paper --results "$OUT/results" \
             ${FOLDS:+--folds $FOLDS} 2>&1 | tail -40 | tee "$OUT/small.log"
         tar -C "$OUT" -czf "$OUT/small-records.tgz" results && rm -rf "$OUT/results" ;;
  higgs) python3 benchmarks/npt_step.py --device cuda --configs higgs --steps 300 --warmup 5 2>&1 | tee "$OUT/higgs.log" ;;
  *) echo "unknown step $1" >&2; exit 2 ;;
esac
