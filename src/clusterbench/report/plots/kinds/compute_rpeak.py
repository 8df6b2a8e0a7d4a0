"""FMA peak and square DGEMM against Rpeak from the probe."""
from __future__ import annotations

from typing import Any

from clusterbench.report.plots.base import PlotKind, PlotSpec, Source, register
from clusterbench.report.plots.common import best_by, core_count, hlines, is_square, node_rpeak, of, plural, prefix


@register
class ComputeRpeak(PlotKind):
    kind = "compute_rpeak"
    order = 50

    def plan(self, sources: list[Source], comparison: Any = None) -> list[PlotSpec]:
        srcs = [s for s in sources if of(s.results, "peak", "gflops")
                or [r for r in of(s.results, "dgemm", "gflops") if is_square(r)]]
        bars, lines = [], []
        for src in srcs:
            many = len(srcs) > 1
            for r in best_by(of(src.results, "peak", "gflops"), lambda r: r.params.get("threads")).values():
                t = r.params.get("threads")
                bars.append({"label": prefix(src, many, f"FMA peak, {plural(t, 'core')}"),
                             "value": r.value, "kind": "peak"})
            dg = best_by([r for r in of(src.results, "dgemm", "gflops") if is_square(r)],
                          lambda r: (r.params.get("mode") or "", r.params.get("blas") or "",
                                     r.params.get("threads") or r.params.get("processes")))
            for (mode, blas, t), r in sorted(dg.items(), key=lambda kv: str(kv[0])):
                bars.append({"label": prefix(src, many, f"DGEMM {mode} {blas}, {plural(t, 'core')}"),
                             "value": r.value, "kind": "dgemm"})
            node, core = node_rpeak(src.probe)
            cores = core_count(src.probe)
            if node:
                lines.append({"label": f"Rpeak of {src.host or 'the node'}{f' ({cores} cores)' if cores else ''}",
                              "value": node})
            if core and cores and cores > 1:
                lines.append({"label": f"Rpeak of 1 core of {src.host or 'the node'}", "value": core})
        lines = list({(lim["label"], lim["value"]): lim for lim in lines}.values())
        if not bars:
            return []
        return [PlotSpec("compute_rpeak", "compute-rpeak", "FMA peak and DGEMM against Rpeak",
                         "Double-precision Gflop/s of the FMA peak kernel and of DGEMM (single: one core; star: every "
                         "core its own; threaded: one threaded call), against Rpeak (cores x nominal clock x "
                         "FLOPs/cycle, from the probe).", {"bars": bars, "limits": lines})]

    def draw(self, data: dict, fig: Any) -> None:
        ax = fig.subplots()
        bars = data["bars"]
        colors = ["#1f77b4" if b["kind"] == "peak" else "#2ca02c" for b in bars]
        ax.bar(range(len(bars)), [b["value"] for b in bars], color=colors)
        for i, b in enumerate(bars):
            ax.text(i, b["value"], f"{b['value']:.1f}", ha="center", va="bottom", fontsize=8)
        hlines(ax, data["limits"])
        top = max([b["value"] for b in bars] + [lim["value"] for lim in data["limits"]])
        ax.set_ylim(0, top * 1.25)
        ax.set_xticks(range(len(bars)), [b["label"] for b in bars], rotation=25, ha="right", fontsize=8)
        ax.set_ylabel("double precision (Gflop/s)")
        ax.grid(alpha=0.3, axis="y")
        if data["limits"]:
            ax.legend(fontsize=8)
