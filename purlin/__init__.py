"""Purlin: design, simulate and run GPU collectives.

Three layers, one Schedule:

>>> import purlin
>>> c = purlin.library.all_reduce(4, 1024, "bf16")
>>> s = purlin.plan(c, policy=purlin.Policy(regime="throughput"))
>>> s.world, s.policy["algorithm"]
(4, 'two_shot')

A model's inference step, expanded into the collectives it issues and predicted
(:mod:`purlin.workload`):

>>> step = purlin.workload.expand(purlin.workload.preset("llama3-70b"), world=8)
>>> step.count("all_reduce")
160

The simulator (simpy) and the GPU executor (cupy) load on first use, so ``import purlin``
needs only numpy, networkx, PyYAML and ml_dtypes.
"""
from purlin.errors import (BackendUnavailable, Deadlock, PlanError, PurlinError, ScheduleError,
                           SpecError, TopologyError)
from purlin.snac import Policy, Schedule, codesign, plan
from purlin.snac.verify import verify
from purlin.spec import Block, Collective, Layout, evaluate, library, packed, scattered, transposed
from purlin.topology import Topology, list_topologies, load_topology
from purlin import workload
from purlin.workload import predict_step

__version__ = "0.1.0"

__all__ = [
    "BackendUnavailable", "Block", "Collective", "Deadlock", "Layout", "PlanError", "Policy",
    "PurlinError", "Schedule", "ScheduleError", "SpecError", "Topology", "TopologyError",
    "codesign", "evaluate", "library", "list_topologies", "load_topology", "packed", "plan",
    "predict_step", "reference", "scattered", "simulate", "transposed", "verify", "workload",
]


def reference(schedule, inputs, outputs=None):
    """Run one call of ``schedule`` on the numpy reference executor."""
    from purlin.backends.reference import run
    return run(schedule, inputs, outputs)


def simulate(schedule, topology=None, calibration=None):
    """Predict ``schedule`` on ``topology`` with the simpy model (see :mod:`purlin.sim`)."""
    try:
        from purlin.sim import simulate as _simulate
    except ImportError as e:  # simpy missing
        raise BackendUnavailable(f"the simulator needs simpy: pip install simpy ({e})") from e
    return _simulate(schedule, topology, calibration)
