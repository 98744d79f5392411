"""Workloads: what a model's inference step spends in collectives, on any topology.

A :class:`StepConfig` (a model's shape, its tensor/expert/sequence-parallel split, the
tokens of the step) expands into the library collectives the step issues
(:func:`expand`); :func:`predict_step` plans and simulates each distinct one once and adds
up the step, per collective kind. Presets hold three public model shapes.

Examples
--------
>>> from purlin import workload
>>> s = workload.expand(workload.preset("llama3-70b", tokens=4), 8)
>>> s.kinds(), s.count("all_reduce"), s.calls[0].collective.input.nbytes(0)
(['all_reduce'], 160, 65536)
"""
from purlin.workload.bound import port_bound_us, port_bytes
from purlin.workload.config import StepConfig
from purlin.workload.expand import KINDS, Call, Step, expand
from purlin.workload.predict import (NCCL_LIKE, POINT_TO_POINT, RING, CallPrediction, KindRow,
                                     SimCache, StepPrediction, predict_step, predict_steps,
                                     spec_digest)
from purlin.workload.presets import PRESETS, preset
from purlin.workload.report import format_table, plot_steps, to_json
from purlin.workload.routing import Routing, dispatch_counts, draw_routing, placement

__all__ = ["KINDS", "NCCL_LIKE", "POINT_TO_POINT", "PRESETS", "RING", "Call", "CallPrediction",
           "KindRow", "Routing", "SimCache", "Step", "StepConfig", "StepPrediction",
           "dispatch_counts", "draw_routing", "expand", "format_table", "placement",
           "plot_steps", "port_bound_us", "port_bytes", "predict_step", "predict_steps",
           "preset", "spec_digest", "to_json"]
