"""Runs and figures as typed objects: what the store hands back, what a session reports, what a
bundle holds. Each round-trips through JSON (``as_json`` / ``from_json``), as pyperf's ``Run`` and
``Benchmark`` do, so a figure is the same object whether it was just measured or read back years later.

:class:`~clusterbench.benchmarks.declare.Result` (one figure) lives with the benchmark declarations
(it is part of the plug-in API); :class:`Run` (a run's record: when, where, with what) and :class:`StoredFigure` (a figure with the
run it belongs to: what ``results table`` pivots and what ``compare`` pools) live here.

Reading one of them as a dict (``run["id"]``, ``r.get("params")``) still works for scripts written
against the dicts the store handed back before 0.2.0, with a :class:`DeprecationWarning`; clusterbench's own
code uses the attributes (the test suite turns the warning into an error).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from clusterbench.benchmarks.declare import Result
from clusterbench.dictreading import DictReading


#: a full run record's fields beyond the listing's (``Store.get_run``; ``list_runs`` leaves them None)
FULL_FIELDS = ("argv", "probe", "builds", "warnings", "notes", "cluster", "pid_start", "boot_id", "energy")


@dataclass
class Run(DictReading):
    """A run's record. ``full`` records (``Store.get_run``, a session's run) carry the provenance:
    the command line, this node's probe, the builds, the warnings and notes, the cluster (every node's
    probe for a run across hosts; ``{}`` on one node) and the energy; a listing's (``list_runs``) does not,
    and carries ``results``, the number of figures stored."""

    id: str
    started: str | None = None
    ended: str | None = None
    status: str = "running"
    error: str | None = None
    command: str | None = None
    host: str | None = None
    clusterbench_version: str | None = None
    profile: str | None = None
    pid: int | None = None
    tags: list[str] = field(default_factory=list)
    note: str | None = None
    argv: list[str] | None = None
    probe: dict | None = None
    builds: dict | None = None
    warnings: list[dict] | None = None
    notes: list[str] | None = None
    cluster: dict | None = None
    pid_start: int | None = None
    boot_id: str | None = None
    energy: dict | None = None
    results: int | None = None  # a listing's count of stored figures
    full: bool = field(default=False, repr=False, compare=False)

    def as_json(self) -> dict:
        """The record as ``--json`` prints it (and as the store handed it back before 0.2.0)."""
        d: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "full" or (f.name in FULL_FIELDS and not self.full) or (f.name == "results" and self.results is None):
                continue
            d[f.name] = getattr(self, f.name)
        return d

    @classmethod
    def from_json(cls, d: dict) -> Run:
        """From :meth:`as_json`'s form (a bundle, a ``--json`` file, a session's record); unknown keys
        (a newer clusterbench's) are ignored."""
        names = {f.name for f in fields(cls)} - {"full"}
        kw = {k: v for k, v in d.items() if k in names}
        return cls(**kw, full=any(k in d for k in ("probe", "argv", "builds")))


@dataclass(frozen=True)
class StoredFigure(Result):
    """A stored result with the run it belongs to (``Store.figures`` adds when and where the run was
    made and its tags; :func:`with_run` only the run's id)."""

    run_id: str = ""
    run_started: str | None = None
    host: str | None = None
    tags: list[str] = field(default_factory=list)


def with_run(result: Result, run_id: str) -> StoredFigure:
    """``result`` as a figure of run ``run_id`` (the same object when it already is one of that run)."""
    if isinstance(result, StoredFigure) and result.run_id == run_id:
        return result
    kw = {f.name: getattr(result, f.name) for f in fields(Result)}
    if isinstance(result, StoredFigure):
        kw.update(run_started=result.run_started, host=result.host, tags=result.tags)
    return StoredFigure(**kw, run_id=run_id)
