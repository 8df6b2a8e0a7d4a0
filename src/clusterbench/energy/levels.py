"""Which Green500 / EEHPC measurement level a run's energy measurement satisfies: checked from what
was measured (the meters' kinds, their sampling rates, which nodes and phases they covered), not
taken from a declaration. Pure: reads a run record's ``energy`` and its figures, no I/O.

The EEHPC WG's *Energy Efficient HPC Power Measurement Methodology* (the Green500's run rules since
2015) grades a measurement on four aspects, and grants a level only when all four meet it:

1. granularity and time span: at least one power reading per second, over the whole core phase (the
   timed part of the benchmark); Level 3 wants integrated total-energy meters;
2. machine fraction instrumented: Level 1 a part of the machine (extrapolated), Level 2 a larger part,
   Level 3 the whole machine;
3. subsystems: Level 1 the compute nodes; Level 2 every participating subsystem (interconnect
   switches, storage, ...) measured or estimated; Level 3 all of them measured;
4. where the meter sits: upstream of the power conversion (at the node's input or the wall), or the
   conversion loss accounted for; Level 3 revenue-grade meters.

What clusterbench can check: Level 1 when every node of the run is metered (so aspect 2 holds for the
nodes that ran) by a meter of the whole node (IPMI: the BMC's reading at the power supplies; an
external meter through ``cmd:``/``csv:``, taken to sit at the node's input, as the meter's owner
says), every reading at least 1 Hz, nothing declared instead of measured, and every core phase of the
run covered with no gap the energy arithmetic refused. RAPL (CPU package and DRAM only) and a Pi's
PMIC rails (after conversion) measure part of a node, so they satisfy none. Level 2 and 3 need the
interconnect and the rest of the system metered, which clusterbench never does: never met, and said so.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clusterbench.benchmarks.declare import Result

#: what each meter kind measures, and whether that is a whole node upstream of its power conversion
KIND_SCOPE: dict[str, tuple[str, bool]] = {
    "ipmi": ("the whole node at its power supplies (the BMC's reading)", True),
    "cmd": ("an external meter (taken to sit at the node's input)", True),
    "csv": ("an external meter's log (taken to sit at the node's input)", True),
    "rapl": ("the CPU package and DRAM only, not the node", False),
    "pmic": ("the board's PMIC rails, after conversion, not the whole node", False),
    "watts": ("a declared wattage, not a measurement", False),
}
#: EEHPC's least sampling rate for power readings (Levels 1 and 2)
MIN_RATE_HZ = 1.0
LEVEL_NAMES = {1: "Level 1 (adequate)", 2: "Level 2 (moderate)", 3: "Level 3 (best)"}


def _core_phases(results: Sequence[Result]) -> list[dict]:
    return [r.params["energy"] for r in results if isinstance(r.params.get("energy"), dict)]


def check_levels(energy: dict | None, results: Sequence[Result] = ()) -> dict[str, Any]:
    """``{"level": 0..3 (the highest satisfied; 0: none), "levels": [{"level", "name", "met", "why"}],
    "checked": {what was read}}``; ``why`` lists every requirement not met (empty when met)."""
    if not energy:
        why = ["the run had no power meter (--power / --watts)"]
        return {"level": 0, "levels": [{"level": n, "name": LEVEL_NAMES[n], "met": False, "why": why}
                                       for n in (1, 2, 3)], "checked": {"sources": {}}}
    sources: dict[str, dict] = energy.get("sources") or {}
    nodes = [str(n) for n in energy.get("nodes") or []]
    why1: list[str] = []
    kinds = {}
    for label, s in sorted(sources.items()):
        kind = str(s.get("kind"))
        scope, whole = KIND_SCOPE.get(kind, (f"an unknown meter kind {kind!r}", False))
        kinds[label] = {"kind": kind, "measures": scope, "rate_hz": s.get("rate_hz"), "declared": bool(s.get("declared"))}
        if s.get("declared"):
            why1.append(f"{label}: declared, not measured")
        elif not whole:
            why1.append(f"{label}: {kind} measures {scope}")
        rate = s.get("rate_hz")
        if kind in ("cmd", "csv", "ipmi", "pmic") and not s.get("declared"):
            if not isinstance(rate, (int, float)) or isinstance(rate, bool):
                why1.append(f"{label}: its sampling rate is not known (at least {MIN_RATE_HZ:g} Hz needed)")
            elif rate < MIN_RATE_HZ:
                why1.append(f"{label}: {rate:g} readings a second, below {MIN_RATE_HZ:g}")
    covered = {str(c) for label, s in sources.items() for c in (s.get("covers") or [label])}
    unmetered = [n for n in nodes if n not in covered]
    if not sources:
        why1.append("no power source recorded")
    if unmetered:
        why1.append(f"not metered: {', '.join(unmetered)}")
    phases = _core_phases(results)
    missing = [p.get("missing") for p in phases if p.get("missing")]
    if not phases:
        why1.append("no figure with a timed core phase carries its energy")
    elif missing:
        why1.append(f"{len(missing)} of {len(phases)} core phases not covered ({missing[0]})")
    for b in energy.get("benchmarks") or []:
        if b.get("interrupted"):
            why1.append(f"{b.get('benchmark')} was interrupted")
    why2 = ["the interconnect, storage and other subsystems are not metered (clusterbench meters nodes)"]
    why3 = ["Level 3 needs integrated total-energy, revenue-grade meters on the whole system"]
    levels = [{"level": 1, "name": LEVEL_NAMES[1], "met": not why1, "why": why1},
              {"level": 2, "name": LEVEL_NAMES[2], "met": False, "why": why1 + why2},
              {"level": 3, "name": LEVEL_NAMES[3], "met": False, "why": why1 + why2 + why3}]
    checked = {"sources": kinds, "nodes": nodes, "nodes_metered": len(nodes) - len(unmetered),
               "core_phases": len(phases), "core_phases_covered": len(phases) - len(missing)}
    return {"level": 1 if not why1 else 0, "levels": levels, "checked": checked}


def power_trace(energy: dict | None) -> list[dict[str, Any]]:
    """The power the run drew over each benchmark it metered (the store keeps the energy over each
    benchmark, not the meter's raw readings): start and end (unix seconds), average power of the
    whole and of every node, energy; ``missing`` where it could not be had."""
    out = []
    for b in (energy or {}).get("benchmarks") or []:
        t = b.get("phase_unix") or [None, None]
        per = {str(k): v.get("avg_watts") if isinstance(v, dict) else None
               for k, v in sorted((b.get("per_node") or {}).items())}
        entry = {"benchmark": b.get("benchmark"), "t0": t[0], "t1": t[1], "avg_watts": b.get("avg_watts"),
                 "joules": b.get("joules"), "per_node_avg_watts": per}
        if b.get("missing"):
            entry["missing"] = b["missing"]
        out.append(entry)
    return out
