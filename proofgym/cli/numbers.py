"""Numbers on the command line, checked when they are parsed.

Click's ``FloatRange`` lets ``nan`` through (every comparison with NaN is false), so an option
such as ``--threshold nan`` used to run and report nonsense. :func:`number` is a typer ``parser=``
that refuses NaN, infinities and values out of range with a usage error (exit 2) naming the
option's accepted range.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import typer


def check_number(text: str | float, *, what: str = "", lo: float | None = None, hi: float | None = None,
                 lo_open: bool = False, hi_open: bool = False) -> float:
    """``text`` as a finite float within the bounds, or :class:`typer.BadParameter`."""
    label = f"{what} " if what else ""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise typer.BadParameter(f"{label}{text!r} is not a number; give a number"
                                 f"{_range(lo, hi, lo_open, hi_open)}") from None
    if not math.isfinite(value):
        raise typer.BadParameter(f"{label}{text!r} is not a finite number; give a number"
                                 f"{_range(lo, hi, lo_open, hi_open)}")
    low = lo is not None and (value <= lo if lo_open else value < lo)
    high = hi is not None and (value >= hi if hi_open else value > hi)
    if low or high:
        raise typer.BadParameter(f"{label}{value:g} is out of range; give a number"
                                 f"{_range(lo, hi, lo_open, hi_open)}")
    return value


def number(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
           hi_open: bool = False) -> Callable[[str], float]:
    """A typer ``parser=`` for a finite float in the range (see :func:`check_number`)."""

    def parse(text: str) -> float:
        return check_number(text, lo=lo, hi=hi, lo_open=lo_open, hi_open=hi_open)

    parse.__name__ = "number"  # shown by --help as the metavar's type
    return parse


def _range(lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> str:
    if lo is None and hi is None:
        return ""
    if hi is None:
        return f" {'>' if lo_open else '>='} {lo:g}"
    if lo is None:
        return f" {'<' if hi_open else '<='} {hi:g}"
    return f" in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
