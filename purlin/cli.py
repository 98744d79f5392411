"""``purlin <verb>``: thin wrappers over the public API that print like nccl-tests.

Errors print one clean line and exit 2; ``--debug`` shows the traceback.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from purlin.errors import PurlinError

SIZES_HELP = "sizes as MIN:MAX (doubling) or a comma list, with K/M/G suffixes (e.g. 1K:1G)"


def parse_size(text: str) -> int:
    """'64K' -> 65536; plain ints pass through."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    try:
        return int(float(t[:-1] if mult > 1 else t) * mult)
    except ValueError:
        raise PurlinError(f"size {text!r}: expected a number with an optional K/M/G suffix") from None


def parse_sizes(text: str) -> list[int]:
    if ":" in text:
        lo, hi = (parse_size(x) for x in text.split(":", 1))
        if lo <= 0 or hi < lo:
            raise PurlinError(f"sizes {text!r}: need 0 < MIN <= MAX")
        out = []
        while lo <= hi:
            out.append(lo)
            lo *= 2
        return out
    return [parse_size(x) for x in text.split(",") if x]


def parse_policy(args: argparse.Namespace):
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
    p.add_argument("--world", "-w", type=int, default=8, help="number of ranks")
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
    from purlin.snac.planner import resolve_topology
    from purlin.spec import library
    c = library.from_size(args.collective, args.world, parse_size(args.bytes), args.dtype,
                          args.op, args.root)
    topo = resolve_topology(args.topology, c.world)
    return plan(c, topo, parse_policy(args), args.ctas, check=check), topo


def cmd_plan(args: argparse.Namespace, verify_only: bool = False) -> int:
    from purlin.snac.report import format_summary, summarize
    from purlin.snac.serialize import to_dict
    sched, topo = _plan_from_args(args, check=True)
    summary = summarize(sched, topo)
    print(format_summary(summary))
    if verify_only:
        print(f"# verified: every output byte written once with the right data, every Wait "
              f"matched, no wait cycle, no early staging reuse, all offsets in bounds")
    if args.json:
        payload = {"summary": summary, "schedule": to_dict(sched)} if not verify_only else \
            {"summary": summary, "verified": True}
        with open(args.json, "w") as f:
            json.dump(payload, f, indent=1, sort_keys=True)
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="purlin", description=__doc__.splitlines()[0])
    ap.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = ap.add_subparsers(dest="verb", required=True)
    for verb, helptext in (("plan", "plan a collective and summarise the schedule"),
                           ("verify", "plan and verify a collective, print the verdict")):
        p = sub.add_parser(verb, help=helptext)
        p.add_argument("collective")
        p.add_argument("--bytes", "-b", default="1M", help="nccl-tests size, e.g. 64K")
        _common(p)
    _add_sim_verbs(sub)
    return ap


def _add_sim_verbs(sub) -> None:
    try:
        from purlin.sim import cli as sim_cli
    except ImportError:  # the simulator is optional at import time
        return
    sim_cli.add_verbs(sub, _common, parse_sizes, parse_policy)


def main(argv: Sequence[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
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
