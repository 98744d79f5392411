"""matplotlib figures (Agg backend, PNG files): bandwidth vs size, and a Gantt chart
of one simulated call. matplotlib loads only when a plot is asked for."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

_KIND_COLOURS = {"Copy": "#4477aa", "Reduce": "#cc6677", "PutPackets": "#228833",
                 "WaitPackets": "#ccbb44", "Wait": "#dddddd", "Notify": "#000000"}


def _pyplot():
    """pyplot, switched to Agg only where no display exists, so notebooks keep inline plots."""
    import os
    import sys

    import matplotlib
    interactive = "ipykernel" in sys.modules or os.environ.get("DISPLAY")
    if not interactive and "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _fmt_size(n: float) -> str:
    for unit, k in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= k:
            return f"{n / k:g}{unit}"
    return f"{n:g}"


def plot_bandwidth(rows: Sequence[dict[str, Any]], path: str | Path, metric: str = "busbw",
                   title: str | None = None) -> Path:
    """Bandwidth (``busbw`` or ``algbw``, GB/s) or ``time_us`` vs size, one line per
    (collective, topology, policy). Rows come from :func:`purlin.sim.predict` or a
    sweep; error rows are skipped."""
    from purlin.check import check_output_path
    check_output_path("plot path", path)
    plt = _pyplot()
    lines: dict[str, list[tuple[int, float]]] = {}
    for r in rows:
        if r.get("error") or r.get(metric) is None:
            continue
        label = " / ".join(x for x in (r.get("collective"), r.get("topology"),
                                       r.get("policy_label")) if x)
        lines.setdefault(label, []).append((r["size"], r[metric]))
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, pts in lines.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=label)
    ax.set_xscale("log", base=2)
    if metric == "time_us":
        ax.set_yscale("log")
    ax.set_xlabel("size (bytes, nccl-tests convention)")
    ax.set_ylabel({"busbw": "busbw (GB/s)", "algbw": "algbw (GB/s)",
                   "time_us": "time (us)"}.get(metric, metric))
    sizes = sorted({p[0] for pts in lines.values() for p in pts})
    if sizes:
        ticks = sizes[:: max(1, len(sizes) // 10)]
        ax.set_xticks(ticks)
        ax.set_xticklabels([_fmt_size(s) for s in ticks], rotation=45)
    ax.grid(True, alpha=0.3)
    ax.set_title(title or f"simulated {metric} vs size")
    if lines:
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_timeline(result: Any, path: str | Path, ranks: Sequence[int] | None = None,
                  max_rows: int = 64, title: str | None = None) -> Path:
    """Gantt chart of one call: a row per (rank, cta), a bar per instruction coloured
    by kind (waits light grey). ``ranks`` limits the ranks shown (default: all, up to
    ``max_rows`` rows)."""
    from purlin.check import check_output_path
    check_output_path("plot path", path)
    plt = _pyplot()
    recs = result.timeline
    keys = sorted({(r.rank, r.cta) for r in recs if ranks is None or r.rank in ranks})[:max_rows]
    row_of = {k: i for i, k in enumerate(keys)}
    fig, ax = plt.subplots(figsize=(10, max(3.0, 0.18 * len(keys) + 1.5)))
    by_kind: dict[str, list[tuple[float, float, int]]] = {}
    for r in recs:
        i = row_of.get((r.rank, r.cta))
        if i is not None:
            by_kind.setdefault(r.kind, []).append((r.start_us, max(r.end_us - r.start_us, 1e-3), i))
    for kind, bars in by_kind.items():
        colour = _KIND_COLOURS.get(kind, "#888888")
        for i in sorted({b[2] for b in bars}):
            ax.broken_barh([(s, d) for s, d, j in bars if j == i], (i - 0.4, 0.8),
                           facecolors=colour)
        ax.bar(0, 0, color=colour, label=kind)  # legend entry
    ax.set_yticks(range(len(keys)))
    ax.set_yticklabels([f"r{r} c{c}" for r, c in keys], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("time (us)")
    ax.set_xlim(0, result.time_us * 1.02)
    ax.set_title(title or str(result))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
