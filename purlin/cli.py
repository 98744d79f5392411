"""``purlin <verb>``: thin wrappers over the public API that print like nccl-tests.

Errors print one clean line and exit 2; ``--debug`` shows the traceback.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from purlin.errors import PurlinError
from purlin.sim.predict import parse_size, parse_sizes

SIZES_HELP = "sizes as LO:HI[:FACTOR] or a comma list, with K/M/G suffixes (e.g. 1K:1G)"


def parse_policy(args: argparse.Namespace):
    """The Policy that ``--policy key=value``, ``--regime``, ``--algorithm``, ``--atom`` and
    ``--chunk`` describe."""
    from purlin.snac.policy import Policy
    fields = {}
    for kv in args.policy or []:
        for item in kv.split(","):
            if "=" not in item:
                raise PurlinError(f"--policy {item!r}: expected key=value")
            k, v = item.split("=", 1)
            fields[k.strip()] = _value(v.strip())
    for name in ("regime", "algorithm", "atom"):
        if getattr(args, name, None):
            fields[name] = getattr(args, name)
    if getattr(args, "chunk", None):
        fields["chunk_nbytes"] = parse_size(args.chunk)
    return Policy.from_dict(fields)


def _value(v: str):
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    try:
        return parse_size(v) if v[-1:].upper() in "KMG" else int(v)
    except (PurlinError, ValueError):
        return v


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--world", "-w", type=int, default=None,
                   help="number of ranks (default: the topology's; 8 without a topology)")
    p.add_argument("--dtype", default="fp32")
    p.add_argument("--op", default="add", help="reduction op for reducing collectives")
    p.add_argument("--root", type=int, default=0)
    p.add_argument("--topology", "-t", default=None, help="topology name or YAML path")
    p.add_argument("--policy", action="append", help="key=value[,key=value] policy fields")
    p.add_argument("--regime", choices=("latency", "throughput", "direct", "auto"))
    p.add_argument("--algorithm", choices=("one_shot", "two_shot", "ring", "auto"))
    p.add_argument("--atom", choices=("sm", "tma", "ce", "switch"))
    p.add_argument("--chunk", help="chunk size, e.g. 1M")
    p.add_argument("--ctas", type=int, default=64, help="CTA budget per rank")
    p.add_argument("--json", metavar="FILE", help="write the result as JSON")


def _plan_from_args(args: argparse.Namespace, check: bool):
    from purlin.snac import plan
    from purlin.snac.planner import resolve
    from purlin.spec import library
    topo = _topology_from_args(args)
    c = library.from_size(args.collective, topo.world, parse_size(args.bytes), args.dtype,
                          args.op, args.root)
    pol = parse_policy(args)
    args.policy_source = resolve(c, topo, pol, args.ctas)[1]
    return plan(c, topo, pol, args.ctas, check=check), topo


def format_source(src: dict) -> str:
    """One line: where the policy came from (``resolve``'s second value)."""
    if src["source"] == "table":
        lo, hi = src["band"]
        band = f"({lo}, {hi}] B" if lo else f"<= {hi} B"
        n = f" ({src['band_index'] + 1} of {src['bands']})" if "bands" in src else ""
        shrunk = f"; CTAs shrunk to the budget {src['shrunk_to_budget']}" if "shrunk_to_budget" in src else ""
        return f"# default from {src['table']}, world {src.get('world')}, band {band}{n}{shrunk}"
    if src["source"] == "generic":
        return f"# default from the generic rules (purlin.snac.policy): {src['why']}"
    filled = ", ".join(src["auto_filled"]) or "nothing"
    return f"# policy as given; the generic rules filled: {filled}"


def _topology_from_args(args: argparse.Namespace):
    """The one topology a command runs on: ``--topology`` (a loopback one takes
    ``--world`` ranks), or a synthetic switch of ``--world`` GPUs (default 8)."""
    from purlin.topology import resolve_topology
    if args.topology is None:
        return resolve_topology(None, args.world or 8)
    return resolve_topology(args.topology, args.world)


def cmd_plan(args: argparse.Namespace, verify_only: bool = False) -> int:
    """``purlin plan`` (or ``verify``): plan one collective, print its summary, write JSON on
    request."""
    from purlin.snac.report import format_summary, summarize
    from purlin.snac.serialize import to_dict
    sched, topo = _plan_from_args(args, check=True)
    summary = summarize(sched, topo)
    summary["policy_source"] = args.policy_source
    print(format_summary(summary))
    print(format_source(args.policy_source))
    if verify_only:
        print("# verified: every output byte written once with the right data, every Wait "
              "matched, no wait cycle, no early staging reuse, all offsets in bounds")
    if args.json:
        payload = {"summary": summary, "schedule": to_dict(sched)} if not verify_only else \
            {"summary": summary, "verified": True}
        with open(args.json, "w") as f:
            json.dump(payload, f, indent=1, sort_keys=True)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every ``purlin`` verb."""
    ap = argparse.ArgumentParser(prog="purlin", description="Design, simulate and run GPU collectives "
                                 "(Purlin: SNAC planner, simpy model, cupy Atoms).")
    ap.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = ap.add_subparsers(dest="verb", required=True)
    for verb, helptext in (("plan", "plan a collective and summarise the schedule"),
                           ("verify", "plan and verify a collective, print the verdict")):
        p = sub.add_parser(verb, help=helptext)
        p.add_argument("collective")
        p.add_argument("--bytes", "-b", default="1M", help="nccl-tests size, e.g. 64K")
        _common(p)
    _add_sim_verbs(sub)
    _add_codesign_verb(sub)
    _add_workload_verb(sub)
    return ap


def _add_codesign_verb(sub) -> None:
    p = sub.add_parser("codesign", help="search the planner's policies on the simulator and "
                       "write the topology's codesign table (the default policy)")
    p.add_argument("topology", help="a shipped topology name or a YAML path")
    p.add_argument("--worlds", help="comma list of worlds (loopback default 2,4,8)")
    p.add_argument("--collectives", help="comma list (default: the seven Purlin collectives)")
    p.add_argument("--sizes", "-s", default=None,
                   help=SIZES_HELP + " (default 1K:256M:4 up to 16 ranks, 1K:64M:16 up to "
                        "144, 1K:32M:32 beyond)")
    p.add_argument("--budget-s", type=float, default=480.0,
                   help="CPU seconds of one core the search may spend, summed over its points "
                        "(default 480; 0: no limit); later stages stop early to fit")
    p.add_argument("--atoms", default="sm,switch",
                   help="Atoms to try (switch only where the switches reduce)")
    p.add_argument("--quick", action="store_true", help="a cheaper search (fewer starts, one round)")
    p.add_argument("--ctas", type=int, default=None,
                   help="CTA budget per rank (default 64; on one GPU its SMs / world)")
    p.add_argument("--calibration", help="GPU kind or calibration JSON (default: the topology's)")
    p.add_argument("--workers", type=int, default=None, help="processes (default: all cores)")
    p.add_argument("--out", metavar="FILE",
                   help="where to write the table (default, for a shipped topology: "
                        "topologies/codesign/NAME.json)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars (one line per stage still goes to stderr)")
    p.set_defaults(func=cmd_codesign)


def cmd_codesign(args: argparse.Namespace) -> int:
    """``purlin codesign``: search a topology's policies on the simulator and write its table."""
    from dataclasses import replace
    from purlin.sim import codesign as cd
    from purlin.topology import resolve_topology, shipped_name
    topo = resolve_topology(args.topology)
    if args.out is None and shipped_name(topo) is None:
        raise PurlinError(f"purlin codesign {args.topology}: not a shipped topology, so there is "
                          f"no default place for its table: pass --out FILE (then plan with "
                          f"table=json.load(open(FILE)))")
    if args.budget_s < 0:
        raise PurlinError(f"--budget-s {args.budget_s}: give 0 (no limit) or a positive number "
                          f"of CPU seconds")
    spec = replace(cd.QUICK if args.quick else cd.Search(),
                   sizes=tuple(parse_sizes(args.sizes)) if args.sizes else None,
                   atoms=tuple(a for a in args.atoms.split(",") if a), cta_budget=args.ctas,
                   budget_s=args.budget_s or None)
    if args.worlds:
        spec = replace(spec, worlds=tuple(int(w) for w in args.worlds.split(",")))
    if args.collectives:
        spec = replace(spec, collectives=tuple(x for x in args.collectives.split(",") if x))
    command = "purlin " + " ".join(args.argv)
    table = cd.search(topo, spec, calibration=args.calibration, workers=args.workers,
                      progress=not args.quiet, command=command)
    path = cd.write_table(table, args.out or cd.default_path(topo.name))
    print("\n".join(cd.summary_lines(table)))
    print(f"# wrote {path}")
    return 0


def _add_sim_verbs(sub) -> None:
    p = sub.add_parser("sim", help="predict collectives on a topology (nccl-tests-style table)")
    p.add_argument("collectives", nargs="*", help="library names; default: the seven Purlin collectives")
    p.add_argument("--sizes", "-s", default="1K:1G", help=SIZES_HELP)
    p.add_argument("--calibration", help="GPU kind or calibration JSON (default: the topology's)")
    p.add_argument("--trace", metavar="FILE", help="Perfetto trace of one call at the largest size")
    p.add_argument("--plot", metavar="FILE", help="bandwidth-vs-size PNG")
    p.add_argument("--gantt", metavar="FILE", help="timeline PNG of one call at the largest size")
    _common(p)
    p.set_defaults(func=cmd_sim, topology="hgx-h200-8")
    p = sub.add_parser("sweep", help="sweep policies x sizes x topologies; pick the best per size band")
    p.add_argument("collectives", nargs="+")
    p.add_argument("--topologies", "-T", default="hgx-h200-8", help="comma list of topologies")
    p.add_argument("--sizes", "-s", default="1K:1G:4", help=SIZES_HELP)
    p.add_argument("--try", dest="tries", action="append", metavar="KEY=VALUE[,...]",
                   help="a policy to try (repeat); default: every regime")
    p.add_argument("--workers", type=int, default=None, help="processes (default: all cores)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="run on a Dask cluster: its scheduler's address, e.g. tcp://host:8786 "
                        "(pip install -e '.[dask]')")
    p.add_argument("--table", metavar="FILE", help="write the best-policy table (planner input)")
    p.add_argument("--plot", metavar="FILE")
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--dtype", default="fp32")
    p.add_argument("--op", default="add")
    p.set_defaults(func=cmd_sweep)


def cmd_sim(args: argparse.Namespace) -> int:
    """``purlin sim``: predict collectives over sizes, print nccl-tests-style tables, write
    plots/traces on request."""
    from purlin.sim import format_table, plot_bandwidth, plot_timeline, predict, simulate_collective
    from purlin.spec import library
    names = args.collectives or list(library.PURLIN_SEVEN)
    pol = parse_policy(args)
    sizes = parse_sizes(args.sizes)
    topo = _topology_from_args(args)
    all_rows = []
    for name in names:
        rows = predict(name, topo, sizes, pol, dtype=args.dtype, op=args.op,
                       calibration=args.calibration, cta_budget=args.ctas)
        print(f"# {library.canonical(name)} on {topo.name}")
        print(format_table(rows))
        all_rows += rows
    if args.json:
        with open(args.json, "w") as f:
            json.dump(all_rows, f, indent=1)
    if args.plot:
        plot_bandwidth(all_rows, args.plot)
    if args.trace or args.gantt:
        r = simulate_collective(names[0], topo, sizes[-1], pol, dtype=args.dtype,
                                op=args.op, calibration=args.calibration, cta_budget=args.ctas)
        if args.trace:
            r.write_trace(args.trace)
        if args.gantt:
            plot_timeline(r, args.gantt)
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    """``purlin sweep``: simulate policies x sizes x topologies and print the best policy per
    size band."""
    from purlin.sim import sweep
    from purlin.snac.policy import Policy
    tries = [None] if not args.tries else []
    for t in args.tries or []:
        fields = dict(item.split("=", 1) for item in t.split(",") if "=" in item)
        tries.append(Policy.from_dict({k: _value(v) for k, v in fields.items()}))
    if tries == [None]:
        tries = [Policy(regime=r) for r in ("latency", "throughput", "direct")]
    topos = [t for t in args.topologies.split(",") if t]
    res = sweep(args.collectives, parse_sizes(args.sizes), topos, tries, dtype=args.dtype,
                op=args.op, plot=args.plot, max_workers=args.workers, scheduler=args.scheduler)
    print(res.table())
    tables = [res.best_policy_table(t, c) for t in topos for c in args.collectives]
    for tb in tables:
        print(f"# best per size band: {tb['collective']} on {tb['topology']}")
        for band in tb["bands"]:
            default = Policy().to_dict()
            changed = {k: v for k, v in band["policy"].items() if default.get(k) != v}
            print(f"#   <= {band['max_nbytes']:>12} B  {changed or 'codesign default'}")
    if args.table:
        with open(args.table, "w") as f:
            json.dump(tables, f, indent=1)
    if args.json:
        res.to_json(args.json)
    return 0


def _add_workload_verb(sub) -> None:
    from purlin.workload.config import PHASES
    from purlin.workload.presets import PRESETS
    p = sub.add_parser("workload", help="predict the collectives of a model's inference step, "
                                         "per kind, against an NCCL-like ring baseline")
    p.add_argument("preset", help=f"model shape: {', '.join(PRESETS)}")
    p.add_argument("--topology", "-t", action="append", required=True,
                   help="topology name or YAML path; repeat to compare side by side")
    p.add_argument("--phase", choices=PHASES, default="decode")
    p.add_argument("--tokens", type=int, default=None,
                   help="tokens per tensor-parallel group (default: decode 128, prefill 4096)")
    p.add_argument("--dedupe", action="store_true",
                   help="MoE dispatch: one copy per token per destination GPU")
    p.add_argument("--seed", type=int, default=0, help="seed of the drawn MoE routing")
    p.add_argument("--no-baseline", action="store_true", help="skip the NCCL-like ring baseline")
    p.add_argument("--workers", type=int, default=None,
                   help="processes simulating the distinct collectives (default: all cores)")
    p.add_argument("--calibration", help="GPU kind or calibration JSON (default: the topology's)")
    p.add_argument("--plot", metavar="FILE", help="stacked bars per topology (PNG)")
    p.add_argument("--json", metavar="FILE", help="write the predictions as JSON")
    p.set_defaults(func=cmd_workload)


def cmd_workload(args: argparse.Namespace) -> int:
    """``purlin workload``: predict a preset model step on each topology."""
    import os
    from concurrent.futures import ProcessPoolExecutor
    from contextlib import nullcontext

    from purlin import workload
    if args.workers is not None and args.workers < 1:
        raise PurlinError(f"--workers {args.workers}: give at least 1")
    config = workload.preset(args.preset, args.phase, args.tokens, dedupe=args.dedupe,
                             seed=args.seed)
    policies = {"default": None} if args.no_baseline else None
    workers = args.workers or os.cpu_count() or 1
    with (ProcessPoolExecutor(workers) if workers > 1 else nullcontext()) as pool:
        preds = workload.predict_steps(config, args.topology, policies, executor=pool,
                                       calibration=args.calibration)
    print(workload.format_table(preds))
    if args.json:
        workload.to_json(preds, args.json)
    if args.plot:
        workload.plot_steps(preds, args.plot)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``purlin`` command line; returns the exit status (2 on a PurlinError, printed as
    one line)."""
    ap = build_parser()
    args = ap.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if args.verb == "plan":
            return cmd_plan(args)
        if args.verb == "verify":
            return cmd_plan(args, verify_only=True)
        return args.func(args)
    except PurlinError as e:
        if args.debug:
            raise
        print(f"purlin {args.verb}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
