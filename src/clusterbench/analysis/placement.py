"""Where a figure would rank on a published list (Green500, TOP500, HPCG) — pure: no I/O.

The lists' figures ship as dated data files (:mod:`clusterbench.data`), often only some rows of an
edition (its top 10, or two rows a source cites). :func:`place` says exactly what those rows allow
and nothing more:

* the rank is **exact** when a covered row just above the figure and the next rank's row just below
  (or level with) it are both in the data (a figure above #1 ranks 1);
* otherwise it is **bounded**: ``rank > K`` below the last covered row K (and, when the list's length
  M is known and K = M, "would not make the list"), or "between a+1 and b" between two covered rows a
  and b with the rows in between missing.

Ranking rule: the figure takes the place of the first covered row it equals or beats (the list's
systems with a higher figure stay above it), as "this cluster would rank N" is usually meant; the
list itself is not re-ranked. Higher is better on all three lists (Gflops/W, Rmax, HPCG rating).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol, Sequence

from clusterbench.units import format_value

LIST_NAMES = {"green500": "Green500", "top500": "TOP500", "hpcg": "HPCG list"}
#: the list's column and its unit; our figures are converted into it (:func:`to_list_units`)
UNITS = {"green500": "Gflop/s/W", "top500": "TFlop/s", "hpcg": "TFlop/s"}
#: which stored figure each list ranks: (benchmark, metric)
FIGURES = {"green500": ("hpl", "gflops_per_watt"), "top500": ("hpl", "rmax"), "hpcg": ("hpcg", "rating")}


class EditionLike(Protocol):
    list: str
    edition: str
    rows: list[dict]
    covers: list[int]
    list_size: int | None
    metric: str


@dataclass
class Placement:
    list: str
    edition: str
    value: float  # in the list's unit
    unit: str
    exact: bool
    rank_min: int  # the best rank it can take
    rank_max: int | None  # the worst (None: not bounded by the data)
    list_size: int | None
    covers: list[int]
    above: dict | None  # the covered row just above it (a better figure), or None
    below: dict | None  # the covered row it displaces (equal or worse), or None
    out_of_order: bool  # the covered rows are not in order around it (the data's fault, said so)
    text: str

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["covers"] = _ranges(self.covers)
        for k in ("above", "below"):
            if d[k] is not None:
                d[k] = {x: d[k].get(x) for x in ("rank", "system", "site", self_metric(self.list))}
        return d


def self_metric(lst: str) -> str:
    return {"green500": "gflops_per_watt", "top500": "rmax_tflops", "hpcg": "hpcg_tflops"}[lst]


def to_list_units(lst: str, value: float) -> float:
    """Our figure (Gflop/s/W for green500, Gflop/s for top500 and hpcg) in the list's unit."""
    return value if lst == "green500" else value / 1000.0


def _ranges(ranks: Sequence[int]) -> str:
    """[1,2,3,200] -> '1-3, 200'."""
    out, start, prev = [], None, None
    for r in ranks:
        if start is None:
            start = prev = r
        elif r == prev + 1:  # type: ignore[operator]
            prev = r
        else:
            out.append(f"{start}-{prev}" if prev != start else str(start))
            start = prev = r
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else str(start))
    return ", ".join(out)


def _row_text(row: dict, metric: str, unit: str) -> str:
    name = f" {row['system']}" if row.get("system") else ""
    return f"#{row['rank']}{name} {format_value(row[metric])} {unit}"


