"""Malformed files never raise anything but PurlinError (hypothesis).

Each strategy starts from a valid document (a topology, a calibration, a Schedule) and
breaks it: fields deleted, replaced by values of any type and size (NaN, 1e300, 10**400,
nested lists, strings), unknown fields added; or it is random text or bytes. Reading it
must give the document or a PurlinError, never another exception; a Schedule that reads
must also verify or be refused by the verifier with a PurlinError.
"""
from __future__ import annotations

import copy
import json

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from purlin.errors import PurlinError
from purlin.sim.calibration import load_calibration, parse_calibration, to_dict as cal_to_dict
from purlin.snac import Policy, plan
from purlin.snac.serialize import from_dict, from_json, to_dict
from purlin.snac.verify import verify
from purlin.spec import library
from purlin.topology import load_topology, minimal, parse_topology
from purlin.topology.load import data_root

SETTINGS = dict(max_examples=120, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

TOPOLOGY = yaml.safe_load(data_root().joinpath("hgx-h200-8.yaml").read_text())
MESH = yaml.safe_load(data_root().joinpath("mesh-2d-16.yaml").read_text())
CALIBRATION = cal_to_dict(load_calibration("h200"))
SCHEDULES = [to_dict(plan(library.all_gather(2, 64), minimal(2), Policy(regime="throughput"))),
             to_dict(plan(library.all_reduce(3, 96), minimal(3), Policy(regime="latency"))),
             to_dict(plan(library.reduce_scatter(2, 32), minimal(2)))]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 10), st.integers(min_value=-(10 ** 400), max_value=10 ** 400),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1e300, -1e300, 1e-300, 0.0, 0.5]),
    st.text(max_size=12), st.sampled_from(["gpu0", "gpu1", "nvswitch", "input", "staging", "Copy", "sm"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                      max_leaves=8)


def _mutate(doc, data, rounds: int = 3):
    """``doc`` with up to ``rounds`` random edits at random places."""
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(1, rounds))):
        parent, key, node = None, None, doc
        while isinstance(node, (dict, list)) and node and data.draw(st.booleans()):
            keys = list(node) if isinstance(node, dict) else list(range(len(node)))
            k = data.draw(st.sampled_from(keys))
            parent, key, node = node, k, node[k]
        op = data.draw(st.sampled_from(["replace", "delete", "add"]))
        if parent is None:
            if op == "replace":
                return data.draw(values)
            target = doc
        else:
            target = parent
        if op == "replace" and parent is not None:
            parent[key] = data.draw(values)
        elif op == "delete" and parent is not None:
            del parent[key]
        elif isinstance(node if parent is None else target, dict):
            (node if parent is None else target)[data.draw(st.text(max_size=8))] = data.draw(values)
        elif isinstance(target, list):
            target.append(data.draw(values))
    return doc


def _only_purlin_errors(fn, *args):
    try:
        return fn(*args)
    except PurlinError:
        return None


@settings(**SETTINGS)
@given(data=st.data(), base=st.sampled_from([TOPOLOGY, MESH]))
def test_malformed_topology_dicts(data, base):
    _only_purlin_errors(parse_topology, _mutate(base, data), "t.yaml")


@settings(**SETTINGS)
@given(data=st.data())
def test_malformed_topology_yaml_files(data, tmp_path_factory):
    doc = _mutate(TOPOLOGY, data)
    path = tmp_path_factory.mktemp("yaml") / "t.yaml"
    try:
        text = yaml.safe_dump(doc, allow_unicode=True)
    except (yaml.YAMLError, ValueError, OverflowError):   # not representable: write repr text
        text = repr(doc)
    path.write_text(text, encoding="utf-8")
    _only_purlin_errors(load_topology, str(path))


@settings(**SETTINGS)
@given(blob=st.one_of(st.binary(max_size=400), st.text(max_size=400).map(str.encode),
                      st.sampled_from([b"[" * 5000, b"{a: " * 3000, b"name: &a [*a]", b"\xef\xbb\xbfname: x",
                                       b"!!python/object:os.system {}", b"a: 2024-13-45", b"? [1]\n: 2"])))
def test_topology_files_of_random_bytes(blob, tmp_path_factory):
    path = tmp_path_factory.mktemp("blob") / "b.yaml"
    path.write_bytes(blob)
    _only_purlin_errors(load_topology, str(path))


@settings(**SETTINGS)
@given(data=st.data())
def test_malformed_calibrations(data, tmp_path_factory):
    doc = _mutate(CALIBRATION, data)
    _only_purlin_errors(parse_calibration, doc, "c.json")
    path = tmp_path_factory.mktemp("cal") / "c.json"
    try:
        path.write_text(json.dumps(doc))
    except (ValueError, TypeError):   # NaN is JSON to Python; keys of other types are not
        return
    _only_purlin_errors(load_calibration, str(path))


@settings(**SETTINGS)
@given(blob=st.binary(max_size=300))
def test_calibration_files_of_random_bytes(blob, tmp_path_factory):
    path = tmp_path_factory.mktemp("calb") / "c.json"
    path.write_bytes(blob)
    _only_purlin_errors(load_calibration, str(path))


@settings(**SETTINGS)
@given(data=st.data(), base=st.sampled_from(SCHEDULES))
def test_malformed_schedules(data, base):
    s = _only_purlin_errors(from_dict, _mutate(base, data))
    if s is not None:
        _only_purlin_errors(verify, s)


@settings(**SETTINGS)
@given(data=st.data(), base=st.sampled_from(SCHEDULES))
def test_malformed_schedule_json_text(data, base):
    text = json.dumps(base)
    cut = data.draw(st.integers(0, len(text)))
    junk = data.draw(st.text(max_size=6))
    s = _only_purlin_errors(from_json, text[:cut] + junk + text[cut + len(junk):])
    if s is not None:
        _only_purlin_errors(verify, s)


@pytest.mark.parametrize("blob", [b"", b"\x00\x01", b"null", b"[]", b"1e999", b'{"schema_version": 2}'])
def test_schedule_json_edge_cases(blob):
    with pytest.raises(PurlinError):
        from_json(blob)
