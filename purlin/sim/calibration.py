"""Cost parameters of the simulator, one JSON file per GPU kind.

Every number the engine charges comes from here, never from engine code, so that a
refit from microbenchmarks is a new file, not an edit. A file lives at
``topologies/calibration/<gpu_kind>.json``::

    {
      "schema_version": 1,
      "gpu_kind": "h200",
      "source": "what the file as a whole rests on",
      "parameters": {
        "launch_us":  {"value": 2.5, "provenance": "prior", "source": "docs/sources.md ..."},
        "sm.cta_local_gbps": {"value": 23.0, "provenance": "measured", "source": "..."},
        ...
      }
    }

Keys are the dotted names of :data:`PARAMETERS` (one per field of
:class:`Calibration`, atoms as ``<atom>.<field>``, except :data:`EXECUTOR`); ``provenance``
is one of :data:`PROVENANCES`. The :data:`EXECUTOR` fields (how many signals or
PutPackets the kernel batches, how it aligns copies) are facts of the executor's kernel,
not measurements: they come from :mod:`purlin.snac.kernel_constants`, the one module the
CUDA source is generated from, and a file that sets one is refused. Every key must be present, none may be unknown, values are
finite and >= 0 (rates and efficiencies > 0). A bad file raises
:class:`CalibrationError` naming the file and the field.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from purlin.errors import TopologyError
from purlin.snac import kernel_constants as _kc

SCHEMA_VERSION = 1
ATOM_KINDS = ("sm", "tma", "ce", "switch")
PROVENANCES = ("measured", "prior", "assumption")


class CalibrationError(TopologyError):
    """Raised when a calibration file is missing, malformed, or has a bad field; the
    message names the file and the dotted field. (A TopologyError: calibration is
    hardware data, like a topology file.)"""


@dataclass(frozen=True, slots=True)
class AtomCost:
    """What one Atom kind costs. Rates are per issuing CTA (per copy engine for ``ce``).

    Attributes
    ----------
    cta_local_gbps : float
        Payload GB/s one CTA moves on a stream that stays on its own GPU.
    cta_remote_gbps : float
        Payload GB/s one CTA moves on a stream that crosses a link (an NVLink load,
        or a load whose store goes to a peer).
    op_start_us : float
        Start-up cost of one Copy/Reduce/PutPackets before bytes move (pipeline fill,
        address setup; for ``ce`` the DMA submission).
    wire_efficiency : float
        Fraction of a link's bandwidth this Atom's traffic attains (0 < x <= 1): each
        payload byte costs ``1 / wire_efficiency`` bytes of link capacity. 1.0 keeps the
        topology's effective bandwidth; in-switch reduction pays multicast/reduce
        protocol overhead on top of it.
    reduce_out_gbps, reduce_src_gbps : float
        A Reduce is not k copies: one CTA pays a fixed cost per output byte (accumulate,
        convert, store) plus one per local source read, so its rate in output bytes is
        ``1 / (1/reduce_out + k/reduce_src)`` (remote sources cost ``1/cta_remote`` each).
        Unused by ``ce`` (no reductions) and ``switch`` (the switch reduces).
    store_gbps : float
        Payload GB/s of each extra destination of a broadcast store on the CTA's own GPU
        (one more store stream in the CTA's loop; stores do not wait on memory as loads
        do, so this may exceed ``cta_local_gbps``).
    """

    cta_local_gbps: float
    cta_remote_gbps: float
    op_start_us: float
    wire_efficiency: float
    reduce_out_gbps: float
    reduce_src_gbps: float
    store_gbps: float


@dataclass(frozen=True)
class Calibration:
    """Every cost parameter of the simulator for one GPU kind (units in the names).

    Attributes
    ----------
    gpu_kind, source : str
        Which GPU, and what the file rests on overall.
    launch_us : float
        From the start of a call to the first instruction of the first CTA (a kernel
        node launched inside a CUDA graph).
    launch_grid_us : float
        What a launch of more than one CTA adds before its first instruction.
    launch_per_cta_us : float
        How much later each further CTA of the launch starts (the grid is dealt out one
        CTA after another).
    signal_latency_us : float
        One-way flag latency between two CTAs of one GPU: release-store to the
        waiter seeing it. A flag to a peer adds the topology's path latency.
    notify_issue_us : float
        Time the notifying CTA spends on a release-store (fence), before it goes on.
    packet_gbps : float
        Payload GB/s one CTA attains building and pushing packets (PutPackets), in place
        of the Atom's copy rate.
    packet_read_gbps : float
        Payload GB/s one CTA attains reading and checking packets (a Copy or Reduce
        from a packet window).
    packet_read_us : float
        Extra start-up of a Copy or Reduce that reads packets: the first packets' load
        round trip and tag check come before any store.
    packet_src_us : float
        Extra start-up per packet source of a Reduce beyond the first: its loads overlap
        the first source's round trip, its tag checks and accumulation do not.
    packet_crowd_us : float
        Extra start-up of a packet read per doubling of the call's CTAs that push or read
        packets, beyond two: their polling crowds the memory system. Paid after any wait
        for the packets (slower polls), so waiting does not hide it.
    reduce_src_us : float
        Extra start-up of a Reduce per plain (not packet) source beyond the first.
    packet_poll_us : float
        How long after a window's last packet lands a reader that was already polling
        for it has it: its poll loads are a round trip behind the stores.
    packet_put_us : float
        What each PutPackets of a batch costs beyond its bytes: the batch's vectors are
        spread over the CTA's threads, and each put's packets are a separate store run.
    copy_head_us : float
        Extra start-up of a Copy whose first destination is off a ``copy_align_bytes``
        boundary (a V block's offset): the executor first copies the bytes up to the
        boundary, one more memory round trip before the bulk.
    copy_align_bytes : float
        The destination alignment the executor's copies establish first (0: none).
    copy_align_min_bytes : float
        Copies shorter than this are not aligned first.
    wait_check_us : float
        Time a Wait costs when its flag is already there (the acquire load); a Wait
        that blocks pays the signal's latency instead. A WaitPackets costs nothing of
        its own: the read that follows checks each packet's tag.
    packet_batch : float
        How many consecutive PutPackets of one CTA the executor runs as one batch, paying
        one Atom start for all of them.
    signal_batch : float
        How many consecutive Notifies (or Waits) of one CTA the executor runs as one
        batch: one release fence (one poll round trip) for all of them.
    hbm_efficiency : float
        Fraction of the topology's ``hbm_bandwidth_gbps`` a stream of copies attains.
    hbm_knee : float
        How softly memory saturates (see :mod:`purlin.sim.fluid`): with demand D and
        capacity H it delivers (D^-k + H^-k)^(-1/k); 0 is a hard min(D, H).
    l2_resident_mib : float
        A call whose buffers on a GPU (inputs, outputs, staging, packet windows) fit in
        this many MiB finds them in the L2 cache when calls repeat (as in a CUDA graph).
    l2_speedup : float
        The memory capacity of such a GPU, as a multiple of its HBM capacity.
    l2_reduce_speedup : float
        A reducing CTA's rates (``reduce_out_gbps``, ``reduce_src_gbps``) on such a GPU, as
        a multiple of the rates from HBM: a reduce's loads are latency-bound, and the L2
        answers sooner.
    link_efficiency : float
        Fraction of a link's ``bandwidth_gbps`` (already "effective" in the topology
        files) that the simulated protocol attains; 1.0 keeps the topology's number.
    sm, tma, ce, switch : AtomCost
        Per-Atom rates and start-up costs (see :class:`AtomCost`).
    provenance : dict
        Dotted key -> ``{"provenance": ..., "source": ...}``, for reports.
    path : str
        The file it came from (``"<code>"`` when built in code).
    """

    gpu_kind: str
    source: str
    launch_us: float
    launch_grid_us: float
    launch_per_cta_us: float
    signal_latency_us: float
    notify_issue_us: float
    wait_check_us: float
    packet_batch: float
    signal_batch: float
    packet_gbps: float
    packet_read_gbps: float
    packet_read_us: float
    packet_src_us: float
    packet_crowd_us: float
    reduce_src_us: float
    packet_poll_us: float
    packet_put_us: float
    copy_head_us: float
    copy_align_bytes: float
    copy_align_min_bytes: float
    hbm_efficiency: float
    hbm_knee: float
    l2_resident_mib: float
    l2_speedup: float
    l2_reduce_speedup: float
    link_efficiency: float
    sm: AtomCost
    tma: AtomCost
    ce: AtomCost
    switch: AtomCost
    provenance: dict = field(default_factory=dict, compare=False, repr=False)
    path: str = field(default="<code>", compare=False)

    def atom(self, kind: str) -> AtomCost:
        """The :class:`AtomCost` of Atom ``kind`` (sm, tma, ce, switch)."""
        if kind not in ATOM_KINDS:
            raise CalibrationError(f"{self.path}: no Atom kind {kind!r}; known: {', '.join(ATOM_KINDS)}")
        return getattr(self, kind)

    def with_values(self, **values: float) -> "Calibration":
        """A copy with some dotted parameters replaced (``{"sm.cta_local_gbps": 50}``
        is written ``**{"sm.cta_local_gbps": 50}``); for what-if studies and tests."""
        flat = to_values(self)
        for key, v in values.items():
            if key not in flat:
                raise CalibrationError(f"{self.path}: unknown parameter {key!r}")
            flat[key] = v
        return from_values(flat, gpu_kind=self.gpu_kind, source=self.source,
                           provenance=self.provenance, where="<with_values>")


_TOP = ("launch_us", "launch_grid_us", "launch_per_cta_us", "signal_latency_us", "notify_issue_us",
        "wait_check_us", "packet_batch", "signal_batch", "packet_gbps", "packet_read_gbps", "packet_read_us",
        "packet_src_us", "packet_crowd_us", "reduce_src_us", "packet_poll_us", "packet_put_us", "copy_head_us",
        "copy_align_bytes", "copy_align_min_bytes", "hbm_efficiency", "hbm_knee", "l2_resident_mib", "l2_speedup",
        "l2_reduce_speedup", "link_efficiency")
_ATOM_FIELDS = tuple(f.name for f in fields(AtomCost))
EXECUTOR: dict[str, float] = {"packet_batch": float(_kc.PACKET_BATCH), "signal_batch": float(_kc.SIGNAL_BATCH),
                              "copy_align_bytes": float(_kc.COPY_ALIGN_BYTES),
                              "copy_align_min_bytes": float(_kc.COPY_ALIGN_MIN_BYTES)}
"""Fields set by the executor's kernel (:mod:`purlin.snac.kernel_constants`), not by files."""
PARAMETERS: tuple[str, ...] = tuple(k for k in _TOP if k not in EXECUTOR) + tuple(
    f"{a}.{f}" for a in ATOM_KINDS for f in _ATOM_FIELDS)
