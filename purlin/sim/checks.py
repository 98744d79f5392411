"""The simulator's argument checks, kept apart from the engine so that its public entry
(:func:`purlin.sim.simulate`) checks in one line and the engine stays about physics."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from purlin.check import check_bool
from purlin.errors import ScheduleError
from purlin.sim.calibration import Calibration, CalibrationError
from purlin.snac.ir import Schedule


def check_args(schedule: Any, calibration: Any, record: Any, symmetry: Any = True,
               exact: Any = False) -> None:
    """Raise a PurlinError naming the argument unless ``schedule`` is a Schedule,
    ``calibration`` a Calibration, GPU kind, JSON path or None, and ``record``,
    ``symmetry`` and ``exact`` bools."""
    if not isinstance(schedule, Schedule):
        raise ScheduleError(f"simulate: schedule {schedule!r:.60}: expected a Schedule (from "
                            f"purlin.plan), got {type(schedule).__name__}")
    if calibration is not None and not isinstance(calibration, (Calibration, str, Path)):
        raise CalibrationError(f"simulate: calibration {calibration!r:.60}: expected a "
                               f"Calibration, a GPU kind or a JSON path, got "
                               f"{type(calibration).__name__}")
    check_bool("simulate: record", record)
    check_bool("simulate: symmetry", symmetry)
    check_bool("simulate: exact", exact)
