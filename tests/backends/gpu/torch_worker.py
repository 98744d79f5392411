"""Run under torchrun (two processes may share one GPU): a purlin.torch.Communicator over a
gloo group. CUDA tensors go through Purlin's IPC world (also from a torch.compile'd
function); CPU tensors fall back to torch.distributed. Each rank checks its results
against the spec's oracle and prints 'COMM OK rank R fallbacks N'."""
import sys

import numpy as np


def main() -> int:
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(0 if torch.cuda.device_count() == 1 else rank)
    import purlin.torch as pt
    from purlin.spec import evaluate, library
    comm = pt.Communicator(max_nbytes=1 << 20, timeout_s=60.0)
    bad = 0
    for count in (1, 7, 1000):
        xs = [torch.arange(2 * count, dtype=torch.float32) * (r + 1) + 0.5 for r in range(size)]
        host = [x.numpy() for x in xs]
        want = {"all_reduce": evaluate(library.all_reduce(size, 8 * count, "fp32"), host)[rank],
                "all_gather": evaluate(library.all_gather(size, 8 * count, "fp32"), host)[rank],
                "reduce_scatter": evaluate(library.reduce_scatter(size, 4 * count, "fp32"), host)[rank]}
        x = xs[rank].cuda()
        f = (torch.compile(lambda t: comm.all_reduce(t) + 0, fullgraph=True, backend="aot_eager")
             if count == 7 else comm.all_reduce)
        got = {"all_reduce": f(x), "all_gather": comm.all_gather(x), "reduce_scatter": comm.reduce_scatter(x)}
        torch.cuda.synchronize()
        for k, y in got.items():
            if not np.array_equal(y.cpu().numpy().view(np.uint8), want[k]):
                print(f"rank {rank}: {k} of {count} wrong", flush=True)
                bad += 1
    # CPU tensors: the IPC world cannot take them; torch.distributed (gloo) does
    y = comm.all_reduce(torch.full((5,), float(rank + 1)))
    z = comm.all_gather(torch.full((3,), float(rank)))
    bad += int(not torch.equal(y, torch.full((5,), float(size * (size + 1) // 2))))
    bad += int(not torch.equal(z, torch.arange(size).repeat_interleave(3).float()))
    comm.world.synchronize()
    comm.close()
    dist.destroy_process_group()
    print(f"COMM {'OK' if bad == 0 else 'FAILED'} rank {rank} fallbacks {comm.fallbacks}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
