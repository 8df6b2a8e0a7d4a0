"""A stored run's place on the published lists: its best figures, the list data, the placement and its caveats.

:func:`place_run` takes a run's results (:class:`~clusterbench.benchmarks.declare.Result` objects), picks the best HPL
``gflops_per_watt`` (Green500), HPL ``rmax`` (TOP500) and HPCG ``rating`` (HPCG list), and places each
on an edition of its list (:mod:`clusterbench.data`, :func:`clusterbench.analysis.placement.place`).
:func:`format_lines` is the text ``clusterbench results place`` prints; ``report`` shows the same.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from clusterbench import data as D
from clusterbench.analysis.placement import FIGURES, LIST_NAMES, caveats, place, to_list_units
from clusterbench.benchmarks.declare import Result
from clusterbench.errors import UsageError


def best_figures(results: Iterable[Result]) -> dict[str, Result]:
    """list -> the best stored figure it ranks (absent when the run has none)."""
    out: dict[str, Result] = {}
    rs = list(results)
    for lst, (bench, metric) in FIGURES.items():
        cands = [r for r in rs if r.benchmark == bench and r.metric == metric
                 and isinstance(r.value, (int, float)) and r.value > 0]
        if cands:
            out[lst] = max(cands, key=lambda r: r.value)
    return out


def _sources_text(energy: Mapping[str, Any] | None) -> str:
    srcs = (energy or {}).get("sources") or {}
    return "; ".join(f"{node}: {s.get('spec')}" + (" declared" if s.get("declared") else "")
                     for node, s in srcs.items() if isinstance(s, Mapping))


def _editions(lst: str, edition: str | None) -> list[str]:
    have = [e for _, e in D.editions(lst)]
    if edition in (None, "", "latest"):
        return have[-1:]
    if edition == "all":
        return have
    if edition not in have:
        raise UsageError(f"no {lst} edition {edition} in clusterbench's list data (have: {', '.join(have) or 'none'})",
                         "give one of those with --edition, 'all', or leave it out for the newest")
    return [edition]


def place_run(results: Iterable[Result], *, lists: Iterable[str] | None = None,
              edition: str | None = None) -> list[dict]:
    """One entry per (list, edition) placed: the figure, the edition, the placement, the caveats.
    ``lists`` None: every list the run has a figure for. An edition the data lacks, or a list asked
    for by name whose figure the run lacks, is a :class:`UsageError`."""
    figs = best_figures(results)
    asked = list(lists) if lists else None
    if asked:
        for lst in asked:
            if lst not in figs:
                bench, metric = FIGURES[lst]
                how = " (run it with --power SPEC or --watts W)" if metric == "gflops_per_watt" else ""
                raise UsageError(f"the run has no {bench} {metric} figure to place on the {LIST_NAMES[lst]}{how}",
                                 "choose a run with one, or another --list")
    todo = asked or [lst for lst in FIGURES if lst in figs]
    if not asked and edition not in (None, "", "latest", "all"):  # only the lists that have this edition
        with_ed = [lst for lst in todo if (lst, edition) in D.editions(lst)]
        if todo and not with_ed:
            have = "; ".join(f"{lst}: {', '.join(e for _, e in D.editions(lst))}" for lst in todo)
            raise UsageError(f"no list edition {edition} in clusterbench's list data for this run's figures "
                             f"(have {have})", "give one of those with --edition, 'all', or leave it out")
        todo = with_ed
    if not todo:
        raise UsageError("the run has no figure any list ranks (hpl rmax, hpl gflops_per_watt or hpcg rating)",
                         "place a run of hpl (with --power/--watts for the Green500) or of hpcg")
    out = []
    for lst in todo:
        eds = _editions(lst, edition)
        r = figs[lst]
        p = r.params or {}
        energy = p.get("energy") if isinstance(p.get("energy"), Mapping) else None
        value = to_list_units(lst, float(r.value))
        for ed_name in eds:
            ed = D.load_edition(lst, ed_name)
            pl = place(value, ed, ed.month_name)
            out.append({
                "list": lst, "list_name": LIST_NAMES[lst], "edition": ed.edition, "edition_name": ed.month_name,
                "title": ed.title,
                "figure": {"benchmark": r.benchmark, "metric": r.metric, "value": r.value,
                           "unit": r.unit, "params": {k: p.get(k) for k in ("n", "nb", "grid", "official")
                                                             if p.get(k) is not None}},
                "value_in_list_unit": value, "list_unit": pl.unit,
                "placement": pl.as_dict(),
                "coverage": {"rows": ed.covers_text(), "list_size": ed.list_size, "note": ed.coverage_note},
                "sources": ed.sources, "retrieved": ed.retrieved,
                "caveats": caveats(lst, declared=bool(energy and energy.get("declared")), sources=_sources_text(energy),
                                   partial=not (ed.list_size and len(ed.covers) >= ed.list_size),
                                   official=p.get("official") if lst == "hpcg" else None, n=p.get("n")),
            })
    return out


def format_lines(entries: list[dict]) -> list[str]:
    lines: list[str] = []
    for e in entries:
        f = e["figure"]
        lines.append(f"{e['list_name']} {e['edition_name']}: {f['benchmark']} {f['metric']} {f['value']:.4g} {f['unit']}"
                     + (f" = {e['value_in_list_unit']:.4g} {e['list_unit']}" if f["unit"] != e["list_unit"] else "")
                     + f" -> {e['placement']['text']}")
        lines.append(f"  data: {e['coverage']['note'] or e['coverage']['rows']}; source: {' ; '.join(e['sources'])}")
    if entries:
        seen: list[str] = []
        for e in entries:
            for c in e["caveats"]:
                if c not in seen:
                    seen.append(c)
        lines.append("caveats:")
        lines.extend(f"  - {c}" for c in seen)
    return lines


__all__ = ["best_figures", "format_lines", "place_run"]
