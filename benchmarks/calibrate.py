"""Raw microbenchmarks for the simulator's calibration (no fitting here).

Writes benchmarks/results/h200-calibration-raw.json with machine, date, command and raw
samples (microseconds):
- copy_rate: atom_copy (sm) and atom_copy_tma per CTA count (1..2 x SMs) and per-CTA
  chunk; each point moves ctas x chunk bytes once per launch;
- reduce_rate: atom_reduce (bf16, 2 and 8 sources) likewise;
- launch: graph replay of 1000 empty kernels (per launch), and plain back-to-back launches;
- signal: flag_chain of N CTAs (each acquire-waits its predecessor, then release-sets its
  own flag), time per launch vs N: the slope is one signal hop;
- copy_engine: cudaMemcpyAsync D2D per size in a graph of 50 copies (start cost = intercept).

Run (after `pip install -e .`): python3 benchmarks/calibrate.py   (about a minute on an H200)
"""
from __future__ import annotations

import argparse

import numpy as np

from gpu_common import cupy, header, median, time_graph, time_launches, write

KiB, MiB = 1 << 10, 1 << 20


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="h200-calibration-raw.json")
    args = ap.parse_args(argv)
    cp = cupy()
    from purlin.backends.gpu import atomset, kernels
    import gpu_kernels
    k = gpu_kernels.for_device(0)
    sms = k.sm_count
    doc = header()
    doc["atom_set"] = k.atoms.name
    doc["threads_per_cta"] = atomset.THREADS
    doc["sm_count"] = sms
    raw = doc["raw"] = {"copy_rate": [], "reduce_rate": [], "launch": {}, "signal": [], "copy_engine": []}
    T = atomset.THREADS
    cta_counts = sorted({1, 2, 4, 8, 16, 32, 66, sms, 2 * sms})
    errors = doc["errors"] = []

    def guarded(section, fn):
        """Run one section; a CUDA error ends it (and is recorded) without losing the rest."""
        try:
            fn()
            cp.cuda.runtime.deviceSynchronize()
        except Exception as e:   # noqa: BLE001 - recorded in the results file
            errors.append(f"{section}: {type(e).__name__}: {e}")
            print("ERROR", errors[-1], flush=True)

    def launch_section():
        fe = k.fn("empty_kernel")
        raw["launch"]["graph_replay_empty_us"] = time_graph(lambda: fe((1,), (32,), ()), calls=1000, replays=5)
        raw["launch"]["back_to_back_empty_us"] = [x / 100 for x in time_launches(
            lambda: [fe((1,), (32,), ()) for _ in range(100)], reps=5)]

    def signal_section():
        fchain = k.fn("flag_chain")
        flags = cp.zeros(2 * sms + 1, cp.uint64)
        value = [0]

        def chain(n):
            value[0] += 1
            fchain((n,), (32,), (flags, np.uint64(value[0])))
        for n in (1, 2, 8, 32, 66, sms, 2 * sms):
            raw["signal"].append({"ctas": n, "hops": n - 1,
                                  "us_per_launch": time_launches(lambda: chain(n), reps=10)})

    def ce_section():
        src = cp.empty(64 * MiB, cp.uint8)
        dst = cp.empty(64 * MiB, cp.uint8)
        kind = cp.cuda.runtime.memcpyDeviceToDevice
        for size in (4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 64 * MiB):
            def ce(size=size):
                cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, size, kind,
                                            cp.cuda.get_current_stream().ptr)
            samples = time_graph(ce, calls=50 if size < 16 * MiB else 10, replays=3, warmup=1)
            raw["copy_engine"].append({"bytes": size, "us_per_copy": samples})

    def copy_section():
        chunks = (64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB)
        big = 2 * sms * 4 * MiB
        src = cp.random.randint(0, 255, big, dtype=cp.uint8)
        dst = cp.empty(big, cp.uint8)
        fcopy = k.fn("atom_copy")
        ftma = k.fn("atom_copy_tma") if k.atoms.tma else None
        if ftma is not None:
            cp.cuda.driver.funcSetAttribute(
                ftma.ptr, cp.cuda.driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 4 * 16384)
        for chunk in chunks:
            for ctas in cta_counts:
                n = ctas * chunk
                calls = 20 if n < 64 * MiB else 5
                launches = {"sm": lambda: fcopy((ctas,), (T,), (src, dst, np.int64(n), np.int64(chunk)))}
                if ftma is not None:
                    launches["tma"] = lambda: ftma((ctas,), (T,), (src, dst, np.int64(n), np.int64(chunk),
                                                                 np.int32(4), np.int32(16384)),
                                                   shared_mem=4 * 16384)
                for kind, fn in launches.items():
                    samples = time_graph(fn, calls=calls, replays=3, warmup=1)
                    cp.cuda.runtime.deviceSynchronize()
                    raw["copy_rate"].append({"kind": kind, "ctas": ctas, "chunk_bytes": chunk,
                                             "bytes_moved": n, "us_per_launch": samples})

    def reduce_section():
        fred = k.fn("atom_reduce")
        per_src = 2 * sms * MiB
        rsrc = [cp.random.standard_normal(per_src // 4, dtype=cp.float32).view(cp.uint8) for _ in range(8)]
        ptrs = cp.asarray(np.array([x.data.ptr for x in rsrc], np.uint64))
        rdst = cp.empty(per_src, cp.uint8)
        for nsrc in (2, 8):
            for chunk in (256 * KiB, 1 * MiB):
                for ctas in cta_counts:
                    n = ctas * chunk
                    if n > per_src:
                        continue
                    fn = lambda: fred((ctas,), (T,), (ptrs, np.int32(nsrc), rdst, np.int64(n), np.int64(chunk),
                                                       np.int32(2), np.int32(0)))
                    samples = time_graph(fn, calls=10, replays=3, warmup=1)
                    cp.cuda.runtime.deviceSynchronize()
                    raw["reduce_rate"].append({"dtype": "bf16", "sources": nsrc, "ctas": ctas,
                                               "chunk_bytes": chunk, "output_bytes": n,
                                               "us_per_launch": samples})

    for name, fn in (("launch", launch_section), ("signal", signal_section), ("copy_engine", ce_section),
                     ("copy_rate", copy_section), ("reduce_rate", reduce_section)):
        guarded(name, fn)
    # a compact view for people; the simulator fits from raw
    glance = doc["glance"] = {}
    try:
        glance["launch_us_graph"] = median(raw["launch"]["graph_replay_empty_us"])
        glance["signal_hop_us"] = ((median(raw["signal"][-1]["us_per_launch"]) -
                                    median(raw["signal"][0]["us_per_launch"])) / max(1, raw["signal"][-1]["hops"]))
        glance["ce_4KiB_us"] = median(raw["copy_engine"][0]["us_per_copy"])
        glance["copy_sm_1cta_4MiB_GBps"] = next(2 * r["bytes_moved"] / median(r["us_per_launch"]) / 1e3
                                                for r in raw["copy_rate"] if r["kind"] == "sm" and r["ctas"] == 1
                                                and r["chunk_bytes"] == 4 * MiB)
    except (KeyError, IndexError, StopIteration):
        pass
    path = write(args.out, doc)
    print("calibration glance:", doc["glance"], "->", path)
    return doc


if __name__ == "__main__":
    main()
