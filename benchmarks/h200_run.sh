#!/usr/bin/env bash
# One device call: Atom + loopback + traffic-mix + eager benchmarks, calibration microbenchmarks, the validation
# measurements (then run fit_calibration.py and validate.py predict on a CPU), then the GPU
# tests. Logs and results go to $OUT (the device tool brings them back) and results also to
# benchmarks/results/. Each stage has its own time limit so one slow stage cannot eat the rest.
# The first stage fills the cubin cache (a hit where the call carries .purlin-cache built by
# gpu_precompile.py on a CPU machine): a cold compile takes minutes, and a stage that starts
# cold spends its own limit on it.
set -uo pipefail
cd "$(dirname "$0")/.."
# PYTHONPATH stands in for `pip install -e .` on a machine without the package installed.
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export PURLIN_CACHE_DIR=${PURLIN_CACHE_DIR:-$PWD/.purlin-cache}
OUT=${OUT:-/tmp/purlin-out}; mkdir -p "$OUT"; export OUT
stage() { local t=$1 name=$2; shift 2; echo "=== $name"; timeout "$t" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$?" >> "$OUT/$name.log"; tail -n 40 "$OUT/$name.log"; }
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d .)
stage ${T_LOAD:-300} precompile python3 benchmarks/gpu_precompile.py --arch "$cc" --cache "$PURLIN_CACHE_DIR"
stage ${T_ATOMS:-120} atoms python3 benchmarks/gpu_atoms.py
stage ${T_LOOP:-200} loopback python3 benchmarks/gpu_loopback.py
stage ${T_MIX:-60} traffic_mix python3 benchmarks/gpu_traffic_mix.py
stage ${T_DIAG:-120} diagnose python3 benchmarks/gpu_diagnose.py
stage 60 diagnose_align_off env PURLIN_DEFINES=PURLIN_DST_ALIGN=0 python3 benchmarks/gpu_diagnose.py --only agv --update
stage ${T_EAGER:-90} eager python3 benchmarks/gpu_eager.py
stage ${T_CAL:-90} calibrate python3 benchmarks/calibrate.py
stage ${T_CALEX:-120} calibrate_executor python3 benchmarks/calibrate_executor.py
stage ${T_VAL:-150} validate python3 benchmarks/validate.py measure
stage ${T_TESTS:-230} tests python3 -m pytest -q -m gpu -rs --durations=15 tests/backends/gpu
