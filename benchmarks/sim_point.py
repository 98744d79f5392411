"""One simulator point, timed phase by phase in a process of its own (for sim_speed.py and
sim_scale.py).

A point is (topology, collective, size, policy, and optionally ``symmetry``: False to
simulate every rank; ``exact``: True to settle rates at every change): plan it
(``check=False``), verify it, simulate it, each timed with ``perf_counter``. ``--memory``
runs the phases under tracemalloc instead and reports each phase's peak of traced memory
(tracing slows Python, so those runs give memory, not time). The process's peak resident
set is reported too.
A topology name of the form ``nvswitch-W`` is a synthetic NVLink-switch world of W GPUs
with the B200/GB200 numbers of ``topologies/gb200-nvl72.yaml`` (720 GB/s effective links,
8 TB/s HBM, a 0.35 us switch, in-switch reduce), simulated with the ``gb200`` calibration.

``root`` picks the code: the working tree, or a checkout of another commit (the baseline
engine), given to the child process as its ``PYTHONPATH``.

Run one by hand: ``python benchmarks/sim_point.py '{"topology": "gb200-nvl72",
"collective": "all_reduce", "size": 1048576}'``.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GB200 = dict(bandwidth_gbps=720.0, latency_us=0.05, switch_latency_us=0.35, in_switch_reduce=True,
             hbm_bandwidth_gbps=8000.0, sms=148, copy_engines=3, nvlink_per_sm_gbps=48.0,
             memory_gib=186.0)


def _topology(name: str):
    from purlin.topology import load_topology, minimal
    if name.startswith("nvswitch-"):
        return minimal(int(name.split("-")[1]), **GB200), "gb200"
    return load_topology(name), None


def run_here(point: dict) -> dict:
    """Plan, verify and simulate ``point`` in this process; times (or traced peaks)."""
    import tracemalloc
    from purlin.sim import simulate
    from purlin.snac import plan
    from purlin.snac.verify import verify
    from purlin.spec import library
    memory = point.get("memory", False)
    topo, cal = _topology(point["topology"])
    c = library.from_size(point["collective"], topo.world, point["size"])
    out: dict = {}

    def phase(name, fn):
        if memory:
            tracemalloc.start()
        t0 = time.perf_counter()
        value = fn()
        out[f"{name}_s"] = time.perf_counter() - t0
        if memory:
            out[f"{name}_peak_mb"] = tracemalloc.get_traced_memory()[1] / 1e6
            tracemalloc.stop()
        return value

    s = phase("plan", lambda: plan(c, topo, point.get("policy"), cta_budget=point.get("cta_budget", 64),
                                   check=False))
    out["instructions"] = sum(len(p.instrs) for p in s.programs)
    out["programs"] = len(s.programs)
    out["policy"] = dict(s.policy)
    phase("verify", lambda: verify(s))
    # ``symmetry`` and ``exact`` only when the point asks: a baseline checkout's simulate may
    # not take them
    opts = {k: point[k] for k in ("symmetry", "exact") if k in point}
    r = phase("sim", lambda: simulate(s, topo, cal, record=False, **opts))
    out.update(time_us=r.time_us, busbw_gbps=r.busbw_gbps, flows=r.stats["flows"], events=r.stats["events"],
               recomputes=r.stats["recomputes"], coalesced=r.stats.get("coalesced", 0), world=topo.world,
               period=r.stats.get("period", topo.world),
               rss_peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    out["total_s"] = out["plan_s"] + out["verify_s"] + out["sim_s"]
    return out


def measure_all(points: list[dict], jobs: int = 1, **kw) -> list[dict]:
    """:func:`measure` of each point, ``jobs`` fresh processes at a time (each point is one
    single-threaded process, so on a machine of at least ``jobs`` idle cores a point's
    times are those it would have alone); results in the order of ``points``."""
    if jobs <= 1:
        return [measure(p, **kw) for p in points]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(lambda p: measure(p, **kw), points))


def measure(point: dict, root: Path | str | None = None, timeout_s: float = 600.0) -> dict:
    """``run_here`` in a fresh Python process running the code under ``root`` (default:
    this tree); on a timeout or a crash, a dict saying so."""
    paths = [str(root or ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths), PYTHONHASHSEED="0", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [sys.executable, str(Path(__file__).resolve()), json.dumps(point)]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env,
                           cwd=str(root or ROOT))
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s:.0f} s", "wall_s": time.perf_counter() - t0}
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["crashed"])[-1], "wall_s": time.perf_counter() - t0}
    return json.loads(p.stdout.strip().splitlines()[-1])


def baseline_checkout(commit: str, where: Path) -> Path:
    """The code of ``commit`` (purlin/ and topologies/) extracted under ``where``."""
    dst = where / commit
    if not (dst / "purlin").is_dir():
        dst.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "purlin", "topologies"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dst)], input=archive, check=True)
    return dst


if __name__ == "__main__":
    print(json.dumps(run_here(json.loads(sys.argv[1]))))
