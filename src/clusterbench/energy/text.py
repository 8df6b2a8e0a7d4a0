"""What ``run`` prints about energy (pure, over the run's energy record and its results)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from clusterbench.benchmarks.declare import Result
from clusterbench.energy.figures import LEVEL


def _source_text(label: str, s: Mapping[str, object]) -> str:
    rate = s.get("rate_hz")
    how = "declared, not measured" if s.get("declared") else (f"{float(rate):g} Hz" if rate else "read after the run")  # type: ignore[arg-type]
    covers = s.get("covers")
    what = f"; {s['measures']}" if s.get("measures") else ""
    return f"{label} {s.get('spec')} ({how}{what}" + (f"; all of {', '.join(covers)}" if covers else "") + ")"  # type: ignore[arg-type]


def energy_lines(run_energy: Mapping[str, object], results: Sequence[Result]) -> list[str]:
    """What ``run`` prints about energy: the sources, each figure's energy over its timed phase (with
    Gflops/W) or why it is missing, every benchmark's whole energy, and the method's level."""
    srcs = run_energy.get("sources") or {}
    lines = ["energy: sources " + "; ".join(_source_text(k, v) for k, v in srcs.items())  # type: ignore[union-attr]
             + f" [{run_energy.get('basis')}]"]
    per_watt = {(r.benchmark, json_key(r)): r for r in results if str(r.unit) == "Gflop/s/W"}
    shown: set[tuple[object, str]] = set()
    for r in results:
        e = (r.params or {}).get("energy")
        if not isinstance(e, Mapping) or str(r.unit) == "Gflop/s/W":
            continue
        key = (r.benchmark, json_key(r))
        if "missing" in e:
            if (r.benchmark, "missing") not in shown:
                shown.add((r.benchmark, "missing"))
                lines.append(f"energy: {r.benchmark} timed phase: missing ({e['missing']}); the figures are kept")
            continue
        pw = per_watt.get(key)
        if pw is None or key in shown:
            continue
        shown.add(key)
        res = f" (phase ends to {e['phase_resolution_s']:g} s)" if e.get("phase_resolution_s") else ""
        declared = " [declared power, not measured]" if e.get("declared") else ""
        lines.append(f"energy: {r.benchmark} {r.metric} {float(r.value):.4g} {r.unit} over its timed "
                     f"phase of {float(e['phase_s']):.3f} s{res}: {float(e['joules']):.4g} J, "
                     f"{float(e['avg_watts']):.4g} W average over {len(e.get('per_node') or {})} meter(s) "
                     f"-> {float(pw.value):.4g} Gflop/s/W{declared}")
    for b in run_energy.get("benchmarks") or []:  # type: ignore[union-attr]
        head = f"energy: {b['benchmark']} whole benchmark ({float(b['phase_s']):.2f} s"
        head += f", within {b['within']})" if b.get("within") else ")"
        if "missing" in b:
            lines.append(f"{head}: missing ({b['missing']})")
        else:
            lines.append(f"{head}: {float(b['joules']):.4g} J, {float(b['avg_watts']):.4g} W average")
    lines.append("energy: method " + LEVEL.split(". Level 2/3")[0]
                 + ("; here the power is declared, not measured" if "declared" in str(run_energy.get("basis")) else ""))
    return lines


def json_key(r: Result) -> str:
    """What tells one figure's parameter point from another's (its phase), to pair it with its per-watt figure."""
    e = (r.params or {}).get("energy") or {}
    return repr(e.get("phase_unix"))
