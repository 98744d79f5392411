"""Purlin: design, simulate and run GPU collectives.

Three layers, one Schedule: a collective is a spec (layouts that name blocks, and
``copy`` or a reduction), the planner turns spec + topology + policy into a Schedule,
and every executor runs that Schedule unchanged.

>>> import purlin
>>> c = purlin.library.all_reduce(4, 1024, "bf16")
>>> s = purlin.plan(c, policy=purlin.Policy(regime="throughput"))
>>> s.world, s.policy["algorithm"]
(4, 'two_shot')
>>> purlin.Schedule.from_json(s.to_json()) == s
True

What this module offers is the public API, the one the README, the docs and the
notebooks teach; it changes only with a version bump. Specs: :class:`Collective`,
:class:`Layout`, the :mod:`library` of named collectives, :func:`evaluate`. Planning: :func:`plan`,
:class:`Policy`, :func:`verify`, :func:`summarize`. The IR: :class:`Schedule` (with
``to_json``/``from_json``, ``save``/``load`` and ``digest``) and its instructions.
Topologies: :func:`load_topology`, :func:`with_overrides`, :func:`minimal`. Executors:
:func:`reference` (numpy), and the simulator's :func:`simulate` (``record=False`` for
speed), :func:`predict`, :func:`sweep`, :func:`format_table`, :func:`plot_bandwidth`,
:func:`plot_timeline`. The GPU executor is :mod:`purlin.backends.gpu`.

A model's inference step, expanded into the collectives it issues and predicted
(:mod:`purlin.workload`):

>>> step = purlin.workload.expand(purlin.workload.preset("llama3-70b"), world=8)
>>> step.count("all_reduce")
160

The simulator (simpy) and the GPU executor (cupy) load on first use, so ``import purlin``
needs only numpy, networkx, PyYAML and ml_dtypes.
"""
from __future__ import annotations

import importlib
from typing import Any

from purlin.errors import (BackendUnavailable, Deadlock, LimitError, PlanError, PurlinError,
                           ScheduleError, SpecError, TopologyError, UsageError)
from purlin.snac import Policy, Schedule, codesign, plan
from purlin.snac.ir import Copy, Fan, Notify, Program, PutPackets, Reduce, Ref, Wait, WaitPackets
from purlin.snac.report import format_summary, summarize
from purlin.snac.verify import verify
from purlin.spec import (Block, Collective, Layout, dtype, evaluate, library, packed, scattered,
                         transposed)
from purlin.topology import Topology, list_topologies, load_topology, minimal, with_overrides
from purlin import workload
from purlin.workload import predict_step

__version__ = "0.1.0"

# Simulator entry points, imported on first use (they need simpy): name -> module.
_SIMULATOR = {"simulate": "purlin.sim.engine", "predict": "purlin.sim.predict",
              "format_table": "purlin.sim.predict", "sweep": "purlin.sim.sweep",
              "plot_bandwidth": "purlin.sim.plots", "plot_timeline": "purlin.sim.plots"}

__all__ = [
    # errors
    "BackendUnavailable", "Deadlock", "LimitError", "PlanError", "PurlinError", "ScheduleError",
    "SpecError", "TopologyError", "UsageError",
    # specs
    "Block", "Collective", "Layout", "dtype", "evaluate", "library", "packed", "scattered",
    "transposed",
    # planning and the Schedule IR
    "Policy", "Schedule", "codesign", "plan", "verify", "summarize", "format_summary",
    "Copy", "Reduce", "Notify", "Wait", "PutPackets", "WaitPackets", "Ref", "Fan", "Program",
    # topologies
    "Topology", "list_topologies", "load_topology", "minimal", "with_overrides",
    # executors
    "reference", *_SIMULATOR,
    # workloads
    "workload", "predict_step",
]


def reference(schedule: Schedule, inputs, outputs=None) -> list:
    """Run one call of ``schedule`` on the numpy reference executor (the oracle).

    Parameters
    ----------
    schedule : Schedule
        From :func:`plan` or built by hand.
    inputs : sequence of numpy arrays
        One per rank (any dtype, C-contiguous, the bytes the input layout names).
    outputs : sequence of numpy arrays, optional
        Written in place when given.

    Returns
    -------
    list of numpy.ndarray
        Each rank's output bytes (uint8).

    Examples
    --------
    >>> import numpy as np
    >>> s = plan(library.all_reduce(2, 16, "int32"))
    >>> out = reference(s, [np.arange(4, dtype=np.int32), np.ones(4, np.int32)])
    >>> out[0].view(np.int32).tolist()
    [1, 2, 3, 4]
    """
    from purlin.backends.reference import run
    return run(schedule, inputs, outputs)


def __getattr__(name: str) -> Any:
    """The simulator's entry points, imported when first asked for (PEP 562)."""
    if name not in _SIMULATOR:
        raise AttributeError(f"module 'purlin' has no attribute {name!r}")
    try:
        module = importlib.import_module(_SIMULATOR[name])
    except ImportError as e:  # simpy missing
        raise BackendUnavailable(f"purlin.{name} needs the simulator: pip install simpy ({e})") from e
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
