"""Putting whole runs into the store as they were recorded elsewhere (``results import``): every run
of a bundle with its tags, note and figures (their ``measured_at`` kept) in ONE transaction, so a
failure (a full disk, a run id taken meanwhile, Ctrl-C) leaves the store as it was. The rows are the
ones :meth:`Store.begin_run`, :meth:`~Store.add_result` and :meth:`~Store.finish_run` write, with the
recorded values where those take the present (``measured_at``, ``pid_start``, ``boot_id``)."""
from __future__ import annotations

import json
from collections.abc import Sequence

from clusterbench.benchmarks.declare import Result
from clusterbench.records import Run
from clusterbench.store.db import Store
from clusterbench.store.names import check_note, check_tag


def check_importable(run: Run) -> None:
    """The run's tags and note as the store takes them (a one-line UsageError otherwise)."""
    for tag in run.tags or []:
        check_tag(tag)
    check_note(run.note)


def insert_runs(store: Store, runs: Sequence[tuple[Run, Sequence[Result]]], replace: bool = False) -> list[str]:
    """Insert ``runs`` (full records) and their figures, all or nothing. ``replace``: a stored run with
    the same id is deleted first (its figures and tags with it); without it, one makes the insert fail."""
    for run, _ in runs:
        check_importable(run)
    with store._tx():  # noqa: SLF001 (this module is the store's own)
        db = store.db
        for run, results in runs:
            if replace:
                db.execute("DELETE FROM runs WHERE id=?", (run.id,))
            db.execute(
                "INSERT INTO runs (id, started, ended, status, error, command, argv, host, pid, clusterbench_version,"
                " profile, probe, builds, warnings, notes, cluster, pid_start, boot_id, note, energy, figures)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run.id, run.started, run.ended, run.status, run.error, run.command, json.dumps(run.argv or []),
                 run.host, int(run.pid or 0), run.clusterbench_version, run.profile, json.dumps(run.probe or {}),
                 json.dumps(run.builds or {}), json.dumps(run.warnings or []), json.dumps(run.notes or []),
                 json.dumps(run.cluster or {}), run.pid_start, run.boot_id, run.note,
                 json.dumps(run.energy, default=str) if run.energy is not None else None, len(results)))
            for tag in run.tags or []:
                db.execute("INSERT OR IGNORE INTO run_tags VALUES (?, ?)", (run.id, tag))
            for seq, res in enumerate(results):
                db.execute(
                    "INSERT INTO results (run_id, seq, benchmark, metric, value, unit, higher_is_better, params,"
                    " samples, summary, limit_json, limits, warnings, kernel, measured_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (run.id, seq, res.benchmark, res.metric, res.value, res.unit, int(res.higher_is_better),
                     json.dumps(res.params), json.dumps(res.samples), json.dumps(res.summary),
                     json.dumps(res.limit) if res.limit else None, json.dumps(res.limits),
                     json.dumps(res.warnings), res.kernel, res.measured_at))
    return [run.id for run, _ in runs]
