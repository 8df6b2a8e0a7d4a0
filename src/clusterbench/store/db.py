"""The results store: one SQLite file, a versioned schema, one transaction per write.

A run row is written first with status ``running``; every result is committed on its own as soon
as it is measured; the run is closed as ``complete`` or ``incomplete`` (with the reason). A run
whose process died without closing it (``kill -9``, power loss) is shown as ``incomplete``
because its recorded pid no longer exists on its host.

Schema (version :data:`STORE_SCHEMA`), documented in README.md ("Results store"):

* ``meta(key PRIMARY KEY, value)`` - ``schema_version``, ``created_by``.
* ``runs(id, started, ended, status, error, command, argv, host, pid, clusterbench_version,
  profile, probe, builds, warnings, notes, cluster)`` - probe, builds, warnings, notes and cluster
  are JSON. ``cluster`` (schema 2) is ``{}`` for a run on this node only; for a run across hosts it
  holds the cluster definition and every node's probe and NIC settings (see
  :func:`clusterbench.probe.cluster.provenance`).

Schema history: 1 (first release); 2 adds ``runs.cluster``. A schema-1 file is upgraded in place
when it is opened for writing (one ``ALTER TABLE``; old runs read back with ``cluster = {}``) and
read as it is when opened read-only.
* ``results(id, run_id, seq, benchmark, metric, value, unit, higher_is_better, params, samples,
  summary, limit_json, limits, warnings, kernel, measured_at)`` - JSON columns hold the
  :class:`~clusterbench.benchmarks.base.Result` fields of the same name.
"""
from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from clusterbench import __version__
from clusterbench.errors import StoreError, UsageError

STORE_SCHEMA = 2
#: older schemas this version reads, and upgrades when it writes
UPGRADES = {1: ("ALTER TABLE runs ADD COLUMN cluster TEXT NOT NULL DEFAULT '{}'",)}

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    started TEXT NOT NULL,
    ended TEXT,
    status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'incomplete')),
    error TEXT,
    command TEXT NOT NULL,
    argv TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    clusterbench_version TEXT NOT NULL,
    profile TEXT,
    probe TEXT NOT NULL,
    builds TEXT NOT NULL DEFAULT '{}',
    warnings TEXT NOT NULL DEFAULT '[]',
    notes TEXT NOT NULL DEFAULT '[]',
    cluster TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    benchmark TEXT NOT NULL,
    metric TEXT NOT NULL,
    value REAL NOT NULL,
    unit TEXT NOT NULL,
    higher_is_better INTEGER NOT NULL,
    params TEXT NOT NULL,
    samples TEXT NOT NULL,
    summary TEXT NOT NULL,
    limit_json TEXT,
    limits TEXT NOT NULL,
    warnings TEXT NOT NULL,
    kernel TEXT,
    measured_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS results_run ON results(run_id, seq);
