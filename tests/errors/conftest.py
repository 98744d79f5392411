"""Files the bad-input table reads: broken topologies, calibrations, and a folder."""
import json
from pathlib import Path

import pytest

from purlin.sim.calibration import load_calibration, to_dict

GOOD_TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "hgx-h200-8.yaml"


MESH = """name: mesh
source: test
gpu_kind: x
gpus: {gpus}
gpu: {{hbm_bandwidth_gbps: 1000, sms: 4, copy_engines: 1, nvlink_per_sm_gbps: 10, memory_gib: 1}}
links:
  - {{all_pairs: true, bandwidth_gbps: 50, latency_us: 0.5, link_class: nvlink}}
"""
LOOPBACK = """name: lb
source: test
gpu_kind: x
gpus: 2
loopback: true
ranks: 4
gpu: {hbm_bandwidth_gbps: 1000, sms: 4, copy_engines: 1, nvlink_per_sm_gbps: 10, memory_gib: 1}
"""


def _calibration(**values) -> str:
    d = to_dict(load_calibration("h200"))
    for key, v in values.items():
        d["parameters"].setdefault(key, {"provenance": "measured", "source": "test"})["value"] = v
    return json.dumps(d)


@pytest.fixture(scope="session")
def files(tmp_path_factory) -> dict[str, str]:
    """name -> path of each bad file (``{name}`` in a CLI row's argv)."""
    d = tmp_path_factory.mktemp("bad-inputs")
    text = GOOD_TOPOLOGY.read_text()
    made = {
        "binary.yaml": b"\x7fELF\x02\x01\x01\x00\x00\x00" * 20,
        "latin1.yaml": "name: caf\xe9\n".encode("latin-1"),
        "empty.yaml": b"",
        "syntax.yaml": b"name: [unclosed\n",
        "dupkey.yaml": (text + "\nname: again\n").encode(),
        "listkey.yaml": b"name: x\n? [a, b]\n: 1\n",
        "baddate.yaml": b"name: 2024-13-45\n",
        "deep.yaml": b"[" * 100000,
        "huge_bw.yaml": text.replace("bandwidth_gbps: 370", "bandwidth_gbps: 1.0e+300", 1).encode(),
        "text_bw.yaml": text.replace("bandwidth_gbps: 370", "bandwidth_gbps: 1e3", 1).encode(),
        "many_gpus.yaml": text.replace("gpus: 8", "gpus: 1000000000", 1).encode(),
        "mesh2000.yaml": MESH.format(gpus=2000).encode(),
        "loopback2.yaml": LOOPBACK.encode(),
        "calib_1e300.json": _calibration(**{"sm.cta_local_gbps": 1e300}).encode(),
        "calib_binary.json": b"\xff\xfe\x00\x01" * 16,
        "calib_notjson.json": b"{ not json",
        "calib_eff.json": _calibration(hbm_efficiency=1.5).encode(),
        "calib_batch0.json": _calibration(packet_batch=0).encode(),
        "calib_bigint.json": _calibration(launch_us=10 ** 400).encode(),
        "calib_str.json": _calibration(launch_us="fast").encode(),
    }
    out = {}
    for name, data in made.items():
        (d / name).write_bytes(data)
        out[name] = str(d / name)
    big = d / "big.yaml"
    with open(big, "wb") as f:                      # sparse: 17 MiB without writing them
        f.truncate(17 << 20)
    out["big.yaml"] = str(big)
    (d / "folder").mkdir()
    (d / "dir.json").mkdir()
    out["dir.json"] = str(d / "dir.json")
    out["folder"] = str(d / "folder")
    out["nodir"] = str(d / "no" / "such" / "folder")
    return out
