"""A run's Raspberry Pi readings judged (pure): which node was under-voltage, capped or throttled while
the run measured, the warning its figures then carry, and the note kept with the run.

A node's readings: ``get_throttled`` before and after the run, and the samples taken while it ran
(``get_throttled``, ``measure_temp``, ``measure_clock arm``). What happened during the run is every
"now" bit seen in a sample or after it, and every since-boot bit set after the run that was clear
before it. A since-boot bit already set before the run cannot say whether it happened again: the
note says so (a reboot clears them).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clusterbench.analysis.warnings import Warning_
from clusterbench.telemetry import vcgencmd as V

CODE = "pi-throttled"
#: what to do about each cause
FIXES = {
    "power": "use a power supply that holds 5.1 V under load (the official 5.1 V 3 A supply for a Pi 4, 5 V 5 A "
             "for a Pi 5), one per board (Duffy 2020 §4.1.2), and short thick cables; not a USB hub shared by "
             "several boards",
    "thermal": "cool the board: a heatsink with a fan (Duffy 2020's Pi 4 cluster stayed under 65 °C with them, "
               "§4.1.4), airflow between boards",
}
#: at or above this temperature a throttle is taken as thermal (the Pi 4 throttles at 80-85 °C)
HOT_C = 80.0


def _mask(reading: Mapping[str, Any] | None) -> int | None:
    t = (reading or {}).get("throttled")
    if isinstance(t, int):
        return t
    if isinstance(t, Mapping) and t.get("raw"):
        return int(str(t["raw"]), 16)
    return None


def node_summary(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None,
                 samples: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """One node's readings -> ``{"before", "after", "during", "already", "temp_c", "arm_mhz", "samples"}``
    (masks in hex; ``during``: the bits' keys seen during the run; ``already``: since-boot bits set
    before it started)."""
    b, a = _mask(before), _mask(after)
    during: list[str] = []
    masks = [m for m in [*(_mask(s) for s in samples), a] if m is not None]
    for m in masks:
        during += V.throttled_flags(m)["now"]
    already: list[str] = V.throttled_flags(b)["since_boot"] if b is not None else []
    if a is not None:
        during += [k for k in V.throttled_flags(a)["since_boot"] if k not in already]
    temps = [float(s["temp_c"]) for s in [*samples, after or {}] if isinstance(s.get("temp_c"), (int, float))]
    clocks = [float(s["arm_hz"]) / 1e6 for s in [*samples, after or {}] if isinstance(s.get("arm_hz"), (int, float))]
    out: dict[str, Any] = {
        "before": None if b is None else f"0x{b:x}", "after": None if a is None else f"0x{a:x}",
        "during": [bit.key for bit in V.THROTTLED_BITS if bit.key in during], "already": already,
        "samples": len(samples)}
    if temps:
        out["temp_c"] = {"min": min(temps), "max": max(temps)}
    if clocks:
        out["arm_mhz"] = {"min": min(clocks), "max": max(clocks)}
    return out


def causes(summary: Mapping[str, Any]) -> list[str]:
    """The causes (keys of :data:`FIXES`) of what happened during the run on a node."""
    during = set(summary.get("during") or [])
    out = []
    if "under_voltage" in during:
        out.append("power")
    hot = (summary.get("temp_c") or {}).get("max", 0) >= HOT_C
    if "soft_temp_limit" in during or (hot and during & {"throttled", "arm_capped"}):
        out.append("thermal")
    if during and not out:  # capped or throttled, neither under-voltage nor heat seen: either
        out += ["power", "thermal"]
    return out


def warning(node: str, summary: Mapping[str, Any]) -> Warning_ | None:
    """The warning a run's figures carry when ``node`` was under-voltage, capped or throttled during it."""
    during = list(summary.get("during") or [])
    if not during:
        return None
    temp = summary.get("temp_c")
    clock = summary.get("arm_mhz")
    seen = "".join([f"; {temp['max']:.1f} °C at most" if temp else "",
                    f"; arm clock {clock['min']:.0f}-{clock['max']:.0f} MHz" if clock else ""])
    return Warning_(CODE, f"{node} was {V.throttled_text(during)} during the run (vcgencmd get_throttled "
                          f"{summary.get('before')} before, {summary.get('after')} after{seen}): its figures are "
                          "below what the board does when supplied and cooled",
                    "; ".join(FIXES[c] for c in causes(summary)) + f"; then rerun (`clusterbench doctor` on {node} "
                    "names it until the board reboots)")


def note(node: str, summary: Mapping[str, Any]) -> str:
    """The line kept with the run for a node with vcgencmd."""
    parts = [f"pi: {node} get_throttled {summary.get('before')} before, {summary.get('after')} after"]
    if summary.get("during"):
        parts.append(f"during the run: {V.throttled_text(summary['during'])}")
    else:
        parts.append("no under-voltage, capping or throttling seen during the run")
    if summary.get("already"):
        parts.append(f"already since boot before it: {V.throttled_text(summary['already'])} (cannot tell whether "
                     "again; a reboot clears it)")
    if summary.get("samples"):
        t, c = summary.get("temp_c"), summary.get("arm_mhz")
        parts.append(f"{summary['samples']} sample(s) while it ran"
                     + (f": {t['min']:.1f}-{t['max']:.1f} °C" if t else "")
                     + (f", arm {c['min']:.0f}-{c['max']:.0f} MHz" if c else ""))
    return "; ".join(parts)


def judge(readings: Mapping[str, Mapping[str, Any]]) -> tuple[list[Warning_], list[str], dict[str, Any]]:
    """``{node: {"before", "after", "samples"}}`` -> (warnings, notes, ``{node: summary}``), nodes in order."""
    warnings: list[Warning_] = []
    notes: list[str] = []
    summaries: dict[str, Any] = {}
    for node, r in readings.items():
        s = node_summary(r.get("before"), r.get("after"), r.get("samples") or ())
        summaries[node] = s
        notes.append(note(node, s))
        w = warning(node, s)
        if w is not None:
            warnings.append(w)
    return warnings, notes, summaries
