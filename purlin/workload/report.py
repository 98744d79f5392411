"""Step predictions as text tables (one per topology), JSON and a stacked-bar plot."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from purlin.workload.expand import KINDS
from purlin.workload.predict import StepPrediction

COLOURS = {"all_reduce": "#4477aa", "reduce_scatter": "#66ccee", "all_gather": "#228833",
           "dispatch": "#ee6677", "combine": "#ccbb44"}


def _by_topology(preds: Sequence[StepPrediction]) -> dict[str, list[StepPrediction]]:
    out: dict[str, list[StepPrediction]] = {}
    for p in preds:
        out.setdefault(p.topology, []).append(p)
    return out


def describe(p: StepPrediction) -> str:
    """One line: the step and how it is split on this topology."""
    c = p.config
    ep = (c.ep or p.world) if c.is_moe else 1
    split = f"tp={c.tp} ({p.world // c.tp} group{'s' if p.world // c.tp > 1 else ''})"
    if ep > 1:
        split += f", ep={ep} ({p.world // ep} group{'s' if p.world // ep > 1 else ''})"
    if c.sp:
        split += ", sp"
    return (f"{c.name} {c.phase}: {c.tokens} tokens per tensor-parallel group, {c.layers} layers"
            f"{f' ({c.moe_layers} MoE, top-{c.top_k} of {c.experts})' if c.is_moe else ''}"
            f" | {p.topology}, {p.world} ranks: {split}")


def format_table(preds: Sequence[StepPrediction]) -> str:
    """Per topology: one row per collective kind (calls, bytes, the port bound, and time
    per call and per step under each policy), then the total communication per step.

    ``bytes`` sums each call's nccl-tests size (the largest per-rank buffer); ``bound`` sums
    each call's max-per-port bound (copy kinds only).

    Examples
    --------
    >>> from purlin.topology import minimal
    >>> from purlin.workload import StepConfig, predict_step
    >>> p = predict_step(StepConfig("toy", hidden=256, layers=2, heads=4, tp=4, tokens=8),
    ...                  minimal(4), calibration="synthetic")
    >>> print(format_table([p]).splitlines()[0])
    # toy decode: 8 tokens per tensor-parallel group, 2 layers | minimal-4, 4 ranks: tp=4 (1 group)
    >>> format_table([p]).splitlines()[3].split()[:3]
    ['all_reduce', '4', '16384']
    """
    lines = []
    for topo, group in _by_topology(preds).items():
        first = group[0]
        lines.append(f"# {describe(first)}")
        head = f"#{'':>15} {'':>6} {'':>13} {'bound':>10}"
        sub = f"#{'kind':>15} {'calls':>6} {'bytes':>13} {'us/step':>10}"
        for p in group:
            head += f"  {p.label:>21}"
            sub += f"  {'us/call':>10} {'us/step':>10}"
        lines += [head, sub]
        for kind in KINDS:
            rows = [next((r for r in p.rows if r.kind == kind), None) for p in group]
            if rows[0] is None:
                continue
            r0 = rows[0]
            bound = f"{r0.bound_us:>10.1f}" if r0.bound_us is not None else f"{'-':>10}"
            line = f"{kind:>16} {r0.calls:>6} {r0.nbytes:>13} {bound}"
            for r in rows:
                line += f"  {r.time_per_call_us:>10.2f} {r.time_us:>10.1f}"
            lines.append(line)
        calls = sum(r.calls for r in first.rows)
        nbytes = sum(r.nbytes for r in first.rows)
        line = f"{'total':>16} {calls:>6} {nbytes:>13} {'':>10}"
        for p in group:
            line += f"  {'':>10} {p.total_us:>10.1f}"
        lines.append(line)
        lines.append("")
    return "\n".join(lines).rstrip()


def to_json(preds: Sequence[StepPrediction], path: str | Path) -> Path:
    """Write the predictions as JSON to ``path``."""
    path = Path(path)
    path.write_text(json.dumps([p.to_dict() for p in preds], indent=1) + "\n")
    return path


def plot_steps(preds: Sequence[StepPrediction], path: str | Path) -> Path:
    """Stacked bars of communication time per step, one bar per topology, one panel per
    policy (each with its own scale), segments by collective kind."""
    from purlin.sim.plots import _pyplot   # Agg where there is no display
    plt = _pyplot()

    labels = list(dict.fromkeys(p.label for p in preds))
    topos = list(dict.fromkeys(p.topology for p in preds))
    fig, axes = plt.subplots(1, len(labels), figsize=(max(4.0, 1.5 * len(topos)) * len(labels) + 1.6,
                                                      4.5), squeeze=False)
    handles: dict[str, object] = {}
    for ax, label in zip(axes[0], labels):
        mine = {p.topology: p for p in preds if p.label == label}
        bottom = [0.0] * len(topos)
        for kind in KINDS:
            heights = [next((r.time_us for r in mine[t].rows if r.kind == kind), 0.0)
                       if t in mine else 0.0 for t in topos]
            if not any(heights):
                continue
            handles[kind] = ax.bar(topos, heights, bottom=bottom, color=COLOURS[kind], label=kind)
            bottom = [b + h for b, h in zip(bottom, heights)]
        ax.set_title(label)
        ax.set_ylabel("communication per step (us)")
        ax.tick_params(axis="x", rotation=20)
        ax.grid(True, axis="y", alpha=0.3)
    kinds = [k for k in KINDS if k in handles][::-1]     # top of the stack first
    fig.legend([handles[k] for k in kinds], kinds, loc="center right", fontsize=9)
    configs = {p.config for p in preds}
    first = preds[0].config
    fig.suptitle(f"{first.name} {first.phase}, {first.tokens} tokens per tensor-parallel group"
                 if len(configs) == 1 else ", ".join(sorted({c.name for c in configs})))
    fig.tight_layout(rect=(0, 0, 1 - 1.5 / fig.get_figwidth(), 1))
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
