"""Data shipped with the package: the published lists' figures (``data/lists/<list>-<yyyy>-<mm>.csv``).

Each list file is a CSV whose leading ``# key: value`` lines say what it is (``list``, ``edition``,
``title``, one or more ``source``, ``retrieved``, ``covers`` — the ranks it holds, e.g. ``1-10`` or
``1,200`` —, ``list_size`` when a source states it, ``metric``, ``coverage_note``, ``notes``), then a
header row and one row per system: ``rank, system, site, rmax_tflops, power_kw, gflops_per_watt,
hpcg_tflops, top500_rank, note`` (empty where the source gives nothing). Only figures found in the
named sources are kept; how much of each list that is, ``covers`` says.

:func:`editions` lists what is there, :func:`load_edition` reads one (read through
:mod:`importlib.resources`, so it works from a wheel as from the source tree).
"""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from importlib import resources

#: the lists clusterbench knows, and the column each is ranked by
LISTS = {"green500": "gflops_per_watt", "top500": "rmax_tflops", "hpcg": "hpcg_tflops"}
_NAME = re.compile(r"^(green500|top500|hpcg)-(\d{4})-(\d{2})\.csv$")
_NUMERIC = ("rmax_tflops", "power_kw", "gflops_per_watt", "hpcg_tflops")


@dataclass
class Edition:
    """One edition of a list as far as the data holds it."""

    list: str
    edition: str  # YYYY-MM
    title: str
    sources: list[str]
    retrieved: str
    covers: list[int]  # the ranks present
    list_size: int | None  # the list's length when a source states it
    metric: str
    coverage_note: str
    notes: str
    rows: list[dict] = field(default_factory=list)

    @property
    def month_name(self) -> str:
        import calendar

        y, m = self.edition.split("-")
        return f"{calendar.month_name[int(m)]} {y}"

    def covers_text(self) -> str:
        """``rows 1-10`` / ``rows 1 and 200`` / ``rows 1-500``."""
        r = self.covers
        if r and r == list(range(r[0], r[-1] + 1)):
            return f"row {r[0]}" if len(r) == 1 else f"rows {r[0]}-{r[-1]}"
        return "rows " + (", ".join(map(str, r[:-1])) + f" and {r[-1]}" if len(r) > 1 else str(r[0]))


def _ranks(text: str) -> list[int]:
    out: list[int] = []
    for part in text.replace(" ", "").split(","):
        if "-" in part:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return sorted(set(out))


def parse(text: str, name: str = "<list>") -> Edition:
    """An :class:`Edition` from a list file's text; ``ValueError`` naming the file and the problem."""
    meta: dict[str, list[str]] = {}
    body: list[str] = []
    for line in text.splitlines():
        if line.startswith("#"):
            key, sep, value = line[1:].partition(":")
            if sep:
                meta.setdefault(key.strip(), []).append(value.strip())
        elif line.strip():
            body.append(line)

    def one(key: str, required: bool = True) -> str:
        v = meta.get(key)
        if not v or (required and not v[0]):
            if required:
                raise ValueError(f"{name}: no '# {key}:' line")
            return ""
        return v[0]

    lst, edition = one("list"), one("edition")
    if lst not in LISTS:
        raise ValueError(f"{name}: unknown list '{lst}'")
    if not re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])", edition):
        raise ValueError(f"{name}: edition '{edition}' is not YYYY-MM")
    size = one("list_size", required=False)
    rows = []
    for rec in csv.DictReader(io.StringIO("\n".join(body))):
        row: dict = {k: (v.strip() if isinstance(v, str) else v) for k, v in rec.items()}
        row["rank"] = int(row["rank"])
        for k in _NUMERIC:
            row[k] = float(row[k]) if row.get(k) else None
        row["top500_rank"] = int(row["top500_rank"]) if row.get("top500_rank") else None
        rows.append(row)
    rows.sort(key=lambda r: r["rank"])
    ed = Edition(list=lst, edition=edition, title=one("title"), sources=meta.get("source") or [],
                 retrieved=one("retrieved"), covers=_ranks(one("covers")), list_size=int(size) if size else None,
                 metric=one("metric"), coverage_note=one("coverage_note", required=False),
                 notes=one("notes", required=False), rows=rows)
    if not ed.sources or not all(ed.sources):
        raise ValueError(f"{name}: no source")
    if ed.metric != LISTS[lst]:
        raise ValueError(f"{name}: metric '{ed.metric}' is not {LISTS[lst]}")
    if [r["rank"] for r in rows] != ed.covers:
        raise ValueError(f"{name}: the rows' ranks differ from '# covers: ...'")
    if any(r[ed.metric] is None for r in rows):
        raise ValueError(f"{name}: a row has no {ed.metric}")
    return ed


def _files() -> dict[tuple[str, str], object]:
    out = {}
    for f in resources.files(__name__).joinpath("lists").iterdir():
        m = _NAME.match(f.name)
        if m:
            out[(m.group(1), f"{m.group(2)}-{m.group(3)}")] = f
    return out


def editions(lst: str | None = None) -> list[tuple[str, str]]:
    """(list, edition) of every list file, oldest first (only ``lst``'s when given)."""
    return sorted(k for k in _files() if lst is None or k[0] == lst)


def load_edition(lst: str, edition: str) -> Edition:
    """One edition; ``KeyError`` with a one-line message when the data has no such edition."""
    f = _files().get((lst, edition))
    if f is None:
        have = ", ".join(e for _, e in editions(lst)) or "none"
        raise KeyError(f"no {lst} edition {edition} in clusterbench's list data (have: {have})")
    return parse(f.read_text(encoding="utf-8"), f.name)  # type: ignore[attr-defined]


def load_all() -> list[Edition]:
    return [load_edition(lst, ed) for lst, ed in editions()]


__all__ = ["LISTS", "Edition", "editions", "load_all", "load_edition", "parse"]
