"""Concurrent pairs of ranks: per-pair and aggregate bandwidth against message size."""
from __future__ import annotations

from typing import Any

from clusterbench.report.plots.base import PlotKind, PlotSpec, Source, register
from clusterbench.report.plots.common import best_by, of, prefix, size_of, size_panel


@register
class Multipair(PlotKind):
    kind = "multipair"
    order = 80
    size = (11.0, 4.5)

    def plan(self, sources: list[Source], comparison: Any = None) -> list[PlotSpec]:
        srcs = [s for s in sources if of(s.results, "multipair", "pair_bandwidth", "aggregate_bandwidth")]
        per: list[dict] = []
        agg: list[dict] = []
        for src in srcs:
            for metric, series in (("pair_bandwidth", per), ("aggregate_bandwidth", agg)):
                rs = [r for r in of(src.results, "multipair", metric) if (size_of(r) or 0) > 0
                      and isinstance(r.params.get("pairs"), int)]
                best = best_by(rs, lambda r: (r.params["pairs"], size_of(r)))
                for k in sorted({k[0] for k in best}):
                    pts = sorted((key[1], r.value) for key, r in best.items() if key[0] == k)
                    series.append({"label": prefix(src, len(srcs) > 1, f"{k} pair{'s' if k != 1 else ''}"),
                                   "x": [p[0] for p in pts], "y": [p[1] for p in pts], "unit": rs[0].unit})
        if not per and not agg:
            return []
        return [PlotSpec("multipair", "multipair", "Concurrent pairs: per-pair and aggregate bandwidth",
                         "k pairs of ranks streaming at once between the two sides (rank i with i + k): the bandwidth of "
                         "one pair and the sum over pairs against message size.", {"per_pair": per, "aggregate": agg})]

    def draw(self, data: dict, fig: Any) -> None:
        a, b = fig.subplots(1, 2)
        unit = next((s["unit"] for s in data["per_pair"] + data["aggregate"] if s.get("unit")), "MB/s")
        size_panel(a, data["per_pair"], f"bandwidth per pair ({unit}, log scale)", "per pair")
        size_panel(b, data["aggregate"], f"aggregate bandwidth ({unit}, log scale)", "aggregate")
