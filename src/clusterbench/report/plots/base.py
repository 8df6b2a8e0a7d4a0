"""What a plot kind is, and the registry the planner walks.

A plot kind is one file in :mod:`clusterbench.report.plots.kinds` with a :class:`PlotKind` subclass
decorated with :func:`register`. Its one job, in two halves of one interface: :meth:`PlotKind.plan`
says whether it applies to the report's sources (an empty list: it does not) and extracts what it
draws into :class:`PlotSpec` objects (plain lists and numbers, no matplotlib, so tests check the
selection on hand-made results); :meth:`PlotKind.draw` renders one spec's data on a matplotlib
figure. Plots appear in the page in the order of :attr:`PlotKind.order`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clusterbench.benchmarks.declare import Result
from clusterbench.records import Run


@dataclass
class Source:
    """What one column of the report shows: one run, or every trial of one ``tune hpl``."""

    label: str
    runs: list[Run]
    results: list[Result]

    @property
    def probe(self) -> dict:
        return (self.runs[0].probe if self.runs else None) or {}

    @property
    def host(self) -> str | None:
        return self.runs[0].host if self.runs else None


@dataclass
class PlotSpec:
    kind: str
    slug: str
    title: str
    caption: str
    data: dict[str, Any] = field(default_factory=dict)


class PlotKind:
    """One kind of plot. Subclasses set :attr:`kind` (the name its specs carry), :attr:`order` (its
    place in the page; the built-in kinds use 10, 20, ... 120) and optionally :attr:`size` (inches)."""

    kind: str = ""
    order: int = 1000
    size: tuple[float, float] = (8.0, 4.5)

    def plan(self, sources: list[Source], comparison: Any = None) -> list[PlotSpec]:
        """The plots of this kind the data of ``sources`` (and ``comparison``, a comparison document,
        or None) allows, each only where its data exists; ``[]`` when it does not apply."""
        raise NotImplementedError

    def draw(self, data: dict, fig: Any) -> None:
        """Draw a spec's ``data`` on the matplotlib ``fig`` (axes, labels with units, legend; not the
        title, which the renderer sets)."""
        raise NotImplementedError

    def figure_size(self, spec: PlotSpec) -> tuple[float, float]:
        return self.size


#: the registered plot kinds by name
REGISTRY: dict[str, PlotKind] = {}


def register(cls: type[PlotKind]) -> type[PlotKind]:
    """Class decorator: register one instance of a :class:`PlotKind` subclass under its ``kind``
    (a later registration of the same name replaces the earlier one)."""
    if not cls.kind:
        raise ValueError(f"{cls.__name__} has no kind")
    REGISTRY[cls.kind] = cls()
    return cls


def registered() -> list[PlotKind]:
    """The registered kinds in page order."""
    return sorted(REGISTRY.values(), key=lambda k: k.order)


__all__ = ["PlotKind", "PlotSpec", "REGISTRY", "Source", "register", "registered"]
