"""The simulator: executes any Schedule over a Topology in simpy, with a fluid model of
bandwidth sharing (max-min fair, recomputed when a flow starts or ends).

Public entry points:

- :func:`simulate` (schedule, topology, calibration) -> :class:`SimResult`;
- :func:`predict` (collective name, topology, sizes, policy) -> nccl-tests-style rows,
  and :func:`simulate_collective` for one size's full result;
- :func:`sweep` over collectives x sizes x topologies x policies on any Executor, and
  :func:`best_policy_table` for the planner's codesign hook;
- :func:`load_calibration` and the :class:`Calibration` parameter set;
- :func:`plot_bandwidth`, :func:`plot_timeline`, and :meth:`SimResult.write_trace`.

Every cost parameter comes from ``topologies/calibration/<gpu_kind>.json``.
"""
from purlin.sim.calibration import (AtomCost, Calibration, CalibrationError,
                                    available_calibrations, load_calibration,
                                    parse_calibration)
from purlin.sim.engine import simulate
from purlin.sim.plots import plot_bandwidth, plot_timeline
from purlin.sim.predict import format_table, parse_sizes, predict, simulate_collective
from purlin.sim.result import OpRecord, SimResult
from purlin.sim.sweep import SweepResult, best_policy_table, run_point, sweep

__all__ = ["AtomCost", "Calibration", "CalibrationError", "OpRecord", "SimResult",
           "SweepResult", "available_calibrations", "best_policy_table", "format_table",
           "load_calibration", "parse_calibration", "parse_sizes", "plot_bandwidth",
           "plot_timeline", "predict", "run_point", "simulate", "simulate_collective", "sweep"]
