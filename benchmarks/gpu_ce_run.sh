#!/usr/bin/env bash
# One device call for the copy-engine Atom (issue 17): its GPU tests, the copy collectives'
# large loopback points with `ce` plans (4 streams a rank, and a stream per program),
# memcpys under many streams (gpu_ce_streams.py), then the Atom copy against cudaMemcpy.
# The tests come first, since the figures mean nothing if the bytes are wrong. Logs and
# results go to $OUT (the device tool brings them back) and results also to
# benchmarks/results/ (NAME-loopback-ce.json, NAME-ce-streams.json, NAME-atoms-ce.json;
# NAME = h200 or h100 by the GPU found). Where simpy is not installed, put it on PYTHONPATH
# first (e.g. pip install --target /tmp/site simpy-*.whl; PYTHONPATH=/tmp/site).
# A cold NVRTC compile takes minutes there: carry .purlin-cache filled by gpu_precompile.py;
# the first stage runs it there (a cache hit, or the compile) so no later stage compiles.
# A stage that runs out of time dumps its Python stacks (SIGABRT, faulthandler) into its log.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PURLIN_CACHE_DIR=${PURLIN_CACHE_DIR:-$PWD/.purlin-cache} PYTHONFAULTHANDLER=1
OUT=${OUT:-/tmp/purlin-out}; mkdir -p "$OUT"; export OUT
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
case "$gpu" in *H200*) g=h200 ;; *H100*) g=h100 ;; *) g=gpu ;; esac
echo "# $gpu -> $g"
stage() { local t=$1 name=$2; shift 2; echo "=== $name"; timeout -s ABRT "$t" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$?" >> "$OUT/$name.log"; tail -n 30 "$OUT/$name.log"; }
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d .)
stage ${T_LOAD:-240} load python3 benchmarks/gpu_precompile.py --arch "$cc" --cache "$PURLIN_CACHE_DIR"
stage ${T_TESTS:-150} tests python3 -m pytest -q -rs -p no:cacheprovider tests/backends/gpu -k copy_engine
stage ${T_LOOP:-170} loopback_ce python3 benchmarks/gpu_loopback.py --large-only --atoms sm,ce \
    --collectives all_to_all,all_to_all_v,all_gather --divs 1 --out $g-loopback-ce.json
stage ${T_STREAMS:-90} ce_streams python3 benchmarks/gpu_ce_streams.py --out $g-ce-streams.json
stage ${T_ATOMS:-110} atoms python3 benchmarks/gpu_atoms.py --out $g-atoms-ce.json --sizes-mib 64 --rounds 3 --reps 8
