"""Probe atom_reduce configurations one process each (an illegal address kills a CUDA
context, so each config gets its own): prints OK or the error per config."""
import subprocess
import sys

import numpy as np

CONFIGS = [(8, 132, 512 << 10), (2, 132, 512 << 10), (8, 1, 256 << 10), (2, 1, 256 << 10),
           (2, 2, 256 << 10), (8, 4, 1 << 20)]


def one(nsrc: int, ctas: int, chunk: int) -> None:
    from purlin.backends.gpu import atomset, kernels
    cp = kernels.cupy()
    k = kernels.for_device(0)
    n = ctas * chunk
    srcs = [cp.random.standard_normal(n // 4, dtype=cp.float32).view(cp.uint8) for _ in range(nsrc)]
    ptrs = cp.asarray(np.array([x.data.ptr for x in srcs], np.uint64))
    out = cp.empty(n, cp.uint8)
    k.fn("atom_reduce")((ctas,), (atomset.THREADS,), (ptrs, np.int32(nsrc), out, np.int64(n), np.int64(chunk),
                                                     np.int32(0), np.int32(0)))
    cp.cuda.runtime.deviceSynchronize()
    acc = srcs[0].view(cp.float32).copy()
    for x in srcs[1:]:
        acc = acc + x.view(cp.float32)
    print("OK" if bool(cp.array_equal(acc, out.view(cp.float32))) else "WRONG", nsrc, ctas, chunk, flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 4:
        one(*(int(a) for a in sys.argv[1:]))
    else:
        for cfg in CONFIGS:
            r = subprocess.run([sys.executable, __file__, *map(str, cfg)], capture_output=True, text=True)
            print(cfg, r.stdout.strip() or r.stderr.strip().splitlines()[-1][:200], flush=True)
