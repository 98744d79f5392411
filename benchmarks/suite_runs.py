"""Run the README's test command N times, each in a fresh clone and a fresh venv, as a new
user on this machine would, and record every run: exit code, time, pytest's summary line,
the failures, and the skip reasons.

    python benchmarks/suite_runs.py --runs 5            # HEAD of this checkout
    python benchmarks/suite_runs.py --runs 5 --append   # add to the runs already recorded

Writes benchmarks/results/suite_runs.json. The command is read from the README (its second
line of code), so the record is of what the README says, not of a copy of it.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS, header, save

ROOT = Path(__file__).resolve().parent.parent
NAME = "suite_runs.json"


def readme_test_command(readme: Path) -> str:
    """The README's second command (the one that sets up and runs the tests)."""
    block = re.search(r"```bash\n(.*?)```", readme.read_text(), re.S)
    lines = [ln for ln in block.group(1).splitlines() if ln.strip()]
    return lines[1]


def skip_section(lines: list[str]) -> list[str]:
    """The lines of the suite's "skipped, by reason" section (tests/conftest.py)."""
    try:
        start = next(i for i, ln in enumerate(lines) if "skipped, by reason" in ln) + 1
    except StopIteration:
        return []
    return [ln.strip() for ln in lines[start:] if re.match(r"\s*\d+\s{2}", ln)]


def one_run(commit: str, command: str, work: Path) -> dict:
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", commit], check=True)
    subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True)
    env_path = f"{work / 'venv' / 'bin'}:/usr/bin:/bin"
    t0 = time.monotonic()
    proc = subprocess.run(["bash", "-c", command], cwd=clone, capture_output=True, text=True,
                          env={"PATH": env_path, "HOME": str(work), "LANG": "C.UTF-8"})
    wall = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    lines = out.splitlines()
    summary = next((ln for ln in reversed(lines) if re.search(r"\d+ (passed|failed)", ln)), "")
    return {"rc": proc.returncode, "wall_s": round(wall, 1), "summary": summary.strip(" ="),
            "failed": [ln for ln in lines if ln.startswith(("FAILED", "ERROR"))],
            "skip_reasons": skip_section(lines),
            "tail": "\n".join(lines[-15:]) if proc.returncode else ""}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--commit", default="HEAD")
    ap.add_argument("--append", action="store_true", help="keep the runs already recorded")
    args = ap.parse_args(argv)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", args.commit], check=True,
                            capture_output=True, text=True).stdout.strip()
    command = readme_test_command(ROOT / "README.md")
    runs = []
    old = RESULTS / NAME
    if args.append and old.exists():
        runs = json.loads(old.read_text())["runs"]
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="suite-run-") as tmp:
            r = one_run(commit, command, Path(tmp))
        r.update(commit=commit, date=header()["date"])
        runs.append(r)
        print(f"run {len(runs)}: rc={r['rc']} {r['wall_s']} s  {r['summary']}", flush=True)
        doc = {**header(), "readme_command": command, "runs": runs,
               "summary": {"runs": len(runs), "passed": sum(x["rc"] == 0 for x in runs),
                           "commits": sorted({x["commit"][:10] for x in runs}),
                           "wall_s_max": max(x["wall_s"] for x in runs)}}
        save(NAME, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
