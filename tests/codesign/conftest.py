"""Shared by the codesign-table tests: the shipped tables and their topologies."""
import json
from pathlib import Path

import pytest

from purlin.topology import list_topologies
from purlin.topology.identity import load_shipped

ROOT = Path(__file__).resolve().parents[2]
TABLES = ROOT / "topologies" / "codesign"
SHIPPED = list_topologies()


def table_of(name: str) -> dict:
    """The committed table of ``name``; a topology whose table is not committed yet is
    skipped, saying the command that makes it (benchmarks/codesign_all.py makes them all)."""
    path = TABLES / f"{name}.json"
    if not path.exists():
        pytest.skip(f"no codesign table committed for {name} yet: run `purlin codesign {name}` "
                    f"(or benchmarks/codesign_all.py) and commit topologies/codesign/{name}.json")
    return json.loads(path.read_text())


def cases(table: dict):
    """(world, topology, collective name, entry) for every world and collective."""
    for w, entry in sorted(table["worlds"].items(), key=lambda kv: int(kv[0])):
        topo = load_shipped(table["topology"], int(w))
        for name, coll in entry["collectives"].items():
            yield int(w), topo, name, entry, coll
