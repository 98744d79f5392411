"""The exceptions Purlin raises. Imports nothing from the package.

Every message says where (file, rank, cta, block, field) and what rule broke, so a
user can fix the input without reading a traceback.
"""


class PurlinError(Exception):
    """Root of every error Purlin raises on purpose."""


class SpecError(PurlinError, ValueError):
    """Raised when a collective spec breaks a rule: a block without a source, a copy
    block with two sources, sizes that disagree, an op the dtype does not support,
    misalignment for the chosen Atom, a world size mismatch."""


class TopologyError(PurlinError, ValueError):
    """Raised when a topology file or graph is invalid: unknown or missing field,
    negative bandwidth, a GPU that cannot reach another. Names file and field."""


class PlanError(PurlinError, ValueError):
    """Raised when the planner cannot build a schedule for the given spec, topology
    and policy (e.g. a CTA budget too small for the roles the policy asks for)."""


class ScheduleError(PurlinError):
    """Raised by the verifier when a schedule breaks a rule: an output byte written
    twice or with the wrong data, a Wait with no matching Notify, an out-of-bounds
    offset, a staging slot overwritten before its readers are done."""


class Deadlock(ScheduleError):
    """Raised when CTAs wait on each other in a cycle, or on a signal nobody sends;
    names the stuck (rank, cta, instruction) and the signal it waits for."""


class UsageError(PurlinError, ValueError):
    """Raised when an argument (a CLI option, a keyword, an output path) is malformed,
    out of range, of the wrong type, or does not apply to what was asked; names the
    argument, the value, the rule and, where there is one, the fix."""


class LimitError(PurlinError, ValueError):
    """Raised before any work when a request would exceed a resource limit (blocks in a
    layout, instructions or memory of a plan); states the estimate, the limit and the
    argument that raises it (``max_blocks=``, ``max_instructions=``, ``max_memory_nbytes=``;
    on the command line ``--max-instructions`` and ``--max-memory``)."""


class BackendUnavailable(PurlinError, RuntimeError):
    """Raised when an executor is asked for but its dependency (simpy, cupy, a GPU)
    is missing here."""
