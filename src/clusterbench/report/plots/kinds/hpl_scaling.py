"""HPL Rmax against node count, with ideal scaling and Rpeak: runs of hpl-scaling."""
from __future__ import annotations

from typing import Any

from clusterbench.report.plots.base import PlotKind, PlotSpec, Source, register
from clusterbench.report.plots.common import best_by, number, of


@register
class HplScaling(PlotKind):
    kind = "hpl_scaling"
    order = 110

    def plan(self, sources: list[Source], comparison: Any = None) -> list[PlotSpec]:
        out: list[PlotSpec] = []
        for src in sources:
            rs = [r for r in of(src.results, "hpl-scaling", "rmax") if isinstance(r.params.get("nodes"), int)]
            best = best_by(rs, lambda r: r.params["nodes"])
            if not best:
                continue
            nodes = sorted(best)
            grids = [{"nodes": k, "grid": g, "value": v} for k in nodes
                     for g, v in (best[k].params.get("rmax_by_grid") or {}).items() if number(v)]
            rpeak = [{"nodes": k, "value": best[k].params["rpeak_nodes_gflops"]} for k in nodes
                     if number(best[k].params.get("rpeak_nodes_gflops"))]
            out.append(PlotSpec("hpl_scaling", f"hpl-scaling-{len(out) + 1}", f"HPL Rmax against node count ({src.label})",
                                "The best grid's Rmax at each node count (dots: every grid tried), the ideal line (the "
                                "Rmax of the fewest nodes times the node ratio) and Rpeak of that many nodes.",
                                {"nodes": nodes, "rmax": [best[k].value for k in nodes], "grids": grids,
                                 "rpeak": rpeak}))
        return out

    def draw(self, data: dict, fig: Any) -> None:
        ax = fig.subplots()
        nodes, rmax = data["nodes"], data["rmax"]
        ax.plot(nodes, rmax, marker="o", linewidth=2, label="Rmax, best grid")
        if data["grids"]:
            ax.plot([g["nodes"] for g in data["grids"]], [g["value"] for g in data["grids"]], "o", color="#aaaaaa",
                    markersize=4, label="every grid tried")
        ax.plot(nodes, [rmax[0] * k / nodes[0] for k in nodes], linestyle="--", color="#2ca02c",
                label="ideal (linear from the fewest nodes)")
        if data["rpeak"]:
            ax.plot([r["nodes"] for r in data["rpeak"]], [r["value"] for r in data["rpeak"]], linestyle="--",
                    color="#d62728", label="Rpeak of that many nodes")
        ax.set_xticks(nodes)
        ax.set_xlabel("nodes")
        ax.set_ylabel("Rmax (Gflop/s)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
