"""HPL Rmax against the block size NB (two NB values or more)."""
from __future__ import annotations

from typing import Any

from clusterbench.benchmarks.declare import Result
from clusterbench.report.plots.base import PlotKind, PlotSpec, Source, register
from clusterbench.report.plots.common import best_by, hlines, number, of, rpeak_lines


def _hpl_series_key(r: Result) -> tuple:
    p = r.params
    return (p.get("blas") or "", p.get("topology") or "", p.get("grid") or "", p.get("n"))


@register
class HplNb(PlotKind):
    kind = "hpl_nb"
    order = 90

    def plan(self, sources: list[Source], comparison: Any = None) -> list[PlotSpec]:
        rs = [r for s in sources for r in of(s.results, "hpl", "rmax") if number(r.params.get("nb"))]
        if len({r.params["nb"] for r in rs}) < 2:
            return []
        best = best_by(rs, lambda r: (_hpl_series_key(r), r.params["nb"]))
        series = []
        for key in sorted({k[0] for k in best}, key=str):
            pts = sorted((k[1], r.value) for k, r in best.items() if k[0] == key)
            blas, topo, grid, n = key
            series.append({"label": f"{blas} {topo} {grid}, N={n}", "x": [p[0] for p in pts], "y": [p[1] for p in pts]})
        srcs = [s for s in sources if of(s.results, "hpl", "rmax")]
        return [PlotSpec("hpl_nb", "hpl-nb", "HPL Rmax against the block size NB",
                         "Rmax (HPL's 2/3 N^3 + 3/2 N^2 flops over the wall time) of each configuration tried, the best "
                         "run at each NB; one line per BLAS, topology (pure: a rank per core; hybrid: a rank per node, "
                         "threaded BLAS), P x Q grid and N.", {"series": series, "limits": rpeak_lines(srcs)})]

    def draw(self, data: dict, fig: Any) -> None:
        ax = fig.subplots()
        for s in data["series"]:
            ax.plot(s["x"], s["y"], marker="o", label=s["label"])
        hlines(ax, data["limits"])
        ax.set_xlabel("block size NB")
        ax.set_ylabel("Rmax (Gflop/s)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
