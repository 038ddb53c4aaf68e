#!/usr/bin/env bash
# The GPU steps of issue 26, run on the lent machine from the repository root (after benchmarks/gpu/prepare.sh
# here), each writing its figures under $OUT:
#   device run: bash benchmarks/gpu/session.sh STEP      carry: [".whl", ".gpu-data"]
#   install  only the install and machine.json: run it first where several steps then run side by side
#   tests  the test suite on the GPU (Ray, the boosters and TabNet are absent there: those tests skip); TESTS:
#          pytest's selection instead of the whole suite
#   step   benchmarks/npt_step.py: fused vs explicit attention, bf16 vs fp32, eager vs CUDA graph; CONFIGS
#          (default boston,breast-cancer,higgs), PATHS (default all)
#   small  the paper's base NPT config on DATASETS (comma-separated), FOLDS, in-process (--no-ray), cuda
#   probe  the corruption probe of the paper's base NPT config on DATASETS, FOLDS (comma-separated; default 0)
#   higgs  300 minibatch steps of the real Higgs subset at the paper's batch size and e 64 (uci-higgs-npt-gpu.yaml)
#   breadth  NPT on breadth's splits at its 450 s budget a job, on the GPU (issue 45, step 4): PROCS processes
#          (default 12, a CPU core each) share the GPU and the jobs (claims: each job runs once); MODELS (default
#          npt-budget,npt), DATASETS (default breadth's holdout datasets, the largest tables), LIMIT (a job still
#          running then is lost: size it to whole jobs, 450 s and the start). Records: results/breadth-npt-gpu
#   images  the paper's image NPT on the offline MNIST and CIFAR-10 splits at 420 s a job, both at once
#          (suites/image-reduced-npt-gpu.yaml; needs IMAGES=1 at prepare). Records: results/image-reduced
# Learned on the lent machines (an H100, then H200s; benchmarks/README.md has their figures): a machine starts
# in ~35-90 s and stays warm only 30 s after a call; at most 8 files come back from $OUT (the steps write 2-3);
# a lease is 15 device-minutes, starts included, so one command of ~8 minutes is the most a lease holds; the
# whole suite takes ~200 s on 8 workers with OMP_NUM_THREADS=1; with the step as a CUDA graph, one fold process
# keeps the GPU busy (sharing it adds little); a command that waits on its own steps must not `pgrep -f` a
# string its own command line holds.
# TESTS is split on spaces: name node ids, not a `-k` expression. A machine goes back 30 s after a call: have the
# next command ready. Steps that run side by side give each its own OUT (each tars and removes "$OUT/results").
# Suggested next lease, one command (~520 s): the capture fix's GPU tests beside Concrete's last folds, then Higgs
# alone (a graphed Concrete fold takes ~123 s, an eager one 400: the first record's info.cuda_graph must say
# "replayed"):
#   bash benchmarks/gpu/session.sh install; mkdir -p $OUT/t $OUT/h
#   OUT=$OUT/t TESTS="tests/test_npt.py" WORKERS=4 LIMIT=300 bash benchmarks/gpu/session.sh tests >/dev/null 2>&1 &
#   DATASETS=concrete PROCS=1 FOLDS="7 8 9" LIMIT=420 bash benchmarks/gpu/session.sh small >/dev/null 2>&1
#   OUT=$OUT/h bash benchmarks/gpu/session.sh higgs >/dev/null 2>&1; wait
# then, in the leases after: `probe` (DATASETS=breast_cancer,boston,yacht,concrete), `breadth`, `images`.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
# once per machine: several steps may run at once (one command of a short lease), and must not reinstall together
[ -e "${SITE:=/tmp/site}/.installed" ] ||
    { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
      && touch "$SITE/.installed"; }
export PYTHONPATH=$SITE:$PWD/.gpu-data/python PYTHONUNBUFFERED=1 TABBENCH_MIRROR=$PWD/.gpu-data  # python: breadth's
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}   # else every test worker and job process runs 16 torch threads
python3 -c "from tabbench.measure import fingerprint; import json, torch; torch.cuda.is_available() and torch.cuda.init(); print(json.dumps(fingerprint()))" \
    | tee "$OUT/machine.json"
