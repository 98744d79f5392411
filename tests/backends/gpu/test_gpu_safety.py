"""What keeps a call safe on the GPU: Schedules verified once per digest, a planted
deadlock named and measured (and the GPU then serving a new world), the checks a bound
call rests on, and bound calls seeing new data and new buffers. Marked ``gpu``."""
import numpy as np
import pytest

from purlin.errors import Deadlock, ScheduleError, SpecError
from purlin.snac import plan
from purlin.snac.ir import Copy, Notify, Program, Ref, Schedule, Wait
from purlin.spec import evaluate, library
from tests.backends.gpu.test_gpu_loopback import cp, world  # noqa: F401 (fixture)

pytestmark = pytest.mark.gpu


def _stuck(c, signal=3):
    """Rank 1 copies, then waits on a signal nobody notifies; rank 0 notifies another."""
    progs = (Program(0, 0, "notifier", (Notify(1, 0, 1),)),
             Program(1, 0, "waiter", (Copy(Ref(1, "input", 0), (Ref(1, "output", 0),), 16), Wait(0, 1),
                                      Wait(signal, 1))))
    return Schedule(c, progs, 0, 0, signal + 1, 2)


def test_a_foreign_schedule_is_verified_once_before_its_first_launch(cp, monkeypatch):
    from purlin.backends.gpu import LoopbackWorld
    import purlin.snac.verify as verify_mod
    w = LoopbackWorld(2, timeout_s=0.5)
    c = library.all_gather(2, 16, "fp32")
    with pytest.raises((ScheduleError, Deadlock)):
        w.run(_stuck(c), [cp.zeros(4, cp.float32)] * 2)   # refused before any launch
    w.synchronize()                                        # nothing ran: no deadlock recorded
    calls = []
    real = verify_mod.verify
    monkeypatch.setattr(verify_mod, "verify", lambda s: calls.append(s) or real(s))
    s = plan(c, w.topology, cta_budget=w.cta_budget, check=False)   # made elsewhere, unverified
    xs = [cp.full(4, r + 1.0, cp.float32) for r in range(2)]
    for _ in range(3):
        outs = w.run(s, xs)
    w.synchronize()
    assert len(calls) == 1
    assert bool(cp.array_equal(outs[0].view(cp.float32), cp.asarray([1, 1, 1, 1, 2, 2, 2, 2], cp.float32)))
    own = w.plan(library.all_gather(2, 32, "fp32"))        # the planner verifies its plans
    before = len(calls)
    w.run(own, [cp.zeros(8, cp.float32)] * 2)
    w.synchronize()
    assert len(calls) == before                            # the world does not verify them again


def test_a_planted_deadlock_is_named_within_the_timeout_and_the_gpu_serves_a_new_world(cp):
    from purlin.backends.gpu import LoopbackWorld
    timeout = 0.5
    w = LoopbackWorld(2, timeout_s=timeout)
    c = library.all_gather(2, 16, "fp32")
    w.run(_stuck(c), [cp.zeros(4, cp.float32)] * 2, verify=False)
    with pytest.raises(Deadlock, match=r"rank 1, cta 0 \(waiter\), instr 2: Wait timed out after 0.5 s: "
                                       r"signal 3 is 0, waited for >= \d+"):
        w.synchronize()
    # measured on the GPU: from the Wait's first poll to the watchdog giving up
    assert timeout <= w.stuck_s <= timeout + 0.5, w.stuck_s
    with pytest.raises(Deadlock, match="must be rebuilt"):
        w.all_gather([cp.zeros(4, cp.float32)] * 2, [cp.zeros(8, cp.float32)] * 2)
    fresh = LoopbackWorld(2, timeout_s=timeout)
    xs = [cp.full(4, r + 1.0, cp.float32) for r in range(2)]
    outs = [cp.empty(8, cp.float32) for _ in range(2)]
    fresh.all_gather(xs, outs)
    fresh.synchronize()
    want = evaluate(c, [cp.asnumpy(x) for x in xs])
    assert all(bool(cp.array_equal(o.view(cp.uint8), cp.asarray(e))) for o, e in zip(outs, want))


