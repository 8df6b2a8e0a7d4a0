"""STREAM bandwidth against threads: every run with STREAM kernels at integer thread counts."""
from __future__ import annotations

from typing import Any

from clusterbench.report.plots.base import PlotKind, PlotSpec, Source, register
from clusterbench.report.plots.common import STREAM_KERNELS, best_by, hlines, limit_lines, of, prefix


@register
class StreamThreads(PlotKind):
    kind = "stream_threads"
    order = 10

    def plan(self, sources: list[Source], comparison: Any = None) -> list[PlotSpec]:
        many = sum(1 for s in sources if of(s.results, "stream", *STREAM_KERNELS)) > 1
        series, limits, unit = [], [], "MB/s"
        for src in sources:
            rs = of(src.results, "stream", *STREAM_KERNELS)
            rs = [r for r in rs if isinstance(r.params.get("threads"), int)]
            if not rs:
                continue
            unit = rs[0].unit or unit
            best = best_by(rs, lambda r: (r.metric, r.params.get("variant") or "regular", r.params["threads"]))
            for metric in STREAM_KERNELS:
                for variant in sorted({k[1] for k in best if k[0] == metric}):
                    pts = sorted((k[2], r.value) for k, r in best.items() if k[0] == metric and k[1] == variant)
                    label = metric + ("" if variant == "regular" else f" ({variant} stores)")
                    series.append({"label": prefix(src, many, label), "x": [p[0] for p in pts],
                                   "y": [p[1] for p in pts], "kernel": metric, "variant": variant})
            limits += [{**lim, "label": prefix(src, many, lim["label"])} for lim in limit_lines(rs, ("best_bandwidth",))]
        if not series:
            return []
        return [PlotSpec("stream_threads", "stream-threads", "STREAM bandwidth against threads",
                         "STREAM Copy, Scale, Add and Triad, the best sample at each thread count, per store variant "
                         "(nt: non-temporal stores); the dashed line is the best memory bandwidth measured on this node.",
                         {"series": series, "limits": limits, "unit": unit})]

    def draw(self, data: dict, fig: Any) -> None:
        ax = fig.subplots()
        colors = {k: f"C{i}" for i, k in enumerate(STREAM_KERNELS)}
        for s in data["series"]:
            ax.plot(s["x"], s["y"], marker="o", label=s["label"], color=colors.get(s.get("kernel"), None),
                    linestyle="-" if s.get("variant") in (None, "regular") else "--")
        hlines(ax, data["limits"], colors=("#7f7f7f", "#d62728"))
        xs = sorted({x for s in data["series"] for x in s["x"]})
        ax.set_xticks(xs)
        ax.set_xlabel("threads")
        ax.set_ylabel(f"bandwidth ({data['unit']})")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
