"""Checks for values that cross a boundary: a public function's argument, a CLI option,
a field of a file. One place for the rules and for how a broken one is said.

Each helper returns the value (normalised: an int stays an int, a path becomes a Path)
or raises ``error`` (default :class:`~purlin.errors.UsageError`) with a message in the
project's style, "where: what rule broke; fix"::

    world 0: must be an integer >= 1
    --json out/x.json: folder 'out' does not exist; create it first or write elsewhere

Imports only the standard library and :mod:`purlin.errors`, so every layer may use it.

Examples
--------
>>> check_int("world", 4, lo=1)
4
>>> check_int("nbytes", 1024.7, lo=0)
Traceback (most recent call last):
...
purlin.errors.UsageError: nbytes 1024.7: must be a whole number (an integer)
"""
from __future__ import annotations

import math
import numbers
import os
from pathlib import Path
from typing import Any, Iterable

from purlin.errors import LimitError, PurlinError, UsageError

__all__ = ["check_bool", "check_choice", "check_instance", "check_int", "check_limit",
           "check_number", "check_output_path", "check_str", "fail", "human_bytes"]


def fail(name: str, value: Any, rule: str, fix: str | None = None,
         error: type[PurlinError] = UsageError) -> PurlinError:
    """The error for ``name`` = ``value`` breaking ``rule`` (raise it)."""
    return error(f"{name} {_show(value)}: {rule}" + (f"; {fix}" if fix else ""))


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_int(name: str, value: Any, lo: int | None = None, hi: int | None = None, *,
              fix: str | None = None, error: type[PurlinError] = UsageError) -> int:
    """``value`` as an int within [lo, hi]: ints and numpy integers pass, as does a float
    with a whole value (1024.0); bools, fractions (1024.7), strings and the rest fail.

    Examples
    --------
    >>> check_int("root", 3, 0, 7), check_int("nbytes", 64.0)
    (3, 64)
    """
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, float)):
        raise fail(name, value, f"must be an integer, got {type(value).__name__}", fix, error)
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise fail(name, value, "must be a whole number (an integer)", fix, error)
    value = int(value)
    _range(name, value, lo, hi, fix, error)
    return value


def check_number(name: str, value: Any, lo: float | None = None, hi: float | None = None, *,
                 lo_open: bool = False, fix: str | None = None,
                 error: type[PurlinError] = UsageError) -> float:
    """``value`` as a finite float in [lo, hi] (``(lo, hi]`` with ``lo_open``).

    Examples
    --------
    >>> check_number("scale", 2)
    2.0
    >>> check_number("scale", 0, lo=0, lo_open=True)
    Traceback (most recent call last):
    ...
    purlin.errors.UsageError: scale 0: must be > 0
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise fail(name, value, f"must be a number, got {type(value).__name__}", fix, error)
    shown, value = value, float(value)
    if not math.isfinite(value):
        raise fail(name, shown, "must be finite", fix, error)
    if lo is not None and (value <= lo if lo_open else value < lo):
        raise fail(name, shown, f"must be {'>' if lo_open else '>='} {lo:g}"
                   + (f" and <= {hi:g}" if hi is not None else ""), fix, error)
    if hi is not None and value > hi:
        raise fail(name, shown, f"must be <= {hi:g}" + (f" (and {'>' if lo_open else '>='} {lo:g})"
                                                        if lo is not None else ""), fix, error)
    return value


def _range(name: str, value: int, lo: int | None, hi: int | None, fix: str | None,
           error: type[PurlinError]) -> None:
    if lo is not None and hi is not None and not lo <= value <= hi:
        raise fail(name, value, f"must be in {lo}..{hi}", fix, error)
    if lo is not None and value < lo:
        raise fail(name, value, f"must be an integer >= {lo}", fix, error)
    if hi is not None and value > hi:
        raise fail(name, value, f"must be an integer <= {hi}", fix, error)


def check_choice(name: str, value: Any, choices: Iterable[str], *, fix: str | None = None,
                 error: type[PurlinError] = UsageError) -> str:
    """``value`` if it is one of ``choices`` (strings).

    Examples
    --------
    >>> check_choice("op", "max", ("add", "max"))
    'max'
    >>> check_choice("op", "xor", ("add", "max"))
    Traceback (most recent call last):
    ...
    purlin.errors.UsageError: op 'xor': must be one of add, max
    """
    choices = tuple(choices)
    if not isinstance(value, str) or value not in choices:
        raise fail(name, value, f"must be one of {', '.join(choices)}", fix, error)
    return value


def check_bool(name: str, value: Any, *, error: type[PurlinError] = UsageError) -> bool:
    """``value`` if it is True or False (not 0, 1 or 'no')."""
    if not isinstance(value, bool):
        raise fail(name, value, f"must be True or False, got {type(value).__name__}", None, error)
    return value


def check_str(name: str, value: Any, *, error: type[PurlinError] = UsageError) -> str:
    """``value`` if it is a non-empty string."""
    if not isinstance(value, str) or not value.strip():
        raise fail(name, value, f"must be a non-empty string, got {type(value).__name__}", None, error)
    return value


def check_instance(name: str, value: Any, types: type | tuple[type, ...], what: str, *,
                   fix: str | None = None, error: type[PurlinError] = UsageError) -> Any:
    """``value`` if it is an instance of ``types``; ``what`` says what is expected in words."""
    if not isinstance(value, types):
        raise fail(name, value, f"expected {what}, got {type(value).__name__}", fix, error)
    return value


def check_output_path(name: str, path: Any, *, error: type[PurlinError] = UsageError) -> Path:
    """A path a command may write to, checked before the work runs: its folder exists
    and is writable, and it is not itself a folder.

    Examples
    --------
    >>> check_output_path("--json", "/no/such/folder/x.json")
    Traceback (most recent call last):
    ...
    purlin.errors.UsageError: --json '/no/such/folder/x.json': folder '/no/such/folder' does not exist; create it first or write elsewhere
    """
    if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
        raise fail(name, path, "must be a file path", None, error)
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise fail(name, str(path), "is a folder, not a file", "name a file in it", error)
    if not parent.exists():
        raise fail(name, str(path), f"folder '{parent}' does not exist",
                   "create it first or write elsewhere", error)
    if not parent.is_dir():
        raise fail(name, str(path), f"'{parent}' is not a folder", None, error)
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise fail(name, str(path), "is not writable here", "choose a path you can write", error)
    return p


def check_limit(what: str, estimate: int, limit: int, unit: str, raise_with: str,
                detail: str = "") -> None:
    """Refuse a request whose ``estimate`` exceeds ``limit`` before any work, saying
    both and the argument (``raise_with``) that raises the limit.

    Examples
    --------
    >>> check_limit("plan", 10, 100, "instructions", "max_instructions=")
    >>> check_limit("plan", 1000, 100, "instructions", "max_instructions=")
    Traceback (most recent call last):
    ...
    purlin.errors.LimitError: plan: about 1,000 instructions, over the limit of 100; raise it with max_instructions= if you mean it
    """
    if estimate > limit:
        raise LimitError(f"{what}: about {estimate:,} {unit}{detail}, over the limit of {limit:,}; "
                         f"raise it with {raise_with} if you mean it")


def human_bytes(n: float) -> str:
    """``1536`` -> ``'1.5 KiB'``.

    Examples
    --------
    >>> human_bytes(512), human_bytes(3 << 30)
    ('512 B', '3.0 GiB')
    """
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover
