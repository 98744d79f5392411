"""Shared by the GPU benchmarks: timing with CUDA events, results files, tables."""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import common

RESULTS = common.RESULTS


def cupy():
    from purlin.backends.gpu.kernels import cupy as _cupy
    return _cupy()


def time_launches(fn, reps: int = 20, warmup: int = 3, stream=None) -> list[float]:
    """Microseconds of ``fn()`` (which enqueues work on ``stream``), each timed by events."""
    cp = cupy()
    cp.cuda.runtime.deviceSynchronize()
    stream = stream or cp.cuda.get_current_stream()
    for _ in range(warmup):
        fn()
    stream.synchronize()
    out = []
    for _ in range(reps):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(stream)
        fn()
        b.record(stream)
        b.synchronize()
        out.append(cp.cuda.get_elapsed_time(a, b) * 1e3)
    return out


def time_graph(fn, calls: int, replays: int = 8, warmup: int = 2) -> list[float]:
    """Per-call microseconds: capture ``calls`` calls of ``fn()`` in one CUDA graph, replay
    it ``replays`` times after ``warmup`` replays, each replay timed by events."""
    cp = cupy()
    cp.cuda.runtime.deviceSynchronize()       # inputs made on other streams are ready
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        fn()                                  # plans, uploads, allocations: outside capture
        stream.synchronize()
        stream.begin_capture()
        for _ in range(calls):
            fn()
        graph = stream.end_capture()
        for _ in range(warmup):
            graph.launch(stream)
        stream.synchronize()
        out = []
        for _ in range(replays):
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record(stream)
            graph.launch(stream)
            b.record(stream)
            b.synchronize()
            out.append(cp.cuda.get_elapsed_time(a, b) * 1e3 / calls)
    return out


def memcpy_roofline(sizes=(256 << 20, 1 << 30), reps: int = 20) -> tuple[float, dict]:
    """The HBM roofline: cudaMemcpy device-to-device, bytes read plus written per second
    (GB/s, the best of ``sizes``), and its raw per-size samples (us)."""
    cp = cupy()
    n = max(sizes)
    a, b = cp.empty(n, cp.uint8), cp.empty(n, cp.uint8)
    a.fill(1)
    s = cp.cuda.get_current_stream()
    kind = cp.cuda.runtime.memcpyDeviceToDevice
    raw = {str(size): time_launches(lambda: cp.cuda.runtime.memcpyAsync(b.data.ptr, a.data.ptr, size, kind, s.ptr),
                                    reps) for size in sizes}
    return max(2 * int(k) / median(v) / 1e3 for k, v in raw.items()), raw


def median(xs) -> float:
    return float(statistics.median(xs))


def header(command: str | None = None) -> dict:
    """The shared header, with the GPU's description as the machine."""
    from purlin.backends.gpu.kernels import machine
    doc = common.header(machine())
    if command:
        doc["command"] = command
    return doc


write = common.save   # GPU benchmarks put the header in ``doc`` themselves


def nccl_table(rows: list[dict], title: str) -> str:
    """nccl-tests style: size count type redop time(us) algbw busbw #wrong."""
    lines = [f"# {title}",
             f"# {'size':>12} {'count':>12} {'type':>6} {'redop':>6} {'time(us)':>10} "
             f"{'algbw(GB/s)':>11} {'busbw(GB/s)':>11} {'#wrong':>7}"]
    for r in rows:
        lines.append(f"  {r['size']:>12} {r['count']:>12} {r['type']:>6} {r['redop']:>6} "
                     f"{r['time_us']:>10.2f} {r['algbw_gbps']:>11.2f} {r['busbw_gbps']:>11.2f} "
                     f"{r['wrong']:>7}")
    return "\n".join(lines)


def wrong_bytes(c, ins, outs) -> int:
    """Bytes of ``outs`` (device arrays, None where a rank has none) that differ from the
    spec's oracle, :func:`purlin.spec.evaluate`, on the host inputs of ``ins``."""
    import numpy as np
    from purlin.spec import evaluate
    cp = cupy()
    host = [cp.asnumpy(x).view(np.uint8) if x is not None else np.zeros(0, np.uint8) for x in ins]
    want = evaluate(c, host)
    return sum(int(np.count_nonzero(cp.asnumpy(o).view(np.uint8) != w))
               for o, w in zip(outs, want) if o is not None)


def traffic(c) -> tuple[int, int]:
    """(bytes read, bytes written) the collective must move through HBM at least: every
    input byte some output depends on read once, every output byte written once, summed
    over ranks."""
    from purlin.spec.collective import output_sources
    out = sum(c.output.nbytes(q) for q in range(c.world))
    needed = set()
    for p, srcs in output_sources(c):
        for s in srcs:
            needed.add((s.rank, s.name, s.offset, s.nbytes))
    return sum(n for *_, n in needed), out


def least_traffic(c) -> int:
    """Bytes the collective must move through HBM at least (:func:`traffic`, read plus
    written)."""
    return sum(traffic(c))


def before_and_after(script: str | Path, before: str | Path, child_args: list[str]) -> dict:
    """``script --child ARGS`` run once with the package under ``before`` (an earlier tree:
    ``git archive <commit> purlin topologies | tar -x -C DIR``) and once with this tree's,
    each in its own process (its own kernels, compiled from its own source, cached apart);
    each child prints its results as JSON on its last line. Returns {"before": .., "after": ..}."""
    if before is None or not Path(before).is_dir():
        raise SystemExit(f"--before {before}: give the directory holding the earlier package "
                         "(git archive <commit> purlin topologies | tar -x -C DIR)")
    script = Path(script).resolve()
    runs = {}
    for label, tree in (("before", Path(before).resolve()), ("after", script.parents[1])):
        env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
                   PURLIN_CACHE_DIR=str(tree / ".purlin-cache"))
        res = subprocess.run([sys.executable, str(script), "--child", *child_args],
                             env=env, capture_output=True, text=True, cwd=str(tree))
        if res.returncode:
            raise SystemExit(f"{label} failed:\n{res.stderr[-3000:]}")
        runs[label] = json.loads(res.stdout.strip().splitlines()[-1])
        print(label, "done", flush=True)
    return runs
