"""Suite-wide hooks: skipped tests say why, one line per reason, at the end of every run."""
from __future__ import annotations

from collections import Counter


def skip_reasons(reports) -> Counter:
    """Skip reason -> how many tests it skipped (pytest's "Skipped: " prefix dropped)."""
    reasons: Counter = Counter()
    for rep in reports:
        longrepr = getattr(rep, "longrepr", None)
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    return reasons


def pytest_terminal_summary(terminalreporter) -> None:
    """After the run, one line per skip reason with its count (``-q`` prints only ``s``)."""
    reasons = skip_reasons(terminalreporter.stats.get("skipped", []))
    if not reasons:
        return
    terminalreporter.section("skipped, by reason")
    for reason, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
        terminalreporter.line(f"{n:5d}  {reason}")
