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


def header() -> dict:
    return {"machine": machine(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join([Path(sys.executable).name] + sys.argv)}


def write(name: str, payload: dict, out_dir: Path | None = None) -> Path:
    out = (out_dir or RESULTS) / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**header(), **payload}, indent=1, sort_keys=False) + "\n")
    return out
