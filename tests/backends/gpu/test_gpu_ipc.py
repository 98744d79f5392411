"""The multi-process (torchrun + CUDA IPC) world: two processes, sharing one GPU if
that is all there is (kernels time-slice: slow, but the protocol is the real one)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu


def test_two_processes_over_cuda_ipc():
    from purlin.backends.gpu.kernels import is_available
    ok, why = is_available()
    if not ok:
        pytest.skip(f"no GPU executor here: {why}")
    pytest.importorskip("torch.distributed")
    worker = Path(__file__).with_name("ipc_worker.py")
    root = Path(__file__).parents[3]
    env = dict(os.environ, PYTHONPATH=f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               NCCL_NVLS_ENABLE="0")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(worker)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=540)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    assert "IPC OK rank 0" in out and "IPC OK rank 1" in out, out[-4000:]
