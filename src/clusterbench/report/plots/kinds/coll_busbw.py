"""MPI collectives: nccl-tests' bus bandwidth against message size, every collective on one plot."""
from __future__ import annotations

from typing import Any

from clusterbench.analysis import collmodel
from clusterbench.report.plots.base import PlotKind, PlotSpec, Source, register
from clusterbench.report.plots.common import best_by, coll_results, coll_series_label, prefix, size_of, size_panel


@register
class CollBusbw(PlotKind):
    kind = "coll_busbw"
    order = 84

    def plan(self, sources: list[Source], comparison: Any = None) -> list[PlotSpec]:
        srcs = [s for s in sources if coll_results(s.results, "busbw")]
        series: list[dict] = []
        for src in srcs:
            rs = coll_results(src.results, "busbw")
            best = best_by(rs, lambda r: (r.benchmark, coll_series_label(r), size_of(r)))
            for op in collmodel.OPS:
                for name in dict.fromkeys(k[1] for k in best if k[0] == op):
                    pts = sorted((k[2], r.value) for k, r in best.items() if k[:2] == (op, name))
                    series.append({"label": prefix(src, len(srcs) > 1, f"{op}, {name}"), "x": [p[0] for p in pts],
                                   "y": [p[1] for p in pts], "unit": rs[0].unit})
        if not series:
            return []
        # the fastest link the model saw (1/beta), once: what a busbw of one link per rank approaches
        ceiling = []
        for src in srcs:
            for r in coll_results(src.results, "latency"):
                m = collmodel.model_of_params(r.params)
                bw = (m.large or m.small).bandwidth_mbs if m else None
                if bw:
                    ceiling.append(bw)
        lims = [{"label": "ping-pong bandwidth of the model (1/beta)", "value": max(ceiling)}] if ceiling else []
        return [PlotSpec("coll_busbw", "coll-busbw", "MPI collectives: bus bandwidth against message size",
                         "nccl-tests' bus bandwidth (algbw = bytes / time with nccl-tests' byte count; busbw = algbw x "
                         "2(P-1)/P for allreduce, (P-1)/P for allgather, reduce-scatter and alltoall, 1 for bcast, reduce, "
                         "gather and scatter; 1 MB/s = 1e6 B/s) against OSU's message size, the best figure at each size; "
                         "the line: the point-to-point bandwidth of the network model (1/beta of the ping-pong fit), which "
                         "busbw approaches when every rank's link is busy.",
                         {"series": series, "limits": lims})]

    def draw(self, data: dict, fig: Any) -> None:
        ax = fig.subplots()
        unit = next((s["unit"] for s in data["series"] if s.get("unit")), "MB/s")
        size_panel(ax, data["series"], f"bus bandwidth ({unit}, log scale)", "busbw", tuple(data["limits"]))