def place(value: float, edition: EditionLike, edition_name: str | None = None) -> Placement:
    """The rank ``value`` (in the list's unit) would take on ``edition``, as far as its covered rows tell."""
    if not (value == value) or value < 0:
        raise ValueError(f"a figure of {value!r} cannot be placed")
    metric, unit, rows = edition.metric, UNITS[edition.list], edition.rows
    name = f"{edition_name or edition.edition} {LIST_NAMES[edition.list]}"
    size = edition.list_size
    better = [r for r in rows if r[metric] > value]
    worse = [r for r in rows if r[metric] <= value]
    a = max((r["rank"] for r in better), default=0)
    b = min((r["rank"] for r in worse), default=None)
    above = next((r for r in rows if r["rank"] == a), None)
    below = next((r for r in rows if r["rank"] == b), None) if b is not None else None
    of = f" of {size}" if size else ""
    nolen = "" if size else "; the list's length is not in the data"
    out_of_order = b is not None and b <= a
    if out_of_order:
        lo, hi = min(a + 1, b), max(a + 1, b)  # type: ignore[type-var]
        text = (f"rank {lo} to {hi}{of} on the {name}: the data's rows are out of order here "
                f"({_row_text(above, metric, unit)} is above {_row_text(below, metric, unit)})")  # type: ignore[arg-type]
        return Placement(edition.list, edition.edition, value, unit, False, lo, hi, size, list(edition.covers),
                         above, below, True, text)
    if b is not None and b == a + 1:
        ctx = ([f"below {_row_text(above, metric, unit)}"] if above else []) + \
              [f"level with or above {_row_text(below, metric, unit)}"]  # type: ignore[arg-type]
        text = f"rank {b}{of} on the {name} ({', '.join(ctx)}){nolen}"
        return Placement(edition.list, edition.edition, value, unit, True, b, b, size, list(edition.covers),
                         above, below, False, text)
    if b is None:
        if size and a >= size:
            text = (f"below all {size} systems of the {name}: it would not make the list "
                    f"(the last, {_row_text(above, metric, unit)})")  # type: ignore[arg-type]
            return Placement(edition.list, edition.edition, value, unit, False, size + 1, None, size,
                             list(edition.covers), above, None, False, text)
        cov = _ranges(edition.covers)
        rest = f"rows {a + 1}-{size}" if size else f"the rows below {a}"
        text = (f"rank > {a}{of} on the {name}: below every row the data holds (rows {cov}; the lowest, "
                f"{_row_text(above, metric, unit)}); {rest} are not in the data{nolen}")  # type: ignore[arg-type]
        return Placement(edition.list, edition.edition, value, unit, False, a + 1, size + 1 if size else None, size,
                         list(edition.covers), above, None, False, text)
    text = (f"rank {a + 1} to {b}{of} on the {name}: between {_row_text(above, metric, unit)} and "  # type: ignore[arg-type]
            f"{_row_text(below, metric, unit)}; rows {a + 1}-{b - 1} are not in the data{nolen}")
    return Placement(edition.list, edition.edition, value, unit, False, a + 1, b, size, list(edition.covers),
                     above, below, False, text)


def caveats(lst: str, *, declared: bool = False, sources: str = "", partial: bool = True, official: bool | None = None,
            n: int | None = None) -> list[str]:
    """What a placement does not account for, per list (and for this figure: declared power, a partial list,
    an HPCG run that is not official, the HPL problem size)."""
    out: list[str] = []
    if lst == "green500":
        out.append("the list's systems report power under the Green500/EEHPC methodology (Level 1 to 3: from a "
                   "metered fraction of the nodes to the whole system at revenue-grade meters); this figure is "
                   "EEHPC Level 1-like at the nodes' own meters" + (f" ({sources})" if sources else ""))
        out.append("the network switch, storage and cooling are not counted here; on the list's Level 2/3 entries "
                   "they are, which would lower this figure")
        if declared:
            out.append("the power is declared (--watts / watts:W), not measured: the figure and its place are "
                       "arithmetic on a typed number")
    if lst in ("green500", "top500"):
        out.append("the list's Rmax comes from tuned HPL runs at full system scale; this run's N"
                   + (f" = {n}" if n else "") + " may be far from the largest that fits memory")
    if lst == "hpcg":
        out.append("the HPCG list ranks official runs (at least 1800 s of timed sets, the problem size rules)"
                   + ("; this run is not official" if official is False else ""))
    if partial:
        out.append("the data holds only some rows of the edition (see its coverage): where they do not bound the "
                   "figure, the rank is a range, not a number")
    out.append("a place on a list needs a submission; the list ranks only the systems submitted to it")
    return out


__all__ = ["FIGURES", "LIST_NAMES", "UNITS", "Placement", "caveats", "place", "to_list_units"]
