"""Regenerate every shipped topology's codesign table, one topology per process.

Each topology runs ``purlin codesign NAME --workers 1`` in a process of its own with
``OMP_NUM_THREADS=1`` (the search's budget is CPU seconds, so a table does not depend on
how many run beside it); the widest systems get a few worker processes and the budget
times that (``WORKERS``); the searches run at once up to ``--jobs`` processes, the
costliest first (rack-scale systems), so the wall time is about the longest one. Each table goes
to ``topologies/codesign/NAME.json``; each search's output to ``LOG_DIR/NAME.log``; the
summary (per topology: exit status, wall seconds, CPU seconds, points, points left out
by the budget) to ``LOG_DIR/summary.json`` and the terminal. CPU only; no GPU.

Run (the lead's 16-core machine; about 10 minutes):

    python benchmarks/codesign_all.py --jobs 16
    python benchmarks/codesign_all.py --only h200-loopback,a100-loopback --jobs 2
    python benchmarks/codesign_all.py --budget-s 480 --budget rubin-ultra-nvl576=900

Then commit ``topologies/codesign/*.json`` (the tests in tests/codesign read them).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from common import machine

ROOT = Path(__file__).resolve().parents[1]
# Costliest first, so the long searches start at once (world size is the cost's driver).
ORDER = ("rubin-ultra-nvl576", "rubin-nvl144", "gb200-nvl72", "mesh-2d-16")
# The widest systems get a pool of their own and the budget times its size, so they end
# about when the others do (a point there costs 5-100 CPU seconds).
WORKERS = {"rubin-ultra-nvl576": 4, "rubin-nvl144": 2}


def topologies() -> list[str]:
    """The shipped topologies, costliest first."""
    out = subprocess.run([sys.executable, "-c", "import purlin; print(' '.join(purlin.list_topologies()))"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [n for n in ORDER if n in out] + [n for n in out if n not in ORDER]


def start(name: str, budget_s: float, workers: int, log_dir: Path, extra: list[str]) -> tuple:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, "-m", "purlin.cli", "codesign", name, "--workers", str(workers),
           "--budget-s", f"{budget_s:g}", "--quiet", *extra]
    log = open(log_dir / f"{name}.log", "w")
    log.write("$ " + " ".join(cmd) + "\n")
    log.flush()
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT), log, time.time()


def summary_of(name: str) -> dict:
    path = ROOT / "topologies" / "codesign" / f"{name}.json"
    if not path.exists():
        return {}
    s = json.loads(path.read_text())["search"]
    return {k: s.get(k) for k in ("points", "left_out", "cpu_s", "budget_s", "sizes")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1, help="processes at once")
    ap.add_argument("--only", help="comma list of topologies (default: every shipped one)")
    ap.add_argument("--budget-s", type=float, default=480.0, help="each search's CPU budget (s)")
    ap.add_argument("--budget", action="append", default=[], metavar="NAME=SECONDS",
                    help="another budget for one topology (repeat; default: --budget-s x its workers)")
    ap.add_argument("--workers", action="append", default=[], metavar="NAME=K",
                    help="processes for one topology's search (repeat; default "
                         + ", ".join(f"{k}={v}" for k, v in WORKERS.items()) + ", others 1)")
    ap.add_argument("--log-dir", default=str(ROOT / "benchmarks" / "results" / "codesign-logs"))
    ap.add_argument("extra", nargs="*", help="more arguments for purlin codesign (after --)")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"--jobs {args.jobs}: give at least 1")
    names = topologies()
    if args.only:
        want = [n for n in args.only.split(",") if n]
        unknown = sorted(set(want) - set(names))
        if unknown:
            ap.error(f"--only: not shipped topologies: {', '.join(unknown)} (shipped: {', '.join(names)})")
        names = [n for n in names if n in want]
    workers = {n: WORKERS.get(n, 1) for n in names}
    for item in args.workers:
        n, _, v = item.partition("=")
        if n not in workers or not v.isdigit() or int(v) < 1:
            ap.error(f"--workers {item}: give NAME=K (K >= 1) for a topology being run")
        workers[n] = int(v)
    budgets = {n: args.budget_s * workers[n] for n in names}
    for item in args.budget:
        n, _, v = item.partition("=")
        if n not in budgets or not v:
            ap.error(f"--budget {item}: give NAME=SECONDS for a topology being run")
        budgets[n] = float(v)
    log_dir = Path(args.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    t0, queue, running, done = time.time(), list(names), {}, {}
    print(f"# {len(names)} topologies, {args.jobs} at once, logs in {log_dir}", flush=True)
    while queue or running:
        busy = sum(workers[n] for n in running)
        while queue and (not running or busy + workers[queue[0]] <= args.jobs):
            n = queue.pop(0)
            running[n] = start(n, budgets[n], workers[n], log_dir, args.extra)
            busy += workers[n]
            print(f"# [{time.time() - t0:7.1f} s] started {n} ({workers[n]} process(es), budget "
                  f"{budgets[n]:g} CPU s)", flush=True)
        time.sleep(1.0)
        for n, (proc, log, t_start) in list(running.items()):
            if proc.poll() is None:
                continue
            log.close()
            del running[n]
            done[n] = {"rc": proc.returncode, "wall_s": round(time.time() - t_start, 1), **summary_of(n)}
            d = done[n]
            print(f"# [{time.time() - t0:7.1f} s] {n}: rc {d['rc']}, {d['wall_s']} s wall, "
                  f"{d.get('cpu_s')} CPU s, {d.get('points')} points, {d.get('left_out')} left out "
                  f"({len(done)}/{len(names)} done)", flush=True)
    report = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "command": " ".join(sys.argv),
              "machine": machine(), "cpus": os.cpu_count(), "jobs": args.jobs, "wall_s": round(time.time() - t0, 1),
              "topologies": done}
    (log_dir / "summary.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    print(f"{'topology':<20} {'rc':>3} {'wall_s':>8} {'cpu_s':>8} {'points':>7} {'left_out':>8}")
    for n in names:
        d = done[n]
        print(f"{n:<20} {d['rc']:>3} {d['wall_s']:>8} {str(d.get('cpu_s')):>8} "
              f"{str(d.get('points')):>7} {str(d.get('left_out')):>8}")
    print(f"# all done in {report['wall_s']} s; summary in {log_dir / 'summary.json'}")
    return 0 if all(d["rc"] == 0 for d in done.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
