"""``purlin <verb>``: thin wrappers over the public API that print like nccl-tests.

Errors print one clean line and exit 2; ``--debug`` shows the traceback.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from purlin import cliargs as ca
from purlin.errors import PurlinError

SIZES_HELP = "sizes as LO:HI[:FACTOR] or a comma list, with K/M/G suffixes (e.g. 1K:1G)"


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--world", "-w", type=int, default=None,
                   help="ranks of a loopback topology, or of the synthetic switch when no "
                        "--topology is given (default 8); a topology with its own GPUs takes none")
    p.add_argument("--dtype", default="fp32")
    p.add_argument("--op", default=None, help="reduction op for reducing collectives (default add)")
    p.add_argument("--root", type=int, default=None,
                   help="root rank of broadcast, reduce, gather, scatter (default 0)")
    p.add_argument("--topology", "-t", default=None, help="topology name or YAML path")
    p.add_argument("--policy", action="append", help="key=value[,key=value] policy fields")
    p.add_argument("--regime", choices=("latency", "throughput", "direct", "auto"))
    p.add_argument("--algorithm", choices=("one_shot", "two_shot", "ring", "auto"))
    p.add_argument("--atom", choices=("sm", "tma", "ce", "switch"))
    p.add_argument("--chunk", help="chunk size, e.g. 1M")
    p.add_argument("--ctas", type=int, default=64, help="CTA budget per rank")
    p.add_argument("--json", metavar="FILE", help="write the result as JSON")
    ca.add_limit_options(p)


def format_source(src: dict) -> str:
    """One line: where the policy came from (``resolve``'s second value)."""
    gated = f"; {src['handshakes']}" if "handshakes" in src else ""
    if src["source"] == "table":
        lo, hi = src["band"]
        band = f"({lo}, {hi}] B" if lo else f"<= {hi} B"
        n = f" ({src['band_index'] + 1} of {src['bands']})" if "bands" in src else ""
        shrunk = f"; CTAs shrunk to the budget {src['shrunk_to_budget']}" if "shrunk_to_budget" in src else ""
        return f"# default from {src['table']}, world {src.get('world')}, band {band}{n}{shrunk}{gated}"
    if src["source"] == "generic":
        return f"# default from the generic rules (purlin.snac.policy): {src['why']}{gated}"
    filled = ", ".join(src["auto_filled"]) or "nothing"
    return f"# policy as given; the generic rules filled: {filled}"


def cmd_plan(args: argparse.Namespace, verify_only: bool = False) -> int:
    """``purlin plan`` (or ``verify``): plan one collective, print its summary, write JSON on
    request."""
    from purlin.snac import plan
    from purlin.snac.planner import resolve
    from purlin.snac.limits import (DEFAULT_MAX_INSTRUCTIONS, DEFAULT_MAX_MEMORY_NBYTES,
                                    check_plan_size, library_lower_bound, max_blocks_for)
    from purlin.snac.report import format_summary, summarize
    from purlin.snac.serialize import to_dict
    from purlin.spec import library
    from purlin.topology import resolve_topology
    verb = "verify" if verify_only else "plan"
    ca.check_outputs(args)                                   # every check before any work
    names = ca.collective_names([args.collective])
    size = ca.size_option("--bytes", args.bytes)
    dtype = ca.check_dtype("--dtype", args.dtype, names)
    topo, world = ca.topology_option(args)
    op = ca.op_option(verb, args.op, names)
    root = ca.root_option(verb, args.root, names, world)
    pol, ctas, lim = ca.policy_option(args), ca.ctas_option(args), ca.limits_option(args)
    check_plan_size(library_lower_bound(names[0], world, size),      # before building the spec
                    lim["max_instructions"] or DEFAULT_MAX_INSTRUCTIONS,
                    lim["max_memory_nbytes"] or DEFAULT_MAX_MEMORY_NBYTES,
                    f"{names[0]} at world {world}, {size} B")
    c = library.from_size(names[0], world, size, dtype, op, root,
                          max_blocks=max_blocks_for(lim["max_instructions"] or DEFAULT_MAX_INSTRUCTIONS))
    sched = plan(c, topo, pol, ctas, check=True, **lim)
    topo = topo or resolve_topology(None, world)
    summary = summarize(sched, topo)
    summary["policy_source"] = resolve(c, topo, pol, ctas,
                                       max_instructions=lim["max_instructions"] or DEFAULT_MAX_INSTRUCTIONS)[1]
    print(format_summary(summary))
    print(format_source(summary["policy_source"]))
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
    p.add_argument("--beyond", choices=("last-band", "generic"), default="last-band",
                   help="past the largest size searched: the last band's policy (default), or "
                        "the generic rules (for a search over small sizes only)")
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
    from purlin.sim.predict import parse_sizes
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
                   budget_s=args.budget_s or None, beyond=args.beyond)
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
    p.add_argument("--workers", type=int, default=None,
                   help="processes simulating the sizes side by side (default: all cores)")
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
    p.add_argument("--op", default=None, help="reduction op for reducing collectives (default add)")
    p.set_defaults(func=cmd_sweep)


