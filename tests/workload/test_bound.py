"""Every MoE prediction respects the max-per-port bound, and stays near it when the bytes
dominate.

The bound (purlin.workload.bound): a GPU must push the bytes it sends to other GPUs through
its outgoing links and take the bytes it receives through its incoming links, so a call
takes at least max over GPUs of max(sent / out-bandwidth, received / in-bandwidth). A
prediction below it is a model error. Above it by more than 3x is fine only where the bytes
are few: then the call's fixed cost (launch, handshake, latency) dominates, and faster links
barely move it, which the last test checks.
"""
import pytest

from purlin.errors import TopologyError
from purlin.sim import simulate
from purlin.snac import plan
from purlin.spec import library
from purlin.topology import load_topology, minimal, with_overrides
from purlin.workload import expand, port_bound_us, port_bytes, predict_steps, preset
from purlin.workload.bound import port_bandwidth_gbps
from purlin.workload.groups import group_topology

BYTES_BOUND_US = 10.0   # the few-bytes cases all have a per-call bound below this


def test_port_bytes_and_bound_by_hand():
    c = library.all_to_all_v(3, [[16, 32, 48], [0, 64, 80], [96, 0, 16]])
    sent, received = port_bytes(c)
    assert sent == [32 + 48, 0 + 80, 96 + 0]              # the diagonal stays home
    assert received == [0 + 96, 32 + 0, 48 + 80]
    t = minimal(3, bandwidth_gbps=0.001)                   # 1 B/us per link direction
    assert port_bound_us(c, t) == pytest.approx(128.0)    # rank 2 receives 128 B
    # a full mesh: a GPU's port is all its links (7 x 64 GB/s on mi300x-8)
    mesh = load_topology("mi300x-8")
    assert port_bandwidth_gbps(mesh, 0) == (448.0, 448.0)
    a2a = library.all_to_all(8, 64_000)
    assert port_bound_us(a2a, mesh) == pytest.approx(7 * 64_000 / 448e3)
    # a tensor-parallel group of NVL72 keeps its GPUs' ports
    sub = group_topology(load_topology("gb200-nvl72"), range(8, 16))
    assert port_bandwidth_gbps(sub, 3) == (720.0, 720.0)
    with pytest.raises(TopologyError, match="loopback ranks share one GPU"):
        port_bound_us(a2a, load_topology("h200-loopback", world=8))


def _moe_calls(name, phase, tokens, topology):
    preds = predict_steps(preset(name, phase, tokens), [topology])
    return [(p.label, c) for p in preds for c in p.calls if c.call.kind in ("dispatch", "combine")]


BYTES_DOMINATED = [  # (preset, phase, tokens per tensor-parallel group, topology)
    ("deepseek-v3", "decode", None, "hgx-h200-8"),     # 128 tokens per GPU
    ("deepseek-v3", "decode", None, "hgx-b200-8"),
    ("deepseek-v3", "prefill", 512, "hgx-h200-8"),
    ("mixtral-8x22b", "prefill", None, "hgx-h200-8"),  # 4096 tokens: 512 per rank
    ("mixtral-8x22b", "prefill", None, "gb200-nvl72"), # nine EP8 groups, each its own routing
]
FEW_BYTES = [  # per-call bound of a few microseconds: the call's fixed cost dominates
    ("mixtral-8x22b", "decode", None, "hgx-h200-8"),   # 16 tokens per rank
    ("mixtral-8x22b", "prefill", 1024, "hgx-b200-8"),
    ("deepseek-v3", "decode", 16, "hgx-b200-8"),
]


@pytest.mark.parametrize("name,phase,tokens,topology", BYTES_DOMINATED + FEW_BYTES)
def test_moe_predictions_respect_the_port_bound(name, phase, tokens, topology):
    calls = _moe_calls(name, phase, tokens, topology)
    assert len(calls) == 2 * 2 * (9 if topology == "gb200-nvl72" else 1)  # 2 kinds, 2 policies
    for label, p in calls:
        part = group_topology(load_topology(topology), p.call.ranks)
        assert p.bound_us == pytest.approx(port_bound_us(p.call.collective, part))
        assert p.time_us >= p.bound_us, (label, p.call.kind, p.call.group)
        if (name, phase, tokens, topology) in BYTES_DOMINATED:
            assert p.time_us <= 3 * p.bound_us, (label, p.call.kind, p.time_us, p.bound_us)
        else:
            assert p.bound_us < BYTES_BOUND_US


@pytest.mark.slow
def test_deepseek_decode_on_nvl72_is_within_3x_of_the_bound():
    """The headline case: 72-rank dispatch and combine, bytes-dominated at 128 tokens."""
    preds = predict_steps(preset("deepseek-v3"), ["gb200-nvl72"], {"default": None})
    (p,) = preds
    for c in p.calls:
        assert c.bound_us >= BYTES_BOUND_US
        assert c.bound_us <= c.time_us <= 3 * c.bound_us, (c.call.kind, c.time_us, c.bound_us)
    assert p.row("dispatch").bound_us == pytest.approx(58 * p.calls[0].bound_us)


@pytest.mark.parametrize("cfg,topology", [(preset("mixtral-8x22b"), "hgx-h200-8"),
                                          (preset("deepseek-v3", tokens=16), "hgx-b200-8")],
                         ids=["mixtral-decode-h200", "deepseek-decode-16-b200"])
def test_small_moe_calls_are_latency_bound(cfg, topology):
    """Where a call is far above its bound, the bytes are not what it waits for: doubling
    every link's bandwidth (which halves the bound exactly) moves it by under 25%. The
    same schedules run on both (the shipped box takes its default from its codesign
    table, the what-if from the generic rules, so each call's default policy is given)."""
    t = load_topology(topology)
    fast = with_overrides(t, link_bandwidth_scale=2)
    base = {c.call.kind: c for c in predict_steps(cfg, [t], {"default": None})[0].calls
            if c.call.kind in ("dispatch", "combine")}
    for kind in ("dispatch", "combine"):
        part = group_topology(fast, base[kind].call.ranks)
        s = plan(base[kind].call.collective, part, base[kind].policy, check=False)
        quick_us = simulate(s, part, record=False).time_us
        assert base[kind].time_us > 3 * base[kind].bound_us
        assert port_bound_us(base[kind].call.collective, part) == pytest.approx(base[kind].bound_us / 2)
        assert 1.0 <= base[kind].time_us / quick_us < 1.25
    assert expand(cfg, 8).count("dispatch") == cfg.moe_layers
