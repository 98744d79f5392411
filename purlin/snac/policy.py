"""Policies (the codesign knobs) and the generic rules that fill a policy's ``auto`` fields.

Where a default comes from is :mod:`purlin.snac.tables`: a shipped topology has a codesign
table (``topologies/codesign/<name>.json``, made on the simulator by ``purlin codesign``)
that names the policy per collective, world and size band. The rules here fill what no
table gives (a topology of your own, a collective outside the table, the fields a caller
left ``auto``). They read the topology through :class:`Traits` (link bandwidth and
latency, the per-SM NVLink rate, whether ranks share a GPU) and hold no GPU's numbers.
The rules start from Purlin's published defaults (docs/sources.md#purlins-defaults);
``codesign`` logs its pick at debug level. A sweep can replace the table per topology
(``Policy.from_table``).
"""
from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping

from purlin.errors import PlanError
from purlin.snac.sync import FENCES, NOTIFY_ORDERS, STARTS

log = logging.getLogger("purlin.codesign")

REGIMES = ("latency", "throughput", "direct")
ALGORITHMS = ("one_shot", "two_shot", "ring")
ATOMS = ("sm", "tma", "ce", "switch")
KiB, MiB = 1 << 10, 1 << 20
# Options added after schedules were first recorded, with the value that plans as before.
LATER_OPTIONS = {"fence": "rank", "push_nbytes": None, "notify_order": "rank", "start": "cta"}


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
    fence: who waits at call end for the peers that touched a rank's memory: ``rank``
        (one CTA per rank waits for every touching CTA) or ``cta`` (CTA c waits for
        the CTAs c of its peers only: a CTA checks one signal per peer, not one per
        peer CTA) or ``gather`` (each CTA reports to its rank's CTA 0, which signals each
        owner once: an owner checks one signal per peer rank). See :mod:`purlin.snac.sync`.
    push_nbytes: latency regime: bytes per packet push, a multiple of ``chunk_nbytes``
        that consumers split into chunks (None: one push per chunk).
    notify_order: in which order a rank takes its peers: ``rank`` (rank 0 first) or
        ``rotated`` (rank r starts with r+1, so each rank is first for one notifier and
        last for one, instead of rank W-1 last for all): the peers a CTA signals and,
        where ranks have GPUs of their own, the signals it waits for, the holders a copy
        stores to or pushes to (its own first) and the peers it unpacks from; every
        rank's program is then its peers' rotation.
    start: who waits for a peer's start signal before touching its buffers: ``cta`` (every
        CTA that touches it) or ``gate`` (the rank's CTA 0 waits for every peer once, then
        releases its other CTAs with one local signal: W flags a rank instead of W per
        CTA, for one local hop).
    """

    regime: str = "auto"
    algorithm: str = "auto"
    chunk_nbytes: int | None = None
    put_ctas: int | None = None
    consumer_ctas: int | None = None
    atom: str = "sm"
    staging_nbytes: int = 256 * MiB
    align: int = 16
    fence: str = "rank"
    push_nbytes: int | None = None
    notify_order: str = "rank"
    start: str = "cta"

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
        if not isinstance(self.fence, str) or self.fence not in FENCES:
            raise PlanError(f"policy.fence {self.fence!r}: choose one of {', '.join(FENCES)}")
        if not isinstance(self.notify_order, str) or self.notify_order not in NOTIFY_ORDERS:
            raise PlanError(f"policy.notify_order {self.notify_order!r}: choose one of "
                            f"{', '.join(NOTIFY_ORDERS)}")
        if not isinstance(self.start, str) or self.start not in STARTS:
            raise PlanError(f"policy.start {self.start!r}: choose one of {', '.join(STARTS)}")
        if self.align & (self.align - 1):
            raise PlanError(f"policy.align {self.align}: must be a power of two (the Atom's "
                            f"vector width in bytes: 16, or 32 on Blackwell)")
        if self.chunk_nbytes is None:
            return self
        if self.chunk_nbytes % self.align:
            raise PlanError(f"policy.chunk_nbytes {self.chunk_nbytes} is not a multiple of "
                            f"align {self.align}")
        if self.push_nbytes is not None and self.push_nbytes % self.chunk_nbytes:
            raise PlanError(f"policy.push_nbytes {self.push_nbytes} is not a multiple of "
                            f"chunk_nbytes {self.chunk_nbytes}")
        if self.staging_nbytes < 2 * self.chunk_nbytes:
            raise PlanError(f"policy.staging_nbytes {self.staging_nbytes} must hold at least "
                            f"two chunks of {self.chunk_nbytes} B")
        return self

    def is_auto(self) -> bool:
        """True if the caller chose nothing (every field at its default)."""
        return self == Policy()

    def to_dict(self) -> dict[str, Any]:
        """Every field, but the later options at their defaults (so a policy that does
        not use them serialises, and hashes, as it did before they existed)."""
        d = asdict(self)
        for name, default in LATER_OPTIONS.items():
            if d[name] == default:
                del d[name]
        return d

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


_OPTIONAL = ("chunk_nbytes", "put_ctas", "consumer_ctas", "push_nbytes")
_INT_RANGES = {"chunk_nbytes": (1, 1 << 40), "put_ctas": (1, 1 << 16),
               "consumer_ctas": (1, 1 << 16), "staging_nbytes": (1, 1 << 44), "align": (1, 4096),
               "push_nbytes": (1, 1 << 40)}
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
    """The policy a sweep table (``best_policy_table`` output, or a list of them) gives
    for this size; None when none covers the case. See :func:`purlin.snac.tables.lookup`,
    which also reads codesign tables."""
    from purlin.snac.tables import lookup
    hit = lookup(tables, collective, topology, None, nbytes)
    return hit[0] if hit else None


# ---- what the generic rules read from a topology ------------------------------------

@dataclass(frozen=True)
class Traits:
    """The few numbers of a topology the generic rules use.

    world: ranks. link_gbps: what one GPU sends per direction to the others, GB/s (the
    sum of its links; ranks sharing one GPU: its HBM bandwidth over the ranks).
    rtt_us: a round trip between two ranks (twice the path latency, links and switches,
    to rank 0's farthest direct peer; 0 on one GPU, where the topology states none).
    per_sm_gbps: one SM's NVLink read rate. fully_connected: every pair is direct.
    shared_memory: the ranks share one GPU (a loopback topology). in_switch_reduce: a
    switch reduces (NVLS), so the ``switch`` Atom can run.
    """

    world: int
    link_gbps: float
    rtt_us: float
    per_sm_gbps: float
    fully_connected: bool = True
    shared_memory: bool = False
    in_switch_reduce: bool = False

    @property
    def bdp_nbytes(self) -> float:
        """Bandwidth-delay product: bytes a rank's links carry in one round trip."""
        return self.link_gbps * 1e3 * self.rtt_us

    @property
    def reader_floor(self) -> int:
        """CTAs that keep a rank's links busy: ceil(0.8 x link bandwidth / per-SM rate)
        (Purlin's reader-floor rule), at least 1."""
        return max(1, math.ceil(0.8 * self.link_gbps / max(self.per_sm_gbps, 1e-9)))

    @property
    def fill_ctas(self) -> int:
        """CTAs whose NVLink rates fill a rank's links when one of every W pieces they copy
        stays on the rank (an AllToAll's own block), at least 1."""
        w = self.world
        return max(1, math.ceil(self.link_gbps * w / (max(1, w - 1) * max(self.per_sm_gbps, 1e-9))))

    @property
    def link_ctas(self) -> int:
        """CTAs whose NVLink rates add up to twice a rank's link bandwidth (the headroom
        covers each CTA's gaps between instructions), at least 1."""
        return max(1, math.ceil(2 * self.link_gbps / max(self.per_sm_gbps, 1e-9)))


def traits(topology) -> Traits:
    """Read :class:`Traits` off a Topology.

    Examples
    --------
    >>> from purlin.topology import minimal
    >>> t = traits(minimal(4))
    >>> t.link_gbps, t.rtt_us, t.reader_floor
    (100.0, 1.0, 8)
    """
    from purlin.topology import direct_peers, is_fully_connected, path_latency_us
    gpu = topology.gpu_of(0)
    if topology.loopback:
        return Traits(topology.world, gpu.hbm_bandwidth_gbps / max(1, topology.world), 0.0,
                      gpu.nvlink_per_sm_gbps, True, True)
    out = sum(ln.bandwidth_gbps for ln in topology.links if ln.src == gpu.name)
    peers = direct_peers(topology, 0)
    rtt = 2 * max((path_latency_us(topology, 0, q) for q in peers), default=0.0)
    return Traits(topology.world, out, rtt, gpu.nvlink_per_sm_gbps,
                  is_fully_connected(topology), False,
                  any(sw.in_switch_reduce for sw in topology.switches))


# ---- the generic rules ---------------------------------------------------------------
# Latency-regime chunk: a consumer CTA's share of the payload, kept within these bounds
# (a packet window's smallest useful piece, and the most one CTA unpacks at once).
LATENCY_CHUNK = (1 * KiB, 64 * KiB)
# Smallest staged or direct chunk: below it an instruction costs more than it moves (a
# broadcast's chunk moves once per holder: it may be as much smaller, see codesign).
MIN_CHUNK = 16 * KiB
# At most this many chunks per rank: bounds the instructions to plan and simulate.
MAX_CHUNKS = 512
# At most this many stores per rank (chunks x holders) where a broadcast's chunk goes below
# MIN_CHUNK: bounds the Refs to plan and verify (576 ranks x 7 chunks x 576 holders: 2.3 M).
MAX_STORES = 8 * MAX_CHUNKS
# Past this per-rank input an even ReduceScatter on the SM beats the switch Atom: links
# bind there, and the SM moves (W - 1) / W of each input over them where the switch moves
# all of it at its protocol overhead (gb200-nvl72 and rubin-nvl144 cross over between 16
# and 64 MiB: benchmarks/results/generic_rules.json).
SWITCH_REDUCE_SCATTER_MAX = 16 * MiB


def in_switch(name: str, nbytes: int, t: Traits, is_reduce: bool) -> bool:
    """Whether the generic rules reduce in the switch: a reduction on a fully connected
    topology whose switches reduce, at any size but an even ReduceScatter's large ones.
    A CTA reducing on the SM streams every source (its rate falls as 1/W, and a V split's
    largest shard waits on one rank's CTAs), while each source crosses its uplink once to
    the switch, and an AllReduce's result comes down once to every rank (multicast)."""
    if not (is_reduce and t.in_switch_reduce and t.fully_connected and not t.shared_memory):
        return False
    return name != "reduce_scatter" or nbytes <= SWITCH_REDUCE_SCATTER_MAX


def latency_max_nbytes(name: str, world: int, t: Traits, is_reduce: bool) -> float:
    """Largest per-rank buffer for the latency regime: packets carry a flag byte per data
    byte, so they pay while those extra bytes take less time on a rank's links than the
    two handshakes (call start and end, each at least a round trip) that the direct and
    throughput regimes add. One-shot AllReduce sends its whole buffer to W - 1 peers;
    other collectives send about (W - 1) / W of it."""
    if world < 2 or not t.fully_connected:
        return 0.0
    per_byte = (world - 1) if is_reduce and name.startswith("all_reduce") else (world - 1) / world
    return 2 * t.bdp_nbytes / per_byte


def _roles(regime: str, t: Traits, cta_budget: int, is_reduce: bool = False,
           broadcast: bool = False, switch: bool = False) -> tuple[int, int]:
    """CTAs per role (put, consumer). Latency: the reader floor pushes, twice that
    unpacks; throughput: twice the floor stages and the consumers, split evenly over the
    W - 1 peers, pull at four times it; direct: all of the budget but one CTA to the one
    role that works (a zero-copy move is bound by each CTA's rate; copies run on the put
    CTAs, reductions on the consumer CTAs), one to the other. A direct ``broadcast`` (each
    input byte stored to several ranks, on GPUs of their own) takes at most
    :attr:`Traits.link_ctas` put CTAs: each of its stores goes to every holder at once, so
    that many fill the links, and every further CTA adds a handshake with each peer (about
    4 W^2 C flags in all) and nothing else. So does an even reduction in the ``switch``:
    each of its CTAs moves a chunk at its NVLink rate, whatever the number of sources (on
    the SM a CTA streams every source, so its rate falls as 1/W, and it keeps the budget;
    a V split keeps it too, since its largest shard's chunks would take more rounds on
    fewer CTAs: gb200-nvl72's ReduceScatterV of 16 MiB, 67 chunks, three rounds on 30)."""
    f = t.reader_floor
    if regime == "latency":
        return f, 2 * f
    if regime == "throughput":
        peers = max(1, t.world - 1)
        return 2 * f, -(-4 * f // peers) * peers
    working = max(1, cta_budget - 1)
    if is_reduce:
        return 1, min(working, t.link_ctas) if switch else working
    return (min(working, t.link_ctas) if broadcast else working), 1


def _fewest_for_rounds(chunks: int, ctas: int) -> int:
    """The fewest CTAs that take ``chunks`` dealt round-robin in as many rounds as ``ctas``
    do: an even AllToAll's 72 blocks of one chunk each on 63 CTAs leave 9 CTAs a second
    round while 54 idle; on 36 every CTA runs both (gb200-nvl72, 64 MiB: 112.1 us
    predicted on 63, 103.7 on 36)."""
    rounds = -(-chunks // max(1, ctas))
    return max(1, min(ctas, -(-chunks // max(1, rounds))))


def _pieces_per_block(blocks: int, ctas: int, need: int) -> int:
    """The fewest pieces to cut each of ``blocks`` into so that, dealt as
    :func:`_fewest_for_rounds` deals them over at most ``ctas``, at least ``need`` CTAs
    work."""
    p = 1
    while _fewest_for_rounds(blocks * p, ctas) < need:
        p += 1
    return p


def _up(n: int, align: int) -> int:
    """``n`` rounded up to a multiple of ``align``."""
    return -(-n // align) * align


def _chunk_max(nbytes: int, t: Traits) -> int:
    """The largest staged or direct chunk: about one bandwidth-delay product in flight
    (a power of two), more only to keep within MAX_CHUNKS chunks."""
    bdp = 1 << max(0, math.ceil(math.log2(max(1.0, t.bdp_nbytes))))
    bound = 1 << max(0, math.ceil(math.log2(max(1, -(-nbytes // MAX_CHUNKS)))))
    return max(MIN_CHUNK, bdp, bound)


def codesign(name: str, world: int, nbytes: int, t: Traits, cta_budget: int = 64,
             is_reduce: bool = False, base: Policy | None = None,
             read_nbytes: int | None = None, fanout: float = 1.0, even: bool = True) -> Policy:
    """Fill the ``auto`` fields of ``base`` for a collective of ``nbytes`` per rank
    (largest buffer) on a topology with traits ``t``: the generic rules.

    Past the latency regime a fully connected world takes the zero-copy direct regime
    (staging is an extra copy, and the CTA count, not the staging, sets the pace) with
    the end fence spread over the CTAs; a ring otherwise. A reduction where the switches
    reduce takes the direct regime with the ``switch`` Atom (:func:`in_switch`). A copy
    left wholly to the rules signals its peers in rotated order (rank r first tells r+1):
    the order its puts go out in (destinations rotate from rank+1), so the peer a put
    CTA writes first is the first to release it, and no rank is last for every notifier.
    On one GPU (a loopback world) a direct chunk may grow to the largest power of two
    within a CTA's share: no link needs pieces in flight there, and each piece costs its
    CTA an instruction start and a handshake (h200-loopback, W=8 AllToAll of 4 MiB: 35.5
    us predicted in 16 KiB chunks, 23.5 in 256 KiB ones). Role CTAs beyond ``cta_budget``
    are shrunk, the larger role first. ``read_nbytes``: the most input
    bytes a rank holds (default ``nbytes``); a direct copy splits those over its CTAs,
    since each input byte is read once and stored to every holder (an AllGather's block,
    not its W times larger output). ``fanout``: the ranks each input byte is stored to,
    on average (an AllGather's W); from 2 on, a direct copy across GPUs is a broadcast:
    it takes the CTAs that fill the links (:func:`_roles`), and where a CTA's share
    exceeds the largest chunk, chunks that give every CTA as many (gb200-nvl72's
    AllGatherV of 1 GiB: 34 chunks of 2 MiB on 30 CTAs would leave 4 CTAs a second round
    at a CTA's rate, where 60 smaller ones run two full rounds at the links' rate), and
    its least chunk is ``MIN_CHUNK / fanout``: a broadcast instruction moves its chunk to
    every holder (gb200-nvl72's AllGather of 4 MiB: a 58,240 B block in 30 chunks of
    1,952 B, each stored 71 times, predicts 19.15 us; held to 16 KiB it took 4 chunks on
    4 CTAs and 38.65 us, as long as 16 MiB), in at most ``MAX_STORES`` stores a rank.
    ``even``: every rank's input, and every rank's output, the same size (not a V split).
    An even direct copy that is not a broadcast (an AllToAll: a rank's input in W blocks,
    one per holder, each cut into chunks) takes the fewest put CTAs that need no more
    rounds of chunks than the budget's (:func:`_fewest_for_rounds`), and cuts its blocks
    only into the fewest pieces that keep :attr:`Traits.fill_ctas` of them working
    (:func:`_pieces_per_block`): a direct copy feeds no pipeline, so smaller chunks only add
    instructions and uneven rounds (gb200-nvl72's AllToAll of 1 GiB: 72 whole blocks on 36
    CTAs predict 1482.37 us, 512 chunks of 2 MiB on 58 took 1488.31).

    Examples
    --------
    >>> from purlin.topology import minimal
    >>> t = traits(minimal(8))
    >>> codesign("all_reduce", 8, 16 << 10, t, is_reduce=True).regime
    'latency'
    >>> p = codesign("all_reduce", 8, 1 << 30, t, is_reduce=True)
    >>> p.regime, p.algorithm, p.put_ctas + p.consumer_ctas
    ('direct', 'two_shot', 64)
    """
    base = base or Policy()
    regime, algorithm = base.regime, base.algorithm
    auto = base.is_auto()
    switch = auto and in_switch(name, nbytes, t, is_reduce)
    if switch:
        regime = "direct"
    if regime == "auto":
        bulk = "direct" if t.fully_connected else "throughput"
        regime = "latency" if nbytes <= latency_max_nbytes(name, world, t, is_reduce) else bulk
    if algorithm == "auto":
        if not t.fully_connected:
            algorithm = "ring"
        elif is_reduce and regime != "latency":
            algorithm = "two_shot"
        else:
            algorithm = "one_shot"
    broadcast = regime == "direct" and not is_reduce and fanout >= 2 and not t.shared_memory
    put_default, cons_default = _roles(regime, t, cta_budget, is_reduce, broadcast, switch and even)
    put = base.put_ctas or put_default
    cons = base.consumer_ctas or cons_default
    # Split the payload so every consumer CTA gets a share (two-shot: each owner's shard
    # among its reducers), within the bounds of the regime.
    if is_reduce and algorithm == "two_shot":
        ways = max(1, world * cons // 2)   # each owner's shard among its reducers
    elif regime == "direct" and not is_reduce:
        ways = put                         # direct copies run on the put CTAs
    else:
        ways = cons
    split = read_nbytes if regime == "direct" and not is_reduce and read_nbytes else nbytes
    share = _up(-(-split // ways), base.align)
    lo, hi = LATENCY_CHUNK if regime == "latency" else (MIN_CHUNK, _chunk_max(nbytes, t))
    if broadcast:   # its instruction stores the chunk to every holder: MIN_CHUNK in all,
        # in at most MAX_STORES stores a rank
        least = max(math.ceil(MIN_CHUNK / fanout), -(-split // max(1, MAX_STORES // math.ceil(fanout))))
        lo = min(MIN_CHUNK, _up(least, base.align))
    if regime == "direct" and t.shared_memory and share > 0:
        hi = max(hi, 1 << (share.bit_length() - 1))   # one GPU: a CTA's share, aligned
    if broadcast and share > hi:   # as many chunks on every put CTA (no last round on a few)
        share = _up(-(-split // (ways * -(-share // hi))), base.align)
        hi = share
    chunk = base.chunk_nbytes or min(max(lo, share), hi, base.staging_nbytes // 2 // base.align * base.align)
    chunk = _up(chunk, base.align)
    if (regime == "direct" and not is_reduce and not broadcast and even and not t.shared_memory
            and not base.put_ctas and split > 0):
        block = -(-split // world)   # a rank's input for one holder
        if not base.chunk_nbytes:   # no pipeline to feed: cut blocks only for the CTAs links need
            pieces = _pieces_per_block(world, put, min(put, t.fill_ctas))
            chunk = max(chunk, _up(-(-block // pieces), base.align))
        put = _fewest_for_rounds(world * -(-block // chunk), put)
    while put + cons > cta_budget and put + cons > 2:  # shrink the larger role first
        if put >= cons:
            put = max(1, put // 2)
        else:
            cons = max(1, cons // 2)
    fence = base.fence
    if auto and regime == "direct":
        fence = "cta"
    pol = replace(base, regime=regime, algorithm=algorithm, chunk_nbytes=chunk,
                  put_ctas=put, consumer_ctas=cons, fence=fence,
                  atom="switch" if switch else base.atom,
                  notify_order="rotated" if auto and not is_reduce else base.notify_order).check()
    log.debug("codesign (generic rules) %s W=%d %d B -> %s", name, world, nbytes, pol)
    return pol
