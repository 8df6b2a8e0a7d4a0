"""MPI ping-pong latency and bandwidth (and windowed streaming) against message size."""
from __future__ import annotations

from typing import Any

from clusterbench.benchmarks.declare import Result
from clusterbench.report.plots.base import PlotKind, PlotSpec, Source, register
from clusterbench.report.plots.common import best_by, limit_lines, of, prefix, size_of, size_panel


@register
class Pingpong(PlotKind):
    kind = "pingpong"
    order = 70
    size = (11.0, 4.5)

    def plan(self, sources: list[Source], comparison: Any = None) -> list[PlotSpec]:
        srcs = [s for s in sources if of(s.results, "pingpong", "latency", "bandwidth")]
        lat: list[dict] = []
        bw: list[dict] = []
        limits: list[dict] = []
        for src in srcs:
            many = len(srcs) > 1

            def path(r: Result) -> str:
                p = r.params
                return f"{p.get('transport_used') or p.get('transport') or '?'}, {p.get('pair') or 'pair'}"
            for metric, series in (("latency", lat), ("bandwidth", bw)):
                rs = [r for r in of(src.results, "pingpong", metric) if (size_of(r) or 0) > 0]
                best = best_by(rs, lambda r: (path(r), size_of(r)))
                for name in dict.fromkeys(k[0] for k in best):
                    pts = sorted((k[1], r.value) for k, r in best.items() if k[0] == name)
                    series.append({"label": prefix(src, many, f"ping-pong {name}"), "x": [p[0] for p in pts],
                                   "y": [p[1] for p in pts], "unit": rs[0].unit})
            rs = [r for r in of(src.results, "bw", "bw", "bibw") if (size_of(r) or 0) > 0]
            best = best_by(rs, lambda r: (r.metric, path(r), size_of(r)))
            for metric, name in dict.fromkeys(k[:2] for k in best):
                pts = sorted((k[2], r.value) for k, r in best.items() if k[:2] == (metric, name))
                label = ("windowed one way" if metric == "bw" else "windowed both ways") + f" ({name})"
                bw.append({"label": prefix(src, many, label), "x": [p[0] for p in pts], "y": [p[1] for p in pts],
                           "unit": rs[0].unit, "dashed": True})
            limits += limit_lines(of(src.results, "pingpong", "bandwidth") + rs)
        if not lat and not bw:
            return []
        return [PlotSpec("pingpong", "pingpong", "MPI ping-pong latency and bandwidth against message size",
                         "Half round-trip latency and bandwidth (1 MB/s = 1e6 B/s) of a blocking ping-pong per transport "
                         "and rank placement, the best of the repeated loops at each size (0 B is left out of the log "
                         "axis); dashed: osu_bw-style windowed streaming (window of 64 messages).",
                         {"latency": lat, "bandwidth": bw, "limits": limits})]

    def draw(self, data: dict, fig: Any) -> None:
        a, b = fig.subplots(1, 2)
        lu = next((s["unit"] for s in data["latency"] if s.get("unit")), "us")
        bu = next((s["unit"] for s in data["bandwidth"] if s.get("unit")), "MB/s")
        size_panel(a, data["latency"], f"half round-trip latency ({lu}, log scale)", "latency")
        size_panel(b, data["bandwidth"], f"bandwidth ({bu}, log scale)", "bandwidth", tuple(data["limits"]))
