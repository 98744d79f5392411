"""Calibration files: every shipped one loads with provenance; bad ones fail clearly."""
import json

import pytest

from purlin.sim.calibration import (PARAMETERS, PROVENANCES, CalibrationError,
                                    available_calibrations, load_calibration, parse_calibration,
                                    to_dict)
from purlin.topology import list_topologies, load_topology


def test_every_shipped_file_loads_with_provenance():
    kinds = available_calibrations()
    assert {"a100", "h100", "h200", "b200", "gb200", "mi300x", "rubin"} <= set(kinds)
    for kind in kinds:
        cal = load_calibration(kind)
        assert cal.gpu_kind == kind
        assert set(cal.provenance) == set(PARAMETERS)
        assert all(p["provenance"] in PROVENANCES and p["source"] for p in cal.provenance.values())


def test_h200_has_measured_parameters():
    prov = load_calibration("h200").provenance
    measured = {k for k, p in prov.items() if p["provenance"] == "measured"}
    assert {"signal_latency_us", "hbm_efficiency", "sm.cta_local_gbps"} <= measured


def test_every_shipped_topology_has_a_calibration():
    kinds = set(available_calibrations())
    for name in list_topologies():
        assert load_topology(name).gpu_kind in kinds, name


def _good():
    return to_dict(load_calibration("h200"))


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d["parameters"].pop("launch_us"), "parameters.launch_us"),
    (lambda d: d["parameters"].__setitem__("warp_speed", {"value": 1, "provenance": "prior",
                                                          "source": "x"}), "parameters.warp_speed"),
    (lambda d: d["parameters"]["sm.cta_local_gbps"].__setitem__("value", -3),
     "parameters.sm.cta_local_gbps.value"),
    (lambda d: d["parameters"]["hbm_efficiency"].__setitem__("value", 0), "parameters.hbm_efficiency.value"),
    (lambda d: d["parameters"]["launch_us"].__setitem__("value", "fast"), "parameters.launch_us.value"),
    (lambda d: d["parameters"]["launch_us"].__setitem__("provenance", "vibes"),
     "parameters.launch_us.provenance"),
    (lambda d: d["parameters"]["launch_us"].pop("source"), "parameters.launch_us.source"),
    (lambda d: d.__setitem__("schema_version", 7), "schema_version"),
    (lambda d: d.pop("gpu_kind"), "gpu_kind"),
])
def test_bad_file_names_file_and_field(tmp_path, mutate, field):
    d = _good()
    mutate(d)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(CalibrationError) as e:
        load_calibration(path)
    assert str(path) in str(e.value) and field in str(e.value)


def test_not_json_and_unknown_kind(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{nope")
    with pytest.raises(CalibrationError, match="x.json: not valid JSON"):
        load_calibration(path)
    with pytest.raises(CalibrationError, match="no calibration file for GPU kind 'tpu'"):
        load_calibration("tpu")


def test_round_trip_and_with_values():
    cal = load_calibration("h100")
    assert parse_calibration(to_dict(cal)) == cal
    fast = cal.with_values(**{"sm.cta_remote_gbps": 92.0})
    assert fast.sm.cta_remote_gbps == 92.0 and fast.sm.cta_local_gbps == cal.sm.cta_local_gbps
    with pytest.raises(CalibrationError, match="unknown parameter"):
        cal.with_values(**{"sm.nope": 1.0})
