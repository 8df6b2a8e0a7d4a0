"""Diagnostics as data: each warning says what was seen, why it matters and what to do."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

#: A figure whose samples vary more than this (stdev / mean) is flagged as unstable.
CV_LIMIT = 0.05
#: A timed section shorter than this many timer ticks is too coarse (STREAM wants 20).
MIN_TICKS = 20


@dataclass(frozen=True)
class Warning_:
    code: str
    message: str
    remedy: str

    def as_dict(self) -> dict:
        return asdict(self)


def unstable(cv: float) -> Warning_ | None:
    if cv <= CV_LIMIT:
        return None
    return Warning_(
        "unstable",
        f"samples vary by {cv:.1%} (CV > {CV_LIMIT:.0%}): the figure is not reproducible",
        "close other programs, set the governor to performance, pin threads, or use --full for more samples",
    )


def coarse_timer(times_s: Sequence[float], resolution_s: float | None) -> Warning_ | None:
    if not times_s or not resolution_s or resolution_s <= 0:
        return None
    shortest = min(times_s)
    if shortest >= MIN_TICKS * resolution_s:
        return None
    return Warning_(
        "coarse-timer",
        f"the shortest sample lasted {shortest * 1e6:.2f} us, under {MIN_TICKS} ticks of a "
        f"{resolution_s * 1e9:.0f} ns timer",
        "use a larger size or more iterations per sample",
    )


def clock_changed(before: dict, after: dict) -> list[Warning_]:
    """Compare two :func:`clusterbench.probe.clock.snapshot` readings."""
    out: list[Warning_] = []
    # The frequency cap moving (power capping, thermal or firmware limits) always matters. The
    # current clock only means something under a fixed-clock governor: under schedutil or
    # ondemand it is low at idle before a run and high after it, every time.
    cb, ca = before.get("cap_mhz") or {}, after.get("cap_mhz") or {}
    fixed = after.get("governor") in ("performance", "userspace")
    fb, fa = before.get("freq_mhz") or {}, after.get("freq_mhz") or {}
    changes = [(cpu, cb.get(cpu), mhz, "frequency cap") for cpu, mhz in ca.items()]
    if fixed:
        changes += [(cpu, fb.get(cpu), mhz, "clock") for cpu, mhz in fa.items()]
    for cpu, old, new, what in changes:
        if old and new and abs(new - old) / old > 0.05:
            out.append(Warning_(
                "clock-changed",
                f"cpu{cpu} {what} moved from {old:.0f} to {new:.0f} MHz during the run",
                "check power capping and cooling; set the governor to performance "
                "(cpupower frequency-set -g performance) and disable turbo for stable figures",
            ))
            break
    tb, ta = before.get("throttle") or {}, after.get("throttle") or {}
    for cpu, count in ta.items():
        if count > tb.get(cpu, count):
            out.append(Warning_(
                "throttled",
                f"cpu{cpu} was thermally throttled during the run ({count - tb[cpu]} events)",
                "improve cooling or lower the load; figures are below what the hardware sustains when cool",
            ))
            break
    hot = [t for t in (after.get("temps_c") or {}).values() if t is not None and t >= 85]
    if hot:
        out.append(Warning_(
            "hot",
            f"a thermal zone reached {max(hot):.0f} C",
            "improve cooling (a fan or heatsink on single-board computers) and rerun",
        ))
    return out


def as_dicts(ws: Sequence[Warning_ | None]) -> list[dict]:
    return [w.as_dict() for w in ws if w is not None]
