"""Stored rows as the store hands them back: results as typed :class:`Result` objects (and
:class:`~clusterbench.records.StoredFigure`, a result with its run), fixes as dicts, JSON decoded."""
from __future__ import annotations

import json
import sqlite3
from typing import Any

from clusterbench.benchmarks.declare import Result
from clusterbench.records import StoredFigure
from clusterbench.store.liveness import _recorder_alive


FIX_INTERRUPTED = ("applying was interrupted (the process that applied it is gone): some of its commands may have "
                   "run; --undo restores the values recorded before it")


def _fix_dict(r: sqlite3.Row) -> dict:
    d = dict(r)
    for k in ("hosts", "actions", "finding", "verify"):
        if d.get(k) is not None:
            d[k] = json.loads(d[k])
    if d["status"] == "applying" and not (d.get("pid") and _recorder_alive(r)):
        d["status"] = "interrupted"
        d["error"] = FIX_INTERRUPTED + (f"; {d['error']}" if d.get("error") else "")
    for k in ("pid", "pid_start", "boot_id"):
        d.pop(k, None)
    return d


def _decoded(text: str, seen: dict[str, Any] | None) -> Any:
    """``json.loads(text)``; with ``seen``, equal texts decode once and share the object (read only)."""
    if seen is None:
        return json.loads(text)
    got = seen.get(text)
    if got is None:
        got = seen[text] = json.loads(text)
    return got


def _result_dict(r: sqlite3.Row, seen: dict[str, Any] | None = None) -> Result:
    """A result row as a :class:`Result`; ``seen`` (``results_of``) shares the decoded params, limits and
    warnings of equal texts between the results of many runs (read them, do not change them)."""
    return Result(**_result_fields(r, seen))


def _result_fields(r: sqlite3.Row, seen: dict[str, Any] | None = None) -> dict:
    return {
        "benchmark": r["benchmark"], "metric": r["metric"], "value": r["value"], "unit": r["unit"],
        "higher_is_better": bool(r["higher_is_better"]), "params": _decoded(r["params"], seen),
        "samples": json.loads(r["samples"]), "summary": json.loads(r["summary"]),
        "limit": _decoded(r["limit_json"], seen) if r["limit_json"] else None,
        "limits": _decoded(r["limits"], seen), "warnings": _decoded(r["warnings"], seen),
        "kernel": r["kernel"], "measured_at": r["measured_at"],
    }


def _stored_figure(r: sqlite3.Row, tags: list[str]) -> StoredFigure:
    return StoredFigure(**_result_fields(r), run_id=r["run_id"], run_started=r["run_started"], host=r["host"],
                        tags=tags)


def _tabled_figure(r: sqlite3.Row, tags: list[str], seen: dict[str, Any]) -> StoredFigure:
    """What a table reads of a stored figure (``figures(full=False)``): its value, unit, direction, params
    (shared as in _result_dict) and run; no samples, summary, limits or warnings (empty)."""
    return StoredFigure(benchmark=r["benchmark"], metric=r["metric"], value=r["value"], unit=r["unit"],
                        higher_is_better=bool(r["higher_is_better"]), params=_decoded(r["params"], seen),
                        samples=[], summary={}, kernel=r["kernel"], run_id=r["run_id"],
                        run_started=r["run_started"], host=r["host"], tags=tags)


def _figure_dict(r: sqlite3.Row, seen: dict[str, Any]) -> Result:
    """What a comparison reads of a result (``results_of(full=False)``), params shared as in _result_dict:
    no summary (empty), limits, warnings or time of measurement."""
    return Result(benchmark=r["benchmark"], metric=r["metric"], value=r["value"], unit=r["unit"],
                  higher_is_better=bool(r["higher_is_better"]), params=_decoded(r["params"], seen),
                  samples=json.loads(r["samples"]), summary={}, kernel=r["kernel"])
