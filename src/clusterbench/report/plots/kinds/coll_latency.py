"""MPI collectives: latency against message size, one plot per collective, with the network model's
best algorithm drawn beside each measured series."""
from __future__ import annotations

from typing import Any

from clusterbench.analysis import collmodel
from clusterbench.report.plots.base import PlotKind, PlotSpec, Source, register
from clusterbench.report.plots.common import best_by, coll_results, coll_series_label, prefix, size_of, size_panel


def model_curve(op: str, pts: list[tuple[float, dict]]) -> list[tuple[float, tuple[str, float]]]:
    """The model's (best algorithm, us) at the measured sizes and every power of two between them, on
    the model of the series' first figure that has one (a series is one run: one p2p sweep)."""
    first = next(((prm, got[2]) for _, prm in pts if (got := collmodel.model_time(prm))), None)
    if first is None:
        return []
    prm, model = first
    lo, hi = min(s for s, _ in pts), max(s for s, _ in pts)
    sizes = sorted({s for s, _ in pts} | {float(1 << k) for k in range(64) if lo <= (1 << k) <= hi})
    return [(s, collmodel.lower_bound(op, int(prm["processes"]), s, model)) for s in sizes]


@register
class CollLatency(PlotKind):
    kind = "coll_latency"
    order = 82

    def plan(self, sources: list[Source], comparison: Any = None) -> list[PlotSpec]:
        specs = []
        for op in collmodel.OPS:
            series: list[dict] = []
            srcs = [s for s in sources if any(r.benchmark == op for r in coll_results(s.results, "latency"))]
            for src in srcs:
                rs = [r for r in coll_results(src.results, "latency") if r.benchmark == op]
                best = best_by(rs, lambda r: (coll_series_label(r), size_of(r)))
                for name in dict.fromkeys(k[0] for k in best):
                    pts = sorted((k[1], r) for k, r in best.items() if k[0] == name)
                    label = prefix(src, len(srcs) > 1, name)
                    series.append({"label": label, "x": [s for s, _ in pts], "y": [r.value for _, r in pts],
                                   "unit": pts[0][1].unit})
                    model = model_curve(op, [(s, r.params) for s, r in pts])
                    if model:
                        series.append({"label": f"{label}: network model (best algorithm)", "x": [s for s, _ in model],
                                       "y": [m[1] for _, m in model], "dashed": True,
                                       "algorithms": [m[0] for _, m in model]})
            if series:
                specs.append(PlotSpec(
                    "coll_latency", f"coll-latency-{op}", f"MPI {op}: latency against message size",
                    f"OSU's latency of MPI {op} (each rank's average over the timed iterations, averaged over ranks) "
                    "against OSU's message size for the op; dashed: the network model's time, the least of the standard "
                    "algorithms on a Hockney fit of the same run's ping-pong sweep (reductions' computation ignored: a "
                    "lower bound). Non-blocking figures include the overlapped compute and have no model curve.",
                    {"op": op, "series": series}))
        return specs

    def draw(self, data: dict, fig: Any) -> None:
        ax = fig.subplots()
        unit = next((s["unit"] for s in data["series"] if s.get("unit")), "us")
        size_panel(ax, data["series"], f"latency ({unit}, log scale)", data["op"])
