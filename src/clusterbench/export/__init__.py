"""``results export``: stored runs in another format, one module per format, registered by name.

Each format module defines ``FORMAT`` (a :class:`Format`: its name, its ``--format`` help and its
``render``) and is listed in :data:`MODULES`; :func:`formats` is the registry (name -> Format), so
adding a format is one module and one line here, never a branch in the command. ``render`` takes the
runs to export, each with its figures, and returns the text; a format that reads several runs at once
(``several``: openmetrics, bundle) takes a selector (a tag, ``last~1,last``), the others exactly one run.
Where the text goes: :mod:`.writing` (stdout, or a file written whole or not at all).

The formats: ``json`` (:mod:`.jsondoc`, the ``--json`` document), ``csv`` (:mod:`.csvrows`),
``hpccoutf`` (:mod:`.hpccoutf`), ``openmetrics`` (:mod:`.openmetrics`, for Prometheus) and ``bundle``
(:mod:`.bundle`: the versioned, checksummed JSON document of :mod:`clusterbench.bundle`).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from clusterbench.benchmarks.declare import Result
from clusterbench.errors import UsageError
from clusterbench.export.writing import write
from clusterbench.records import Run

#: a run with its figures, as the formats take them
Exported = tuple[Run, list[Result]]
#: the format modules of this package, in ``--format``'s order
MODULES = ("jsondoc", "csvrows", "hpccoutf", "openmetrics", "bundle")


@dataclass(frozen=True)
class Format:
    """One export format: ``render(runs, **options) -> text``; ``several``: it takes several runs."""

    name: str
    help: str
    render: Callable[..., str]
    several: bool = False


_REGISTRY: dict[str, Format] = {}


def formats() -> dict[str, Format]:
    """The registry: format name -> :class:`Format` (the modules of :data:`MODULES`, loaded once)."""
    if not _REGISTRY:
        for mod in MODULES:
            fmt = importlib.import_module(f"clusterbench.export.{mod}").FORMAT
            _REGISTRY[fmt.name] = fmt
    return _REGISTRY


def get_format(name: str) -> Format:
    fmt = formats().get(name)
    if fmt is None:
        raise UsageError(f"--format {name!r} is not one of {', '.join(formats())}", "pick one of those")
    return fmt


def render(fmt: str, runs: Sequence[Exported], **options: Any) -> str:
    """The text of ``runs`` in format ``fmt`` (one run unless the format takes several)."""
    f = get_format(fmt)
    if not runs:
        raise UsageError("no run to export", "give a run id, a tag or 'last'")
    if len(runs) > 1 and not f.several:
        raise UsageError(f"--format {fmt} exports one run, the selector names {len(runs)}",
                         "give one run id, or use --format openmetrics or bundle for several")
    return f.render(list(runs), **options)


def export(runs: Sequence[Exported], fmt: str, dest: str | None, force: bool = False,
           **options: Any) -> dict[str, Any]:
    """Render and write; returns what was written where (for callers that report it)."""
    text = render(fmt, runs, **options)
    write(text, dest, force)
    return {"format": fmt, "output": dest or "-", "bytes": len(text.encode())}


__all__ = ["Exported", "Format", "MODULES", "export", "formats", "get_format", "render", "write"]
