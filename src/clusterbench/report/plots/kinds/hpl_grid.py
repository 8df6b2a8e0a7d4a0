"""HPL Rmax by process grid, topology and BLAS (two configurations or more)."""
from __future__ import annotations

from typing import Any

from clusterbench.report.plots.base import PlotKind, PlotSpec, Source, register
from clusterbench.report.plots.common import best_by, hlines, of, rpeak_lines


@register
class HplGrid(PlotKind):
    kind = "hpl_grid"
    order = 100

    def plan(self, sources: list[Source], comparison: Any = None) -> list[PlotSpec]:
        rs = [r for s in sources for r in of(s.results, "hpl", "rmax") if r.params.get("grid")]
        best = best_by(rs, lambda r: (r.params["grid"], r.params.get("topology") or "", r.params.get("blas")
                                       or ""))
        if len({k[0] for k in best}) < 2 and len(best) < 2:
            return []
        bars = [{"label": f"{g} {t} {b}", "grid": g, "value": r.value, "nb": r.params.get("nb"),
                 "n": r.params.get("n")} for (g, t, b), r in sorted(best.items(), key=lambda kv: -kv[1].value)]
        srcs = [s for s in sources if of(s.results, "hpl", "rmax")]
        return [PlotSpec("hpl_grid", "hpl-grid", "HPL Rmax by process grid",
                         "The best Rmax of each P x Q grid, topology and BLAS (at its best NB, printed on the bar).",
                         {"bars": bars, "limits": rpeak_lines(srcs)})]

    def draw(self, data: dict, fig: Any) -> None:
        ax = fig.subplots()
        bars = data["bars"]
        ax.bar(range(len(bars)), [b["value"] for b in bars], color="#1f77b4")
        for i, b in enumerate(bars):
            ax.text(i, b["value"], f"{b['value']:.1f}\nNB={b['nb']}", ha="center", va="bottom", fontsize=8)
        hlines(ax, data["limits"])
        ax.set_xticks(range(len(bars)), [b["label"] for b in bars], rotation=25, ha="right", fontsize=8)
        top = max([b["value"] for b in bars] + [lim["value"] for lim in data["limits"]])
        ax.set_ylim(0, top * 1.2)
        ax.set_xlabel("P x Q grid, topology, BLAS")
        ax.set_ylabel("Rmax (Gflop/s)")
        ax.grid(alpha=0.3, axis="y")
        if data["limits"]:
            ax.legend(fontsize=8)
