"""Short first look on a GPU machine: toolchain, the three Atom sets, one loopback run of
each library collective against the oracle. Prints a line per check; exits nonzero on
the first failure."""
import json
import sys
import time

import numpy as np


def main() -> int:
    t0 = time.time()
    from purlin.backends.gpu import atomset, kernels
    print("machine", json.dumps(kernels.machine()))
    import ml_dtypes  # noqa: F401,E501  (the spec needs it: fail early if missing)
    for cc in (80, 90, 100):
        s = atomset.ATOM_SETS[cc]
        t = time.time()
        cub = atomset.compile_cubin(s)
        code = atomset.sass(cub)
        print(f"{s.name}: {len(cub)} B in {time.time() - t:.1f} s; sass problems: {atomset.check_sass(s, code)}")
    k = kernels.for_device(0)
    print("loaded", k.atoms.name, "blocks/SM", k.blocks_per_sm, "SMs", k.sm_count)
    import cupy as cp
    from purlin.backends.gpu import LoopbackWorld
    from purlin.backends.reference import Reference
    from purlin.snac import Policy
    from purlin.spec import library
    rng = np.random.default_rng(0)
    w = LoopbackWorld(8)
    bad = 0
    for name in library.ALL:
        for regime in ("latency", "throughput", "direct"):
            c = library.from_size(name, 8, 64 << 10, "bf16" if "reduce" in name else "fp32")
            s = w.plan(c, Policy(regime=regime))
            ins = [rng.standard_normal(c.input.nbytes(r) // c.dtype.itemsize).astype(c.dtype.numpy)
                   for r in range(8)]
            want = Reference(s)(ins)
            dev_in = [cp.asarray(x.view(np.uint8)) if x.size else None for x in ins]
            outs = [cp.full(c.output.nbytes(r), 0xA5, cp.uint8) if c.output.nbytes(r) else None
                    for r in range(8)]
            t = time.time()
            try:
                w.run(s, dev_in, outs)
                w.synchronize()
            except Exception as e:
                print(f"FAIL {name} {regime}: {type(e).__name__}: {e}")
                return 1
            wrong = sum(int((cp.asnumpy(o) != want[r]).sum()) for r, o in enumerate(outs) if o is not None)
            bad += wrong
            print(f"{name:18s} {regime:10s} ctas={len(s.programs):4d} wrong_bytes={wrong} {1e3 * (time.time() - t):.1f} ms")
    print(f"smoke done in {time.time() - t0:.1f} s, wrong bytes {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
