"""What every benchmark records: machine, date, command, and where results go."""
from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    info = {"host": platform.node(), "platform": platform.platform(), "python": sys.version.split()[0],
            "cpus": os.cpu_count(), "processor": platform.processor() or platform.machine()}
    try:
        with open("/proc/meminfo") as f:
            info["mem_gib"] = round(int(f.readline().split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    return info


def header(machine_info: dict | None = None) -> dict:
    """Machine (host, or the GPU's description when given), date and command."""
    return {"machine": machine_info or machine(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join([Path(sys.executable).name] + sys.argv)}


def save(name: str, doc: dict, out_dir: Path | str | None = None) -> Path:
    """Write ``doc`` to benchmarks/results/NAME, and also to ``out_dir`` or $OUT when set
    (the device tool brings $OUT back). Returns the results path."""
    paths = [RESULTS / name]
    extra = out_dir or os.environ.get("OUT")
    if extra and Path(extra).resolve() != RESULTS.resolve():
        paths.append(Path(extra) / name)
    for p in paths:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    return paths[0]


def write(name: str, payload: dict, out_dir: Path | None = None) -> Path:
    """:func:`save` with the :func:`header` (machine, date, command) in front."""
    return save(name, {**header(), **payload}, out_dir)


def load(name: str) -> dict:
    """benchmarks/results/NAME, or a one-line exit naming the file when it is not there."""
    path = RESULTS / name
    if not path.is_file():
        raise SystemExit(f"no results file {path}: give the name of a file under benchmarks/results/")
    return json.loads(path.read_text())


def revise(name: str, key: str, make) -> dict:
    """Rebuild part ``key`` of results file NAME from the rest of it on the CPU
    (``make(doc)``), keeping its machine, date and command; the rebuild's own command
    and date go beside it as ``KEY_by``."""
    doc = load(name)
    doc[key] = make(doc)
    doc[f"{key}_by"] = {k: v for k, v in header().items() if k != "machine"}
    save(name, doc)
    return doc