case "${1:?say which step: install, tests, step, small, probe, higgs, breadth or images}" in
  install) ;;
  tests) mkdir -p ../shared && ln -sfn "$PWD/.gpu-data" ../shared/datasets
         # xdist workers (in the device image), a per-test limit, and a SIGINT at LIMIT seconds so pytest
         # still prints its summary (failures with their tracebacks) when the suite outlasts the call
         timeout -s INT -k 30 "${LIMIT:-480}" python3 -m pytest -q -n "${WORKERS:-14}" --timeout 150 -rfEs \
             --tb=short -p no:cacheprovider --durations=15 ${TESTS:-} 2>&1 | tee "$OUT/tests.log" ;;
  step)  python3 benchmarks/npt_step.py --device cuda --configs "${CONFIGS:-boston,breast-cancer,higgs}" \
             ${PATHS:+--paths "$PATHS"} 2>&1 | tee "$OUT/npt_step.log" ;;
  small) # the paper's base config on a GPU, in-process; PROCS fold processes share the GPU (eager steps leave it
         # idle between launches; graphed ones do not), each stopped at LIMIT seconds (a record is written when a
         # job ends). At most 8
         # files come back from $OUT: the processes' logs end up in one file, the records in one archive.
         folds=(${FOLDS:-0 1 2 3 4 5 6 7 8 9}); logs=$(mktemp -d); export DATASETS="${DATASETS:?}" OUT
         for ((i = 0; i < ${PROCS:-4}; i++)); do
           mine=$(for ((j = i; j < ${#folds[@]}; j += ${PROCS:-4})); do echo -n "${folds[j]},"; done)
           # a process takes its folds one dataset after another, in DATASETS' order (the first completes first)
           [ -n "$mine" ] && timeout "${LIMIT:-480}" bash -c 'for d in ${DATASETS//,/ }; do
               python3 -m tabbench.cli run suites/uci-small-npt-paper-gpu.yaml --no-ray --no-progress --tables-only \
                   --results "$OUT/results" --datasets "$d" --folds "$0"; done' "${mine%,}" \
               > "$logs/folds-${mine%,}.log" 2>&1 &
         done
         wait
         tail -n 5 "$logs"/*.log > "$OUT/small.log"; cat "$OUT/small.log"
         tar -C "$OUT" -czf "$OUT/small-records.tgz" results && rm -rf "$OUT/results" ;;
  probe) # the corruption probe (docs/probe.md) of the paper's base config on DATASETS, FOLDS (default 0): each job
         # is fitted again, in-process, then every test row predicted against corrupted other rows
         python3 -m tabbench.cli probe corruption suites/uci-small-npt-paper-gpu.yaml --results "$OUT/results" \
             --datasets "${DATASETS:?}" --folds "${FOLDS:-0}" 2>&1 | tail -20 | tee "$OUT/probe.log"
         tar -C "$OUT" -czf "$OUT/probe-results.tgz" results && rm -rf "$OUT/results" ;;
  higgs) # 300 steps of the paper's Higgs config on the real rows through the harness: the record calibrates
         # `tabbench plan suites/uci.yaml --gpus 1` (commit it into results/uci-higgs-npt-gpu/records)
         python3 -m tabbench.cli run suites/uci-higgs-npt-gpu.yaml --no-ray --no-progress --tables-only \
             --results "$OUT/results" 2>&1 | tail -20 | tee "$OUT/higgs.log"
         tar -C "$OUT" -czf "$OUT/higgs-records.tgz" results && rm -rf "$OUT/results" ;;
  breadth) holdout=$(python3 -c "import yaml; print(','.join(d['name'] for d in yaml.safe_load(open(
             'suites/breadth.yaml'))['datasets'] if d['split']['protocol'] == 'holdout'))")
         logs=$(mktemp -d)
         for ((i = 0; i < ${PROCS:-12}; i++)); do
           timeout "${LIMIT:-500}" python3 -m tabbench.cli run suites/breadth.yaml --no-ray --no-progress --tables-only \
               --results "$OUT/results" --models "${MODELS:-npt-budget,npt}" --datasets "${DATASETS:-$holdout}" \
               > "$logs/process-$i.log" 2>&1 &
         done
         wait
         tail -n 4 "$logs"/*.log > "$OUT/breadth.log"; cat "$OUT/breadth.log"
         tar -C "$OUT" -czf "$OUT/breadth-records.tgz" results && rm -rf "$OUT/results" ;;
  images) for i in 0 1; do  # two processes share the two jobs (claims)
           timeout "${LIMIT:-480}" python3 -m tabbench.cli run suites/image-reduced-npt-gpu.yaml --no-ray --no-progress \
               --tables-only --results "$OUT/results" > "$OUT/images-$i.log" 2>&1 &
         done
         wait
         tail -n 5 "$OUT"/images-*.log
         tar -C "$OUT" -czf "$OUT/images-records.tgz" results && rm -rf "$OUT/results" ;;
  *) echo "unknown step $1" >&2; exit 2 ;;
esac
