"""Memory latency against working-set size, with the probe's cache sizes: runs with memlat latency."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clusterbench.report.plots.base import PlotKind, PlotSpec, Source, register
from clusterbench.report.plots.common import best_by, log2_bytes_axis, number, of, prefix
from clusterbench.units import human_bytes


def _caches(probe: Mapping) -> list[dict]:
    seen: dict[tuple, dict] = {}
    for c in (probe.get("topology") or {}).get("caches") or []:
        if not isinstance(c, Mapping) or c.get("type") == "instruction" or not number(c.get("size_bytes")):
            continue
        key = (c.get("level"), c.get("name"))
        seen.setdefault(key, {"name": str(c.get("name") or f"L{c.get('level')}"), "size": float(c["size_bytes"])})
    return sorted(seen.values(), key=lambda c: c["size"])


@register
class Memlat(PlotKind):
    kind = "memlat"
    order = 30

    def plan(self, sources: list[Source], comparison: Any = None) -> list[PlotSpec]:
        srcs = [s for s in sources if of(s.results, "memlat", "latency")]
        series: list[dict] = []
        caches: list[dict] = []
        for src in srcs:
            rs = [r for r in of(src.results, "memlat", "latency") if number(r.params.get("size_bytes"))]
            best = best_by(rs, lambda r: (r.params.get("pattern") or "random", r.params.get("hugepages") or "off",
                                           r.params["size_bytes"]))
            for pattern, huge in sorted({k[:2] for k in best}):
                pts = sorted((k[2], r.value) for k, r in best.items() if k[:2] == (pattern, huge))
                label = f"{pattern} pointer chase" + (f", huge pages {huge}" if huge != "off" else "")
                series.append({"label": prefix(src, len(srcs) > 1, label), "x": [p[0] for p in pts],
                               "y": [p[1] for p in pts], "unit": rs[0].unit or "ns"})
            if not caches:
                caches = _caches(src.probe)
        if not series:
            return []
        return [PlotSpec("memlat", "memlat", "Memory latency against working-set size",
                         "Load-to-use latency of a dependent pointer chase against the size of the working set; the "
                         "vertical lines are the cache sizes the probe reports, each plateau is one level of the "
                         "hierarchy.", {"series": series, "caches": caches})]

    def draw(self, data: dict, fig: Any) -> None:
        ax = fig.subplots()
        unit = "ns"
        for s in data["series"]:
            ax.plot(s["x"], s["y"], marker=".", label=s["label"])
            unit = s.get("unit") or unit
        styles = ("--", "-.", ":", (0, (5, 1)))
        for i, c in enumerate(data["caches"]):
            ax.axvline(c["size"], color="#555555", linestyle=styles[i % len(styles)], linewidth=1.2,
                       label=f"{c['name']} {human_bytes(c['size'])} (probe)")
        log2_bytes_axis(ax)
        ax.set_yscale("log")
        ax.set_xlabel("working-set size (bytes, log scale)")
        ax.set_ylabel(f"latency per load ({unit}, log scale)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
