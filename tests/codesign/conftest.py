"""Shared by the codesign-table tests: the shipped tables and their topologies."""
import json
from pathlib import Path

import pytest

from purlin.topology import list_topologies
from purlin.topology.identity import load_shipped

ROOT = Path(__file__).resolve().parents[2]
TABLES = ROOT / "topologies" / "codesign"
# Rack-scale systems whose tables wait for the faster simulator (generate them with the
# command given; until then the planner uses the generic rules there).
PENDING = {"gb200-nvl72": "purlin codesign gb200-nvl72",
           "rubin-nvl144": "purlin codesign rubin-nvl144",
           "rubin-ultra-nvl576": "purlin codesign rubin-ultra-nvl576"}
SHIPPED = list_topologies()


def table_of(name: str) -> dict:
    path = TABLES / f"{name}.json"
    if not path.exists():
        if name in PENDING:
            pytest.skip(f"no codesign table for {name} yet (rack scale): run `{PENDING[name]}`")
        pytest.fail(f"topologies/codesign/{name}.json is missing: run `purlin codesign {name}`")
    return json.loads(path.read_text())


def cases(table: dict):
    """(world, topology, collective name, entry) for every world and collective."""
    for w, entry in sorted(table["worlds"].items(), key=lambda kv: int(kv[0])):
        topo = load_shipped(table["topology"], int(w))
        for name, coll in entry["collectives"].items():
            yield int(w), topo, name, entry, coll