"""Every key a calibration file must give, in file order."""
_POSITIVE = ({"hbm_efficiency", "link_efficiency", "l2_speedup", "l2_reduce_speedup"}
             | {k for k in PARAMETERS if k.endswith(("_gbps", "_efficiency"))})
_AT_MOST_ONE = {k for k in PARAMETERS if k.endswith("_efficiency")}


def _sane_range(key: str) -> tuple[float, float]:
    """The range a value of ``key`` may take (besides the sign rules above): set by the
    unit in its name, wide enough for any GPU and narrow enough that the engine's
    arithmetic stays meaningful (a 1e300 rate or latency is a typo, not hardware)."""
    if key.endswith("_us"):
        return 0.0, 1e6                      # up to one second
    if key.endswith("_gbps"):
        return 1e-6, 1e9                     # 1 KB/s .. 1 EB/s (tests use 1e6 as "no cap")
    if key.endswith("_efficiency"):
        return 1e-6, 1.0
    if key in ("packet_batch", "signal_batch"):
        return 1.0, 1e6                      # a batch holds at least one
    return {"hbm_knee": (0.0, 100.0), "l2_resident_mib": (0.0, 1e6),
            "l2_speedup": (1e-3, 1e3), "l2_reduce_speedup": (1e-3, 1e3),
            "copy_align_bytes": (0.0, float(1 << 20)),
            "copy_align_min_bytes": (0.0, float(1 << 40))}[key]


