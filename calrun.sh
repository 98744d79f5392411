set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 PURLIN_CACHE_DIR=$PWD/.purlin-cache
t0=$(date +%s)
timeout 200 python3 -c "from purlin.backends.gpu import kernels; kernels.for_device(0)"; echo compiled $(( $(date +%s)-t0 )) s
timeout 100 python3 benchmarks/calibrate_executor.py 2>&1 | grep -v "^ *copy_ops\|^ *ctas\|^ *reduce_ops\|^ *copy_dsts"
cp benchmarks/results/h200-executor-calibration-raw.json $OUT/
echo "elapsed $(( $(date +%s)-t0 )) s"
