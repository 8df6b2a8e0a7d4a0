"""Floating-point latency and reciprocal throughput per operation: runs with fpu cycles."""
from __future__ import annotations

from typing import Any

from clusterbench.benchmarks.declare import Result
from clusterbench.report.plots.base import PlotKind, PlotSpec, Source, register
from clusterbench.report.plots.common import best_by, of, prefix


@register
class Fpu(PlotKind):
    kind = "fpu"
    order = 40

    def plan(self, sources: list[Source], comparison: Any = None) -> list[PlotSpec]:
        srcs = [s for s in sources if of(s.results, "fpu", "latency_cycles", "throughput_cycles")]
        bars = []
        for src in srcs:
            rs = of(src.results, "fpu", "latency_cycles", "throughput_cycles")

            def what(r: Result) -> str:
                p = r.params
                return " ".join(str(p[k]) for k in ("op", "precision", "vector") if p.get(k) is not None)
            best = best_by(rs, lambda r: (what(r), r.metric))
            for name in dict.fromkeys(k[0] for k in best):
                lat, thr = best.get((name, "latency_cycles")), best.get((name, "throughput_cycles"))
                bars.append({"label": prefix(src, len(srcs) > 1, name),
                             "latency": lat.value if lat else None, "throughput": thr.value if thr else None})
        if not bars:
            return []
        return [PlotSpec("fpu", "fpu", "Floating-point latency and throughput",
                         "Cycles per operation: latency of one dependent chain, and reciprocal throughput with "
                         "enough independent chains to fill the pipelines (lower is better).", {"bars": bars})]

    def draw(self, data: dict, fig: Any) -> None:
        ax = fig.subplots()
        bars = data["bars"]
        xs = list(range(len(bars)))
        w = 0.4
        ax.bar([x - w / 2 for x in xs], [b["latency"] or 0 for b in bars], w, label="latency (dependent chain)")
        ax.bar([x + w / 2 for x in xs], [b["throughput"] or 0 for b in bars], w, label="reciprocal throughput")
        ax.set_xticks(xs, [b["label"] for b in bars], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("cycles per operation")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8)
