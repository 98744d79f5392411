"""Policies (the codesign knobs) and the default table that picks one.

The table is the one readable place where size and world choose regime, algorithm,
chunk and CTA counts. Numbers are Purlin's published defaults
(docs/sources.md#purlins-defaults); ``codesign`` logs its pick at debug level. A sweep
can replace the table per topology (``Policy.from_table``).
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping

from purlin.errors import PlanError

log = logging.getLogger("purlin.codesign")

REGIMES = ("latency", "throughput", "direct")
ALGORITHMS = ("one_shot", "two_shot", "ring")
KiB, MiB = 1 << 10, 1 << 20


@dataclass(frozen=True)
class Policy:
    """How a collective is orchestrated.

    regime: ``latency`` (packets carry their own flag, pushed to the consumer),
        ``throughput`` (stage locally, notify, consumer pulls), ``direct`` (zero-copy over
        registered buffers: data moves straight from input to every holder's output,
        with a start and an end handshake), or ``auto``.
    algorithm: ``one_shot`` (every holder reduces every contribution), ``two_shot``
        (a reduce-scatter head feeds an all-gather tail), ``ring`` (hop by hop along a
        cycle, for topologies without all-to-all reach), or ``auto``.
    chunk_nbytes: pipelining unit; staging slots are this big (None: by size).
    put_ctas / consumer_ctas: CTAs per rank for producing (stage, push, local copies)
        and for consuming (pull, reduce, relay) (None: by regime).
    atom: datapath for Copy/Reduce: ``sm``, ``tma``, ``ce`` or ``switch``.
    staging_nbytes: per half; larger payloads cycle through slots with drain signals.
    align: Atom access width in bytes (16; 32 on Blackwell).
    """

    regime: str = "auto"
    algorithm: str = "auto"
    chunk_nbytes: int | None = None
    put_ctas: int | None = None
    consumer_ctas: int | None = None
    atom: str = "sm"
    staging_nbytes: int = 256 * MiB
    align: int = 16

    def __new__(cls, *args: Any, **fields: Any) -> "Policy":
        """Refuse a field the dataclass does not have with a PlanError (not a TypeError),
        and the retired ``deterministic`` with what replaced it."""
        if fields:
            _known_fields(fields)
        if len(args) > len(cls.__dataclass_fields__):
            raise PlanError(f"Policy takes at most {len(cls.__dataclass_fields__)} fields, "
                            f"got {len(args)} positional values")
        return super().__new__(cls)

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> "Policy":
        """Return self if every field has the right type and range; else PlanError naming
        the field, the value and the rule."""
        for name, choices in (("regime", REGIMES), ("algorithm", ALGORITHMS), ("atom", ATOMS)):
            v = getattr(self, name)
            extra = ("auto",) if name != "atom" else ()
            if not isinstance(v, str) or v not in choices + extra:
                raise PlanError(f"policy.{name} {v!r}: choose one of {', '.join(choices + extra)}")
        for name, (lo, hi) in _INT_RANGES.items():
            v = getattr(self, name)
            if v is None and name in _OPTIONAL:
                continue
            if isinstance(v, bool) or not isinstance(v, int):
                raise PlanError(f"policy.{name} {v!r}: must be an integer"
                                + (" or None (chosen by size)" if name in _OPTIONAL else "")
                                + f", got {type(v).__name__}")
            if v < lo:
                raise PlanError(f"policy.{name} must be >= {lo}, got {v}")
            if v > hi:
                raise PlanError(f"policy.{name} {v}: must be <= {hi:,} (a sanity bound)")
        if self.align & (self.align - 1):
            raise PlanError(f"policy.align {self.align}: must be a power of two (the Atom's "
                            f"vector width in bytes: 16, or 32 on Blackwell)")
        if self.chunk_nbytes is None:
            return self
        if self.chunk_nbytes % self.align:
            raise PlanError(f"policy.chunk_nbytes {self.chunk_nbytes} is not a multiple of "
                            f"align {self.align}")
        if self.staging_nbytes < 2 * self.chunk_nbytes:
            raise PlanError(f"policy.staging_nbytes {self.staging_nbytes} must hold at least "
                            f"two chunks of {self.chunk_nbytes} B")
        return self

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain data (what ``Schedule.policy`` records)."""
        return asdict(self)

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "Policy":
        """The checked Policy ``d`` describes; PlanError naming an unknown or bad field."""
        if not isinstance(d, Mapping):
            raise PlanError(f"policy {d!r:.60}: expected a mapping of field -> value, got "
                            f"{type(d).__name__}")
        d = dict(d)
        if d.get("deterministic", False) is True:   # retired: every plan but a ring reduces in rank order
            d.pop("deterministic")
        return Policy(**d).check()

    def with_(self, **changes: Any) -> "Policy":
        """A checked copy with ``changes`` applied."""
        return replace(self, **changes).check()


