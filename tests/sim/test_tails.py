"""The simulator's charge for instructions off the 16-byte grid (purlin.sim.tails): what
the executor's kernel does for tails and narrow Refs, and nothing else changes."""
import pytest

from purlin.sim import simulate, tails
from purlin.sim.calibration import CalibrationError, load_calibration, parse_calibration, to_dict
from purlin.snac import kernel_constants as kc
from purlin.snac.ir import Copy, Program, PutPackets, Ref
from tests.sim.simkit import round_calibration, schedule

MB = 1_000_000


def _copy_time(src_off, dst_off, nbytes, cal):
    s = schedule([Program(0, 0, "c", (Copy(Ref(0, "input", src_off), (Ref(0, "output", dst_off),), nbytes),)),
                  Program(1, 0, "idle", ())], nbytes=2 * MB)
    return simulate(s, _topo(), cal).time_us


def _topo():
    from purlin.topology import minimal
    return minimal(2)


def test_on_the_grid_nothing_changes():
    cal = load_calibration("h200")
    ins = Copy(Ref(0, "input", 32), (Ref(1, "output", 4096),), 1 << 20)
    spec = object()
    assert tails.charge(ins, spec, 1.5, cal) == (spec, 1.5)
    put = PutPackets(Ref(0, "input", 16), Ref(1, "packets", 0), 24, 1)   # whole packets
    assert tails.charge(put, spec, 0.7, cal) == (spec, 0.7)


def test_narrow_refs_pay_the_access_width_and_tails_a_round_trip():
    cal = round_calibration(copy_head_us=0.5, **{"sm.cta_local_gbps": 100.0})
    base = _copy_time(0, 0, MB, cal)
    # a 4-byte-aligned source and destination: 4-byte words, a quarter of the bytes in flight
    words = _copy_time(4, 4, MB, cal)
    assert words - base == pytest.approx(MB / (100e3 * kc.bytes_in_flight(4) / kc.bytes_in_flight(16)) - MB / 100e3,
                                         rel=1e-6)
    # one side on the grid, the other 4-byte aligned: vectors split into words, full rate
    assert _copy_time(0, 4, MB, cal) == pytest.approx(base)
    # a size that is not whole vectors: one more round trip (copy_head_us) than its bytes
    assert _copy_time(0, 0, MB + 4, cal) == pytest.approx(base + 0.5 + 4 / 100e3)
    # odd bytes (fp8 at an odd offset): the narrow path, 1-byte elements
    odd = _copy_time(1, 0, MB, cal)
    assert odd - base == pytest.approx(MB / (100e3 * kc.bytes_in_flight(1) / 128) - MB / 100e3, rel=1e-6)


def test_executor_constants_come_from_the_kernel_module_not_files(tmp_path):
    cal = load_calibration("h200")
    assert (cal.packet_batch, cal.signal_batch, cal.copy_align_bytes, cal.copy_align_min_bytes) == \
        (kc.PACKET_BATCH, kc.SIGNAL_BATCH, kc.COPY_ALIGN_BYTES, kc.COPY_ALIGN_MIN_BYTES)
    d = to_dict(cal)
    assert "signal_batch" not in d["parameters"]
    d["parameters"]["signal_batch"] = {"value": 32, "provenance": "prior", "source": "x"}
    with pytest.raises(CalibrationError, match="parameters.signal_batch: the executor's kernel sets it"):
        parse_calibration(d, "f.json")
    assert cal.with_values(signal_batch=4.0).signal_batch == 4.0   # a what-if may still set it
