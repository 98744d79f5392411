"""Bad input gets a clear error: no traceback, no hang, no silent answer (issue 18).

One table of distinct bad inputs across the CLI and the Python API. Each row is the call,
the PurlinError subclass it must raise, the fragments of the message that name the
problem (argument, value, rule, fix), and what the input did before (``was``):

- ``traceback``: a raw Python exception escaped;
- ``silent``: it was accepted and ignored, truncated or answered with garbage;
- ``hang``: it ran on (gigabytes and growing) instead of being refused;
- ``clear``: already a clear error, kept here so it stays one.

A CLI row runs ``purlin ...`` in-process twice: plainly (exit 2, one line
``purlin VERB: error: ...`` on stderr, no traceback) and with ``--debug`` (the exception,
so its class can be checked). Refusals happen before any work, so the table is fast.
"""
from __future__ import annotations

import copy
import dataclasses
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, NamedTuple

import numpy as np
import pytest

from purlin import cli
from purlin.backends.reference import Reference
from purlin.errors import (BackendUnavailable, Deadlock, LimitError, PlanError, PurlinError,
                           ScheduleError, SpecError, TopologyError, UsageError)
from purlin.sim import load_calibration, predict, simulate, simulate_collective, sweep
from purlin.sim.calibration import CalibrationError, parse_calibration, to_dict as cal_to_dict
from purlin.sim.sweep import connect
from purlin.snac import Policy, plan
from purlin.snac.serialize import from_dict, from_json, to_dict
from purlin.spec import Collective, Layout, evaluate, library, packed, scattered, transposed
from purlin.topology import (load_topology, minimal, parse_topology, resolve_topology,
                             with_overrides)
from purlin.torchargs import check_max_nbytes, check_op, check_tensors, check_world, out_numel
from purlin.workload import StepConfig, expand, predict_step, predict_steps, preset

E = ScheduleError


class FakeTensor(NamedTuple):
    """What the torch-free checks read of a tensor."""
    shape: tuple
    dtype: str = "float32"
    device: str = "cpu"


def toy(**changes) -> StepConfig:
    """A small dense step (4-way tensor parallel), with ``changes``."""
    return StepConfig(**{"name": "toy", "hidden": 256, "layers": 2, "heads": 4, "tp": 4,
                         "tokens": 8, **changes})


AR4 = library.all_reduce(4, 4096)
AG2 = library.all_gather(2, 64)
S_AG2 = plan(AG2, minimal(2), Policy(regime="throughput"))
S_AR2 = plan(library.all_reduce(2, 64), minimal(2))
H200 = load_topology("hgx-h200-8")
MISMATCHED = Collective("c", Layout.of([[("a", 16)], [("b", 16)]]), Layout.of([[("a", 16)]]), "copy")


class Cli(NamedTuple):
    argv: list[str]
    debug: bool = True     # also run with --debug to check the class (False: slow rows run once)


class Usage(NamedTuple):
    """argparse's own usage error: exit 2 with a usage line, never a traceback."""
    argv: list[str]


class Row(NamedTuple):
    id: str
    call: Any                       # Cli, Usage, or a function of the files fixture
    error: type[BaseException]
    fragments: tuple[str, ...]
    was: str = "clear"


def sched(*path_value) -> Callable:
    """A serialized schedule with fields replaced (path tuple, value) or deleted (value ...)."""
    def build(_files):
        d = copy.deepcopy(to_dict(S_AG2))
        for path, value in zip(path_value[::2], path_value[1::2]):
            node = d
            for k in path[:-1]:
                node = node[k]
            if value is ...:
                del node[path[-1]]
            else:
                node[path[-1]] = value
        return from_dict(d)
    return build


def ref_call(inputs, outputs=None, schedule=S_AR2, **kw) -> Callable:
    return lambda _f: Reference(schedule, **kw)(inputs() if callable(inputs) else inputs,
                                                outputs() if callable(outputs) else outputs)


def _in_place():
    """AllReduce in place (outputs are the inputs' own bytes): read after written."""
    x = [F32(16), F32(16)]
    return Reference(S_AR2)(x, [a.view(np.uint8) for a in x])


def readonly(n: int) -> np.ndarray:
    x = np.zeros(n, np.uint8)
    x.flags.writeable = False
    return x


F32 = lambda n: np.zeros(n, np.float32)          # noqa: E731
TOPO = {"name": "x", "source": "test", "gpu_kind": "x", "gpus": 2,
        "gpu": {"hbm_bandwidth_gbps": 1000, "sms": 4, "copy_engines": 1,
                "nvlink_per_sm_gbps": 10, "memory_gib": 1},
        "links": [{"pairs": [["gpu0", "gpu1"]], "bandwidth_gbps": 50, "latency_us": 0.5,
                   "link_class": "nvlink"}]}


def topo_with(path: tuple, value) -> Callable:
    def build(_files):
        d = copy.deepcopy(TOPO)
        node = d
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
        return parse_topology(d, where="t.yaml")
    return build


def cal_with(**values) -> Callable:
    def build(_files):
        d = cal_to_dict(load_calibration("h200"))
        for key, v in values.items():
            if v is ...:
                del d["parameters"][key]
            else:
                d["parameters"][key]["value"] = v
        return parse_calibration(d, "c.json")
    return build


def cal_top(**fields) -> Callable:
    def build(_files):
        d = cal_to_dict(load_calibration("h200"))
        d.update(fields)
        return parse_calibration(d, "c.json")
    return build


def table(entries: dict) -> Callable:
    return lambda _f: plan(AR4, minimal(4), table=entries)


