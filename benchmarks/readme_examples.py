"""How long each command-line example of the README takes, against issue 20's 30 s.

Every line of the README's shell blocks that starts with ``purlin `` (and the main job of
its first command) runs once, in a fresh process and an empty temporary folder, the way a
reader pastes it; its wall time and exit status are recorded. The baseline in the same run
is ``purlin --help``: what starting the command line costs before any work.

Writes ``benchmarks/results/readme_examples.json`` with a ``summary`` (the slowest example,
how many finish within 30 s).

Run: ``python benchmarks/readme_examples.py``
"""
from __future__ import annotations

import re
import shlex
import subprocess
import tempfile
import time
from pathlib import Path

from common import write

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 30.0


def examples(readme: str) -> list[str]:
    """The ``purlin ...`` commands of the README's bash blocks, in order (the part after
    ``&&`` where a line installs first)."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", readme, re.S):
        for line in block.splitlines():
            cmd = line.split("&&")[-1].strip()
            if cmd.startswith("purlin "):
                out.append(cmd)
    return out


def timed(cmd: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        p = subprocess.run(shlex.split(cmd), cwd=tmp, capture_output=True, text=True)
        wall = time.perf_counter() - t0
    return {"command": cmd, "wall_s": wall, "rc": p.returncode,
            "last_line": (p.stdout.strip().splitlines() or [""])[-1][:200],
            "error": p.stderr.strip().splitlines()[-1][:200] if p.returncode else None}


def main() -> None:
    cmds = examples((ROOT / "README.md").read_text())
    base = timed("purlin --help")
    rows = [timed(c) for c in cmds]
    for r in rows:
        print(f"{r['wall_s']:7.2f} s  rc={r['rc']}  {r['command']}", flush=True)
    ok = [r for r in rows if r["rc"] == 0 and r["wall_s"] <= TARGET_S]
    slowest = max(rows, key=lambda r: r["wall_s"])
    write("readme_examples.json", {
        "summary": {"examples": len(rows), "within_target": len(ok), "target_s": TARGET_S,
                    "slowest": {"command": slowest["command"], "wall_s": slowest["wall_s"]},
                    "startup_s": base["wall_s"],
                    "slowest_over_startup": slowest["wall_s"] / base["wall_s"]},
        "baseline": base, "examples": rows})


if __name__ == "__main__":
    main()
