"""What an instruction crosses: capacity resources, weights, CTA cap and latencies.

This is the simulator's adapter over :mod:`purlin.topology` (it only calls its public
functions) joined with a :class:`~purlin.sim.calibration.Calibration`. Every number
it produces comes from one of those two; none is written here.

Resources are the topology's directed links (``"gpu0->nvswitch"``), one HBM per GPU
(``"gpu0.hbm"``, reads and writes share it; ``l2_speedup`` times faster when the call's
buffers on that GPU fit in ``l2_resident_mib``), and nothing else: the issuing CTA's rate
is a private cap on each flow, not a shared resource (a CTA runs one instruction at a
time). How an instruction maps on them, for an issuing CTA on rank ``c``:

- Copy/Reduce with Atom ``sm``/``tma``: each source is read from its GPU's HBM and,
  when remote, crosses ``route(src, c)`` (an NVLink load); each destination crosses
  ``route(c, dst)`` when remote (an NVLink store) and is written to its HBM.
- Atom ``ce``: the copy engine moves bytes straight from source to destination
  (``route(src, dst)``); no SM is involved, its own rate is the cap.
- Atom ``switch`` (NVLS): every source crosses its GPU's uplink to the in-switch-reduce
  switch once, the switch reduces (or, for a Copy, multicasts) and the result goes down
  once to each destination.
- PutPackets: as an ``sm`` push, but the wire and the packet window carry 16 bytes per
  8 payload bytes (weight 2): that is the packet format of the IR, not a hardware number.
  The CTA builds packets at ``packet_gbps``; a Copy or Reduce reading packets reads
  them at ``packet_read_gbps`` (weight 2 on the window's memory) and starts
  ``packet_read_us`` later, plus ``packet_src_us`` per further packet source.

Each link weight is divided by the Atom's ``wire_efficiency`` (protocol overhead, e.g.
of in-switch reduction); HBM weights are not.

CTA cap: a CTA moves one stream per source; a stream runs at the Atom's
``cta_local_gbps`` if it stays on the CTA's GPU and ``cta_remote_gbps`` if it or the
store it feeds crosses a link; each extra destination (a broadcast store) is one more
stream for ``sm``/``tma``, at ``store_gbps`` on the CTA's GPU (a multicast store of
``switch`` is one stream). The streams
of one instruction run one after the other in the CTA's loop, so
the cap is ``1 / sum(1 / stream rate)``. A Reduce adds a stream for its output
(``reduce_out_gbps``: accumulate, convert, store) and reads each local source at
``reduce_src_gbps`` (remote ones at ``cta_remote_gbps``); both ``l2_reduce_speedup``
times faster on a GPU whose buffers sit in the L2. Each plain source beyond the first adds
``reduce_src_us`` to its start.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from purlin.errors import ScheduleError
from purlin.sim.calibration import AtomCost, Calibration
from purlin.snac.ir import Copy, Fan, PutPackets, Reduce, ref_ranks, sources
from purlin.topology import Switch, Topology, hbm_resource, is_direct, path_latency_us, route

PACKET_WIRE_FACTOR = 2.0
"""Wire bytes per payload byte of a packet: 8 data + 8 flag bytes per 16-byte packet
(the IR's packet format)."""
GBPS_TO_BPUS = 1e3
"""1 GB/s = 1e9 B/s = 1e3 B/us (a unit conversion)."""


@dataclass(frozen=True, slots=True)
class FlowSpec:
    """How one data instruction loads the fabric.

    Attributes
    ----------
    resources, weights : tuple
        Resource indices crossed and capacity bytes per payload byte on each.
    cap_Bpus : float
        The issuing CTA's (or copy engine's) own rate bound, bytes per microsecond.
    pre_us : float
        Before bytes flow: the Atom's start-up cost plus a load round trip when a
        source is remote.
    post_us : float
        After the last byte leaves: until the stores land at the farthest destination
        (for packets: until the waiter sees them).
    """

    resources: tuple[int, ...]
    weights: tuple[float, ...]
    cap_Bpus: float
    pre_us: float
    post_us: float


class Fabric:
    """Resource indices and per-instruction flow specs for one (topology, calibration).

    Attributes
    ----------
    names : list of str
        Resource id per index (links first, then HBMs).
    capacities_Bpus : numpy.ndarray
        Capacity per index in bytes per microsecond, efficiencies applied.
    knees : numpy.ndarray
        Soft-saturation exponent per index (:mod:`purlin.sim.fluid`): ``hbm_knee`` for
        memories, 0 (a hard limit) for links.
    """

    def __init__(self, topology: Topology, calibration: Calibration,
                 footprint: dict[str, int] | None = None) -> None:
        self.topology = topology
        self.cal = calibration
        names, caps, knees = [], [], []   # memory saturates softly, links hard
        for link in topology.links:
            names.append(link.id)
            caps.append(link.bandwidth_gbps * calibration.link_efficiency * GBPS_TO_BPUS)
            knees.append(0.0)
        l2 = calibration.l2_resident_mib * (1 << 20)
        self._cached: set[str] = set()   # GPUs whose buffers of this call sit in the L2
        for gpu in topology.gpus:   # a call whose buffers fit in L2 finds them there
            cached = footprint is not None and 0 < footprint.get(gpu.name, 0) <= l2
            if cached:
                self._cached.add(gpu.name)
            names.append(f"{gpu.name}.hbm")
            caps.append(gpu.hbm_bandwidth_gbps * calibration.hbm_efficiency * GBPS_TO_BPUS
                        * (calibration.l2_speedup if cached else 1.0))
            knees.append(calibration.hbm_knee)
        self.names = names
        self.index = {n: i for i, n in enumerate(names)}
        self.capacities_Bpus = np.asarray(caps, dtype=float)
        self.knees = np.asarray(knees, dtype=float)
        self._gpu = [topology.gpu_of(r).name for r in range(topology.world)]
        self._route: dict[tuple[int, int], tuple[int, ...]] = {}
        self._lat: dict[tuple[int, int], float] = {}
        self._hbm = [self.index[hbm_resource(topology, r)] for r in range(topology.world)]
        self._flows: dict[tuple, FlowSpec] = {}
        self._nvls: dict[str, str] = {}
        self._star = _star_roles(topology, self.index, self._gpu)
        self._w = topology.world
        self._star_lat = path_latency_us(topology, 0, 1) if self._star is not None and self._w > 1 else 0.0
        self._hot = [g in self._cached for g in self._gpu]
        self._templates: dict[tuple, tuple[tuple[tuple[int, int], ...], FlowSpec]] = {}

    # ---- topology lookups (cached) ----------------------------------------------------
    def same_gpu(self, p: int, q: int) -> bool:
        """Whether ranks ``p`` and ``q`` live on the same GPU (loopback ranks share one)."""
        return self._gpu[p] == self._gpu[q]

    def gpu_of(self, rank: int) -> str:
        """The name of the GPU rank ``rank`` runs on."""
        return self._gpu[rank]

    def route(self, p: int, q: int) -> tuple[int, ...]:
        """Resource indices of the links from rank p to rank q."""
        key = (p, q)
        if key not in self._route:
            self._route[key] = tuple(self.index[h] for h in route(self.topology, p, q))
        return self._route[key]

    def latency_us(self, p: int, q: int) -> float:
        """One-way path latency from rank p to rank q (links + switches)."""
        if self._star is not None and type(p) is int and type(q) is int and 0 <= p < self._w and 0 <= q < self._w:
            return 0.0 if p == q else self._star_lat   # every pair of a uniform star sums the same terms
        key = (p, q)
        if key not in self._lat:
            self._lat[key] = 0.0 if self.same_gpu(p, q) else path_latency_us(self.topology, p, q)
        return self._lat[key]

    def signal_us(self, p: int, q: int) -> float:
        """From a release-store on rank p to a waiter on rank q seeing it."""
        return self.cal.signal_latency_us + self.latency_us(p, q)

    def signal_row(self, p: int) -> list[float]:
        """:meth:`signal_us` from rank ``p`` to every rank (on a uniform star one value
        but its own, not W calls)."""
        if self._star is None:
            return [self.signal_us(p, q) for q in range(self._w)]
        row = [self.signal_us(p, (p + 1) % self._w)] * self._w
        row[p] = self.signal_us(p, p)
        return row

    def nvls_switch(self, rank: int, where: str) -> str:
        """The in-switch-reduce switch that ``rank``'s GPU is linked to."""
        gpu = self._gpu[rank]
        if gpu not in self._nvls:
            g = self.topology.graph
            cands = sorted(n for n in g.successors(gpu)
                           if isinstance(g.nodes[n]["part"], Switch))
            nvls = [n for n in cands if g.nodes[n]["part"].in_switch_reduce]
            if not nvls:
                have = ", ".join(cands) or "none"
                raise ScheduleError(
                    f"{where}: Atom 'switch' needs an in-switch-reduce switch, but {gpu} of "
                    f"topology {self.topology.name} is linked to switch(es) {have} without "
                    "in_switch_reduce")
            self._nvls[gpu] = nvls[0]
        return self._nvls[gpu]

    def _up(self, rank: int, sw: str) -> int:
        return self.index[f"{self._gpu[rank]}->{sw}"]

    def _down(self, sw: str, rank: int) -> int:
        return self.index[f"{sw}->{self._gpu[rank]}"]

    # ---- flows ------------------------------------------------------------------------
    def flow(self, ins: Copy | Reduce | PutPackets, rank: int, where: str | tuple[int, int, int]) -> FlowSpec:
        """The :class:`FlowSpec` of a data instruction issued on ``rank`` (cached).
        ``where`` names it in errors: a text, or (rank, cta, instruction), put in words
        only if there is an error (an engine asks once per instruction)."""
        t = type(ins)
        if t is PutPackets:
            key = ("P", "sm", rank, (ins.src.rank,), (ins.dst.rank,), (False,))
        elif t is Copy:
            src = ins.src
            key = ("C", ins.atom, rank, (src.rank,), tuple(ref_ranks(ins.dsts)), (src.buffer == "packets",))
        else:
            srcs = sources(ins)
            pkt = ((srcs.buffer == "packets",) * len(srcs) if type(srcs) is Fan
                   else tuple(s.buffer == "packets" for s in srcs))
            key = (type(ins).__name__[0], ins.atom, rank, tuple(ref_ranks(srcs)), tuple(ref_ranks(ins.dsts)), pkt)
        spec = self._flows.get(key)
        if spec is None:
            spec = self._build(key, where) if self._star is None else self._relabel(key, where)
            self._flows[key] = spec
        return spec

    def _relabel(self, key: tuple, where: str | tuple[int, int, int]) -> FlowSpec:
        """On a uniform star every renaming of GPUs maps the fabric onto itself, so a
        key's spec is that of the first key alike up to renaming (the same pattern of
        equal ranks, the same GPUs with buffers in L2), its resources renamed: built once
        per pattern instead of once per pair of a rack's W^2. The resources come in the
        order :meth:`_build` lists them (that order follows the pattern, not the names),
        so every spec is the one it builds, bit for bit."""
        kind, atom, c, srcs, dsts, pkt = key
        seen: dict[int, int] = {}
        labels = tuple([seen.setdefault(r, len(seen)) for r in (c, *srcs, *dsts)])
        ranks = tuple(seen)
        hot = self._hot
        if not all(type(r) is int and 0 <= r < len(hot) for r in ranks):
            return self._build(key, where)   # it names the rank out of range
        tkey = (kind, atom, labels, pkt, tuple([hot[r] for r in ranks]))
        got = self._templates.get(tkey)
        if got is None:
            spec = self._build(key, where)
            pos = {r: k for k, r in enumerate(ranks)}
            roles = tuple((role, pos[r]) for role, r in map(self._star[1].__getitem__, spec.resources))
            self._templates[tkey] = (roles, spec)
            return spec
        roles, spec = got
        table = self._star[0]
        return FlowSpec(tuple([table[role][ranks[k]] for role, k in roles]), spec.weights,
                        spec.cap_Bpus, spec.pre_us, spec.post_us)

    def _build(self, key: tuple, where: str | tuple[int, int, int]) -> FlowSpec:
        kind, atom, c, srcs, dsts, pkt_src = key
        if type(where) is tuple:
            where = "rank {}, cta {}, instr {}".format(*where)
        if atom not in ("sm", "tma", "ce", "switch"):
            raise ScheduleError(f"{where}: unknown Atom {atom!r}; known: sm, tma, ce, switch")
        if not dsts:
            raise ScheduleError(f"{where}: instruction has no destination")
        if kind == "R" and atom == "ce":
            raise ScheduleError(f"{where}: a copy engine cannot Reduce (Atom 'ce' is for Copy)")
        pairs = ([(s, d) for s in srcs for d in dsts] if atom == "ce"
                 else [(s, c) for s in srcs] + [(c, d) for d in dsts])
        for p, q in pairs:
            if not is_direct(self.topology, p, q):
                raise ScheduleError(
                    f"{where}: ranks {p} and {q} are not direct peers on topology "
                    f"{self.topology.name} (the route crosses another GPU, and GPUs do not "
                    "forward); a schedule must relay through staging")
        cost: AtomCost = self.cal.atom(atom)
        load: dict[int, float] = defaultdict(float)
        wire = PACKET_WIRE_FACTOR if kind == "P" else 1.0
        remote_dst = [not self.same_gpu(c, d) for d in dsts]
        any_remote_store = any(remote_dst)
        if atom == "ce":   # a DMA per destination, one after another: each reads the source
            for s in srcs:
                load[self._hbm[s]] += float(len(dsts))
                for d in dsts:
                    for r in self.route(s, d):
                        load[r] += 1.0
            any_remote = any(not self.same_gpu(s, d) for s in srcs for d in dsts)
            pre = cost.op_start_us + max((self.latency_us(s, d) for s in srcs for d in dsts),
                                         default=0.0)
            post = 0.0
            stream_rates = [cost.cta_remote_gbps if any_remote else cost.cta_local_gbps] * len(dsts)
        elif atom == "switch":
            sw = self.nvls_switch(c, where)
            for s in srcs:
                load[self._hbm[s]] += 1.0
                load[self._up(s, self.nvls_switch(s, where) if s != c else sw)] += 1.0
            pre = cost.op_start_us + max((self.latency_us(c, s) + self.latency_us(s, c)
                                          for s in srcs), default=0.0)
            post = max((self.latency_us(c, d) for d in dsts), default=0.0)
            stream_rates = [cost.cta_remote_gbps]
        else:
            for s, pk in zip(srcs, pkt_src):
                load[self._hbm[s]] += PACKET_WIRE_FACTOR if pk else 1.0
                for r in self.route(s, c):
                    load[r] += 1.0
            pre = cost.op_start_us + max((self.latency_us(c, s) + self.latency_us(s, c)
                                          for s in srcs if not self.same_gpu(s, c)),
                                         default=0.0)
            if any(pkt_src):   # the first packets' round trip, then each further source's checks
                pre += self.cal.packet_read_us + self.cal.packet_src_us * (sum(pkt_src) - 1)
            if kind == "R":   # each further plain source: its pointer and first loads
                pre += self.cal.reduce_src_us * max(0, sum(not pk for pk in pkt_src) - 1)
            post = max((self.latency_us(c, d) for d in dsts), default=0.0)

            def read_rate(s: int, pk: bool, local: float) -> float:
                if pk:
                    return self.cal.packet_read_gbps
                if not self.same_gpu(s, c) or any_remote_store:
                    return cost.cta_remote_gbps
                return local
            if kind == "R":   # a fixed cost per output byte, plus one per source read
                f = self.cal.l2_reduce_speedup if self._gpu[c] in self._cached else 1.0
                stream_rates = [cost.reduce_out_gbps * f] + [read_rate(s, pk, cost.reduce_src_gbps * f)
                                                             for s, pk in zip(srcs, pkt_src)]
            else:
                stream_rates = [read_rate(s, pk, cost.cta_local_gbps) for s, pk in zip(srcs, pkt_src)]
        # stores: the write side of every destination
        for d, far in zip(dsts, remote_dst):
            if atom == "switch":
                load[self._down(self.nvls_switch(c, where), d)] += 1.0
            elif atom != "ce":
                for r in self.route(c, d):
                    load[r] += wire
            load[self._hbm[d]] += wire
        if atom in ("sm", "tma"):  # a multicast store (switch) is one stream; ce: above
            stream_rates += [cost.cta_remote_gbps if far else cost.store_gbps
                             for far in remote_dst[1:]]
        if cost.wire_efficiency != 1.0:  # protocol overhead on links, not on HBM
            hbm = set(self._hbm)
            for r in load:
                if r not in hbm:
                    load[r] /= cost.wire_efficiency
        if kind == "P":          # the CTA builds 16-byte packets: packet_gbps per payload byte
            stream_rates = [self.cal.packet_gbps * wire]
        per_byte_us = sum(wire / (g * GBPS_TO_BPUS) for g in stream_rates)
        if kind == "P":
            post += self.cal.signal_latency_us
        res = tuple(load)
        return FlowSpec(res, tuple(load[r] for r in res), 1.0 / per_byte_us, pre, post)


def _star_roles(topology: Topology, index: dict[str, int], gpu: list[str]
                ) -> tuple[tuple[list[int], ...], dict[int, tuple[int, int]]] | None:
    """Where every GPU hangs off one switch by one link each way, all links alike, and
    each rank has a GPU of its own: per role (HBM, uplink, downlink) the resource index
    of each rank, and per resource index its (role, rank). None elsewhere."""
    if topology.loopback or len(topology.switches) != 1 or len(set(gpu)) != len(gpu):
        return None
    sw = topology.switches[0].name
    ups = [index.get(f"{g}->{sw}") for g in gpu]
    downs = [index.get(f"{sw}->{g}") for g in gpu]
    if None in ups or None in downs or len(topology.links) != 2 * len(gpu):
        return None
    if len({(k.bandwidth_gbps, k.latency_us, k.link_class) for k in topology.links}) != 1:
        return None
    hbm = [index[f"{g}.hbm"] for g in gpu]
    table = (hbm, ups, downs)
    roles = {i: (role, r) for role, col in enumerate(table) for r, i in enumerate(col)}
    return table, roles
