"""Numbers shown to a person: one figure prints the same in ``run``, ``compare``, ``sweep`` and the report.

Pure (no I/O, no imports beyond the standard library), so every printer may use it. Only for text: the
``--json`` output and the store keep the exact numbers.

* :func:`format_value` is one figure: thousands separated from 1000 (``12,346``), one decimal from 10
  (``42.4``), two from 1 (``3.14``), three significant digits below (``0.00123``); ``0`` is ``0``; from
  1e15 in scientific notation (``1.235e+20``); ``None`` is ``-``, NaN ``nan``, infinities ``inf`` and
  ``-inf``; a negative figure as its magnitude with a minus. With a ``unit``, the unit follows after a
  space (``12,346 MB/s``); byte units (``B``, ``bytes``) are scaled by :func:`human_bytes`.
* :func:`format_values` is a set of figures of one unit (a row of a table, a median with its spread),
  modelled on pyperf's ``format_values``: one scaling and one precision for all, chosen by the largest
  magnitude in the set, so the figures line up and compare by eye (``15,000`` and ``12`` rather than
  ``15,000`` and ``12.3``).
* :func:`human_bytes` is a size in binary units (``48 KiB``, ``1.5 MiB``); a byte count that is not a
  whole number of KiB (NetPIPE's perturbed sizes) stays in bytes below 10 MiB (``16387 B``).
* :func:`plain_number` is a bound or a value as a person writes it on the command line (``1073741824``,
  ``0.5``), and :func:`clock_duration` a duration as a clock shows it (``1m05s``).

Why a module of its own rather than :mod:`clusterbench.text`: that one makes stored text safe for a
terminal; this one decides how many digits a figure gets. Its users (the report, the analysis
helpers) need only this, and it must stay importable from ``analysis/`` (no I/O).
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

#: the units whose values :func:`format_value` shows with :func:`human_bytes`
BYTE_UNITS = frozenset({"B", "bytes", "byte"})
#: from this magnitude on, a figure is shown in scientific notation (its digits are not meaningful)
HUGE = 1e15
_BINARY = (("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10))


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _special(v: Any) -> str | None:
    """The text of what is not a finite number: ``-`` for None, ``nan``/``inf``/``-inf``, ``str(v)``
    for anything else that is not a number; None for a finite number."""
    if v is None:
        return "-"
    if not _is_number(v):
        return str(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return None


def _decimals(magnitude: float) -> int:
    """How many decimals a figure of this magnitude gets (see the module's rule)."""
    if magnitude >= 1000:
        return 0
    if magnitude >= 10:
        return 1
    if magnitude >= 1:
        return 2
    return 2 - math.floor(math.log10(magnitude))  # three significant digits


def _with_unit(text: str, unit: str | None) -> str:
    if not unit:
        return text
    return f"{text}{unit}" if unit == "%" else f"{text} {unit}"


def format_value(value: Any, unit: str | None = None) -> str:
    """One figure as text (the module's rule), followed by ``unit`` when given."""
    special = _special(value)
    if special is not None:
        return _with_unit(special, unit) if special != "-" and _is_number(value) else special
    if unit in BYTE_UNITS:
        return human_bytes(value)
    a = abs(value)
    if a == 0:
        text = "0"
    elif a >= HUGE:
        text = f"{value:.3e}"
    elif a >= 1:
        text = f"{value:,.{_decimals(a)}f}"
    else:
        text = f"{value:.3g}"
    return _with_unit(text, unit)


def format_values(unit: str | None, values: Iterable[Any]) -> list[str]:
    """Figures of one ``unit`` as text, one scaling and one precision for all (those of the largest
    magnitude among them; pyperf's ``format_values``): ``format_values(None, [15000.4, 12.34])`` is
    ``["15,000", "12"]``. What is not a finite number is shown as :func:`format_value` shows it."""
    values = list(values)
    finite = [abs(v) for v in values if _special(v) is None]
    if not finite:
        return [format_value(v, unit) for v in values]
    ref = max(finite)
    if unit in BYTE_UNITS:
        name, size = next(((n, s) for n, s in _BINARY if ref >= s), ("B", 1))
        whole = all(_special(v) is not None or float(v / size).is_integer() for v in values)
        return [_special(v) or f"{v / size:.{0 if whole else 1}f} {name}" for v in values]
    out = []
    for v in values:
        special = _special(v)
        if special is not None:
            out.append(format_value(v, unit))
        elif ref >= HUGE:
            out.append(_with_unit(f"{v:.3e}", unit))
        elif v == 0:
            out.append(_with_unit("0", unit))
        else:
            out.append(_with_unit(f"{v:,.{_decimals(ref) if ref else 0}f}", unit))
    return out


def human_bytes(n: Any) -> str:
    """A size in bytes in binary units: ``48 KiB``, ``1.5 MiB``, ``2 TiB``; whole byte counts that are
    not a whole number of KiB stay in bytes below 10 MiB (``16387 B``, NetPIPE's perturbed sizes);
    ``None`` is ``-``."""
    special = _special(n)
    if special is not None:
        return special
    if isinstance(n, int) and n % 1024 and abs(n) < 10 * 2 ** 20:
        return f"{n} B"
    for name, size in _BINARY:
        if abs(n) >= size:
            v = n / size
            return f"{v:.0f} {name}" if v == int(v) else f"{v:.1f} {name}"
    return f"{n:.0f} B"


def plain_number(v: float | None) -> str:
    """A bound or value as a person writes it on the command line: ``1073741824``, not ``1.07374e+09``;
    ``0.5``, not ``0.500000``; ``None`` is ``''``."""
    if v is None:
        return ""
    if float(v).is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:g}"


def clock_duration(s: float) -> str:
    """A duration in whole seconds as a clock shows it: ``1m05s``, ``0m00s`` for anything below half
    a second (a negative one too)."""
    s = max(0, int(round(s)))
    return f"{s // 60}m{s % 60:02d}s"


__all__ = ["BYTE_UNITS", "HUGE", "clock_duration", "format_value", "format_values", "human_bytes", "plain_number"]
