"""purlin.torch on the GPU: the custom ops on a loopback world under torch.compile and in a
CUDA graph torch captures; the Communicator in two processes on one GPU under torchrun
(started by the test), falling back to torch.distributed for what it cannot take. Every
result against the spec's oracle. Marked ``gpu``; skipped (saying why) without one."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from purlin.spec import evaluate, library
from tests.backends.gpu.test_gpu_loopback import cp, world  # noqa: F401 (fixture)

pytestmark = pytest.mark.gpu


def _oracle(c, xs):
    import torch
    return evaluate(c, [x.cpu().reshape(-1).view(torch.uint8).numpy() for x in xs])


def test_custom_ops_compiled_and_in_a_torch_cuda_graph(cp):
    torch = pytest.importorskip("torch")
    import purlin.torch as pt
    w = world(4)
    pt.register(w)   # before compiling: a traced function must not change the handle table
    xs = [torch.randn(1001, device="cuda", dtype=torch.bfloat16) for _ in range(4)]

    def step(xs):
        return [y * 1 for y in pt.all_reduce(xs, "sum", world=w)], pt.all_gather(xs, world=w)

    compiled = torch.compile(step, fullgraph=True)
    ys, gs = compiled(xs)
    torch.cuda.synchronize()
    w.check()
    c_ar = library.all_reduce(4, 2002, "bf16")
    c_ag = library.all_gather(4, 2002, "bf16")
    want_ar, want_ag = _oracle(c_ar, xs), _oracle(c_ag, xs)
    for r in range(4):
        assert np.array_equal(ys[r].cpu().view(torch.uint8).numpy(), want_ar[r])
        assert np.array_equal(gs[r].cpu().view(torch.uint8).numpy(), want_ag[r])
    # the same calls captured by torch into a CUDA graph (run once before: plans are made)
    static = [x.clone() for x in xs]
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        step(static)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outs, gathered = step(static)
    for k in range(3):
        for r in range(4):
            static[r].copy_(xs[r] * (k + 1))
        g.replay()
        torch.cuda.synchronize()
        w.check()
        want = _oracle(c_ar, static)
        assert all(np.array_equal(outs[r].cpu().view(torch.uint8).numpy(), want[r]) for r in range(4)), k


def test_communicator_two_processes_under_torchrun():
    from purlin.backends.gpu.kernels import is_available
    ok, why = is_available()
    if not ok:
        pytest.skip(f"no GPU executor here: {why}")
    pytest.importorskip("torch.distributed")
    worker = Path(__file__).with_name("torch_worker.py")
    root = Path(__file__).parents[3]
    env = dict(os.environ, PYTHONPATH=f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               NCCL_NVLS_ENABLE="0")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(worker)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    assert "COMM OK rank 0 fallbacks 2" in out and "COMM OK rank 1 fallbacks 2" in out, out[-4000:]
