"""The GPU executor on a real GPU: every library collective against the spec's oracle
(``purlin.spec.evaluate``), poisoned outputs, many calls, graphs, determinism, the
watchdog.

Marked ``gpu``; skipped (saying why) where cupy or a GPU is missing.
"""
import numpy as np
import pytest

from purlin.errors import Deadlock
from purlin.snac import Policy
from purlin.snac.ir import Copy, Notify, Program, Ref, Schedule, Wait
from purlin.spec import evaluate, library
from tests.helpers import random_inputs

pytestmark = pytest.mark.gpu

POISON = 0xA5


@pytest.fixture(scope="module")
def cp():
    from purlin.backends.gpu.kernels import is_available
    ok, why = is_available()
    if not ok:
        pytest.skip(f"no GPU executor here: {why}")
    import cupy
    return cupy


_WORLDS = {}


def world(w):
    from purlin.backends.gpu import LoopbackWorld
    if w not in _WORLDS:
        _WORLDS[w] = LoopbackWorld(w)
    return _WORLDS[w]


def _replay_in_graph(cp, w, warm, calls, outs, rounds: int, replays: int) -> None:
    """Run ``warm`` once (every binding made outside a capture), poison ``outs``, capture
    ``rounds`` of ``calls`` in one CUDA graph, replay it ``replays`` times, then check the
    world's watchdog."""
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        for f in warm:
            f()
        stream.synchronize()
        for o in outs:
            o.fill(-1)
        stream.begin_capture()
        for _ in range(rounds):
            for f in calls:
                f()
        graph = stream.end_capture()
        for _ in range(replays):
            graph.launch(stream)
        stream.synchronize()
    w.check()


def run_and_check(cp, w, c, policy=None, rng=None, calls=2, devices=None):
    """Run ``c`` on world ``w`` with random inputs and poisoned outputs (rank r's arrays on
    ``devices[r]``, else the current GPU); every byte must equal the spec's oracle."""
    rng = rng or np.random.default_rng(c.world)
    s = w.plan(c, policy)
    on = lambda r: cp.cuda.Device(devices[r] if devices else cp.cuda.Device().id)
    for _ in range(calls):
        ins = random_inputs(c, rng)
        want = evaluate(c, ins)
        dev_in, outs = [], []
        for r in range(c.world):
            with on(r):
                dev_in.append(cp.asarray(ins[r].view(np.uint8)) if ins[r].size else None)
                outs.append(cp.full(c.output.nbytes(r), POISON, cp.uint8) if c.output.nbytes(r) else None)
        w.run(s, dev_in, outs)
        w.synchronize()
        for r, o in enumerate(outs):
            if o is not None:
                got = cp.asnumpy(o)
                wrong = int((got != want[r]).sum())
                assert wrong == 0, f"{c.name} {c.dtype.name} {s.policy.get('regime')}: rank {r}: {wrong} wrong bytes"


_run_and_check = run_and_check


SIZES = (1 << 10, 64 << 10, 4 << 20)


@pytest.mark.parametrize("w", (2, 4, 8))
@pytest.mark.parametrize("name", library.ALL)
@pytest.mark.parametrize("size", SIZES)
def test_every_collective_every_element(cp, name, w, size):
    dt = "bf16" if "reduce" in name else "fp32"
    c = library.from_size(name, w, size, dt, op="add", seed=size + w)
    _run_and_check(cp, world(w), c)


@pytest.mark.parametrize("regime", ("latency", "throughput", "direct"))
@pytest.mark.parametrize("name", library.PURLIN_SEVEN)
def test_each_regime(cp, name, regime):
    c = library.from_size(name, 8, 256 << 10, "fp32", seed=3)
    _run_and_check(cp, world(8), c, Policy(regime=regime))


@pytest.mark.parametrize("dt,op", [("fp32", "max"), ("fp16", "add"), ("int32", "add"),
                                   ("bf16", "min"), ("fp32", "mul")])
def test_dtypes_and_ops(cp, dt, op):
    for name in ("all_reduce", "reduce_scatter"):
        c = library.from_size(name, 4, 64 << 10, dt, op=op)
        _run_and_check(cp, world(4), c)
    # W=8 at 8 KiB: 8-source packet reduces, spread over the CTA's threads
    c = library.from_size("all_reduce", 8, 8 << 10, dt, op=op)
    _run_and_check(cp, world(8), c)