ATOMS = ("sm", "tma", "ce", "switch")
_OPTIONAL = ("chunk_nbytes", "put_ctas", "consumer_ctas")
_INT_RANGES = {"chunk_nbytes": (1, 1 << 40), "put_ctas": (1, 1 << 16),
               "consumer_ctas": (1, 1 << 16), "staging_nbytes": (1, 1 << 44), "align": (1, 4096)}
"""Sanity bounds on the integer fields: no GPU has 65536 CTAs per rank or 16 TiB of
staging; a value past them is a typo, not a plan."""


def _known_fields(fields: Mapping[str, Any]) -> None:
    known = set(Policy.__dataclass_fields__)
    if "deterministic" in fields:
        raise PlanError("policy.deterministic was removed: every reduction reads its "
                        "sources in rank order (a ring reduces along the ring; see "
                        "Schedule.reduction); drop the field")
    unknown = set(fields) - known
    if unknown:
        raise PlanError(f"policy: unknown field(s) {', '.join(sorted(map(str, unknown)))}; "
                        f"known: {', '.join(sorted(known))}")


def from_table(tables, collective: str, topology: str, nbytes: int) -> Policy | None:
    """The policy a sweep found best for this size band (``best_policy_table`` output:
    ``{"topology", "collective", "bands": [{"max_nbytes", "policy"}]}``, or a list of them).
    None when no table covers the case."""
    for t in [tables] if isinstance(tables, Mapping) else list(tables or ()):
        if t.get("collective") != collective or t.get("topology") not in (topology, None):
            continue
        for band in sorted(t["bands"], key=lambda b: b["max_nbytes"]):
            if nbytes <= band["max_nbytes"]:
                return Policy.from_dict(band["policy"])
        if t["bands"]:
            return Policy.from_dict(max(t["bands"], key=lambda b: b["max_nbytes"])["policy"])
    return None


# ---- the codesign table -----------------------------------------------------------
# Latency-regime thresholds for AllReduce by world (Purlin: 512 KiB at W=2, 256 KiB at
# W=4, 128 KiB at W=8 and beyond); other collectives switch to throughput at 64 KiB per
# rank (Purlin moves AllGather to throughput from 1-64 KiB on A100/H100).
LATENCY_MAX_ALLREDUCE = ((2, 512 * KiB), (4, 256 * KiB), (1 << 30, 128 * KiB))
LATENCY_MAX_OTHER = 64 * KiB
# Ranks sharing one GPU's memory (loopback topologies) leave the latency regime much
# earlier: packets double the bytes and run at a few GB/s per CTA, while the direct regime
# only reads. Measured crossover on one H200 (benchmarks/gpu_diagnose.py, crossover part,
# h200-diagnose.json: each of the seven at W = 2, 4, 8 in both regimes), largest buffer
# per rank, by world; the last entry covers larger worlds. Collectives not named here use
# the tables above.
LATENCY_MAX_SHARED = {
    "all_reduce": ((2, 128 * KiB), (4, 64 * KiB), (1 << 30, 8 * KiB)),
    "all_gather": ((2, 128 * KiB), (4, 256 * KiB), (1 << 30, 128 * KiB)),
    "reduce_scatter": ((2, 256 * KiB), (4, 128 * KiB), (1 << 30, 128 * KiB)),
    "all_to_all": ((2, 128 * KiB), (4, 128 * KiB), (1 << 30, 64 * KiB)),
    "all_gather_v": ((2, 256 * KiB), (4, 128 * KiB), (1 << 30, 0)),
    "reduce_scatter_v": ((2, 256 * KiB), (4, 256 * KiB), (1 << 30, 256 * KiB)),
    "all_to_all_v": ((2, 192 * KiB), (4, 384 * KiB), (1 << 30, 192 * KiB)),
}
# On shared memory a direct AllReduce up to this size reduces one-shot (every rank reads
# every input once; two-shot's extra handshake costs more than the saved reads).
DIRECT_ONE_SHOT_MAX_SHARED = 128 * KiB
# Chunk by per-rank payload: small chunks pipeline short messages; 1 MiB matches the
# NVLink bandwidth-delay product (Purlin), and the simulator found 4 MiB slower
# (slot reuse stalls in two-shot AllReduce and ReduceScatter); past 512 MiB per rank 2 MiB
# costs ~3% of busbw in the model and halves the instructions to plan and simulate.
CHUNK_BY_SIZE = ((8 * MiB, 512 * KiB), (512 * MiB, 1 * MiB), (1 << 62, 2 * MiB))
MIN_CHUNK = 16 * KiB
# Latency-regime chunk: a consumer CTA's share of the payload, kept within these bounds.
LATENCY_CHUNK = (1 * KiB, 64 * KiB)
# CTAs per role by regime: (put, consumer). Purlin: 16-32 put, 16-32 consumer, <= 64.
# 28 consumers split evenly over 7 peers at W=8 (the simulator showed uneven splits crowd
# one source's link).
CTAS = {"latency": (8, 16), "throughput": (16, 28), "direct": (16, 16)}
# Across GPUs a direct copy or reduce is bound by each CTA's NVLink rate, so the direct
# regime takes as many CTAs as the budget allows, and past the latency regime it is the
# default on fully connected boxes. Measured on 2 H200s over NVLink
# (h200x2-collectives.json against h200x2-collectives-direct64.json, each beside NCCL):
# AllReduce 64 MiB ran at 0.34x NCCL staged (throughput, 16 + 28 CTAs), 0.54x direct with
# 16 + 16, 0.98x direct with 64 + 64; the simulator, uncalibrated for NVLink, ranks them
# the same way at W=8 on hgx-h200-8.
CTAS_DIRECT_ACROSS_GPUS = (64, 64)


