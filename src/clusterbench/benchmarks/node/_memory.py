"""Array sizing shared by the bandwidth benchmarks (stream, bandwidth): the run rule
``max(4 x total last-level cache, 1M elements)``, bounded by free memory.

Not a benchmark (the leading underscore keeps the registry from loading it as one).
"""
from __future__ import annotations

import math

from clusterbench.analysis.warnings import Warning_
from clusterbench.errors import UsageError
from clusterbench.benchmarks.base import RunContext, available_memory

MIN_ELEMENTS = 1_000_000
PAGE_ELEMS = 512           # doubles per 4 KiB page: threads' chunks start on page boundaries
MEM_FRACTION = 0.8         # of MemAvailable ...
MEM_RESERVE = 256 << 20    # ... minus this, is what the arrays may take


def llc_total(probe: dict) -> int | None:
    """Sum of the last-level cache instances (what arrays shared by all cores must exceed)."""
    try:
        from clusterbench.probe.topology import llc_total_bytes
    except ImportError:  # pragma: no cover - the probe ships with the package
        return None
    return llc_total_bytes(probe)


def fitting_elements(avail: int | None, arrays: int) -> int | None:
    """Largest per-array element count whose ``arrays`` arrays fit in memory with the margin."""
    if not avail:
        return None
    usable = avail * MEM_FRACTION - MEM_RESERVE
    return max(0, int(usable // (arrays * 8)) // PAGE_ELEMS * PAGE_ELEMS)


def size_arrays(ctx: RunContext, given: int | None, arrays: int, name: str = "array-elements",
                per: str = "array") -> tuple[int, list[str]]:
    """Elements per array: explicit (checked against memory) or the 4 x LLC run rule, lowered
    to what fits (the returned notes say so)."""
    avail = available_memory(ctx.probe)
    fit = fitting_elements(avail, arrays)
    notes: list[str] = []
    if given is not None:
        if given < 1:
            raise UsageError(f"--{name} {given} is not allowed", f"use --{name} 1 or more")
        if fit is not None and given > fit:
            raise UsageError(
                f"--{name} {given} needs {arrays} x {given * 8 / 1e9:.2f} GB but only "
                f"{avail / 1e9:.2f} GB of memory is available",
                f"use --{name} {fit} or fewer (the largest size that fits)")
        return given, notes
    llc = llc_total(ctx.probe)
    want = MIN_ELEMENTS
    if llc:
        want = max(want, math.ceil(4 * llc / 8))
    else:
        notes.append("last-level cache size unknown: arrays sized at 1M elements, which may fit in cache")
    want = -(-want // PAGE_ELEMS) * PAGE_ELEMS
    if fit is not None and want > fit:
        if fit < PAGE_ELEMS:
            raise UsageError(f"not enough free memory for {arrays} arrays "
                             f"({(avail or 0) / 1e6:.0f} MB available)", "free some memory and rerun")
        notes.append(f"arrays lowered from {want} to {fit} elements per {per} to fit in memory; "
                     f"below 4 x the last-level cache, cache effects may inflate the figures")
        want = fit
    return want, notes


def small_array_warning(ctx: RunContext, elements: int, per: str) -> Warning_ | None:
    """Arrays under 4 x the last-level cache (or 1M elements) partly run from cache."""
    llc = llc_total(ctx.probe)
    need = max(MIN_ELEMENTS, math.ceil(4 * llc / 8)) if llc else MIN_ELEMENTS
    if elements >= need - PAGE_ELEMS:
        return None
    return Warning_("small-arrays",
                    f"{elements} elements per {per} ({elements * 8 / 1e6:.0f} MB) is under the run rule "
                    f"of {need} (max(4 x last-level cache, 1M)): caches may inflate the figure",
                    "use the default size or free memory so that it fits")