CREATE INDEX IF NOT EXISTS results_metric ON results(benchmark, metric);
"""


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def default_path() -> Path:
    env = os.environ.get("CLUSTERBENCH_DB")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "clusterbench" / "results.db"


def _fix_for(path: Path) -> str:
    return f"move {path} aside or set CLUSTERBENCH_DB (or --db) to another file"


class Store:
    """A handle on the results store. Every write is its own transaction."""

    def __init__(self, path: str | Path | None = None, readonly: bool = False) -> None:
        self.path = Path(path) if path else default_path()
        if readonly and not self.path.exists():
            raise StoreError(f"no results store at {self.path}", "run a benchmark first, or pass --db")
        try:
            if not readonly:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            uri = f"file:{self.path}?mode=ro" if readonly else f"file:{self.path}"
            self.db = sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None)
            self.db.row_factory = sqlite3.Row
            self.db.execute("PRAGMA foreign_keys = ON")
            self._check_schema(readonly)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"results store {self.path} is unreadable or corrupted ({exc})",
                             _fix_for(self.path)) from exc
        except OSError as exc:
            raise StoreError(f"cannot open the results store {self.path} ({exc.strerror})",
                             _fix_for(self.path)) from exc

    # -- schema -------------------------------------------------------------------------------
    def _check_schema(self, readonly: bool) -> None:
        has_meta = self.db.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
        if has_meta:
            row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            try:
                found = int(row[0]) if row else None
            except (TypeError, ValueError):
                raise StoreError(f"results store {self.path} records schema version {row[0]!r}, not a number",
                                 "it was not written by clusterbench: " + _fix_for(self.path)) from None
            self.schema = found
            if found in UPGRADES and not readonly:
                with self._tx():
                    for v in range(found, STORE_SCHEMA):
                        for stmt in UPGRADES[v]:
                            self.db.execute(stmt)
                    self.db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(STORE_SCHEMA),))
                self.schema = STORE_SCHEMA
                return
            if found in UPGRADES:  # read-only: read it as it is
                return
            if found != STORE_SCHEMA:
                raise StoreError(
                    f"results store {self.path} has schema {found}, this clusterbench reads {STORE_SCHEMA}",
                    "use the clusterbench version that wrote it, or " + _fix_for(self.path))
            return
        others = self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if others:
            raise StoreError(f"{self.path} is an SQLite file but not a clusterbench results store",
                             _fix_for(self.path))
        if readonly:
            raise StoreError(f"results store {self.path} is empty", "run a benchmark first")
        self.schema = STORE_SCHEMA
        with self._tx():
            for stmt in _DDL.strip().split(";"):
                if stmt.strip():
                    self.db.execute(stmt)
            self.db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(STORE_SCHEMA),))
            self.db.execute("INSERT INTO meta VALUES ('created_by', ?)", (f"clusterbench {__version__}",))

    @contextmanager
    def _tx(self) -> Iterator[None]:
        try:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            if "readonly" in str(exc) or "unable to open" in str(exc) or "disk" in str(exc):
                raise StoreError(f"cannot write the results store {self.path} ({exc})",
                                 _fix_for(self.path)) from exc
            raise StoreError(f"results store {self.path}: {exc}", _fix_for(self.path)) from exc
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"results store {self.path} is corrupted ({exc})", _fix_for(self.path)) from exc

    def check_writable(self) -> None:
        """Fail early (before measuring) when the store cannot be written."""
        with self._tx():
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('last_open', ?)", (now_iso(),))

    # -- writing ------------------------------------------------------------------------------
    def begin_run(self, record: dict) -> str:
        """Insert a run record (see :func:`clusterbench.session.new_run_record`) as ``running``."""
        with self._tx():
            self.db.execute(
                "INSERT INTO runs (id, started, status, command, argv, host, pid, clusterbench_version,"
                " profile, probe, builds, cluster) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (record["id"], record["started"], record["command"], json.dumps(record["argv"]), record["host"],
                 record["pid"], record["clusterbench_version"], record["profile"], json.dumps(record["probe"]),
                 json.dumps(record.get("builds") or {}), json.dumps(record.get("cluster") or {})))
        return str(record["id"])

    def add_build(self, run_id: str, name: str, info: dict) -> None:
        with self._tx():
            row = self.db.execute("SELECT builds FROM runs WHERE id=?", (run_id,)).fetchone()
            builds = json.loads(row["builds"]) if row else {}
            builds[name] = info
            self.db.execute("UPDATE runs SET builds=? WHERE id=?", (json.dumps(builds), run_id))

    def add_result(self, run_id: str, res: Any) -> None:
        """Store one :class:`Result` in its own transaction."""
        with self._tx():
            seq = self.db.execute("SELECT count(*) FROM results WHERE run_id=?", (run_id,)).fetchone()[0]
            self.db.execute(
                "INSERT INTO results (run_id, seq, benchmark, metric, value, unit, higher_is_better, params,"
                " samples, summary, limit_json, limits, warnings, kernel, measured_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, seq, res.benchmark, res.metric, res.value, res.unit, int(res.higher_is_better),
                 json.dumps(res.params), json.dumps(res.samples), json.dumps(res.summary),
                 json.dumps(res.limit) if res.limit else None, json.dumps(res.limits),
                 json.dumps(res.warnings), res.kernel, now_iso()))

    def finish_run(self, run_id: str, status: str, error: str | None = None,
                   warnings: list[dict] | None = None, notes: list[str] | None = None,
                   ended: str | None = None) -> None:
        with self._tx():
            self.db.execute("UPDATE runs SET status=?, ended=?, error=?, warnings=?, notes=? WHERE id=?",
                            (status, ended or now_iso(), error, json.dumps(warnings or []), json.dumps(notes or []),
                             run_id))

    # -- reading ------------------------------------------------------------------------------
    def _run_dict(self, row: sqlite3.Row, full: bool) -> dict:
        status, error = row["status"], row["error"]
        if status == "running" and row["host"] == socket.gethostname() and not _alive(row["pid"]):
            status, error = "incomplete", error or "the process running it died (killed or crashed)"
        d = {
            "id": row["id"], "started": row["started"], "ended": row["ended"], "status": status,
            "error": error, "command": row["command"], "host": row["host"],
            "clusterbench_version": row["clusterbench_version"], "profile": row["profile"], "pid": row["pid"],
        }
        if full:
            d["argv"] = json.loads(row["argv"])
            d["probe"] = json.loads(row["probe"])
            d["builds"] = json.loads(row["builds"])
            d["warnings"] = json.loads(row["warnings"])
            d["notes"] = json.loads(row["notes"])
            d["cluster"] = json.loads(row["cluster"]) if "cluster" in row.keys() else {}
        return d

    def list_runs(self, limit: int | None = None) -> list[dict]:
        q = ("SELECT r.*, (SELECT count(*) FROM results x WHERE x.run_id=r.id) AS n FROM runs r"
             " ORDER BY started DESC")
        rows = self._read(q + (f" LIMIT {int(limit)}" if limit else ""))
        return [{**self._run_dict(r, False), "results": r["n"]} for r in rows]

    def resolve(self, ref: str) -> str:
        """A run id from a full id, a unique prefix, or 'last'."""
        if ref == "last":
            rows = self._read("SELECT id FROM runs ORDER BY started DESC LIMIT 1")
        else:
            if not ref.strip():
                raise UsageError("an empty run id selects nothing", "give a run id, a unique prefix of one, or 'last'")
            pattern = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"  # a prefix, literally
            rows = self._read("SELECT id FROM runs WHERE id LIKE ? ESCAPE '\\' ORDER BY started DESC", (pattern,))
        if not rows:
            raise UsageError(f"no run '{ref}' in {self.path}", "see 'clusterbench results list'")
        if len(rows) > 1:
            raise UsageError(f"run prefix '{ref}' is ambiguous ({len(rows)} runs)", "give more characters")
        return rows[0]["id"]

    def get_run(self, ref: str) -> dict:
        run_id = self.resolve(ref)
        return self._run_dict(self._read("SELECT * FROM runs WHERE id=?", (run_id,))[0], True)

    def results(self, ref: str) -> list[dict]:
        run_id = self.resolve(ref)
        return [_result_dict(r) for r in self._read(
            "SELECT * FROM results WHERE run_id=? ORDER BY seq", (run_id,))]

    def history(self, benchmark: str, metric: str, host: str | None = None) -> list[dict]:
        """Stored results of one metric on this host (all runs), for measured limits."""
        rows = self._read(
            "SELECT x.* FROM results x JOIN runs r ON r.id = x.run_id"
            " WHERE x.benchmark=? AND x.metric=? AND r.host=?",
            (benchmark, metric, host or socket.gethostname()))
        return [_result_dict(r) for r in rows]

    def _read(self, q: str, args: tuple = ()) -> list[sqlite3.Row]:
        try:
            return self.db.execute(q, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"results store {self.path} is corrupted ({exc})", _fix_for(self.path)) from exc

    def close(self) -> None:
        self.db.close()


def _result_dict(r: sqlite3.Row) -> dict:
    return {
        "benchmark": r["benchmark"], "metric": r["metric"], "value": r["value"], "unit": r["unit"],
        "higher_is_better": bool(r["higher_is_better"]), "params": json.loads(r["params"]),
        "samples": json.loads(r["samples"]), "summary": json.loads(r["summary"]),
        "limit": json.loads(r["limit_json"]) if r["limit_json"] else None,
        "limits": json.loads(r["limits"]), "warnings": json.loads(r["warnings"]),
        "kernel": r["kernel"], "measured_at": r["measured_at"],
    }


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