def test_bad_buffers_are_refused_naming_rank_and_rule(cp):
    w = world(2)
    xs = [cp.zeros(4, cp.float32)] * 2
    with pytest.raises(SpecError, match="output of rank 1 has 16 B, the layout needs 32 B"):
        w.all_gather(xs, [cp.zeros(8, cp.float32), cp.zeros(4, cp.float32)])
    with pytest.raises(SpecError, match="input of rank 0 holds bf16, the collective is over fp32"):
        w.run(library.all_reduce(2, 16, "fp32"), [_bf16(cp, 8), _bf16(cp, 8)])
    base = cp.zeros(20, cp.uint8)
    odd = cp.ndarray((4,), cp.float32, base.data + 1)   # a float32 view one byte in
    with pytest.raises(SpecError, match="not on a fp32 element boundary"):
        w.all_reduce([odd, odd], [cp.zeros(4, cp.float32)] * 2)
    with pytest.raises(SpecError, match="not C-contiguous"):
        w.all_reduce([cp.zeros(8, cp.float32)[::2]] * 2, [cp.zeros(4, cp.float32)] * 2)
    with pytest.raises(SpecError, match="do not split into 2 equal blocks"):
        w.reduce_scatter([cp.zeros(3, cp.float32)] * 2, [cp.zeros(1, cp.float32)] * 2)


def _bf16(cp, n):
    torch = pytest.importorskip("torch")
    return torch.zeros(n, dtype=torch.bfloat16, device="cuda")


def test_bound_calls_see_new_data_and_rebind_for_new_buffers(cp):
    """A call bound to a set of buffers launches without rebuilding anything; it reads
    what the buffers hold now, and other buffers (or sizes) get a binding of their own."""
    w = world(4)
    xs = [cp.full(1000, r, cp.float32) for r in range(4)]
    outs = [cp.empty(1000, cp.float32) for _ in range(4)]
    for k in range(5):
        for r in range(4):
            xs[r].fill(r + 10 * k)
        w.all_reduce(xs, outs)
        w.synchronize()
        assert all(float(o[17]) == 6 + 40 * k for o in outs), k
    bound = len(w._lib)
    other = [cp.full(1000, 1, cp.float32) for _ in range(4)]
    w.all_reduce(other, outs)
    w.synchronize()
    assert len(w._lib) == bound + 1 and all(float(o[999]) == 4 for o in outs)
    small_in = [x[:999] for x in other]
    small_out = [o[:999] for o in outs]
    w.all_reduce(small_in, small_out, op="max")
    w.synchronize()
    assert len(w._lib) == bound + 2 and all(float(o[0]) == 1 for o in small_out)


def test_a_bound_torch_call_is_checked_again_after_an_in_place_change(cp):
    """Calls found by their buffer objects (the identity table) rest on the torch version
    counter: a tensor resized or made non-contiguous in place after binding is refused,
    and one refilled in place still gets the right sums, found by identity still (only
    its own key read again, not the call's whole signature)."""
    torch = pytest.importorskip("torch", reason="torch is an optional extra")
    w = world(2)
    xs = [torch.full((64,), float(r + 1), device="cuda") for r in range(2)]
    outs = [torch.empty(64, device="cuda") for _ in range(2)]
    w.all_reduce(xs, outs)
    w.all_reduce(xs, outs)                      # found by identity now
    assert len(w._ids) >= 1
    signatures = []
    full = w._signature
    w._signature = lambda *a: signatures.append(a) or full(*a)
    bound = len(w._lib)
    for k in range(3):
        xs[0].fill_(5.0 + k)                    # a write bumps the version: same bytes, same binding
        w.all_reduce(xs, outs)
        w.synchronize()
        assert float(outs[1][63]) == 7.0 + k
    assert signatures == [] and len(w._lib) == bound
    del w._signature
    xs[0].data = torch.full((64,), 9.0, device="cuda")   # new storage, same version
    w.all_reduce(xs, outs)
    w.synchronize()
    assert float(outs[0][0]) == 11.0 and len(w._lib) == bound + 1   # rebound to the new pointer
    outs[1].resize_(32)                         # in place, same pointer
    with pytest.raises(SpecError, match="output of rank 1"):
        w.all_reduce(xs, outs)
    outs[1].resize_(64)
    sq = [torch.zeros(8, 8, device="cuda") for _ in range(2)]
    sq_out = [torch.empty(8, 8, device="cuda") for _ in range(2)]
    w.all_reduce(sq, sq_out)
    w.all_reduce(sq, sq_out)
    sq[1].t_()                                  # same pointer and size, no longer contiguous
    with pytest.raises(SpecError, match="torch tensor is not contiguous"):
        w.all_reduce(sq, sq_out)
