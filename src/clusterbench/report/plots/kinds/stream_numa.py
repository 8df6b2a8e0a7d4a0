"""STREAM Triad as a CPU node x memory node matrix: each run with triad_numa over two NUMA nodes or more."""
from __future__ import annotations

from typing import Any

from clusterbench.report.plots.base import PlotKind, PlotSpec, Source, register
from clusterbench.report.plots.common import best_by, of


@register
class StreamNuma(PlotKind):
    kind = "stream_numa"
    order = 20

    def plan(self, sources: list[Source], comparison: Any = None) -> list[PlotSpec]:
        out: list[PlotSpec] = []
        for src in sources:
            rs = [r for r in of(src.results, "stream", "triad_numa")
                  if isinstance(r.params.get("cpu_node"), int) and isinstance(r.params.get("mem_node"), int)]
            cpu_nodes = sorted({r.params["cpu_node"] for r in rs})
            mem_nodes = sorted({r.params["mem_node"] for r in rs})
            if len(cpu_nodes) < 2 and len(mem_nodes) < 2:
                continue
            best = best_by(rs, lambda r: (r.params["cpu_node"], r.params["mem_node"]))
            matrix = [[best[(c, m)].value if (c, m) in best else None for m in mem_nodes] for c in cpu_nodes]
            out.append(PlotSpec("stream_numa", f"stream-numa-{len(out) + 1}",
                                f"STREAM Triad, CPU node x memory node ({src.label})",
                                "Triad bandwidth with the threads on one NUMA node's cores (rows) and the arrays bound "
                                "to one memory node (columns), as numactl --cpunodebind/--membind.",
                                {"cpu_nodes": cpu_nodes, "mem_nodes": mem_nodes, "matrix": matrix,
                                 "unit": rs[0].unit or "MB/s"}))
        return out

    def draw(self, data: dict, fig: Any) -> None:
        import numpy as np

        ax = fig.subplots()
        m = np.array([[np.nan if v is None else v for v in row] for row in data["matrix"]], dtype=float)
        im = ax.imshow(m, cmap="viridis")
        ax.set_xticks(range(len(data["mem_nodes"])), [str(n) for n in data["mem_nodes"]])
        ax.set_yticks(range(len(data["cpu_nodes"])), [str(n) for n in data["cpu_nodes"]])
        ax.set_xlabel("memory node (arrays bound here)")
        ax.set_ylabel("CPU node (threads run here)")
        mid = (np.nanmin(m) + np.nanmax(m)) / 2
        for i, row in enumerate(data["matrix"]):
            for j, v in enumerate(row):
                if v is not None:  # dark text on the bright (high) end of viridis
                    ax.text(j, i, f"{v:,.0f}", ha="center", va="center", color="black" if v > mid else "white",
                            fontsize=9)
        fig.colorbar(im, ax=ax, label=f"Triad bandwidth ({data['unit']})")