def cmd_sim(args: argparse.Namespace) -> int:
    """``purlin sim``: predict collectives over sizes, print nccl-tests-style tables, write
    plots/traces on request."""
    import os
    from concurrent.futures import ProcessPoolExecutor
    from contextlib import nullcontext

    from purlin.check import check_int
    from purlin.sim import format_table, plot_bandwidth, plot_timeline, predict, simulate_collective
    from purlin.sim.calibration import load_calibration
    from purlin.sim.predict import check_points
    from purlin.spec import library
    ca.check_outputs(args)                                   # every check before any work
    names = ca.collective_names(args.collectives or list(library.PURLIN_SEVEN))
    sizes = ca.sizes_option("--sizes", args.sizes)
    dtype = ca.check_dtype("--dtype", args.dtype, names)
    topo, world = ca.topology_option(args)
    op = ca.op_option("sim", args.op, names)
    root = ca.root_option("sim", args.root, names, world)
    pol, ctas, lim = ca.policy_option(args), ca.ctas_option(args), ca.limits_option(args)
    cal = load_calibration(args.calibration or topo.gpu_kind)
    kw = dict(dtype=dtype, cta_budget=ctas, **lim)
    per = {n: dict(kw, op=op if n in library.REDUCING else None,
                   root=root if n in library.ROOTED else None) for n in names}
    workers = None if args.workers is None else check_int("--workers", args.workers, lo=1,
                                                          fix="it is a process count")
    for name in names:
        check_points(name, topo, sizes, pol, **per[name])
    if (args.trace or args.gantt) and len(names) > 1:
        ca.warn("sim", f"--trace/--gantt show one call: {names[0]} at {sizes[-1]} B")
    all_rows = []
    workers = workers or os.cpu_count() or 1
    with (ProcessPoolExecutor(workers) if workers > 1 and len(sizes) > 1 else nullcontext()) as pool:
        for name in names:
            rows = predict(name, topo, sizes, pol, calibration=cal, executor=pool, **per[name])
            print(f"# {name} on {topo.name}", flush=True)
            print(format_table(rows), flush=True)
            all_rows += rows
    if args.json:
        with open(args.json, "w") as f:
            json.dump(all_rows, f, indent=1)
    if args.plot:
        plot_bandwidth(all_rows, args.plot)
    if args.trace or args.gantt:
        r = simulate_collective(names[0], topo, sizes[-1], pol, calibration=cal, **per[names[0]])
        if args.trace:
            r.write_trace(args.trace)
        if args.gantt:
            plot_timeline(r, args.gantt)
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    """``purlin sweep``: simulate policies x sizes x topologies and print the best policy per
    size band."""
    from purlin.check import check_int
    from purlin.sim import sweep
    from purlin.snac.policy import Policy
    ca.check_outputs(args)                                   # every check before any work
    names = ca.collective_names(args.collectives)
    topos = ca.list_option("--topologies", args.topologies)
    sizes = ca.sizes_option("--sizes", args.sizes)
    dtype = ca.check_dtype("--dtype", args.dtype, names)
    op = ca.op_option("sweep", args.op, names)
    tries = ca.tries_option(args.tries) or [Policy(regime=r) for r in ("latency", "throughput", "direct")]
    workers = None if args.workers is None else check_int("--workers", args.workers, lo=1)
    res = sweep(names, sizes, topos, tries, dtype=dtype, op=op, plot=args.plot,
                max_workers=workers, scheduler=ca.scheduler_option(args.scheduler))
    print(res.table())
    tables = [res.best_policy_table(t, c) for t in topos for c in names]
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
    from purlin.check import check_int
    from purlin.workload.config import RANGES
    from purlin.sim.calibration import load_calibration
    from purlin.topology import resolve_topology
    ca.check_outputs(args)                                   # every check before any work
    workers = None if args.workers is None else check_int("--workers", args.workers, lo=1,
                                                          fix="it is a process count")
    tokens = None if args.tokens is None else check_int(
        "--tokens", args.tokens, *RANGES["tokens"],
        fix="it is the tokens per tensor-parallel group")
    seed = check_int("--seed", args.seed, lo=0, fix="it seeds the drawn MoE routing")
    config = workload.preset(args.preset, args.phase, tokens, dedupe=args.dedupe, seed=seed)
    if not config.is_moe and (args.dedupe or args.seed):
        ca.warn("workload", f"--dedupe and --seed apply to MoE dispatch; {config.name} is dense, "
                            f"so they change nothing")
    topologies = [resolve_topology(t) for t in args.topology]   # a bad name or file fails here
    if args.calibration:
        load_calibration(args.calibration)                   # an unknown kind or bad file fails here
    policies = {"default": None} if args.no_baseline else None
    workers = workers or os.cpu_count() or 1
    with (ProcessPoolExecutor(workers) if workers > 1 else nullcontext()) as pool:
        preds = workload.predict_steps(config, topologies, policies, executor=pool,
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
    args = ap.parse_args(argv)          # argparse's own usage errors exit 2 here
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
        print(f"purlin {args.verb}: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except MemoryError:
        if args.debug:
            raise
        print(f"purlin {args.verb}: error: out of memory; ask for less (fewer ranks, a smaller "
              f"size) or lower --max-memory", file=sys.stderr)
        return 2
    except OSError as e:                # a write that failed after the checks (disk full)
        if args.debug:
            raise
        print(f"purlin {args.verb}: error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 2


def _one_line(e: Exception) -> str:
    """The message on one line (a Deadlock lists its stuck CTAs on the lines below)."""
    lines = str(e).splitlines() or [type(e).__name__]
    return lines[0] + (f" ({len(lines) - 1} more lines with --debug)" if len(lines) > 1 else "")


if __name__ == "__main__":
    sys.exit(main())
