"""MPI collectives: the model efficiency (network model's time / measured time) as a heat map over
(collective, message size), one per source and rank count."""
from __future__ import annotations

from typing import Any

from clusterbench.analysis import collmodel
from clusterbench.benchmarks.declare import Result
from clusterbench.report.plots.base import PlotKind, PlotSpec, Source, register
from clusterbench.report.plots.common import best_by, number, prefix, size_of
from clusterbench.units import human_bytes


def efficiency(r: Result) -> float | None:
    """The figure's model efficiency: its ``collective_model`` limit's fraction as judged when it was
    measured, else computed now from its params (the same model)."""
    for lim in r.limits or []:
        if isinstance(lim, dict) and lim.get("name") == "collective_model":
            return number(lim.get("fraction"))
    got = collmodel.model_time(r.params)
    return got[1] / r.value if got and r.value > 0 else None


def _blocking_latency(results: list[Result]) -> list[Result]:
    return [r for r in results if r.metric == "latency" and r.benchmark in collmodel.OPS
            and r.params.get("op") == r.benchmark and not r.params.get("nonblocking")
            and number(r.value) is not None and size_of(r) is not None]


@register
class CollEfficiency(PlotKind):
    kind = "coll_efficiency"
    order = 86
    size = (9.0, 4.5)

    def plan(self, sources: list[Source], comparison: Any = None) -> list[PlotSpec]:
        srcs = [s for s in sources if _blocking_latency(s.results)]
        specs = []
        for src in srcs:
            rs = _blocking_latency(src.results)
            for p in sorted({r.params.get("processes") for r in rs if isinstance(r.params.get("processes"), int)}):
                best = best_by([r for r in rs if r.params.get("processes") == p],
                               lambda r: (r.benchmark, size_of(r)))
                cells = {k: efficiency(r) for k, r in best.items()}
                cells = {k: v for k, v in cells.items() if v is not None}
                if not cells:
                    continue
                ops = [op for op in collmodel.OPS if any(k[0] == op for k in cells)]
                sizes = sorted({k[1] for k in cells})
                grid = [[cells.get((op, s)) for s in sizes] for op in ops]
                label = prefix(src, len(srcs) > 1, f"{p} ranks")
                slug = f"coll-efficiency-{p}" + (f"-{len(specs)}" if len(srcs) > 1 else "")
                specs.append(PlotSpec(
                    "coll_efficiency", slug, f"MPI collectives: model efficiency, {label}",
                    "Each blocking collective's network-model efficiency: the least time of the standard algorithms on a "
                    "Hockney fit of the run's own ping-pong sweep, divided by the measured OSU latency (1 = as fast as the "
                    f"best algorithm on that network; below {collmodel.FAR_OFF:.0%} a finding). Blank: not measured.",
                    {"ops": ops, "sizes": sizes, "efficiency": grid, "far_off": collmodel.FAR_OFF}))
        return specs

    def draw(self, data: dict, fig: Any) -> None:
        import numpy as np

        ax = fig.subplots()
        grid = np.array([[np.nan if v is None else v for v in row] for row in data["efficiency"]], dtype=float)
        im = ax.imshow(np.ma.masked_invalid(grid), cmap="RdYlGn", vmin=0.0, vmax=1.0, aspect="auto")
        fig.colorbar(im, ax=ax, label="model efficiency (model time / measured)")
        ax.set_xticks(range(len(data["sizes"])), [human_bytes(s) for s in data["sizes"]], rotation=60, fontsize=7)
        ax.set_yticks(range(len(data["ops"])), data["ops"], fontsize=8)
        ax.set_xlabel("message size (OSU's size of each op)")
        ax.set_ylabel("collective")
        for i, row in enumerate(data["efficiency"]):
            for j, v in enumerate(row):
                if v is not None:
                    ax.text(j, i, f"{v:.0%}", ha="center", va="center", fontsize=6,
                            fontweight="bold" if v < data["far_off"] else "normal")
