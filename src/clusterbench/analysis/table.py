"""Stored figures as a table: rows and columns by parameter (Duffy (2020)'s Table 5.6 shape: Rmax by BLAS
and topology across grids). Pure: it receives the figures (``Store.figures``) and returns cells.

A row or column key is a figure parameter (``params``), or one of the pseudo-keys ``tag`` (the run's
tags, joined by '+'), ``host``, ``run`` (the run id's first 8 characters) and ``started`` (the run's date).
Several figures in one cell are combined by ``agg``: ``best`` (in the metric's direction), ``median``,
``mean`` or ``last`` (the newest); the cell records how many figures it holds.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from clusterbench.errors import UsageError
from clusterbench.records import StoredFigure

PSEUDO_KEYS = ("tag", "host", "run", "started")
AGGREGATES = ("best", "median", "mean", "last")


@dataclass(frozen=True)
class Table:
    benchmark: str
    metric: str
    unit: str
    higher_is_better: bool
    rows: list[str]
    cols: list[str]
    row_keys: list[tuple]
    col_keys: list[tuple]
    #: (row key, col key) -> {"value", "n"}
    cells: dict[tuple[tuple, tuple], dict] = field(default_factory=dict)
    agg: str = "best"

    def as_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark, "metric": self.metric, "unit": self.unit,
            "higher_is_better": self.higher_is_better, "agg": self.agg, "rows": self.rows, "cols": self.cols,
            "cells": [{"row": dict(zip(self.rows, rk)), "col": dict(zip(self.cols, ck)), **cell}
                      for (rk, ck), cell in self.cells.items()],
        }


def key_value(fig: StoredFigure, key: str) -> Any:
    """A figure's value for a row/column key (None when the figure does not have it)."""
    if key == "tag":
        return "+".join(fig.tags or []) or None
    if key == "host":
        return fig.host
    if key == "run":
        return (fig.run_id or "")[:8] or None
    if key == "started":
        return (fig.run_started or "")[:10] or None
    value = (fig.params or {}).get(key)
    if isinstance(value, list):
        return ",".join(map(str, value))
    return value


def pivot(figures: list[StoredFigure], rows: list[str], cols: list[str], agg: str = "best") -> Table:
    """The table of ``figures`` (one benchmark and metric, as ``Store.figures`` returns them)."""
    if agg not in AGGREGATES:
        raise UsageError(f"--agg {agg!r} is not known", f"use one of {', '.join(AGGREGATES)}")
    if not rows:
        raise UsageError("--rows names no parameter", "e.g. --rows blas,topology")
    if not figures:
        raise UsageError("no stored figures to tabulate", "run the benchmark first, or check --runs/--metric")
    bench, metric = figures[0].benchmark, figures[0].metric
    known = set(PSEUDO_KEYS) | {k for f in figures for k in (f.params or {})}
    for key in [*rows, *cols]:
        if key not in known:
            raise UsageError(f"'{key}' is not a parameter of {bench} {metric} figures",
                             f"use one of {', '.join(sorted(known))}")
    hib = bool(figures[0].higher_is_better)
    groups: dict[tuple[tuple, tuple], list[StoredFigure]] = {}
    for f in figures:
        rk = tuple(key_value(f, k) for k in rows)
        ck = tuple(key_value(f, k) for k in cols)
        groups.setdefault((rk, ck), []).append(f)
    cells = {}
    for key, figs in groups.items():
        values = [float(f.value) for f in figs]
        if agg == "best":
            value = max(values) if hib else min(values)
        elif agg == "median":
            value = statistics.median(values)
        elif agg == "mean":
            value = statistics.fmean(values)
        else:
            value = values[-1]  # figures come oldest first
        cells[key] = {"value": value, "n": len(values), "runs": sorted({(f.run_id or "")[:8] for f in figs})}

    def order(keys: set[tuple]) -> list[tuple]:
        return sorted(keys, key=lambda t: tuple((v is None, _sortable(v)) for v in t))

    return Table(benchmark=bench, metric=metric, unit=figures[0].unit, higher_is_better=hib, rows=list(rows),
                 cols=list(cols), row_keys=order({k[0] for k in cells}), col_keys=order({k[1] for k in cells}),
                 cells=cells, agg=agg)


def _sortable(v: Any) -> tuple:
    """Numbers in numeric order before text; grids like '2x4' by their numbers."""
    if isinstance(v, (int, float)):
        return (0, float(v), "")
    text = str(v)
    parts = text.replace("x", " ").split()
    if parts and all(p.isdigit() for p in parts):
        return (1, float(parts[0]), text)
    return (2, 0.0, text)


def format_table(t: Table) -> list[list[str]]:
    """Header and rows of text: the row keys, then one column per column key (value, and (n) when several)."""
    def head(ck: tuple) -> str:
        return ",".join(f"{c}={v}" for c, v in zip(t.cols, ck)) or t.metric
    header = [*t.rows, *[head(ck) for ck in t.col_keys]]
    out = [header]
    for rk in t.row_keys:
        line = ["-" if v is None else str(v) for v in rk]
        for ck in t.col_keys:
            cell = t.cells.get((rk, ck))
            line.append("" if cell is None else f"{cell['value']:.4g}" + (f" ({cell['n']})" if cell["n"] > 1 else ""))
        out.append(line)
    return out