RANGES: dict[str, tuple[float, float]] = {k: _sane_range(k) for k in (*PARAMETERS, *EXECUTOR)}
"""Sane range of every calibration parameter, by dotted key (:func:`_sane_range`)."""


def to_values(cal: Calibration) -> dict[str, float]:
    """Flat dotted key -> value of ``cal``."""
    out = {k: getattr(cal, k) for k in _TOP}
    for a in ATOM_KINDS:
        for f in _ATOM_FIELDS:
            out[f"{a}.{f}"] = getattr(getattr(cal, a), f)
    return out


def from_values(values: Mapping[str, float], gpu_kind: str, source: str = "<code>",
                provenance: dict | None = None, where: str = "<code>") -> Calibration:
    """Build and validate a Calibration from flat dotted values (the :data:`EXECUTOR`
    fields default to the kernel's constants; a what-if may set them)."""
    _check_keys(where, set(values) - set(EXECUTOR))
    vals = {k: _check_value(where, k, values[k]) for k in PARAMETERS}
    vals.update({k: _check_value(where, k, values.get(k, v)) for k, v in EXECUTOR.items()})
    atoms = {a: AtomCost(**{f: vals[f"{a}.{f}"] for f in _ATOM_FIELDS}) for a in ATOM_KINDS}
    return Calibration(gpu_kind=gpu_kind, source=source, provenance=dict(provenance or {}),
                       path=where, **{k: vals[k] for k in _TOP}, **atoms)


