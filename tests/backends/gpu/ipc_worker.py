"""Run under torchrun: one IpcWorld rank per process (two processes may share one GPU).

    torchrun --nproc_per_node=2 tests/backends/gpu/ipc_worker.py

Each rank builds every rank's inputs from the same seeds, runs a few collectives in each
regime and checks its own output against the spec's oracle (purlin.spec.evaluate). Prints 'IPC OK rank R' and exits 0.
"""
import os
import sys

import numpy as np


def main() -> int:
    import torch.distributed as dist
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    import cupy as cp
    from purlin.backends.gpu import IpcWorld
    from purlin.snac import Policy
    from purlin.spec import evaluate, library
    w = IpcWorld(max_nbytes=4 << 20, staging_nbytes=4 << 20, packets_nbytes=1 << 20,
                 timeout_s=float(os.environ.get("PURLIN_TIMEOUT_S", "60")))
    bad = 0
    for name in ("all_reduce", "all_gather", "all_to_all", "reduce_scatter", "all_gather_v"):
        for regime in ("latency", "throughput", "direct"):
            c = library.from_size(name, world, 64 << 10, "fp32", seed=7)
            s = w.plan(c, Policy(regime=regime))
            for call in range(3):
                rng = np.random.default_rng(100 * call + 1)
                ins = [rng.standard_normal(c.input.nbytes(r) // 4).astype(np.float32) for r in range(world)]
                want = evaluate(c, ins)[rank]
                x = cp.asarray(ins[rank].view(np.uint8)) if ins[rank].size else None
                out = cp.full(c.output.nbytes(rank), 0xA5, cp.uint8) if c.output.nbytes(rank) else None
                w.run(s, x, out)
                w.synchronize()
                if out is not None:
                    n = int((cp.asnumpy(out) != want).sum())
                    if n:
                        print(f"rank {rank}: {name} {regime} call {call}: {n} wrong bytes", flush=True)
                        bad += n
    w.close()
    dist.destroy_process_group()
    print(f"IPC {'OK' if bad == 0 else 'FAILED'} rank {rank}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