ROWS = [
    # ---------------- CLI: plan / verify ------------------------------------------------
    Row("plan-world-0", Cli(["plan", "all_reduce", "--world", "0"]), UsageError,
        ("--world 0", "must be an integer >= 1"), "silent"),
    Row("plan-world-negative", Cli(["plan", "all_reduce", "--world", "-1"]), UsageError,
        ("--world -1", ">= 1"), "clear"),
    Row("plan-policy-int-abc", Cli(["plan", "all_reduce", "--policy", "put_ctas=abc"]), UsageError,
        ("policy.put_ctas 'abc'", "must be an integer"), "traceback"),
    Row("plan-json-no-folder", Cli(["plan", "all_reduce", "--json", "{nodir}/x.json"]), UsageError,
        ("--json", "does not exist", "create it first"), "traceback"),
    Row("plan-json-is-folder", Cli(["plan", "all_reduce", "--json", "{folder}"]), UsageError,
        ("--json", "is a folder"), "traceback"),
    Row("verify-json-no-folder", Cli(["verify", "all_gather", "--json", "{nodir}/v.json"]), UsageError,
        ("--json", "does not exist"), "traceback"),
    Row("plan-topology-binary", Cli(["plan", "all_reduce", "-t", "{binary.yaml}"]), TopologyError,
        ("binary.yaml", "binary file, not YAML"), "traceback"),
    Row("plan-topology-latin1", Cli(["plan", "all_reduce", "-t", "{latin1.yaml}"]), TopologyError,
        ("latin1.yaml", "not UTF-8", "byte 9"), "traceback"),
    Row("plan-topology-too-large", Cli(["plan", "all_reduce", "-t", "{big.yaml}"]), TopologyError,
        ("big.yaml", "too large for a topology file"), "hang"),
    Row("plan-topology-folder", Cli(["plan", "all_reduce", "-t", "{folder}/"]), TopologyError,
        ("is a folder, not a topology file",), "clear"),
    Row("plan-topology-missing", Cli(["plan", "all_reduce", "-t", "{nodir}/t.yaml"]), TopologyError,
        ("no such topology file",), "clear"),
    Row("plan-topology-unknown", Cli(["plan", "all_reduce", "-t", "hgx-h900-8"]), TopologyError,
        ("unknown topology 'hgx-h900-8'", "shipped:"), "clear"),
    Row("plan-topology-empty-file", Cli(["plan", "all_reduce", "-t", "{empty.yaml}"]), TopologyError,
        ("<top>: must be a mapping, got NoneType",), "clear"),
    Row("plan-topology-syntax", Cli(["plan", "all_reduce", "-t", "{syntax.yaml}"]), TopologyError,
        ("syntax.yaml", "not valid YAML"), "clear"),
    Row("plan-world-fixed-topology", Cli(["plan", "all_reduce", "-t", "hgx-h200-8", "--world", "4"]),
        UsageError, ("--world 4", "hgx-h200-8 has its own 8 GPUs", "drop it"), "silent"),
    Row("plan-op-xor", Cli(["plan", "all_gather", "--op", "xor"]), UsageError,
        ("--op 'xor'", "must be a reduction", "add, max, min, mul"), "silent"),
    Row("plan-op-on-copy", Cli(["plan", "all_gather", "--op", "max"]), UsageError,
        ("--op max", "all_gather is a copy collective", "drop --op"), "silent"),
    Row("plan-op-copy-on-reduce", Cli(["plan", "all_reduce", "--op", "copy"]), UsageError,
        ("--op 'copy'", "must be a reduction"), "clear"),
    Row("verify-op-on-copy", Cli(["verify", "all_to_all", "--op", "min"]), UsageError,
        ("--op min", "all_to_all is a copy collective"), "silent"),
    Row("plan-blocks-rounded-to-zero", Cli(["plan", "all_gather", "--bytes", "16", "--world", "8"]),
        SpecError, ("size 16 B cuts into blocks of 0 B", "smallest size that works is 32 B"), "silent"),
    Row("plan-all-to-all-too-small", Cli(["plan", "all_to_all", "--bytes", "24"]), SpecError,
        ("all_to_all at world 8", "smallest size that works is 32 B"), "silent"),
    Row("plan-bytes-zero", Cli(["plan", "all_reduce", "--bytes", "0"]), SpecError,
        ("size 0 B", "smallest size that works is 4 B"), "silent"),
    Row("plan-bytes-fraction", Cli(["plan", "all_reduce", "--bytes", "1024.7"]), UsageError,
        ("--bytes '1024.7'", "whole number of bytes"), "clear"),
    Row("plan-bytes-unit", Cli(["plan", "all_reduce", "--bytes", "12Q"]), UsageError,
        ("--bytes '12Q'", "K/M/G suffix"), "clear"),
    Row("plan-bytes-negative", Cli(["plan", "all_reduce", "--bytes=-64"]), UsageError,
        ("--bytes '-64'",), "clear"),
    Row("plan-bytes-elements", Cli(["plan", "all_reduce", "--bytes", "22"]), SpecError,
        ("size 22 B is not a whole number of fp32 elements (4 B)",), "clear"),
    Row("plan-bytes-huge", Cli(["plan", "all_reduce", "--bytes", "1000000G"]), LimitError,
        ("about 8,010,768 instructions", "over the limit of 2,097,152", "--max-instructions"), "hang"),
    Row("plan-world-huge", Cli(["plan", "all_reduce", "--world", "100000"]), LimitError,
        ("world 100000", "of plan memory", "over the limit of 4.0 GiB", "--max-memory"), "hang"),
    Row("plan-world-huge-all-to-all", Cli(["plan", "all_to_all", "-t", "h200-loopback", "--world", "50000"]),
        LimitError, ("all_to_all at world 50000", "over the limit"), "hang"),
    Row("plan-max-instructions-zero", Cli(["plan", "all_reduce", "--max-instructions", "0"]), UsageError,
        ("--max-instructions 0", ">= 1"), "clear"),
    Row("plan-max-instructions-low", Cli(["plan", "all_reduce", "--max-instructions", "10"]), LimitError,
        ("over the limit of 10", "raise it"), "clear"),
    Row("plan-max-memory-zero", Cli(["plan", "all_reduce", "--max-memory", "0"]), UsageError,
        ("--max-memory 0", "at least 1 byte"), "clear"),
    Row("plan-max-memory-unit", Cli(["plan", "all_reduce", "--max-memory", "4X"]), UsageError,
        ("--max-memory '4X'",), "clear"),
    Row("plan-max-memory-low", Cli(["plan", "all_reduce", "--max-memory", "1K"]), LimitError,
        ("of plan memory", "over the limit of 1.0 KiB"), "clear"),
    Row("plan-dtype-unknown", Cli(["plan", "all_reduce", "--dtype", "fp64"]), SpecError,
        ("dtype 'fp64'", "unknown", "fp32"), "clear"),
    Row("plan-dtype-copy-only", Cli(["plan", "all_reduce", "--dtype", "fp8_e4m3"]), UsageError,
        ("--dtype fp8_e4m3", "copy-only", "all_reduce reduces"), "clear"),
    Row("plan-unknown-collective", Cli(["plan", "allfoo"]), SpecError,
        ("collective 'allfoo' is not in the library", "all_reduce"), "clear"),
    Row("plan-chunk-unit", Cli(["plan", "all_reduce", "--chunk", "abc"]), UsageError,
        ("--chunk 'abc'",), "clear"),
    Row("plan-chunk-unaligned", Cli(["plan", "all_reduce", "--chunk", "24"]), UsageError,
        ("chunk_nbytes 24 is not a multiple of align 16",), "clear"),
    Row("plan-ctas-zero", Cli(["plan", "all_reduce", "--ctas", "0"]), UsageError,
        ("--ctas 0", "CTA budget per rank"), "clear"),
    Row("plan-ctas-huge", Cli(["plan", "all_reduce", "--ctas", "100000"]), UsageError,
        ("--ctas 100000", "1..65536"), "clear"),
    Row("plan-policy-no-equals", Cli(["plan", "all_reduce", "--policy", "regime"]), UsageError,
        ("--policy 'regime'", "expected key=value"), "clear"),
    Row("plan-policy-empty-key", Cli(["plan", "all_reduce", "--policy", "=5"]), UsageError,
        ("--policy '=5'", "the key is empty"), "clear"),
    Row("plan-policy-nothing", Cli(["plan", "all_reduce", "--policy", ","]), UsageError,
        ("--policy ','", "no key=value"), "silent"),
    Row("plan-policy-unknown-field", Cli(["plan", "all_reduce", "--policy", "warp=1"]), UsageError,
        ("unknown field(s) warp", "known:"), "clear"),
    Row("plan-policy-regime", Cli(["plan", "all_reduce", "--policy", "regime=fast"]), UsageError,
        ("policy.regime 'fast'", "latency, throughput, direct"), "clear"),
    Row("plan-policy-zero-ctas", Cli(["plan", "all_reduce", "--policy", "consumer_ctas=0"]), UsageError,
        ("policy.consumer_ctas must be >= 1, got 0",), "clear"),
    Row("plan-policy-fraction", Cli(["plan", "all_reduce", "--policy", "put_ctas=1.5"]), UsageError,
        ("policy.put_ctas '1.5'", "must be an integer"), "traceback"),
    Row("plan-policy-align", Cli(["plan", "all_reduce", "--policy", "align=24"]), UsageError,
        ("policy.align 24", "power of two"), "silent"),
    Row("plan-policy-staging", Cli(["plan", "all_reduce", "--policy", "staging_nbytes=16,chunk_nbytes=16"]),
        UsageError, ("staging_nbytes 16 must hold at least two chunks",), "clear"),
    Row("plan-policy-deterministic", Cli(["plan", "all_reduce", "--policy", "deterministic=false"]),
        UsageError, ("policy.deterministic was removed", "drop the field"), "clear"),
    Row("plan-policy-conflict", Cli(["plan", "all_reduce", "--policy", "regime=latency", "--regime", "direct"]),
        UsageError, ("--regime direct disagrees with --policy regime=latency",), "silent"),
    Row("plan-policy-twice", Cli(["plan", "all_reduce", "--policy", "regime=latency,regime=direct"]),
        UsageError, ("regime given twice",), "silent"),
    Row("plan-root-rootless", Cli(["plan", "all_reduce", "--root", "2"]), UsageError,
        ("--root 2", "all_reduce has no root", "drop --root"), "silent"),
    Row("plan-root-out-of-world", Cli(["plan", "broadcast", "--root", "8"]), UsageError,
        ("--root 8", "not a rank of a world of 8", "0..7"), "clear"),
    Row("plan-root-negative", Cli(["plan", "reduce", "--root=-1"]), UsageError,
        ("--root -1", "not a rank"), "clear"),
    Row("plan-ring-needed", Cli(["plan", "all_gather", "-t", "mesh-2d-16", "--algorithm", "one_shot"]),
        PlanError, ("cannot reach directly on mesh-2d-16", "use algorithm='ring'"), "clear"),
    Row("plan-ring-latency", Cli(["plan", "all_reduce", "--algorithm", "ring", "--regime", "latency"]),
        PlanError, ("algorithm 'ring'", "throughput regime"), "clear"),
    Row("plan-switch-no-nvls", Cli(["plan", "all_reduce", "-t", "hgx-a100-8", "--regime", "direct",
                                    "--atom", "switch"]),
        PlanError, ("hgx-a100-8 has no switch with in_switch_reduce",), "clear"),
    Row("plan-switch-copy", Cli(["plan", "all_gather", "--atom", "switch"]), PlanError,
        ("'switch' (in-switch reduce) needs a reduction",), "clear"),
    Row("plan-loopback-world-zero", Cli(["plan", "all_reduce", "-t", "h200-loopback", "--world", "0"]),
        UsageError, ("--world 0",), "clear"),
    Row("plan-topology-huge-bandwidth", Cli(["plan", "all_reduce", "-t", "{huge_bw.yaml}"]), TopologyError,
        ("links[0].bandwidth_gbps", "must be in [1e-06, 1e+09]", "1e+300"), "silent"),
    Row("plan-topology-number-as-text", Cli(["plan", "all_reduce", "-t", "{text_bw.yaml}"]), TopologyError,
        ("links[0].bandwidth_gbps", "got str '1e3'", "write 1.0e+3"), "clear"),
    Row("plan-topology-many-gpus", Cli(["plan", "all_reduce", "-t", "{many_gpus.yaml}"]), TopologyError,
        ("gpus: must be <= 65,536", "1000000000"), "hang"),
    Row("plan-topology-too-many-links", Cli(["plan", "all_reduce", "-t", "{mesh2000.yaml}"]), TopologyError,
        ("1,999,000 links", "more than the 1,048,576", "use a switch"), "hang"),
    Row("plan-topology-dup-key", Cli(["plan", "all_reduce", "-t", "{dupkey.yaml}"]), TopologyError,
        ("duplicate key 'name'",), "clear"),
    Row("plan-topology-list-key", Cli(["plan", "all_reduce", "-t", "{listkey.yaml}"]), TopologyError,
        ("a key must be a name, got a list",), "traceback"),
    Row("plan-topology-bad-date", Cli(["plan", "all_reduce", "-t", "{baddate.yaml}"]), TopologyError,
        ("not valid YAML", "month must be in 1..12"), "traceback"),
    Row("plan-topology-deep", Cli(["plan", "all_reduce", "-t", "{deep.yaml}"]), TopologyError,
        ("nested too deeply",), "traceback"),
    Row("plan-topology-loopback-gpus", Cli(["plan", "all_reduce", "-t", "{loopback2.yaml}"]), TopologyError,
        ("a loopback topology has exactly 1 GPU, got 2",), "clear"),

    # ---------------- CLI: sim ---------------------------------------------------------
    Row("sim-sizes-factor", Cli(["sim", "all_reduce", "--sizes", "1K:1G:x"]), UsageError,
        ("--sizes '1K:1G:x'", "FACTOR 'x' must be a whole number >= 2"), "traceback"),
    Row("sim-sizes-factor-one", Cli(["sim", "all_reduce", "--sizes", "1K:1G:1"]), UsageError,
        ("FACTOR >= 2",), "clear"),
    Row("sim-sizes-reversed", Cli(["sim", "all_reduce", "--sizes", "4K:1K"]), UsageError,
        ("1 <= LO <= HI",), "clear"),
    Row("sim-sizes-four-parts", Cli(["sim", "all_reduce", "--sizes", "1K:2K:2:2"]), UsageError,
        ("LO:HI or LO:HI:FACTOR",), "clear"),
    Row("sim-sizes-empty", Cli(["sim", "all_reduce", "--sizes", ""]), UsageError,
        ("no size given",), "traceback"),
    Row("sim-sizes-comma", Cli(["sim", "all_reduce", "--sizes", ","]), UsageError,
        ("no size given",), "silent"),
    Row("sim-sizes-bad-item", Cli(["sim", "all_reduce", "--sizes", "1K,abc"]), UsageError,
        ("'abc'",), "clear"),
    Row("sim-sizes-too-many", Cli(["sim", "all_reduce", "--sizes", ",".join(["1K"] * 5000)]), UsageError,
        ("5000 sizes, more than 4096",), "silent"),
    Row("sim-plot-no-folder", Cli(["sim", "all_reduce", "-s", "1K", "--plot", "{nodir}/bw.png"]), UsageError,
        ("--plot", "does not exist"), "traceback"),
    Row("sim-json-no-folder", Cli(["sim", "all_reduce", "-s", "1K", "--json", "{nodir}/r.json"]), UsageError,
        ("--json", "does not exist"), "traceback"),
    Row("sim-trace-no-folder", Cli(["sim", "all_reduce", "-s", "1K", "--trace", "{nodir}/t.json"]), UsageError,
        ("--trace", "does not exist"), "traceback"),
    Row("sim-gantt-no-folder", Cli(["sim", "all_reduce", "-s", "1K", "--gantt", "{nodir}/g.png"]), UsageError,
        ("--gantt", "does not exist"), "traceback"),
    Row("sim-world-fixed-topology", Cli(["sim", "all_reduce", "-s", "1K", "--world", "4", "-t", "hgx-h200-8"]),
        UsageError, ("--world 4", "has its own 8 GPUs"), "silent"),
    Row("sim-world-default-topology", Cli(["sim", "all_reduce", "-s", "1K", "--world", "4"]), UsageError,
        ("--world 4", "hgx-h200-8"), "silent"),
    Row("sim-root-out-of-world", Cli(["sim", "broadcast", "-s", "1K", "--root", "8"]), UsageError,
        ("--root 8", "not a rank of a world of 8"), "silent"),
    Row("sim-root-rootless", Cli(["sim", "all_gather", "-s", "1K", "--root", "1"]), UsageError,
        ("--root 1", "all_gather has no root"), "silent"),
    Row("sim-op-on-copy", Cli(["sim", "all_gather", "all_to_all", "-s", "1K", "--op", "max"]), UsageError,
        ("--op max", "are copy collectives"), "silent"),
    Row("sim-op-unknown", Cli(["sim", "all_reduce", "-s", "1K", "--op", "avg"]), UsageError,
        ("--op 'avg'", "must be a reduction"), "clear"),
    Row("sim-workers-zero", Cli(["sim", "all_reduce", "-s", "1K", "--workers", "0"]), UsageError,
        ("--workers 0", ">= 1", "process count"), "silent"),
    Row("sim-too-small", Cli(["sim", "all_gather", "-s", "16"]), SpecError,
        ("all_gather at world 8", "smallest size that works is 32 B"), "silent"),
    Row("sim-calibration-unknown", Cli(["sim", "all_reduce", "-s", "1K", "--calibration", "h900"]),
        CalibrationError, ("no calibration file for GPU kind 'h900'", "known:"), "clear"),
    Row("sim-calibration-missing", Cli(["sim", "all_reduce", "-s", "1K", "--calibration", "{nodir}/c.json"]),
        CalibrationError, ("no such calibration file",), "clear"),
    Row("sim-calibration-binary", Cli(["sim", "all_reduce", "-s", "1K", "--calibration", "{calib_binary.json}"]),
        CalibrationError, ("calib_binary.json", "not UTF-8"), "traceback"),
    Row("sim-calibration-not-json", Cli(["sim", "all_reduce", "-s", "1K", "--calibration", "{calib_notjson.json}"]),
        CalibrationError, ("not valid JSON", "line 1"), "clear"),
    Row("sim-calibration-1e300", Cli(["sim", "all_reduce", "-s", "1K", "--calibration", "{calib_1e300.json}"]),
        CalibrationError, ("parameters.sm.cta_local_gbps.value", "must be in [1e-06, 1e+09]", "1e+300"), "silent"),
    Row("sim-calibration-efficiency", Cli(["sim", "all_reduce", "-s", "1K", "--calibration", "{calib_eff.json}"]),
        CalibrationError, ("hbm_efficiency.value", "<= 1"), "clear"),
    Row("sim-calibration-batch-zero", Cli(["sim", "all_reduce", "-s", "1K", "--calibration", "{calib_batch0.json}"]),
        CalibrationError, ("parameters.packet_batch", "the executor's kernel sets it"), "silent"),
    Row("sim-calibration-bigint", Cli(["sim", "all_reduce", "-s", "1K", "--calibration", "{calib_bigint.json}"]),
        CalibrationError, ("launch_us.value", "an integer of 401 digits"), "traceback"),
    Row("sim-calibration-string", Cli(["sim", "all_reduce", "-s", "1K", "--calibration", "{calib_str.json}"]),
        CalibrationError, ("launch_us.value", "must be a finite number", "'fast'"), "clear"),
    Row("sim-dtype-copy-only", Cli(["sim", "reduce_scatter", "-s", "1K", "--dtype", "fp8_e5m2"]), UsageError,
        ("--dtype fp8_e5m2", "copy-only"), "clear"),
    Row("sim-policy-unknown", Cli(["sim", "all_reduce", "-s", "1K", "--policy", "chunk=1M"]), UsageError,
        ("unknown field(s) chunk",), "clear"),
    Row("sim-unknown-collective", Cli(["sim", "all_reduce", "broadcst", "-s", "1K"]), SpecError,
        ("'broadcst' is not in the library",), "clear"),
    Row("sim-loopback-world-huge", Cli(["sim", "-t", "h200-loopback", "--world", "100000"], debug=False),
        LimitError, ("all_reduce at world 100000", "over the limit"), "hang"),

    # ---------------- CLI: sweep -------------------------------------------------------
    Row("sweep-topologies-empty", Cli(["sweep", "all_reduce", "-T", ","]), UsageError,
        ("--topologies ','", "nothing to run"), "silent"),
    Row("sweep-topology-unknown", Cli(["sweep", "all_reduce", "-s", "1K", "-T", "hgx-h200-8,nope"]),
        TopologyError, ("unknown topology 'nope'",), "clear"),
    Row("sweep-try-regime", Cli(["sweep", "all_reduce", "-s", "1K", "--try", "regime=fast"]), UsageError,
        ("--try 'regime=fast'", "policy.regime 'fast'"), "clear"),
    Row("sweep-try-no-equals", Cli(["sweep", "all_reduce", "-s", "1K", "--try", "latency"]), UsageError,
        ("--try 'latency'", "expected key=value"), "silent"),
    Row("sweep-try-type", Cli(["sweep", "all_reduce", "-s", "1K", "--try", "put_ctas=many"]), UsageError,
        ("policy.put_ctas 'many'",), "traceback"),
    Row("sweep-workers-zero", Cli(["sweep", "all_reduce", "-s", "1K", "--workers", "0"]), UsageError,
        ("--workers 0", ">= 1"), "silent"),
    Row("sweep-op-on-copy", Cli(["sweep", "all_gather", "-s", "1K", "--op", "max"]), UsageError,
        ("--op max", "copy collective"), "silent"),
    Row("sweep-dtype-unknown", Cli(["sweep", "all_reduce", "-s", "1K", "--dtype", "fp99"]), SpecError,
        ("dtype 'fp99'",), "clear"),
    Row("sweep-sizes-factor", Cli(["sweep", "all_reduce", "-s", "1K:1M:x"]), UsageError,
        ("--sizes '1K:1M:x'", "FACTOR 'x'"), "traceback"),
    Row("sweep-table-no-folder", Cli(["sweep", "all_reduce", "-s", "1K", "--table", "{nodir}/t.json"]),
        UsageError, ("--table", "does not exist"), "traceback"),
    Row("sweep-plot-no-folder", Cli(["sweep", "all_reduce", "-s", "1K", "--plot", "{nodir}/p.png"]),
        UsageError, ("--plot", "does not exist"), "traceback"),
    Row("sweep-json-no-folder", Cli(["sweep", "all_reduce", "-s", "1K", "--json", "{nodir}/s.json"]),
        UsageError, ("--json", "does not exist"), "traceback"),
    Row("sweep-unknown-collective", Cli(["sweep", "allreduce", "alltoal", "-s", "1K"]), SpecError,
        ("'alltoal' is not in the library",), "clear"),

    # ---------------- CLI: argparse usage errors ---------------------------------------
    Row("usage-no-verb", Usage([]), SystemExit, ("usage:",), "clear"),
    Row("usage-unknown-verb", Usage(["simulate"]), SystemExit, ("invalid choice",), "clear"),
    Row("usage-plan-no-collective", Usage(["plan"]), SystemExit, ("collective",), "clear"),
    Row("usage-world-not-int", Usage(["plan", "all_reduce", "--world", "eight"]), SystemExit,
        ("--world", "invalid int value"), "clear"),
    Row("usage-regime-choice", Usage(["plan", "all_reduce", "--regime", "fast"]), SystemExit,
        ("--regime", "invalid choice"), "clear"),
    Row("usage-sweep-no-collective", Usage(["sweep"]), SystemExit, ("collectives",), "clear"),
    Row("usage-ctas-not-int", Usage(["sim", "--ctas", "x"]), SystemExit, ("--ctas",), "clear"),

    # ---------------- API: library and layouts -----------------------------------------
    Row("lib-world-zero", lambda f: library.all_reduce(0, 64), SpecError,
        ("world 0", "must be an integer >= 1"), "silent"),
    Row("lib-world-negative", lambda f: library.all_gather(-2, 64), SpecError, ("world -2",), "clear"),
    Row("lib-world-fraction", lambda f: library.reduce_scatter(4.5, 64), SpecError,
        ("world 4.5", "whole number"), "traceback"),
    Row("lib-world-string", lambda f: library.all_to_all("4", 64), SpecError,
        ("world '4'", "must be an integer, got str"), "traceback"),
    Row("lib-nbytes-fraction", lambda f: library.all_gather(4, 1024.7), SpecError,
        ("nbytes 1024.7", "whole number"), "silent"),
    Row("lib-nbytes-fraction-packed", lambda f: library.all_reduce(4, 64.5), SpecError,
        ("nbytes 64.5", "whole number"), "traceback"),
    Row("lib-nbytes-negative", lambda f: library.all_reduce(4, -16), SpecError,
        ("nbytes -16", ">= 0"), "clear"),
    Row("lib-nbytes-string", lambda f: library.broadcast(4, "64"), SpecError,
        ("nbytes '64'", "integer, got str"), "traceback"),
    Row("lib-op-copy", lambda f: library.all_reduce(4, 64, op="copy"), SpecError,
        ("all_reduce: op 'copy' is not a reduction", "add, max, min, mul"), "clear"),
    Row("lib-op-xor", lambda f: library.reduce_scatter(4, 64, op="xor"), SpecError,
        ("op 'xor' is not a reduction",), "clear"),
    Row("lib-op-not-string", lambda f: library.reduce(4, 64, op=5), SpecError,
        ("op 5: must be a string",), "clear"),
    Row("lib-root-fraction", lambda f: library.broadcast(4, 64, root=1.5), SpecError,
        ("root 1.5", "whole number"), "silent"),
    Row("lib-root-string", lambda f: library.gather(4, 64, root="0"), SpecError,
        ("root '0'", "integer, got str"), "traceback"),
    Row("lib-root-out", lambda f: library.scatter(4, 64, root=4), SpecError,
        ("root 4 is not a rank of a world of 4",), "clear"),
    Row("lib-v-sizes-count", lambda f: library.all_gather_v(3, [16, 16]), SpecError,
        ("2 sizes given for a world of 3",), "clear"),
    Row("lib-v-sizes-scalar", lambda f: library.all_gather_v(3, 16), SpecError,
        ("sizes 16", "one size per rank"), "traceback"),
    Row("lib-v-sizes-fraction", lambda f: library.reduce_scatter_v(2, [16, 16.5]), SpecError,
        ("sizes[1] 16.5", "whole number"), "silent"),
    Row("lib-matrix-shape", lambda f: library.all_to_all_v(2, [[16, 16]]), SpecError,
        ("2 x 2", "got 1 rows"), "clear"),
    Row("lib-matrix-entry", lambda f: library.all_to_all_v(2, [[16, 16], [16, "x"]]), SpecError,
        ("split sizes[1][1] 'x'", "must be an integer"), "traceback"),
    Row("lib-world-huge", lambda f: library.all_gather(100000, 64), LimitError,
        ("world 100000", "10,000,000,000 blocks", "over the limit of 524,288", "max_blocks="), "hang"),
    Row("lib-all-to-all-huge", lambda f: library.all_to_all(5000, 16), LimitError,
        ("25,000,000 blocks",), "hang"),
    Row("lib-max-blocks-zero", lambda f: library.all_gather(4, 16, max_blocks=0), SpecError,
        ("max_blocks 0", ">= 1"), "clear"),
    Row("lib-from-size-empty-blocks", lambda f: library.from_size("all_gather", 8, 16), SpecError,
        ("size 16 B cuts into blocks of 0 B", "rounded down to 4 B", "32 B"), "silent"),
    Row("lib-from-size-v-empty", lambda f: library.from_size("all_gather_v", 16, 16), SpecError,
        ("all_gather_v at world 16", "V splits", "the smallest size that works is"), "silent"),
    Row("lib-from-size-world-zero", lambda f: library.from_size("all_gather", 0, 64), SpecError,
        ("world 0",), "traceback"),
    Row("lib-from-size-fraction", lambda f: library.from_size("all_reduce", 4, 1.5), SpecError,
        ("size 1.5", "whole number"), "silent"),
    Row("lib-from-size-negative", lambda f: library.from_size("all_reduce", 4, -1), SpecError,
        ("size -1", ">= 0"), "clear"),
    Row("lib-from-size-op-on-copy", lambda f: library.from_size("all_gather", 4, 1024, op="max"),
        SpecError, ("op 'max' does not apply to all_gather", "leave op out"), "silent"),
    Row("lib-from-size-root-rootless", lambda f: library.from_size("all_reduce", 4, 1024, root=1),
        SpecError, ("root 1 does not apply to all_reduce",), "silent"),
    Row("lib-from-size-name-type", lambda f: library.from_size(5, 4, 1024), SpecError,
        ("collective 5: expected a library name",), "traceback"),
    Row("lib-canonical-unknown", lambda f: library.canonical("allfoo"), SpecError,
        ("'allfoo' is not in the library",), "clear"),
    Row("lib-v-splits-world", lambda f: library.v_splits(0, 64), SpecError, ("world 0",), "traceback"),
    Row("layout-not-a-list", lambda f: Layout.of(5), SpecError, ("layout 5", "expected a list"), "traceback"),
    Row("layout-rank-not-a-list", lambda f: Layout.of([5]), SpecError,
        ("layout rank 0 5", "list of (name, nbytes) pairs"), "traceback"),
    Row("layout-short-pair", lambda f: Layout.of([[("a",)]]), SpecError,
        ("layout rank 0, block 0", "(name, nbytes) pair"), "traceback"),
    Row("layout-string-block", lambda f: Layout.of([["ab"]]), SpecError,
        ("layout rank 0, block 0 'ab'",), "traceback"),
    Row("layout-size-string", lambda f: Layout.of([[("a", "16")]]), SpecError,
        ("block 'a': nbytes '16'", "integer, got str"), "silent"),
    Row("layout-size-bool", lambda f: Layout.of([[("a", True)]]), SpecError,
        ("nbytes True", "integer, got bool"), "silent"),
    Row("layout-size-fraction", lambda f: Layout.of([[("a", 1024.7)]]), SpecError,
        ("nbytes 1024.7", "whole number"), "silent"),
    Row("layout-name-pattern", lambda f: packed(4, 16, name="{q}"), SpecError,
        ("name '{q}'", "not a valid pattern"), "traceback"),
    Row("layout-holder-out", lambda f: packed(4, 16, ranks=[7]), SpecError,
        ("ranks 7", "0..3"), "silent"),
    Row("layout-scattered-world", lambda f: scattered(0, 16), SpecError, ("world 0",), "silent"),
    Row("layout-transposed-shape", lambda f: transposed(3, [[1, 2], [3, 4]]), SpecError,
        ("3 x 3",), "clear"),
    Row("collective-not-layout", lambda f: Collective("c", "x", AG2.output), SpecError,
        ("input 'x'", "expected a Layout"), "traceback"),
    Row("collective-empty-name", lambda f: Collective("", AG2.input, AG2.output), SpecError,
        ("Collective name ''",), "clear"),
    Row("collective-op-unknown", lambda f: Collective("c", AG2.input, AG2.output, "xor").validate(),
        SpecError, ("op 'xor' is unknown",), "clear"),
    Row("collective-dtype-unknown", lambda f: Collective("c", AG2.input, AG2.output, "copy", "fp64"),
        SpecError, ("dtype 'fp64'",), "clear"),
    Row("collective-world-mismatch", lambda f: MISMATCHED.validate(), SpecError,
        ("world size mismatch", "2 ranks"), "clear"),
    Row("evaluate-count", lambda f: evaluate(AG2, [np.zeros(16, np.float32)]), SpecError,
        ("1 input buffers given for a world of 2",), "clear"),
    Row("evaluate-dtype", lambda f: evaluate(library.all_reduce(2, 16), [np.zeros(4, np.int32)] * 2),
        SpecError, ("dtype int32 does not match the collective's fp32",), "silent"),
    Row("evaluate-not-a-list", lambda f: evaluate(AG2, np.zeros(32, np.float32)), SpecError,
        ("inputs: expected a list",), "clear"),
    Row("evaluate-element", lambda f: evaluate(AG2, [[0.0] * 4, [0.0] * 4]), SpecError,
        ("input of rank 0: expected a numpy array, got list",), "clear"),

    # ---------------- API: Policy ------------------------------------------------------
    Row("policy-regime", lambda f: Policy(regime="fast"), PlanError, ("policy.regime 'fast'",), "silent"),
    Row("policy-algorithm", lambda f: Policy(algorithm="tree"), PlanError,
        ("policy.algorithm 'tree'", "one_shot, two_shot, ring"), "silent"),
    Row("policy-atom", lambda f: Policy(atom="bogus"), PlanError,
        ("policy.atom 'bogus'", "sm, tma, ce, switch"), "silent"),
    Row("policy-atom-check", lambda f: Policy().with_(atom="warp"), PlanError,
        ("policy.atom 'warp'",), "silent"),
    Row("policy-int-string", lambda f: Policy(put_ctas="abc"), PlanError,
        ("policy.put_ctas 'abc'", "must be an integer"), "traceback"),
    Row("policy-int-zero", lambda f: Policy(put_ctas=0), PlanError, ("put_ctas must be >= 1, got 0",), "clear"),
    Row("policy-int-bool", lambda f: Policy(consumer_ctas=True), PlanError,
        ("policy.consumer_ctas True", "got bool"), "silent"),
    Row("policy-int-huge", lambda f: Policy(consumer_ctas=1 << 20), PlanError,
        ("policy.consumer_ctas 1048576", "sanity bound"), "silent"),
    Row("policy-chunk-unaligned", lambda f: Policy(chunk_nbytes=24), PlanError,
        ("chunk_nbytes 24 is not a multiple of align 16",), "clear"),
    Row("policy-chunk-fraction", lambda f: Policy(chunk_nbytes=1.5), PlanError,
        ("policy.chunk_nbytes 1.5", "integer"), "traceback"),
    Row("policy-align", lambda f: Policy(align=24), PlanError, ("policy.align 24", "power of two"), "silent"),
    Row("policy-align-zero", lambda f: Policy(align=0), PlanError, ("policy.align must be >= 1",), "clear"),
    Row("policy-staging", lambda f: Policy(staging_nbytes=16, chunk_nbytes=16), PlanError,
        ("must hold at least two chunks",), "clear"),
    Row("policy-deterministic-no", lambda f: Policy(deterministic="no"), PlanError,
        ("policy.deterministic was removed", "drop the field"), "silent"),
    Row("policy-deterministic-true", lambda f: Policy(deterministic=True), PlanError,
        ("policy.deterministic was removed",), "traceback"),
    Row("policy-unknown-field", lambda f: Policy(chunk=5), PlanError,
        ("unknown field(s) chunk", "chunk_nbytes"), "traceback"),
    Row("policy-positional", lambda f: Policy("latency", "one_shot", None, None, None, "sm", 1 << 20, 16,
                                              "rank", None, "rank", "cta", 9),
        PlanError, ("at most 12 fields", "13 positional"), "traceback"),
    Row("policy-from-dict-string", lambda f: Policy.from_dict("regime=latency"), PlanError,
        ("expected a mapping", "got str"), "traceback"),
    Row("policy-from-dict-false", lambda f: Policy.from_dict({"deterministic": False}), PlanError,
        ("policy.deterministic was removed",), "clear"),

    # ---------------- API: plan --------------------------------------------------------
    Row("plan-not-a-collective", lambda f: plan("all_reduce"), PlanError,
        ("collective 'all_reduce': expected a Collective", "from_size"), "traceback"),
    Row("plan-policy-string", lambda f: plan(AR4, policy="throughput"), PlanError,
        ("policy 'throughput'", "did you mean Policy(regime='throughput')"), "traceback"),
    Row("plan-policy-int", lambda f: plan(AR4, policy=42), PlanError, ("policy 42", "got int"), "traceback"),
    Row("plan-policy-dict-bad", lambda f: plan(AR4, policy={"regime": "fast"}), PlanError,
        ("policy.regime 'fast'",), "clear"),
    Row("plan-topology-int", lambda f: plan(AR4, topology=42), TopologyError,
        ("topology 42", "expected a Topology", "got int"), "traceback"),
    Row("plan-topology-name", lambda f: plan(AR4, "hgx-h900-8"), TopologyError,
        ("unknown topology 'hgx-h900-8'",), "clear"),
    Row("plan-world-vs-topology", lambda f: plan(AR4, "hgx-h200-8"), SpecError,
        ("topology hgx-h200-8 has 8 ranks, the collective has 4",), "clear"),
    Row("plan-cta-budget-zero", lambda f: plan(AR4, cta_budget=0), PlanError,
        ("cta_budget 0", "1..65536"), "clear"),
    Row("plan-cta-budget-string", lambda f: plan(AR4, cta_budget="64"), PlanError,
        ("cta_budget '64'", "integer, got str"), "traceback"),
    Row("plan-check-string", lambda f: plan(AR4, check="yes"), PlanError,
        ("check 'yes'", "True or False"), "silent"),
    Row("api-plan-max-instructions-zero", lambda f: plan(AR4, max_instructions=0), PlanError,
        ("max_instructions 0", ">= 1"), "clear"),
    Row("plan-max-memory-negative", lambda f: plan(AR4, max_memory_nbytes=-1), PlanError,
        ("max_memory_nbytes -1",), "clear"),
    Row("plan-over-instruction-limit", lambda f: plan(AR4, max_instructions=10), LimitError,
        ("all_reduce at world 4, 4096 B", "over the limit of 10", "max_instructions="), "clear"),
    Row("plan-petabyte", lambda f: plan(library.all_reduce(4, 1 << 50)), LimitError,
        ("1125899906842624 B", "over the limit of 2,097,152"), "hang"),
    Row("plan-world-mismatch-layouts", lambda f: plan(MISMATCHED), SpecError,
        ("world size mismatch", "input layout has 2 ranks"), "traceback"),
    Row("plan-table-no-bands", table({"collective": "all_reduce", "topology": None}), PlanError,
        ("policy table: missing field 'bands'",), "traceback"),
    Row("plan-table-no-collective", table([{"bands": []}]), PlanError,
        ("missing field 'collective'",), "traceback"),
    Row("plan-table-band-no-policy", table({"collective": "all_reduce", "bands": [{"max_nbytes": 1}]}),
        PlanError, ("bands[0]", "expected {max_nbytes, policy}"), "traceback"),
    Row("plan-table-band-size", table({"collective": "all_reduce", "bands": [{"max_nbytes": "x", "policy": {}}]}),
        PlanError, ("bands[0].max_nbytes 'x'", "integer"), "traceback"),
    Row("plan-table-band-policy", table({"collective": "all_reduce",
                                        "bands": [{"max_nbytes": 1 << 30, "policy": {"regime": "fast"}}]}),
        PlanError, ("bands[0].policy", "policy.regime 'fast'"), "clear"),
    Row("plan-table-bands-not-list", table({"collective": "all_reduce", "bands": {}}), PlanError,
        ("bands: must be a list",), "traceback"),
    Row("plan-table-string", lambda f: plan(AR4, minimal(4), table="best.json"), PlanError,
        ("policy table: expected a table",), "traceback"),

    # ---------------- API: topologies --------------------------------------------------
    Row("load-topology-int", lambda f: load_topology(42), TopologyError,
        ("topology 42", "expected a shipped name or a path"), "traceback"),
    Row("load-topology-empty", lambda f: load_topology(""), TopologyError, ("empty name",), "clear"),
    Row("load-topology-world-zero", lambda f: load_topology("h200-loopback", world=0), TopologyError,
        ("world: must be >= 1, got 0",), "clear"),
    Row("resolve-world-zero", lambda f: resolve_topology(None, 0), TopologyError,
        ("world 0", "rank count"), "silent"),
    Row("resolve-nothing", lambda f: resolve_topology(None), TopologyError,
        ("no topology and no world given",), "clear"),
    Row("parse-not-mapping", lambda f: parse_topology([1, 2], where="t.yaml"), TopologyError,
        ("t.yaml: <top>: must be a mapping, got list",), "clear"),
    Row("parse-huge-latency", topo_with(("links", 0, "latency_us"), 1e300), TopologyError,
        ("links[0].latency_us", "must be in [0, 1e+06]"), "silent"),
    Row("parse-bigint-bandwidth", topo_with(("links", 0, "bandwidth_gbps"), 10 ** 400), TopologyError,
        ("links[0].bandwidth_gbps", "must be in"), "traceback"),
    Row("parse-hbm-string", topo_with(("gpu", "hbm_bandwidth_gbps"), "fast"), TopologyError,
        ("gpu.hbm_bandwidth_gbps", "must be a number, got str"), "clear"),
    Row("parse-sms-fraction", topo_with(("gpu", "sms"), 1.5), TopologyError,
        ("gpu.sms", "must be an integer"), "clear"),
    Row("parse-sms-huge", topo_with(("gpu", "sms"), 10 ** 9), TopologyError,
        ("gpu.sms", "must be <= 100,000"), "silent"),
    Row("parse-link-class", topo_with(("links", 0, "link_class"), "warp"), TopologyError,
        ("links[0].link_class", "'warp'"), "clear"),
    Row("parse-unknown-field", topo_with(("speed",), 1), TopologyError,
        ("speed: unknown field",), "clear"),
    Row("parse-gpus-zero", topo_with(("gpus",), 0), TopologyError, ("gpus: must be >= 1, got 0",), "clear"),
    Row("parse-pair-shape", topo_with(("links", 0, "pairs"), [["gpu0"]]), TopologyError,
        ("pairs[0]: must be a list of 2 node names",), "clear"),
    Row("whatif-scale-zero", lambda f: with_overrides(H200, link_bandwidth_scale=0), TopologyError,
        ("link_bandwidth_scale", "> 0, got 0"), "clear"),
    Row("whatif-scale-inf", lambda f: with_overrides(H200, hbm_bandwidth_scale=float("inf")), TopologyError,
        ("hbm_bandwidth_scale", "must be finite"), "silent"),
    Row("whatif-scale-huge", lambda f: with_overrides(H200, link_latency_scale=1e300), TopologyError,
        ("link_latency_scale", "must be <= 1e+06"), "silent"),
    Row("whatif-scale-string", lambda f: with_overrides(H200, switch_latency_scale="2"), TopologyError,
        ("switch_latency_scale", "got '2'"), "clear"),
    Row("whatif-world-fixed", lambda f: with_overrides(H200, world=4), TopologyError,
        ("only a loopback topology takes a new world",), "clear"),
    Row("whatif-not-topology", lambda f: with_overrides("hgx-h200-8", link_bandwidth_scale=2), TopologyError,
        ("expected a Topology", "got str"), "traceback"),
    Row("whatif-nvls-string", lambda f: with_overrides(H200, in_switch_reduce="yes"), TopologyError,
        ("in_switch_reduce 'yes'", "True or False"), "silent"),
    Row("whatif-name-empty", lambda f: with_overrides(H200, name=""), TopologyError,
        ("name ''", "non-empty string"), "silent"),
    Row("minimal-world-zero", lambda f: minimal(0), TopologyError, ("minimal: world 0",), "silent"),
    Row("minimal-world-fraction", lambda f: minimal(2.5), TopologyError, ("world 2.5",), "traceback"),
    Row("minimal-loopback-string", lambda f: minimal(4, loopback="no"), TopologyError,
        ("loopback 'no'",), "silent"),
    Row("minimal-bandwidth-negative", lambda f: minimal(4, bandwidth_gbps=-1), TopologyError,
        ("bandwidth_gbps: must be > 0, got -1",), "clear"),
    Row("minimal-latency-huge", lambda f: minimal(4, latency_us=1e300), TopologyError,
        ("latency_us: must be in [0, 1e+06]",), "silent"),

    # ---------------- API: calibration -------------------------------------------------
    Row("cal-unknown-kind", lambda f: load_calibration("h900"), CalibrationError,
        ("no calibration file for GPU kind 'h900'",), "clear"),
    Row("cal-type", lambda f: load_calibration(42), CalibrationError,
        ("calibration 42", "expected a GPU kind"), "traceback"),
    Row("cal-folder", lambda f: load_calibration(f["dir.json"]), CalibrationError,
        ("is a folder, not a calibration file",), "traceback"),
    Row("cal-1e300", cal_with(**{"ce.store_gbps": 1e300}), CalibrationError,
        ("ce.store_gbps.value", "must be in [1e-06, 1e+09]"), "silent"),
    Row("cal-negative", cal_with(launch_us=-1), CalibrationError, ("launch_us.value", ">= 0"), "clear"),
    Row("cal-huge-latency", cal_with(signal_latency_us=1e12), CalibrationError,
        ("signal_latency_us.value", "must be in [0, 1e+06]"), "silent"),
    Row("cal-knee", cal_with(hbm_knee=1e6), CalibrationError, ("hbm_knee.value", "[0, 100]"), "silent"),
    Row("cal-align", lambda f: load_calibration("h200").with_values(copy_align_bytes=1e12), CalibrationError,
        ("copy_align_bytes.value", "must be in"), "silent"),
    Row("cal-missing", cal_with(launch_us=...), CalibrationError, ("parameters.launch_us: missing",), "clear"),
    Row("cal-schema", cal_top(schema_version=2), CalibrationError, ("schema_version: expected 1",), "clear"),
    Row("cal-unknown-top", cal_top(extra=1), CalibrationError, ("unknown top-level field(s)",), "clear"),
    Row("cal-with-values", lambda f: load_calibration("h200").with_values(**{"sm.op_start_us": 1e300}),
        CalibrationError, ("sm.op_start_us.value", "must be in"), "silent"),
    Row("cal-with-values-unknown", lambda f: load_calibration("h200").with_values(warp_us=1), CalibrationError,
        ("unknown parameter 'warp_us'",), "clear"),

    # ---------------- API: serialized schedules ----------------------------------------
    Row("json-not-json", lambda f: from_json("{ nope"), E, ("schedule: not JSON",), "clear"),
    Row("json-not-utf8", lambda f: from_json(b"\xff\xfe\x00"), E, ("not UTF-8",), "traceback"),
    Row("json-not-text", lambda f: from_json(42), E, ("expected JSON text, got int",), "traceback"),
    Row("json-not-object", lambda f: from_dict([]), E, ("a schedule is a JSON object, got list",), "clear"),
    Row("json-schema-version", sched(("schema_version",), 1), E, ("schema_version 1 is not supported",), "clear"),
    Row("json-no-programs", sched(("programs",), ...), E, ("missing field 'programs'",), "clear"),
    Row("json-programs-type", sched(("programs",), "x"), E, ("programs: must be a list",), "traceback"),
    Row("json-program-shape", sched(("programs", 0), {"rank": 0}), E,
        ("programs[0]: expected an object with rank, cta, role, instrs",), "clear"),
    Row("json-program-rank", sched(("programs", 0, "rank"), 5), E, ("programs[0].rank", "0..1"), "silent"),
    Row("json-unknown-instr", sched(("programs", 0, "instrs", 0, "instr"), "Jump"), E,
        ("unknown instruction 'Jump'",), "clear"),
    Row("json-missing-field", sched(("programs", 0, "instrs", 0, "nbytes"), ...), E,
        ("programs[0].instrs[0]: Copy is missing field 'nbytes'",), "clear"),
    Row("json-extra-field", sched(("programs", 0, "instrs", 0, "speed"), 2), E,
        ("Copy has no field(s) speed",), "silent"),
    Row("json-nbytes-negative", sched(("programs", 0, "instrs", 0, "nbytes"), -5), E,
        ("instrs[0].nbytes", "must be in 1.."), "clear"),
    Row("json-nbytes-string", sched(("programs", 0, "instrs", 0, "nbytes"), "64"), E,
        ("instrs[0].nbytes", "must be an integer, got str"), "traceback"),
    Row("json-nbytes-huge", sched(("programs", 0, "instrs", 0, "nbytes"), 10 ** 30), E,
        ("instrs[0].nbytes", "must be in"), "hang"),
    Row("json-buffer", sched(("programs", 0, "instrs", 0, "src"), [0, "heap", 0]), E,
        ("buffer 'heap'", "input, output, staging, packets"), "silent"),
    Row("json-ref-rank", sched(("programs", 0, "instrs", 0, "src"), [9, "input", 0]), E,
        ("src[0] (rank)", "0..1"), "silent"),
    Row("json-ref-offset", sched(("programs", 0, "instrs", 0, "src"), [0, "input", -1]), E,
        ("src[2] (offset)",), "silent"),
    Row("json-ref-shape", sched(("programs", 0, "instrs", 0, "src"), [0, "input"]), E,
        ("[rank, buffer, offset]",), "clear"),
    Row("json-dsts-empty", sched(("programs", 0, "instrs", 0, "dsts"), []), E,
        ("dsts: must be a non-empty list",), "silent"),
    Row("json-atom", sched(("programs", 0, "instrs", 0, "atom"), "warp"), E,
        ("atom: 'warp' is not one of sm, tma, ce, switch",), "clear"),
    Row("json-staging-negative", sched(("staging_nbytes",), -1), E, ("staging_nbytes", "must be in 0.."), "silent"),
    Row("json-signals-zero", sched(("num_signals",), 0), E, ("num_signals", "1.."), "silent"),
    Row("json-reduction", sched(("reduction",), "fastest"), E, ("reduction 'fastest'", "rank, any"), "clear"),
    Row("json-topology", sched(("topology",), {"name": 1}), E, ("schedule field topology",), "clear"),
    Row("json-collective", sched(("collective", "output"), [[["0", 64]]]), E,
        ("world size mismatch",), "traceback"),
    Row("json-policy", sched(("policy",), "auto"), E, ("policy: must be an object",), "silent"),

    # ---------------- API: reference executor ------------------------------------------
    Row("ref-not-schedule", lambda f: Reference("schedule"), E, ("expected a Schedule", "got str"), "traceback"),
    Row("ref-inputs-array", ref_call(np.zeros(32, np.float32)), UsageError,
        ("inputs: expected a list of 2 numpy arrays",), "silent"),
    Row("ref-too-few-inputs", ref_call([F32(16)]), UsageError, ("inputs: 1 given for a world of 2",), "clear"),
    Row("ref-input-list", ref_call([[0.0] * 16, [0.0] * 16]), UsageError,
        ("input of rank 0: expected a numpy array, got list",), "clear"),
    Row("ref-input-int32", ref_call(lambda: [np.zeros(16, np.int32)] * 2), UsageError,
        ("input of rank 0: dtype int32 does not match the collective's fp32", ".astype()"), "silent"),
    Row("ref-input-fp16", ref_call(lambda: [np.zeros(32, np.float16)] * 2), UsageError,
        ("dtype float16 does not match the collective's fp32",), "silent"),
    Row("ref-input-size", ref_call(lambda: [F32(15), F32(16)]), UsageError,
        ("input of rank 0: 60 B given, the layout needs 64 B (16 fp32 elements)",), "clear"),
    Row("ref-input-strided", ref_call(lambda: [F32(32)[::2], F32(16)]), UsageError,
        ("input of rank 0: must be C-contiguous",), "clear"),
    Row("ref-too-few-outputs", ref_call(lambda: [F32(16)] * 2, lambda: [F32(16)]), UsageError,
        ("outputs: 1 given for a world of 2",), "traceback"),
    Row("ref-output-readonly", ref_call(lambda: [F32(16)] * 2, lambda: [readonly(64), F32(16)]), UsageError,
        ("output of rank 0: is read-only",), "traceback"),
    Row("ref-output-dtype", ref_call(lambda: [F32(16)] * 2, lambda: [np.zeros(8, np.float64)] * 2), UsageError,
        ("output of rank 0: dtype float64",), "silent"),
    Row("ref-output-overlaps-input", lambda f: _in_place(), UsageError,
        ("output of rank 0 overlaps the input of rank 0",), "silent"),
    Row("ref-outputs-overlap", ref_call(lambda: [F32(16)] * 2, lambda: [np.zeros(64, np.uint8)] * 2), UsageError,
        ("outputs of ranks 0 and 1 overlap",), "silent"),
    Row("ref-scratch-limit", lambda f: Reference(dataclasses.replace(S_AG2, staging_nbytes=1 << 40)), LimitError,
        ("4,398,046,511,104 B of staging", "max_scratch_nbytes="), "hang"),
    Row("ref-out-of-bounds", lambda f: Reference(dataclasses.replace(S_AG2, staging_nbytes=16)), E,
        ("runs outside staging of rank 0 (16 B)",), "silent"),

    # ---------------- API: simulate, predict, sweep ------------------------------------
    Row("sim-not-schedule", lambda f: simulate("schedule"), E, ("simulate: schedule 'schedule'",), "traceback"),
    Row("sim-calibration-type", lambda f: simulate(S_AG2, calibration=42), CalibrationError,
        ("simulate: calibration 42",), "traceback"),
    Row("sim-record-string", lambda f: simulate(S_AG2, calibration="synthetic", record="yes"), UsageError,
        ("simulate: record 'yes'", "True or False"), "silent"),
    Row("sim-other-topology", lambda f: simulate(S_AG2, minimal(2, bandwidth_gbps=5), "synthetic"), E,
        ("planned for topology minimal-2", "which differs"), "clear"),
    Row("sim-topology-int", lambda f: simulate(S_AG2, 42, "synthetic"), TopologyError,
        ("topology 42",), "clear"),
    Row("predict-sizes-empty", lambda f: predict("all_reduce", "hgx-h200-8", []), SpecError,
        ("the list is empty",), "silent"),
    Row("predict-sizes-bad", lambda f: predict("all_reduce", "hgx-h200-8", "1K:1G:x"), SpecError,
        ("FACTOR 'x'",), "traceback"),
    Row("predict-sizes-fraction", lambda f: predict("all_reduce", "hgx-h200-8", [1.5]), SpecError,
        ("size 1.5",), "traceback"),
    Row("predict-too-small", lambda f: predict("all_gather", "hgx-h200-8", [1 << 20, 16]), SpecError,
        ("size 16 B cuts into blocks of 0 B",), "silent"),
    Row("predict-op-on-copy", lambda f: predict("all_gather", "hgx-h200-8", [1024], op="max"), SpecError,
        ("op 'max' does not apply to all_gather",), "silent"),
    Row("predict-root-rootless", lambda f: predict("all_reduce", "hgx-h200-8", [1024], root=1), SpecError,
        ("root 1 does not apply to all_reduce",), "silent"),
    Row("predict-root-out", lambda f: predict("broadcast", "hgx-h200-8", [1024], root=8), SpecError,
        ("root 8 is not a rank of a world of 8",), "silent"),
    Row("predict-calibration", lambda f: predict("all_reduce", "hgx-h200-8", [1024], calibration="h900"),
        CalibrationError, ("GPU kind 'h900'",), "clear"),
    Row("predict-over-limit", lambda f: predict("all_reduce", "hgx-h200-8", [1024, 1 << 50]), LimitError,
        ("all_reduce at world 8, 1125899906842624 B", "over the limit"), "hang"),
    Row("simcoll-size", lambda f: simulate_collective("all_reduce", "hgx-h200-8", "1.5K"), SpecError,
        ("size '1.5K'",), "clear"),
    Row("sweep-no-collectives", lambda f: sweep([], [1024], "hgx-h200-8", progress=False), UsageError,
        ("sweep: collectives: the list is empty", "nothing to run"), "silent"),
    Row("sweep-no-topologies", lambda f: sweep("all_reduce", [1024], [], progress=False), UsageError,
        ("sweep: topologies: the list is empty",), "silent"),
    Row("sweep-unknown-topology", lambda f: sweep("all_reduce", [1024], "hgx-h900-8", progress=False),
        TopologyError, ("unknown topology 'hgx-h900-8'",), "silent"),
    Row("sweep-policy-bad", lambda f: sweep("all_reduce", [1024], "hgx-h200-8", [{"regime": "fast"}],
                                            progress=False), PlanError, ("policy.regime 'fast'",), "silent"),
    Row("sweep-policy-string", lambda f: sweep("all_reduce", [1024], "hgx-h200-8", ["latency"],
                                               progress=False), PlanError, ("policy 'latency'",), "traceback"),
    Row("sweep-policies-empty", lambda f: sweep("all_reduce", [1024], "hgx-h200-8", [], progress=False),
        UsageError, ("policies: the list is empty",), "silent"),
    Row("api-sweep-op-on-copy", lambda f: sweep("all_gather", [1024], "hgx-h200-8", op="max", progress=False),
        SpecError, ("sweep: op 'max' applies to reducing collectives",), "silent"),
    Row("sweep-workers", lambda f: sweep("all_reduce", [1024], "hgx-h200-8", max_workers=0, progress=False),
        UsageError, ("sweep: max_workers 0",), "traceback"),
    Row("sweep-executor", lambda f: sweep("all_reduce", [1024], "hgx-h200-8", executor="pool", progress=False),
        UsageError, ("sweep: executor 'pool'", "concurrent.futures.Executor"), "traceback"),
    Row("sweep-plot-folder", lambda f: sweep("all_reduce", [1024], "hgx-h200-8", plot=f["nodir"] + "/p.png",
                                             progress=False), UsageError, ("sweep: plot", "does not exist"), "traceback"),
    Row("sweep-dtype", lambda f: sweep("all_reduce", [1024], "hgx-h200-8", dtype="fp99", progress=False),
        SpecError, ("dtype 'fp99'",), "silent"),
    Row("sweep-calibration", lambda f: sweep("all_reduce", [1024], "hgx-h200-8", calibration="h900",
                                             progress=False), CalibrationError, ("GPU kind 'h900'",), "silent"),

    # ---------------- sweeps on a Dask scheduler -------------------------------------
    Row("sweep-scheduler-no-port", Cli(["sweep", "all_gather", "-s", "4K", "--scheduler", "no-port-here"]),
        UsageError, ("--scheduler 'no-port-here'", "needs a host and a port in 1..65535",
                     "tcp://HOST:PORT"), "clear"),
    Row("sweep-scheduler-scheme", Cli(["sweep", "all_gather", "-s", "4K", "--scheduler", "http://host:8786"]),
        UsageError, ("--scheduler 'http://host:8786'", "unknown scheme 'http'"), "clear"),
    Row("sweep-scheduler-port-range", Cli(["sweep", "all_gather", "-s", "4K", "--scheduler",
                                           "tcp://127.0.0.1:99999"]),
        UsageError, ("--scheduler 'tcp://127.0.0.1:99999'", "port in 1..65535"), "clear"),
    Row("sweep-scheduler-blank", Cli(["sweep", "all_gather", "-s", "4K", "--scheduler", " "]),
        UsageError, ("--scheduler ' '", "must be a scheduler address"), "clear"),
    Row("sweep-scheduler-unreachable", Cli(["sweep", "all_gather", "-s", "4K", "--scheduler",
                                            "tcp://127.0.0.1:1"], debug=False),
        BackendUnavailable, ("sweep: scheduler 'tcp://127.0.0.1:1'",), "clear"),
    Row("api-sweep-scheduler-int", lambda f: sweep("all_gather", [4096], "hgx-h200-8", scheduler=8786,
                                                   progress=False),
        UsageError, ("sweep: scheduler 8786", "must be a scheduler address"), "clear"),
    Row("api-sweep-scheduler-and-executor", lambda f: sweep("all_gather", [4096], "hgx-h200-8",
                                                            executor=ThreadPoolExecutor(1),
                                                            scheduler="tcp://127.0.0.1:8786"),
        UsageError, ("give an executor or a scheduler address, not both",), "clear"),
    Row("api-sweep-scheduler-bad-topology", lambda f: sweep("all_gather", [4096], "no-such-box",
                                                            scheduler="tcp://127.0.0.1:1"),
        TopologyError, ("unknown topology 'no-such-box'",), "clear"),
    Row("api-connect-unreachable", lambda f: connect("tcp://127.0.0.1:1", timeout_s=0.5),
        BackendUnavailable, ("sweep: scheduler 'tcp://127.0.0.1:1'",), "clear"),
    Row("api-connect-no-host", lambda f: connect(":8786"), UsageError,
        ("sweep: scheduler ':8786'", "needs a host"), "clear"),

    # ---------------- CLI: purlin workload -------------------------------------------
    Row("workload-tokens-zero", Cli(["workload", "llama3-70b", "-t", "hgx-h200-8", "--tokens", "0"]),
        UsageError, ("--tokens 0", "must be in 1..4194304", "tokens per tensor-parallel group"), "clear"),
    Row("workload-tokens-huge", Cli(["workload", "deepseek-v3", "-t", "hgx-h200-8", "--tokens", "100000000"]),
        UsageError, ("--tokens 100000000", "must be in 1..4194304"), "traceback"),
    Row("workload-draw-limit", Cli(["workload", "deepseek-v3", "-t", "hgx-h200-8", "--tokens", "1000000"]),
        LimitError, ("one rank's routing draw would score 256,000,000 (token, expert) pairs",
                     "over the limit of 134,217,728", "give fewer tokens"), "hang"),
    Row("workload-workers-zero", Cli(["workload", "llama3-70b", "-t", "hgx-h200-8", "--workers", "0"]),
        UsageError, ("--workers 0", "must be an integer >= 1"), "clear"),
    Row("workload-seed-negative", Cli(["workload", "mixtral-8x22b", "-t", "hgx-h200-8", "--seed", "-1"]),
        UsageError, ("--seed -1", "must be an integer >= 0"), "clear"),
    Row("workload-json-folder", Cli(["workload", "llama3-70b", "-t", "hgx-h200-8", "--json", "{nodir}/w.json"]),
        UsageError, ("--json", "does not exist"), "traceback"),
    Row("workload-plot-folder", Cli(["workload", "llama3-70b", "-t", "hgx-h200-8", "--plot", "{nodir}/w.png"]),
        UsageError, ("--plot", "does not exist"), "traceback"),
    Row("workload-json-is-folder", Cli(["workload", "llama3-70b", "-t", "hgx-h200-8", "--json", "{dir.json}"]),
        UsageError, ("--json", "is a folder"), "traceback"),
    Row("workload-unknown-preset", Cli(["workload", "gpt5", "-t", "hgx-h200-8"]), SpecError,
        ("workload preset 'gpt5' is unknown", "llama3-70b"), "clear"),
    Row("workload-unknown-topology", Cli(["workload", "llama3-70b", "-t", "no-such-box"]), TopologyError,
        ("unknown topology 'no-such-box'",), "clear"),
    Row("workload-second-topology", Cli(["workload", "llama3-70b", "-t", "hgx-h200-8", "-t", "hgx-h900-8"]),
        TopologyError, ("unknown topology 'hgx-h900-8'",), "clear"),
    Row("workload-binary-topology", Cli(["workload", "llama3-70b", "-t", "{binary.yaml}"]), TopologyError,
        ("is a binary file, not YAML text",), "traceback"),
    Row("workload-calibration-kind", Cli(["workload", "llama3-70b", "-t", "hgx-h200-8", "--calibration", "h900"]),
        CalibrationError, ("GPU kind 'h900'",), "clear"),
    Row("workload-calibration-1e300", Cli(["workload", "llama3-70b", "-t", "hgx-h200-8", "--calibration",
                                           "{calib_1e300.json}"]),
        CalibrationError, ("parameters.sm.cta_local_gbps.value", "must be in"), "silent"),
    Row("usage-workload-no-topology", Usage(["workload", "llama3-70b"]), SystemExit, ("--topology",), "clear"),
    Row("usage-workload-phase", Usage(["workload", "llama3-70b", "-t", "hgx-h200-8", "--phase", "train"]),
        SystemExit, ("--phase", "invalid choice"), "clear"),

    # ---------------- API: purlin.workload --------------------------------------------
    Row("wl-name-int", lambda f: StepConfig(42, hidden=256, layers=2, heads=4), SpecError,
        ("workload name 42", "non-empty string"), "silent"),
    Row("wl-hidden-huge", lambda f: toy(hidden=10 ** 12), SpecError,
        ("hidden=1000000000000", "1..1,048,576", "sanity bound"), "silent"),
    Row("wl-layers-huge", lambda f: toy(layers=10 ** 9), SpecError, ("layers=1000000000", "1..10,000"), "silent"),
    Row("wl-tokens-huge", lambda f: toy(tokens=10 ** 15), SpecError,
        ("tokens=1000000000000000", "1..4,194,304"), "silent"),
    Row("wl-routings-huge", lambda f: toy(routings=10 ** 9), SpecError, ("routings=1000000000", "1..4,096"), "silent"),
    Row("wl-kv-heads-string", lambda f: toy(kv_heads="8"), SpecError, ("kv_heads='8'", "must be an int"), "traceback"),
    Row("wl-kv-heads-zero", lambda f: toy(kv_heads=0), SpecError, ("kv_heads=0", "must be an int in 1.."), "clear"),
    Row("wl-dtype-int", lambda f: toy(dtype=16), SpecError, ("dtype=16", "a dtype name"), "clear"),
    Row("wl-sp-string", lambda f: toy(sp="yes"), SpecError, ("sp='yes'", "True or False"), "silent"),
    Row("wl-dedupe-string", lambda f: toy(dedupe="no"), SpecError, ("dedupe='no'", "True or False"), "silent"),
    Row("wl-skew-nan", lambda f: toy(skew=float("nan")), SpecError, ("skew=nan", "0..100"), "silent"),
    Row("wl-skew-inf", lambda f: toy(skew=float("inf")), SpecError, ("skew=inf", "0..100"), "silent"),
    Row("wl-preset-int", lambda f: preset(42), SpecError, ("workload preset 42", "a string"), "traceback"),
    Row("wl-preset-tokens-string", lambda f: preset("llama3-70b", tokens="12"), SpecError,
        ("tokens='12'", "must be an int"), "clear"),
    Row("wl-predict-config-string", lambda f: predict_step("llama3-70b", "hgx-h200-8"), SpecError,
        ("predict_step: config 'llama3-70b'", "expected a StepConfig", "preset(name)"), "traceback"),
    Row("wl-predict-ctas-string", lambda f: predict_step(toy(), minimal(4), cta_budget="a"), PlanError,
        ("predict_step: cta_budget 'a'", "must be an integer"), "traceback"),
    Row("wl-predict-ctas-zero", lambda f: predict_step(toy(), minimal(4), cta_budget=0), PlanError,
        ("predict_step: cta_budget 0", "1..65536"), "clear"),
    Row("wl-predict-calibration-int", lambda f: predict_step(toy(), minimal(4), calibration=3),
        CalibrationError, ("predict_step: calibration 3", "a GPU kind or a JSON path"), "traceback"),
    Row("wl-predict-calibration-kind", lambda f: predict_step(toy(), minimal(4), calibration="h900"),
        CalibrationError, ("GPU kind 'h900'",), "clear"),
    Row("wl-predict-policy-string", lambda f: predict_step(toy(), minimal(4), "ring"), PlanError,
        ("policy 'ring'", "Policy(algorithm='ring')"), "traceback"),
    Row("wl-predict-policy-by-name", lambda f: predict_step(toy(), minimal(4), {"all_reduce": "ring"}),
        PlanError, ("policy 'ring'",), "traceback"),
    Row("wl-predict-executor", lambda f: predict_step(toy(), minimal(4), executor="pool"), SpecError,
        ("predict_step: executor 'pool'", "concurrent.futures.Executor"), "traceback"),
    Row("wl-predict-progress", lambda f: predict_step(toy(), minimal(4), progress="x"), SpecError,
        ("predict_step: progress 'x'", "True or False"), "silent"),
    Row("wl-predict-label", lambda f: predict_step(toy(), minimal(4), label=3), SpecError,
        ("predict_step: label 3", "a string or None"), "silent"),
    Row("wl-predict-cache", lambda f: predict_step(toy(), minimal(4), cache={}), SpecError,
        ("predict_step: cache {}", "a SimCache"), "traceback"),
    Row("wl-predict-routing-dense", lambda f: predict_step(toy(), minimal(4), routing="x"), SpecError,
        ("routing: applies to MoE layers with expert parallelism", "a dense model", "leave routing out"),
        "silent"),
    Row("wl-predict-world-zero", lambda f: predict_step(toy(), "h200-loopback", world=0), SpecError,
        ("predict_step: world 0", "rank count of a loopback topology"), "clear"),
    Row("wl-predict-steps-empty", lambda f: predict_steps(toy(), []), SpecError,
        ("predict_steps: topologies: the list is empty",), "silent"),
    Row("wl-predict-steps-no-policies", lambda f: predict_steps(toy(), [minimal(4)], {}), PlanError,
        ("predict_steps: policies {}", "non-empty mapping"), "silent"),
    Row("wl-expand-world-zero", lambda f: expand(toy(), 0), SpecError, ("expand: world 0", ">= 1"), "silent"),
    Row("wl-expand-world-string", lambda f: expand(toy(), "8"), SpecError,
        ("expand: world '8'", "must be an integer"), "traceback"),
    Row("wl-draw-total-limit", lambda f: expand(preset("deepseek-v3", "prefill", routings=4096), 576),
        LimitError, ("the step's routing draws would score", "over the limit of 2,147,483,648",
                     "routings=4096"), "hang"),

    # ---------------- API: load_topology(gpus=) ----------------------------------------
    Row("lt-gpus-zero", lambda f: load_topology("hgx-h200-8", gpus=0), TopologyError,
        ("gpus=0", "from 1 to the file's 8 GPUs"), "clear"),
    Row("lt-gpus-too-many", lambda f: load_topology("hgx-h200-8", gpus=9), TopologyError,
        ("gpus=9", "from 1 to the file's 8 GPUs"), "clear"),
    Row("lt-gpus-string", lambda f: load_topology("hgx-h200-8", gpus="4"), TopologyError,
        ("gpus='4'", "must be an int"), "clear"),
    Row("lt-gpus-bool", lambda f: load_topology("hgx-h200-8", gpus=True), TopologyError,
        ("gpus=True", "must be an int"), "clear"),
    Row("lt-gpus-loopback", lambda f: load_topology("h200-loopback", gpus=2), TopologyError,
        ("gpus=2", "the file's 1 GPU;", "give world= for the rank count"), "clear"),
    Row("lt-gpus-pairs", lambda f: load_topology("pcie-gen5-8", gpus=4), TopologyError,
        ("gpus=4", "links listed as pairs cannot be cut"), "clear"),

    # ---------------- purlin.torch's arguments (checked without torch) -----------------
    Row("torch-op-unknown", lambda f: check_op("all_reduce", "xor"), SpecError,
        ("all_reduce: op 'xor'", "choose one of sum"), "clear"),
    Row("torch-op-list", lambda f: check_op("reduce_scatter", ["sum"]), SpecError,
        ("reduce_scatter: op ['sum']",), "traceback"),
    Row("torch-xs-one-tensor", lambda f: check_tensors("all_reduce", np.zeros(4)), SpecError,
        ("xs is one ndarray of shape (4,)", "one tensor per rank, as a list"), "silent"),
    Row("torch-xs-empty", lambda f: check_tensors("all_gather", []), SpecError,
        ("all_gather: no tensors given",), "clear"),
    Row("torch-xs-not-tensors", lambda f: check_tensors("all_gather", [1, 2]), SpecError,
        ("xs[0] is int: expected a tensor",), "traceback"),
    Row("torch-xs-shapes", lambda f: check_tensors("all_to_all", [FakeTensor((4,)), FakeTensor((4, 1))]),
        SpecError, ("one dtype, shape and device", "xs[1] has shape (4, 1)"), "clear"),
    Row("torch-xs-devices", lambda f: check_tensors("all_reduce", [FakeTensor((4,)), FakeTensor((4,), device="cuda:1")]),
        SpecError, ("xs[1] has device cuda:1",), "clear"),
    Row("torch-split", lambda f: out_numel("all_to_all", 5, 2), SpecError,
        ("5 elements do not split into 2 equal blocks",), "clear"),
    Row("torch-cpu-world", lambda f: check_world("all_reduce", False, 7, True), SpecError,
        ("CPU tensors run on the reference executor, which takes no world", "leave world out"), "silent"),
    Row("torch-cuda-no-world", lambda f: check_world("all_gather", True, 0, False), SpecError,
        ("CUDA tensors need a world registered first",), "clear"),
    Row("torch-max-nbytes", lambda f: check_max_nbytes(0), SpecError,
        ("Communicator: max_nbytes 0", "an integer >= 1"), "silent"),
]