@pytest.mark.parametrize("seed", range(4))
def test_random_v_splits_with_zeros(cp, seed):
    rng = np.random.default_rng(seed)
    w = 8
    for name in ("all_gather_v", "reduce_scatter_v", "all_to_all_v"):
        c = library.from_size(name, w, int(rng.integers(1, 64)) << 14, "fp32", seed=seed)
        _run_and_check(cp, world(w), c, rng=rng)


@pytest.mark.parametrize("name", ("all_reduce", "all_gather", "all_to_all", "reduce_scatter"))
def test_64MiB_per_rank(cp, name):
    """Large (several times the L2): every byte against the oracle, on the host."""
    c = library.from_size(name, 8, (8 if name == "all_gather" else 1) * (64 << 20), "fp32")
    _run_and_check(cp, world(8), c, calls=1)


def test_10000_calls_changing_sizes(cp):
    """Back to back, no synchronisation between calls; every output compared on the GPU."""
    w = world(8)
    sizes = [1 << 10, 3 << 10, 8 << 10, 40 << 10, 128 << 10, 1 << 20, 2 << 20]
    cases = []
    for i, n in enumerate(sizes):
        for name in ("all_reduce", "all_gather"):
            c = library.from_size(name, 8, n, "fp32")
            ins = [cp.asarray(np.arange(c.input.nbytes(r) // 4, dtype=np.float32) % 97 + r)
                   for r in range(8)]
            outs = [cp.empty(c.output.nbytes(r) // 4, cp.float32) for r in range(8)]
            w.run(c, ins, outs)            # warm: plan, upload, bind
            w.synchronize()
            exp = evaluate(c, [cp.asnumpy(x) for x in ins])
            want = [cp.asarray(e.view(np.float32)) for e in exp]
            assert all(bool(cp.array_equal(o, e)) for o, e in zip(outs, want))
            cases.append((c, ins, outs, want))
    bad = cp.zeros((), cp.int64)
    order = np.random.default_rng(1).integers(0, len(cases), 10_000)
    for k in order:
        c, ins, outs, want = cases[k]
        outs[0].fill(np.nan)
        w.run(c, ins, outs)
        bad += cp.count_nonzero(outs[0] != want[0]) + cp.count_nonzero(outs[7] != want[7])
    w.synchronize()
    assert int(bad) == 0


def test_cuda_graph_capture_and_replay(cp):
    w = world(8)
    c1 = library.all_reduce(8, 8 << 10, "fp32")
    c2 = library.all_gather(8, 8 << 10, "fp32")
    ins1 = [cp.full(2048, r + 1, cp.float32) for r in range(8)]
    ins2 = [cp.full(2048, r, cp.float32) for r in range(8)]
    out1 = [cp.empty(2048, cp.float32) for _ in range(8)]
    out2 = [cp.empty(16384, cp.float32) for _ in range(8)]
    calls = [lambda: w.run(c1, ins1, out1), lambda: w.run(c2, ins2, out2)]
    _replay_in_graph(cp, w, calls, calls, out1 + out2, rounds=16, replays=10)
    assert all(bool((o == 36).all()) for o in out1)
    want = cp.concatenate(ins2)
    assert all(bool(cp.array_equal(o, want)) for o in out2)


def test_deterministic_bit_identical(cp):
    w = world(8)
    rng = np.random.default_rng(5)
    for regime in ("latency", "throughput", "direct"):
        c = library.all_reduce(8, 1 << 20, "bf16")
        s = w.plan(c, Policy(regime=regime))
        ins = [cp.asarray(x.view(np.uint8)) for x in random_inputs(c, rng)]
        runs = []
        for _ in range(3):
            outs = [cp.empty(1 << 20, cp.uint8) for _ in range(8)]
            w.run(s, ins, outs)
            w.synchronize()
            runs.append(cp.asnumpy(cp.stack(outs)))
        assert all(np.array_equal(runs[0], r) for r in runs[1:]), regime


def test_watchdog_raises_deadlock(cp):
    from purlin.backends.gpu import LoopbackWorld
    c = library.all_gather(2, 16, "fp32")
    progs = (Program(0, 0, "stuck", (Wait(0, 1),)), Program(1, 0, "silent", ()))
    s = Schedule(c, progs, 0, 0, 1, 2)
    w = LoopbackWorld(2, timeout_s=0.2)
    w.run(s, [cp.zeros(4, cp.float32), cp.zeros(4, cp.float32)], verify=False)
    with pytest.raises(Deadlock, match=r"rank 0, cta 0 \(stuck\), instr 0: Wait timed out"):
        w.synchronize()
    with pytest.raises(Deadlock, match="rebuilt"):
        w.run(s, [cp.zeros(4, cp.float32), cp.zeros(4, cp.float32)], verify=False)


def test_notify_reaches_a_later_wait(cp):
    c = library.all_gather(2, 16, "fp32")
    progs = (Program(0, 0, "waiter", (Wait(0, 1),)), Program(1, 0, "notifier", (Notify(0, 0, 1),)))
    s = Schedule(c, progs, 0, 0, 1, 2)
    from purlin.backends.gpu import LoopbackWorld
    w = LoopbackWorld(2, timeout_s=1.0)
    for _ in range(5):
        w.run(s, [cp.zeros(4, cp.float32), cp.zeros(4, cp.float32)], verify=False)
    w.synchronize()


def _signal_runs(n, missing=None):
    """Rank 0 copies its input to its output, then notifies n signals of rank 1 in a row
    (longer than one warp's run); rank 1 waits on all n in a row, then copies rank 0's
    output into its own."""
    c = library.all_gather(2, 256, "fp32")
    notes = tuple(Notify(1, k, 1) for k in range(n) if k != missing)
    progs = (Program(0, 0, "producer", (Copy(Ref(0, "input", 0), (Ref(0, "output", 0),), 256),) + notes),
             Program(1, 0, "consumer", tuple(Wait(k, 1) for k in range(n))
                     + (Copy(Ref(0, "output", 0), (Ref(1, "output", 0),), 256),)))
    return Schedule(c, progs, 0, 0, n, 2)


def test_signal_runs_longer_than_a_warp_order_data(cp):
    from purlin.backends.gpu import LoopbackWorld
    w = LoopbackWorld(2, timeout_s=1.0)
    s = _signal_runs(40)
    for k in range(20):
        x = cp.arange(64, dtype=cp.float32) + 1000 * k
        outs = [cp.zeros(128, cp.float32), cp.zeros(128, cp.float32)]
        w.run(s, [x, cp.zeros(64, cp.float32)], outs, verify=False)
        w.synchronize()
        assert bool(cp.array_equal(outs[1][:64], x)), k


def test_a_missing_signal_in_a_run_is_named(cp):
    from purlin.backends.gpu import LoopbackWorld
    w = LoopbackWorld(2, timeout_s=0.2)
    w.run(_signal_runs(40, missing=37), [cp.zeros(64, cp.float32)] * 2, verify=False)
    with pytest.raises(Deadlock, match=r"rank 1, cta 0 \(consumer\), instr \d+: Wait timed out after "
                                       r"0.2 s: signal 37 is 0"):
        w.synchronize()


def test_trace_times_every_instruction(cp):
    w = world(4)
    c = library.all_gather(4, 1 << 20, "fp32")
    s = w.plan(c, Policy(regime="throughput"))
    ins = [cp.ones(c.input.nbytes(r) // 4, cp.float32) for r in range(4)]
    recs = w.trace(s, ins)
    assert len(recs) == sum(len(p.instrs) for p in s.programs)
    assert min(r.start_us for r in recs) == 0.0
    by_cta = {}
    for r in recs:
        assert r.end_us >= r.start_us
        by_cta.setdefault((r.rank, r.cta), []).append(r)
    for rs in by_cta.values():   # one CTA runs its instructions in order
        assert all(a.start_us <= b.start_us for a, b in zip(rs, rs[1:]))
    copied = sum(r.nbytes for r in recs if r.kind == "Copy")
    assert copied == sum(i.nbytes for p in s.programs for i in p.instrs if isinstance(i, Copy))
    span = max(r.end_us for r in recs)
    assert 1.0 < span < 5000.0, span      # 16 MiB of copies on one H200: tens of us


def test_trace_of_a_schedule_that_is_no_collective(cp):
    # a calibration microbenchmark (one CTA reducing two 64 KiB sources into one block) is
    # no collective: verify refuses it, and trace(verify=False) runs it as run(verify=False)
    from purlin.errors import ScheduleError
    from purlin.sim import microbench as mb
    from purlin.snac.ir import Reduce
    _, _, s = next(x for x in mb.CASES if x[:2] == ("reduce_ops", {"k": 1, "n": 65536, "m": 2}))
    c = s.collective
    w = world(1)
    x = cp.ones(c.input.nbytes(0) // 4, dtype=cp.float32).view(cp.uint8)
    outs = [cp.zeros(c.output.nbytes(0), cp.uint8)]
    with pytest.raises(ScheduleError, match="holds reduce"):
        w.trace(s, [x], outs)
    recs = w.trace(s, [x], outs, verify=False)
    assert len(recs) == sum(len(p.instrs) for p in s.programs)
    reduced = sum(r.nbytes for r in recs if r.kind == "Reduce")
    assert reduced == sum(i.nbytes for p in s.programs for i in p.instrs if isinstance(i, Reduce)) == 65536
    assert bool((outs[0].view(cp.float32) == 2.0).all())   # 1 + 1, every element


def test_torch_tensors_and_library_api(cp):
    torch = pytest.importorskip("torch")
    w = world(4)
    xs = [torch.full((4096,), float(r + 1), dtype=torch.bfloat16, device="cuda") for r in range(4)]
    outs = [torch.empty_like(x) for x in xs]
    w.all_reduce(xs, outs)
    torch.cuda.synchronize()
    w.check()
    assert all(bool((o == 10).all()) for o in outs)
    ag = [torch.empty(4 * 4096, dtype=torch.bfloat16, device="cuda") for _ in range(4)]
    w.all_gather(xs, ag)
    rs = [torch.empty(1024, dtype=torch.bfloat16, device="cuda") for _ in range(4)]
    w.reduce_scatter(xs, rs)
    torch.cuda.synchronize()
    w.check()
    assert all(bool((o == torch.cat(xs)).all()) for o in ag)
    assert all(bool((o == 10).all()) for o in rs)
    # cupy in, allocated out, V form by element counts
    xs2 = [cp.arange(n, dtype=cp.float32) for n in (4, 0, 8, 12)]
    outs2 = w.all_gather_v(xs2, counts=[4, 0, 8, 12])
    w.synchronize()
    assert bool(cp.array_equal(outs2[2].view(cp.float32), cp.concatenate(xs2)))


@pytest.mark.parametrize("name", library.ALL)
def test_peer_world_across_gpus(cp, name):
    """The one-process multi-GPU path over every visible GPU (peer access over NVLink):
    every library collective, each regime, 1 KiB to 4 MiB, every byte checked."""
    n = cp.cuda.runtime.getDeviceCount()
    if n < 2:
        pytest.skip(f"needs two or more GPUs; {n} visible")
    from purlin.backends.gpu import PeerWorld
    if ("peer", n) not in _WORLDS:
        _WORLDS["peer", n] = PeerWorld(list(range(n)))
    w = _WORLDS["peer", n]
    for size in SIZES:
        c = library.from_size(name, n, size, "fp32", seed=size)
        for regime in ("auto", "throughput", "direct") + (("latency",) if size <= 64 << 10 else ()):
            _run_and_check(cp, w, c, Policy(regime=regime), devices=list(range(n)))


def test_peer_world_two_ranks_on_one_gpu(cp):
    """The one-process multi-GPU path, with both ranks on GPU 0 (one launch each)."""
    from purlin.backends.gpu import PeerWorld
    w = PeerWorld([0, 0])
    for name in ("all_reduce", "all_gather", "all_to_all"):
        for regime in ("latency", "throughput", "direct"):
            c = library.from_size(name, 2, 64 << 10, "fp32")
            _run_and_check(cp, w, c, Policy(regime=regime), calls=2)


def test_a_world_refuses_a_schedule_planned_for_another_topology(cp):
    """The Schedule names its topology: a loopback world built on the minimal loopback
    model refuses a plan made for the shipped h200-loopback file, and one built on that
    file runs it. A default world plans on the loopback file of the GPU it runs on."""
    from purlin.backends.gpu import LoopbackWorld
    from purlin.errors import ScheduleError
    from purlin.snac import plan
    from purlin.topology import load_topology, loopback_for, minimal
    name = cp.cuda.runtime.getDeviceProperties(0)["name"]
    name = name.decode() if isinstance(name, bytes) else name
    assert world(2).topology == loopback_for(name, 2)
    c = library.all_gather(2, 1 << 12, "fp32")
    topo = load_topology("h200-loopback", world=2)
    s = plan(c, topo)
    with pytest.raises(ScheduleError, match="planned for topology h200-loopback .* this world runs "
                                            "minimal-loopback-2"):
        LoopbackWorld(2, topology=minimal(2, loopback=True)).run(s, [cp.zeros(512, cp.float32)] * 2)
    w = LoopbackWorld(2, topology=topo)
    xs = [cp.full(1024, r + 1, cp.float32) for r in range(2)]   # 4 KiB per rank
    outs = w.run(s, xs)
    w.synchronize()
    assert all(float(o.view(cp.float32)[:1024].sum()) == 1024.0 and
               float(o.view(cp.float32)[1024:].sum()) == 2048.0 for o in outs)


@pytest.mark.parametrize("name", ("all_gather", "all_to_all", "all_gather_v"))
def test_the_bulk_copy_atom_runs(cp, name):
    """The ``tma`` Atom's kernel (bulk copies through shared memory, sm_90+) fits an SM
    with its stage buffers: a plan that asks for it runs, every byte checked. Its 32 KiB
    of dynamic shared memory and the refs' static arrays pass 48 KiB, so the kernel must
    ask for more; without that no CTA of it was co-resident and every such plan was
    refused."""
    from purlin.backends.gpu import kernels
    k = kernels.for_device(cp.cuda.Device().id)
    if not k.atoms.tma:
        pytest.skip(f"{k.atoms.name} has no bulk-copy engine (sm_90+)")
    assert k.blocks_per_sm["snac_run_tma"] >= 1
    c = library.from_size(name, 8, 4 << 20, "fp32", seed=5)
    _run_and_check(cp, world(8), c, Policy(regime="direct", atom="tma"))


CE_NAMES = ("all_gather", "all_to_all", "broadcast", "all_gather_v", "all_to_all_v")


@pytest.mark.parametrize("name", CE_NAMES)
@pytest.mark.parametrize("regime", ("direct", "throughput"))
def test_the_copy_engine_atom_runs_as_memcpys(cp, name, regime):
    """A plan with atom 'ce' runs as memcpys ordered by events (no kernel): eager calls
    (one CUDA graph per bound call) every byte checked, in a loopback and in a peer world."""
    from purlin.backends.gpu import PeerWorld
    for size in (4 << 10, 4 << 20):
        c = library.from_size(name, 8, size, "fp32", seed=7)
        _run_and_check(cp, world(8), c, Policy(regime=regime, atom="ce"), calls=3)
    c = library.from_size(name, 2, 1 << 20, "fp32", seed=7)
    _run_and_check(cp, PeerWorld([0, 0]), c, Policy(regime=regime, atom="ce"), calls=2)


def test_copy_engine_calls_capture_into_a_graph_with_kernel_calls(cp):
    """Copy-engine calls captured among kernel calls in one CUDA graph (memcpy and event
    nodes of the caller's capture) replay right; trace refuses them by name."""
    from purlin.errors import ScheduleError
    w = world(8)
    ag = library.all_gather(8, 8 << 10, "fp32")
    ar = library.all_reduce(8, 8 << 10, "fp32")
    s_ag = w.plan(ag, Policy(regime="throughput", atom="ce", chunk_nbytes=4096, staging_nbytes=16384))
    ins_ag = [cp.full(2048, r, cp.float32) for r in range(8)]
    ins_ar = [cp.full(2048, r + 1, cp.float32) for r in range(8)]
    out_ag = [cp.empty(16384, cp.float32) for _ in range(8)]
    out_ar = [cp.empty(2048, cp.float32) for _ in range(8)]
    calls = [lambda: w.run(ar, ins_ar, out_ar),
             lambda: w.run(s_ag, out_ar, out_ag)]   # reads what the AllReduce just wrote
    _replay_in_graph(cp, w, [lambda: w.run(s_ag, ins_ag, out_ag)] + calls, calls, out_ag + out_ar,
                     rounds=4, replays=3)
    assert all(bool((o == 36).all()) for o in out_ar)
    assert all(bool((o == 36).all()) for o in out_ag)
    with pytest.raises(ScheduleError, match="copy-engine schedule .* runs as memcpys"):
        w.trace(s_ag, ins_ag, out_ag)
