"""Purlin: design, simulate and run GPU collectives.

Three layers, one Schedule:

>>> import purlin
>>> c = purlin.library.all_reduce(4, 1024, "bf16")
>>> s = purlin.plan(c, policy=purlin.Policy(regime="throughput"))
>>> s.world, s.policy["algorithm"]
(4, 'two_shot')

The simulator (simpy) and the GPU executor (cupy) load on first use, so ``import purlin``
needs only numpy, networkx, PyYAML and ml_dtypes.
"""
from purlin.errors import (BackendUnavailable, Deadlock, LimitError, PlanError, PurlinError,
                           ScheduleError, SpecError, TopologyError, UsageError)
from purlin.snac import Policy, Schedule, codesign, plan
from purlin.snac.verify import verify
from purlin.spec import Block, Collective, Layout, evaluate, library, packed, scattered, transposed
from purlin.topology import Topology, list_topologies, load_topology

__version__ = "0.1.0"

__all__ = [
    "BackendUnavailable", "Block", "Collective", "Deadlock", "Layout", "LimitError", "PlanError",
    "Policy", "PurlinError", "Schedule", "ScheduleError", "SpecError", "Topology", "TopologyError",
    "UsageError",
    "codesign", "evaluate", "library", "list_topologies", "load_topology", "packed", "plan",
    "reference", "scattered", "simulate", "transposed", "verify",
]


def reference(schedule, inputs, outputs=None):
    """Run one call of ``schedule`` on the numpy reference executor."""
    from purlin.backends.reference import run
    return run(schedule, inputs, outputs)


def simulate(schedule, topology=None, calibration=None, record=True):
    """Predict ``schedule`` on ``topology`` with the simpy model (see :mod:`purlin.sim`)."""
    try:
        from purlin.sim import simulate as _simulate
    except ImportError as e:  # simpy missing
        raise BackendUnavailable(f"the simulator needs simpy: pip install simpy ({e})") from e
    return _simulate(schedule, topology, calibration, record=record)