def _argv(argv: list[str], files: dict[str, str]) -> list[str]:
    """``{name}`` in an argument is the path of that file from the ``files`` fixture."""
    out = []
    for a in argv:
        for name, path in files.items():
            a = a.replace("{" + name + "}", path)
        out.append(a)
    return out


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_bad_input_is_a_clear_error(row: Row, files, capsys):
    if isinstance(row.call, Usage):
        with pytest.raises(SystemExit) as e:
            cli.main(row.call.argv)
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and "usage:" in err
        for frag in row.fragments:
            assert frag in err, (frag, err)
        return
    if isinstance(row.call, Cli):
        argv = _argv(row.call.argv, files)
        if row.call.debug:
            assert cli.main(argv) == 2
            err = capsys.readouterr().err
            verb = argv[0]
            assert err.startswith(f"purlin {verb}: error: "), err
            assert err.count("\n") == 1 and "Traceback" not in err, err
            for frag in row.fragments:
                assert frag in err, (frag, err)
        with pytest.raises(row.error) as e:
            cli.main(["--debug", *argv])
    else:
        with pytest.raises(row.error) as e:
            row.call(files)
    assert isinstance(e.value, PurlinError)
    for frag in row.fragments:
        assert frag in str(e.value), (frag, str(e.value))


def test_the_table_is_broad():
    assert len({r.id for r in ROWS}) == len(ROWS) >= 150
    assert len({repr(r.call.argv) if isinstance(r.call, (Cli, Usage)) else r.id for r in ROWS}) == len(ROWS)
    was = {r.was for r in ROWS}
    assert was == {"traceback", "silent", "hang", "clear"}
    for kind, least in (("traceback", 30), ("silent", 20), ("hang", 3)):
        assert sum(r.was == kind for r in ROWS) >= least, kind
    assert sum(isinstance(r.call, (Cli, Usage)) for r in ROWS) >= 60
    classes = {r.error for r in ROWS}
    assert {UsageError, SpecError, PlanError, TopologyError, CalibrationError, ScheduleError,
            LimitError, SystemExit} <= classes
    assert Deadlock not in classes   # a deadlock is a schedule's fault, not bad input
