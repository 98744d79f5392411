"""Checks of the command line's options, shared by every ``purlin`` verb.

Each verb calls these at its top, before any work: a bad value, an output path into a
folder that does not exist, or an option that does not apply to what was asked raises a
PurlinError naming the option (``--world 4: ...``), which :func:`purlin.cli.main` prints
as one line and exits 2. A harmless mismatch (an option that applies to only some of the
collectives asked for) is a warning on stderr instead.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

from purlin.check import check_int, check_output_path, fail
from purlin.errors import PurlinError, SpecError, UsageError

OUTPUTS = ("json", "plot", "table", "trace", "gantt")


def warn(verb: str, message: str) -> None:
    """A harmless mismatch, said on stderr (the run goes on)."""
    print(f"purlin {verb}: warning: {message}", file=sys.stderr)


def check_outputs(args: argparse.Namespace) -> None:
    """Every output path the verb was given (--json, --plot, --table, --trace, --gantt)
    can be written, before the work that fills it runs."""
    for name in OUTPUTS:
        path = getattr(args, name, None)
        if path is not None:
            check_output_path(f"--{name}", path)


def size_option(option: str, text: str) -> int:
    """A size option (``--bytes 64K``), its error naming the option."""
    from purlin.sim.predict import parse_size
    try:
        return parse_size(text)
    except SpecError as e:
        raise UsageError(f"{option} {text!r}: {_inner(str(e), 'size', text)}") from None


def sizes_option(option: str, text: str) -> list[int]:
    """A sizes option (``--sizes 1K:1G``), its error naming the option."""
    from purlin.sim.predict import parse_sizes
    try:
        return parse_sizes(text)
    except SpecError as e:
        raise UsageError(f"{option} {text!r:.60}: {_inner(str(e), 'sizes', text)}") from None


def _inner(msg: str, word: str, text: str) -> str:
    """``msg`` without its leading "sizes '...': " (the option names the value instead)."""
    for prefix in (f"{word} {text!r}: ", f"{word} {text!r:.40}: "):
        if msg.startswith(prefix):
            return msg[len(prefix):]
    return msg


def collective_names(names: Sequence[str]) -> list[str]:
    """Library names, canonical; at least one."""
    from purlin.spec import library
    if not names:
        raise UsageError("no collective given; choose from " + ", ".join(library.ALL))
    return [library.canonical(n) for n in names]


def check_dtype(option: str, name: str, collectives: Sequence[str]) -> str:
    """A known dtype that every reducing collective asked for can reduce."""
    from purlin.spec import library
    from purlin.spec.dtypes import dtype
    dt = dtype(name)
    reducing = [c for c in collectives if c in library.REDUCING]
    if reducing and dt.accumulator is None:
        raise UsageError(f"{option} {name}: {dt.name} is copy-only, and {', '.join(reducing)} "
                         f"reduce{'s' if len(reducing) == 1 else ''}; use fp32, fp16, bf16 or int32")
    return dt.name


def op_option(verb: str, op: str | None, collectives: Sequence[str]) -> str | None:
    """``--op``: a reduction, given only where something reduces."""
    from purlin.spec import library
    from purlin.spec.collective import normalize_op
    from purlin.spec.dtypes import REDUCE_OPS
    if op is None:
        return None
    if normalize_op(op) not in REDUCE_OPS:
        raise UsageError(f"--op {op!r}: must be a reduction, one of {', '.join(REDUCE_OPS)}")
    reducing = [c for c in collectives if c in library.REDUCING]
    if not reducing:
        raise UsageError(f"--op {op}: {', '.join(collectives)} "
                         f"{'is a copy collective' if len(collectives) == 1 else 'are copy collectives'}"
                         f" (no reduction); drop --op")
    if len(reducing) < len(collectives):
        warn(verb, f"--op {op} applies to {', '.join(reducing)} only")
    return op


def root_option(verb: str, root: int | None, collectives: Sequence[str], world: int) -> int | None:
    """``--root``: a rank of the world, given only where a collective has a root."""
    from purlin.spec import library
    if root is None:
        return None
    rooted = [c for c in collectives if c in library.ROOTED]
    if not rooted:
        raise UsageError(f"--root {root}: {', '.join(collectives)} "
                         f"{'has' if len(collectives) == 1 else 'have'} no root (only "
                         f"{', '.join(library.ROOTED)} do); drop --root")
    if not 0 <= root < world:
        raise UsageError(f"--root {root}: not a rank of a world of {world} (0..{world - 1})")
    if len(rooted) < len(collectives):
        warn(verb, f"--root {root} applies to {', '.join(rooted)} only")
    return root


def world_option(args: argparse.Namespace) -> int | None:
    """``--world`` as a rank count, or None when not given."""
    if getattr(args, "world", None) is None:
        return None
    return check_int("--world", args.world, lo=1, fix="it is a rank count")


def topology_option(args: argparse.Namespace):
    """The topology a command runs on, or None for the synthetic switch of ``--world``
    GPUs (default 8; built by the planner after its size checks, so a huge world is
    refused before any GPU is made). ``--world`` sets the ranks of a loopback topology;
    a topology with its own GPUs keeps its world, and a different ``--world`` is an error.
    Returns (topology or None, world)."""
    from purlin.topology import load_topology
    world = world_option(args)
    if args.topology is None:
        return None, world or 8
    topo = load_topology(args.topology)
    if topo.loopback:
        if world is not None and world != topo.world:
            topo = load_topology(args.topology, world=world)
        return topo, topo.world
    if world is not None and world != topo.world:
        raise UsageError(f"--world {world}: topology {topo.name} has its own {topo.world} GPUs, "
                         f"so it takes no --world; drop it (--world sets the ranks of a loopback "
                         f"topology, or of the synthetic switch when no --topology is given)")
    return topo, topo.world


def limits_option(args: argparse.Namespace) -> dict[str, int | None]:
    """``--max-instructions`` and ``--max-memory`` as plan keywords (None: the default)."""
    out: dict[str, int | None] = {"max_instructions": None, "max_memory_nbytes": None}
    if getattr(args, "max_instructions", None) is not None:
        out["max_instructions"] = check_int("--max-instructions", args.max_instructions, lo=1)
    if getattr(args, "max_memory", None) is not None:
        out["max_memory_nbytes"] = size_option("--max-memory", args.max_memory)
        if out["max_memory_nbytes"] < 1:
            raise UsageError("--max-memory 0: must be at least 1 byte (e.g. 16G)")
    return out


def ctas_option(args: argparse.Namespace) -> int:
    """``--ctas``: the CTA budget per rank, in 1..65536."""
    return check_int("--ctas", args.ctas, lo=1, hi=1 << 16, fix="it is the CTA budget per rank")


def policy_items(option: str, texts: Sequence[str] | None) -> dict[str, Any]:
    """``key=value[,key=value]`` items as typed policy fields; a field given twice with two
    values is an error."""
    fields: dict[str, Any] = {}
    for text in texts or []:
        items = [item for item in text.split(",") if item.strip()]
        if not items:
            raise UsageError(f"{option} {text!r}: no key=value given")
        for item in items:
            if "=" not in item:
                raise UsageError(f"{option} {item!r}: expected key=value (e.g. regime=direct)")
            k, v = (x.strip() for x in item.split("=", 1))
            if not k:
                raise UsageError(f"{option} {item!r}: the key is empty")
            value = _value(v)
            if k in fields and fields[k] != value:
                raise UsageError(f"{option}: {k} given twice ({fields[k]!r} and {value!r}); "
                                 f"give it once")
            fields[k] = value
    return fields


def _value(v: str) -> Any:
    """A policy value from text: true/false, none, an int or a size (64K), else a string."""
    low = v.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    if v[:1].isdigit():
        from purlin.sim.predict import parse_size
        try:
            return parse_size(v)
        except PurlinError:
            return v
    return v


def policy_option(args: argparse.Namespace):
    """The Policy of ``--policy`` items and the ``--regime``/``--algorithm``/``--atom``/
    ``--chunk`` shortcuts; one field set two ways with two values is an error."""
    from purlin.errors import PlanError
    from purlin.snac.policy import Policy
    fields = policy_items("--policy", args.policy)
    shortcuts = {"regime": args.regime, "algorithm": args.algorithm, "atom": args.atom,
                 "chunk_nbytes": size_option("--chunk", args.chunk) if args.chunk else None}
    for k, v in shortcuts.items():
        if v is None:
            continue
        if k in fields and fields[k] != v:
            flag = "--chunk" if k == "chunk_nbytes" else f"--{k}"
            raise UsageError(f"{flag} {v} disagrees with --policy {k}={fields[k]}; give one")
        fields[k] = v
    try:
        return Policy.from_dict(fields)
    except PlanError as e:
        raise UsageError(str(e)) from None


def tries_option(texts: Sequence[str] | None) -> list:
    """``sweep --try`` policies (None: the codesign default); each a checked Policy."""
    from purlin.errors import PlanError
    from purlin.snac.policy import Policy
    out = []
    for text in texts or []:
        try:
            out.append(Policy.from_dict(policy_items("--try", [text])))
        except PlanError as e:
            raise UsageError(f"--try {text!r}: {e}") from None
    return out


def scheduler_option(text: str | None) -> str | None:
    """``--scheduler ADDRESS`` checked for form (scheme, host, port) before anything runs;
    whether a scheduler answers is :func:`purlin.sim.sweep.connect`'s, with a short timeout."""
    if text is None:
        return None
    from purlin.sim.sweep import check_scheduler_address
    return check_scheduler_address(text, "--scheduler")


def list_option(option: str, text: str) -> list[str]:
    """A comma list that names at least one thing (``-T ','`` runs nothing: an error)."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise fail(option, text, "names nothing, so there is nothing to run",
                   "give a comma list, e.g. hgx-h200-8,hgx-b200-8")
    return items


def add_limit_options(p: argparse.ArgumentParser) -> None:
    """``--max-instructions`` and ``--max-memory``, the limits a plan is refused past."""
    p.add_argument("--max-instructions", type=int, default=None, metavar="N",
                   help="refuse plans estimated past N instructions (default 2097152)")
    p.add_argument("--max-memory", default=None, metavar="SIZE",
                   help="refuse plans estimated past SIZE of memory to build (default 4G)")