def codesign(name: str, world: int, nbytes: int, fully_connected: bool = True,
             cta_budget: int = 64, is_reduce: bool = False, base: Policy | None = None,
             shared_memory: bool = False) -> Policy:
    """Pick a policy for a collective of ``nbytes`` per rank (largest buffer) and world.

    Only the fields left ``auto`` in ``base`` are chosen. Past the latency regime a fully
    connected world takes the zero-copy direct regime (staging is an extra copy, and on
    NVLink the CTA count, not the staging, set the pace); a ring otherwise.
    ``shared_memory``: the ranks share one GPU's memory (a loopback topology), with its own
    measured latency thresholds.

    Examples
    --------
    >>> codesign("all_reduce", 8, 64 << 10, is_reduce=True).regime
    'latency'
    >>> codesign("all_reduce", 8, 1 << 30, is_reduce=True).algorithm
    'two_shot'
    >>> codesign("all_gather", 8, 1 << 30, shared_memory=True).regime
    'direct'
    >>> codesign("all_reduce", 8, 64 << 10, is_reduce=True, shared_memory=True).regime
    'direct'
    """
    base = base or Policy()
    regime, algorithm = base.regime, base.algorithm
    if regime == "auto":
        if shared_memory and name in LATENCY_MAX_SHARED:
            limit = next(v for w, v in LATENCY_MAX_SHARED[name] if world <= w)
        elif name.startswith("all_reduce"):
            limit = next(v for w, v in LATENCY_MAX_ALLREDUCE if world <= w)
        else:
            limit = LATENCY_MAX_OTHER
        bulk = "direct" if fully_connected else "throughput"
        regime = "latency" if nbytes <= limit and fully_connected else bulk
    if algorithm == "auto":
        if not fully_connected:
            algorithm = "ring"
        elif is_reduce and regime != "latency" and not (
                shared_memory and regime == "direct" and nbytes <= DIRECT_ONE_SHOT_MAX_SHARED):
            algorithm = "two_shot"
        else:
            algorithm = "one_shot"
    ctas = CTAS_DIRECT_ACROSS_GPUS if regime == "direct" and not shared_memory else CTAS[regime]
    put = base.put_ctas or ctas[0]
    cons = base.consumer_ctas or ctas[1]
    # Split the payload so every consumer CTA gets a share (two-shot: each owner's shard
    # among its reducers), within the bounds of the regime.
    if is_reduce and algorithm == "two_shot":
        ways = max(1, world * cons // 2)   # each owner's shard among its reducers
    elif regime == "direct" and not is_reduce:
        ways = put                         # direct copies run on the put CTAs
    else:
        ways = cons
    share = -(-nbytes // ways // base.align) * base.align
    if regime == "latency":
        lo, hi = LATENCY_CHUNK
    else:
        lo, hi = MIN_CHUNK, next(c for limit, c in CHUNK_BY_SIZE if nbytes <= limit)
    chunk = base.chunk_nbytes or min(max(lo, share), hi)
    while put + cons > cta_budget and put + cons > 2:  # shrink the larger role first
        if put >= cons:
            put = max(1, put // 2)
        else:
            cons = max(1, cons // 2)
    pol = replace(base, regime=regime, algorithm=algorithm, chunk_nbytes=chunk,
                  put_ctas=put, consumer_ctas=cons).check()
    log.debug("codesign %s W=%d %d B -> %s", name, world, nbytes, pol)
    return pol
