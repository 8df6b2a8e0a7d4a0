"""The plots of ``clusterbench report``: which ones the data allows, and drawing each as a PNG.

One file per plot kind in :mod:`clusterbench.report.plots.kinds` (a :class:`PlotKind` registered
with :func:`register`; see ``docs/adding-a-plot.md``): adding a kind is adding a file there. Two
layers. :func:`plan` is pure (no matplotlib): it walks the registry in page order and asks each kind
which plots the report's sources (a run, or the trials of one ``tune hpl``, with their Result objects
and probe) allow, each only where its data exists, as :class:`PlotSpec` objects (plain lists and
numbers, so tests can check the selection on hand-made results). :func:`render` draws one spec with
its kind's ``draw``, matplotlib's Agg canvas, no pyplot state, into a PNG file. matplotlib is
imported there only, so the rest of clusterbench never pays for it.

Conventions: every axis names its quantity and unit; limits (Rpeak, the best bandwidth measured,
the caches of the probe, the ideal scaling) are drawn as horizontal or vertical lines and named in
the legend; message and working-set sizes are on log axes.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from clusterbench.report.plots import kinds as _kinds_pkg
from clusterbench.report.plots.base import REGISTRY, PlotKind, PlotSpec, Source, register, registered
from clusterbench.report.plots.common import STREAM_INTENSITY, STREAM_KERNELS
from clusterbench.units import human_bytes

for _mod in sorted(m.name for m in pkgutil.iter_modules(_kinds_pkg.__path__)):  # every file there is a kind
    importlib.import_module(f"{_kinds_pkg.__name__}.{_mod}")

from clusterbench.report.plots.kinds.comparison import comparison_rows  # noqa: E402 - after the kinds load

#: the order the built-in plots appear in the page
KINDS = tuple(k.kind for k in registered())


def plan(sources: list[Source], comparison: Any = None) -> list[PlotSpec]:
    """Every plot the data of ``sources`` (and ``comparison``) allows, in the page order of the kinds."""
    return [spec for kind in registered() for spec in kind.plan(sources, comparison)]


def figure_size(spec: PlotSpec) -> tuple[float, float]:
    kind = REGISTRY.get(spec.kind)
    return kind.figure_size(spec) if kind else PlotKind.size


def render(spec: PlotSpec, path: str) -> None:
    """Draw ``spec`` into the PNG file ``path`` (matplotlib's Agg canvas, no pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    kind = REGISTRY.get(spec.kind)
    if kind is None:
        raise KeyError(f"no plot kind {spec.kind!r} is registered")
    fig = Figure(figsize=figure_size(spec), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    kind.draw(spec.data, fig)
    fig.suptitle(spec.title, fontsize=11)
    fig.savefig(path, format="png")


__all__ = ["KINDS", "REGISTRY", "STREAM_INTENSITY", "STREAM_KERNELS", "PlotKind", "PlotSpec", "Source", "comparison_rows",
           "human_bytes", "plan", "register", "registered", "render"]