def parse_calibration(data: Any, where: str = "<dict>") -> Calibration:
    """Dict (a parsed calibration file) in, checked :class:`Calibration` out.

    Raises
    ------
    CalibrationError
        Naming ``where`` and the field, for a wrong schema version, a missing or
        unknown parameter, a parameter without ``value``/``provenance``/``source``,
        or a value that is not a finite number in range.

    Examples
    --------
    >>> d = to_dict(load_calibration("h200"))
    >>> parse_calibration(d).sm.cta_remote_gbps > 0
    True
    """
    if not isinstance(data, dict):
        raise CalibrationError(f"{where}: top level must be an object, got {type(data).__name__}")
    unknown = set(data) - {"schema_version", "gpu_kind", "source", "description", "parameters"}
    if unknown:
        raise CalibrationError(f"{where}: unknown top-level field(s) {sorted(unknown)}")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise CalibrationError(f"{where}: schema_version: expected {SCHEMA_VERSION}, "
                               f"got {data.get('schema_version')!r}")
    for key in ("gpu_kind", "source"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise CalibrationError(f"{where}: {key}: missing or not a non-empty string")
    params = data.get("parameters")
    if not isinstance(params, dict):
        raise CalibrationError(f"{where}: parameters: missing or not an object")
    for key in EXECUTOR:
        if key in params:
            raise CalibrationError(f"{where}: parameters.{key}: the executor's kernel sets it "
                                   f"(purlin.snac.kernel_constants), not a calibration file: "
                                   f"remove it")
    _check_keys(where, set(params))
    values, prov = {}, {}
    for key in PARAMETERS:
        entry = params[key]
        if not isinstance(entry, dict):
            raise CalibrationError(f"{where}: parameters.{key}: must be an object with "
                                   "value, provenance, source")
        extra = set(entry) - {"value", "provenance", "source", "note"}
        if extra:
            raise CalibrationError(f"{where}: parameters.{key}: unknown field(s) {sorted(extra)}")
        if "value" not in entry:
            raise CalibrationError(f"{where}: parameters.{key}.value: missing")
        if entry.get("provenance") not in PROVENANCES:
            raise CalibrationError(f"{where}: parameters.{key}.provenance: must be one of "
                                   f"{list(PROVENANCES)}, got {entry.get('provenance')!r}")
        if not isinstance(entry.get("source"), str) or not entry["source"]:
            raise CalibrationError(f"{where}: parameters.{key}.source: missing or empty "
                                   "(say where the number comes from)")
        values[key] = entry["value"]
        prov[key] = {"provenance": entry["provenance"], "source": entry["source"]}
    return from_values(values, data["gpu_kind"], data["source"], prov, where)


def to_dict(cal: Calibration) -> dict:
    """The file form of ``cal`` (inverse of :func:`parse_calibration`)."""
    params = {}
    for key, v in to_values(cal).items():
        if key in EXECUTOR:
            continue
        p = cal.provenance.get(key, {"provenance": "assumption", "source": "set in code"})
        params[key] = {"value": v, "provenance": p["provenance"], "source": p["source"]}
    return {"schema_version": SCHEMA_VERSION, "gpu_kind": cal.gpu_kind, "source": cal.source,
            "parameters": params}


def calibration_dirs() -> list[Path]:
    """Where calibration files are looked for: ``calibration/`` under the topology data
    root (installed package data or the source tree's ``topologies/``), then the source
    tree's ``topologies/calibration``."""
    dirs = []
    try:
        from purlin.topology import data_root
        dirs.append(Path(str(data_root())) / "calibration")
    except (ImportError, TypeError):  # pragma: no cover
        pass
    dirs.append(Path(__file__).resolve().parents[2] / "topologies" / "calibration")
    return list(dict.fromkeys(dirs))


def available_calibrations() -> tuple[str, ...]:
    """GPU kinds with a calibration file."""
    kinds = {p.stem for d in calibration_dirs() if d.is_dir() for p in d.glob("*.json")}
    return tuple(sorted(kinds))


def load_calibration(name_or_path: str | Path) -> Calibration:
    """Load the calibration of a GPU kind (``"h200"``) or from a JSON file path.

    Raises
    ------
    CalibrationError
        If no file exists for that kind (listing the kinds that do), or it is bad.

    Examples
    --------
    >>> load_calibration("h200").gpu_kind
    'h200'
    """
    if isinstance(name_or_path, Calibration):
        return name_or_path
    if not isinstance(name_or_path, (str, Path)) or not str(name_or_path).strip():
        raise CalibrationError(f"calibration {name_or_path!r:.60}: expected a GPU kind (one of "
                               f"{', '.join(available_calibrations())}), a JSON path or a "
                               f"Calibration, got {type(name_or_path).__name__}")
    path = Path(name_or_path)
    if path.suffix != ".json":
        found = [d / f"{name_or_path}.json" for d in calibration_dirs()]
        found = [p for p in found if p.is_file()]
        if not found:
            raise CalibrationError(f"no calibration file for GPU kind {str(name_or_path)!r}; "
                                   f"known: {', '.join(available_calibrations())}")
        path = found[0]
    try:
        if path.is_file() and path.stat().st_size > 16 << 20:
            raise CalibrationError(f"{path}: too large for a calibration file (> 16 MiB)")
        data = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise CalibrationError(f"{path}: no such calibration file") from None
    except IsADirectoryError:
        raise CalibrationError(f"{path}: is a folder, not a calibration file") from None
    except UnicodeDecodeError as e:
        raise CalibrationError(f"{path}: is not UTF-8 text (byte {e.start}); a calibration "
                               f"file is JSON") from None
    except json.JSONDecodeError as e:
        raise CalibrationError(f"{path}: not valid JSON: line {e.lineno}: {e.msg}") from None
    except RecursionError:
        raise CalibrationError(f"{path}: not valid JSON: nested too deeply") from None
    except OSError as e:
        raise CalibrationError(f"{path}: cannot read it ({e.strerror or e})") from None
    return parse_calibration(data, str(path))


def _check_keys(where: str, keys: set) -> None:
    missing = [k for k in PARAMETERS if k not in keys]
    if missing:
        raise CalibrationError(f"{where}: parameters.{missing[0]}: missing"
                               + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    unknown = sorted(keys - set(PARAMETERS))
    if unknown:
        raise CalibrationError(f"{where}: parameters.{unknown[0]}: unknown parameter; "
                               f"known: {', '.join(PARAMETERS)}")


def _check_value(where: str, key: str, v: Any) -> float:
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 1e300:
        raise CalibrationError(f"{where}: parameters.{key}.value: must be a finite number in "
                               f"[{RANGES[key][0]:g}, {RANGES[key][1]:g}], got an integer of "
                               f"{len(str(abs(v)))} digits")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise CalibrationError(f"{where}: parameters.{key}.value: must be a finite number, got {v!r}")
    if v < 0 or (key in _POSITIVE and v == 0) or (key in _AT_MOST_ONE and v > 1):
        bound = "> 0" if key in _POSITIVE else ">= 0"
        bound += " and <= 1" if key in _AT_MOST_ONE else ""
        raise CalibrationError(f"{where}: parameters.{key}.value: must be {bound}, got {v!r}")
    lo, hi = RANGES[key]
    if not lo <= v <= hi:
        raise CalibrationError(f"{where}: parameters.{key}.value: must be in [{lo:g}, {hi:g}] "
                               f"(a sane range for its unit), got {v!r}")
    return float(v)


__all__ = ["ATOM_KINDS", "AtomCost", "Calibration", "CalibrationError", "EXECUTOR", "PARAMETERS",
           "PROVENANCES", "available_calibrations", "from_values", "load_calibration",
           "parse_calibration", "to_dict", "to_values"]
