"""The "Energy and cost" part of a report, and of the text printed after ``run``: pure, over stored runs and figures (Run, Result).

:func:`energy_cost` gathers, for one source (runs and their results):

* every per-watt figure (unit ``Gflop/s/W``) beside the figure it divides (HPL ``rmax``, HPCG ``rating``, the
  same timed phase): Gflops/W, joules, average watts, the phase, and the power source of every node
  (measured or declared, its kind and sampling rate);
* figures whose energy is missing, with the reason (never a number);
* every benchmark's whole energy (``runs.energy.benchmarks``);
* with a cost model (``[cost]`` in the config, :mod:`clusterbench.analysis.cost`): the purchase price of
  the nodes, Carver (2014)'s performance per price of the ranked figures (a rate / price; a time 1 / (time x
  price)), Gflop/s per currency unit over the purchase and over the lifetime cost at the timed phase's
  average power, and the energy cost of each benchmark and of the run (J / 3.6e6 x price per kWh).

Nothing is computed that the data does not hold: no energy, no per-watt or energy-cost row; no
``node_price``, no per-price row; no ``power_price_kwh``, no energy cost.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clusterbench.analysis import cost as C
from clusterbench.benchmarks.declare import Result
from clusterbench.energy.text import json_key
from clusterbench.records import Run

#: the figures priced per currency unit (the ones the lists rank) and the time of the same phase
PRICED = {("hpl", "rmax"), ("hpl", "time_s"), ("hpcg", "rating")}


def source_text(sources: Mapping[str, Any] | None) -> str:
    out = []
    for node, s in (sources or {}).items():
        if not isinstance(s, Mapping):
            continue
        if s.get("declared"):
            how = "declared, not measured"
        else:
            rate = s.get("rate_hz")
            how = f"measured, {float(rate):g} Hz" if rate else "measured, read after the run"
            if s.get("measures"):  # a source that sees part of the node says which (pmic: the board's rails)
                how += f"; {s['measures']}"
        out.append(f"{node}: {s.get('spec') or s.get('kind')} ({how})")
    return "; ".join(out)


def _nodes(runs: Sequence[Run]) -> int:
    for run in runs:
        e = run.energy or {}
        if isinstance(e, Mapping) and e.get("nodes"):
            return len(e["nodes"])
        hosts = (run.cluster or {}).get("hosts") if isinstance(run.cluster, Mapping) else None
        if hosts:
            return len(hosts)
    return 1


def energy_cost(runs: Sequence[Run], results: Sequence[Result],
                model: C.CostModel | None = None) -> dict[str, Any]:
    """The section's data for one source (see the module's text). ``has_energy`` is False when no run
    and no figure holds any energy."""
    per_watt, missing = [], []
    bases = {}
    for r in results:
        e = (r.params or {}).get("energy")
        if isinstance(e, Mapping) and "missing" not in e and r.unit != "Gflop/s/W":
            bases.setdefault((r.benchmark, json_key(r)), []).append(r)
    seen_missing = set()
    for r in results:
        e = (r.params or {}).get("energy")
        if not isinstance(e, Mapping):
            continue
        if "missing" in e:
            if r.benchmark not in seen_missing:
                seen_missing.add(r.benchmark)
                missing.append({"benchmark": r.benchmark, "metric": r.metric, "reason": e["missing"]})
            continue
        if r.unit != "Gflop/s/W":
            continue
        base = next((b for b in bases.get((r.benchmark, json_key(r)), [])
                     if str(b.unit).lower().endswith("flop/s")), None)
        per_watt.append({
            "benchmark": r.benchmark, "metric": base.metric if base else None,
            "value": base.value if base else None, "unit": base.unit if base else None,
            "gflops_per_watt": r.value, "joules": e.get("joules"), "avg_watts": e.get("avg_watts"),
            "phase_s": e.get("phase_s"), "declared": bool(e.get("declared")), "basis": e.get("basis"),
            "sources": source_text(e.get("sources")), "nodes": len(e.get("per_node") or {}) or None,
            "params": {k: (r.params or {}).get(k) for k in ("n", "nb", "grid") if (r.params or {}).get(k)},
        })
    benchmarks, run_sources, levels = [], [], []
    for run in runs:
        e = run.energy
        if not isinstance(e, Mapping) or not e:
            continue
        run_sources.append(source_text(e.get("sources")))
        if e.get("level"):
            levels.append(str(e["level"]))
        for b in e.get("benchmarks") or []:
            benchmarks.append({"run": str(run.id)[:8], "benchmark": b.get("benchmark"),
                               "phase_s": b.get("phase_s"), "joules": b.get("joules"), "avg_watts": b.get("avg_watts"),
                               "missing": b.get("missing"), "declared": bool(b.get("declared"))})
    doc: dict[str, Any] = {"has_energy": bool(per_watt or missing or benchmarks), "per_watt": per_watt,
                           "missing": missing, "benchmarks": benchmarks,
                           "sources": list(dict.fromkeys(s for s in run_sources if s)),
                           "level": levels[0] if levels else None, "cost": None}
    if model is not None and (model.node_price is not None or model.power_price_kwh is not None):
        doc["cost"] = _cost(model, runs, results, per_watt, benchmarks)
    return doc


def _cost(model: C.CostModel, runs, results, per_watt, benchmarks) -> dict[str, Any]:
    run_nodes = _nodes(runs)
    nodes = model.nodes or run_nodes
    purchase = model.purchase(nodes)
    cur = model.currency or "currency unit"
    out: dict[str, Any] = {"currency": cur, "nodes": nodes, "run_nodes": run_nodes, "purchase": purchase,
                           "power_price_kwh": model.power_price_kwh, "lifetime_years": model.lifetime_years,
                           "per_price": [], "energy_cost": [], "run_energy_cost": None, "lifetime": []}
    if purchase is not None:
        best: dict[tuple, Result] = {}
        for r in results:
            k = (r.benchmark, r.metric)
            if k in PRICED and isinstance(r.value, (int, float)) and r.value > 0:
                hib = bool(r.higher_is_better)
                if k not in best or ((r.value > best[k].value) == hib):
                    best[k] = r
        for (bench, metric), r in best.items():
            hib = bool(r.higher_is_better)
            v = C.per_price(float(r.value), hib, purchase)
            unit = f"{r.unit}/{cur}" if hib else f"1/(s*{cur})"
            out["per_price"].append({"benchmark": bench, "metric": metric, "value": r.value, "unit": r.unit,
                                     "per_price": v, "per_price_unit": unit,
                                     "definition": "value / price" if hib else "1 / (time x price)"})
        if model.power_price_kwh is not None:
            for pw in per_watt:  # only when the price covers exactly the nodes that were metered
                if pw.get("avg_watts") and pw.get("value") and nodes == (pw.get("nodes") or run_nodes):
                    life = C.lifetime_cost(model, float(pw["avg_watts"]), nodes)
                    out["lifetime"].append({"benchmark": pw["benchmark"], "metric": pw["metric"], "value": pw["value"],
                                            "unit": pw["unit"], "avg_watts": pw["avg_watts"], "lifetime_cost": life,
                                            "per_lifetime_cost": float(pw["value"]) / life if life else None})
    if model.power_price_kwh is not None:
        total, complete = 0.0, True
        for b in benchmarks:
            if b.get("missing") or b.get("joules") is None:
                complete = False
                continue
            c = C.energy_cost(float(b["joules"]), model.power_price_kwh)
            total += c
            out["energy_cost"].append({"run": b["run"], "benchmark": b["benchmark"], "scope": "whole benchmark",
                                       "joules": b["joules"], "kwh": float(b["joules"]) / C.J_PER_KWH, "cost": c})
        for pw in per_watt:
            if pw.get("joules") is not None:
                out["energy_cost"].append({"run": "", "benchmark": pw["benchmark"], "scope": f"{pw['metric']} timed phase",
                                           "joules": pw["joules"], "kwh": float(pw["joules"]) / C.J_PER_KWH,
                                           "cost": C.energy_cost(float(pw["joules"]), model.power_price_kwh)})
        if benchmarks:
            out["run_energy_cost"] = {"cost": total, "complete": complete}
    return out


def _n(v: Any, digits: int = 4) -> str:
    if not isinstance(v, (int, float)):
        return "-"
    return f"{v:.{digits}g}"


def cost_lines(doc: Mapping[str, Any]) -> list[str]:
    """The text ``run`` prints about cost (empty without a cost model)."""
    c = doc.get("cost")
    if not c:
        return []
    cur = c["currency"]
    lines = []
    if c["purchase"] is not None:
        lines.append(f"cost: {c['nodes']} node(s) bought for {_n(c['purchase'], 6)} {cur} ([cost] in the config)")
        for p in c["per_price"]:
            lines.append(f"cost: {p['benchmark']} {p['metric']} {_n(p['value'])} {p['unit']} per {cur}: "
                         f"{_n(p['per_price'])} {p['per_price_unit']} ({p['definition']}, Carver 2014)")
        for lf in c["lifetime"]:
            lines.append(f"cost: lifetime ({c['lifetime_years']:g} years at {_n(lf['avg_watts'])} W) "
                         f"{_n(lf['lifetime_cost'], 6)} {cur}: {_n(lf['per_lifetime_cost'])} {lf['unit']}/{cur}")
    if c.get("run_energy_cost"):
        rc = c["run_energy_cost"]
        lines.append(f"cost: energy of the run at {c['power_price_kwh']:g} {cur}/kWh: {_n(rc['cost'])} {cur}"
                     + ("" if rc["complete"] else " (a benchmark's energy is missing: not counted)"))
    return lines


__all__ = ["energy_cost", "cost_lines", "source_text"]
