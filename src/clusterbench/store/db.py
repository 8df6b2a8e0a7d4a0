"""The results store: one SQLite file or a PostgreSQL database, a versioned schema, one transaction per write.

The SQL here is written once, in SQLite's dialect; the back end (:mod:`clusterbench.store.backends`:
the connection, errors, table listing, schema translation and write lock) is chosen by the store's
location: a file path is SQLite, a ``postgresql://`` URL PostgreSQL (see docs/results.md).

A run row is written first with status ``running``; every result is committed on its own as soon
as it is measured; the run is closed as ``complete`` or ``incomplete`` (with the reason). A run
whose process died without closing it (``kill -9``, power loss) is shown as ``incomplete``
because the process that recorded it is gone (see ``pid_start`` below).

Schema (version :data:`STORE_SCHEMA`), documented in README.md ("Results store"):

* ``meta(key PRIMARY KEY, value)`` - ``schema_version``, ``created_by``.
* ``runs(id, started, ended, status, error, command, argv, host, pid, clusterbench_version,
  profile, probe, builds, warnings, notes, cluster, pid_start, boot_id, note, energy, figures)`` - probe,
  builds, warnings, notes and cluster are JSON; ``figures`` (schema 9) is the run's number of results.
  ``cluster`` (schema 2) is ``{}`` for a run on this node only; for a run across hosts it holds the
  cluster definition and every node's probe and NIC settings (see
  :func:`clusterbench.cluster.check.provenance`). ``pid_start`` (schema 3) is the recording process's
  start time (``/proc/PID/stat`` field 22, clock ticks since boot) and ``boot_id`` the kernel's boot id:
  a ``running`` run reads as running only while that very process lives (same host, same boot, same pid
  *and* start time), so a reused pid never keeps a killed run "running". Rows without them (older
  schemas), and processes /proc hides (``hidepid``), are judged by the pid alone.
* ``run_tags(run_id, tag)`` (schema 4) - the tags given with ``--tag`` (or ``results tag``) to select
  runs by name in ``compare``, ``report`` and ``results list --tag``; ``runs.note`` is ``--note``'s text.
* ``fixes(id, created, rule, hosts, status, actions, finding, verify, ended, error)`` (schema 5) - the
  fixes ``doctor --fix`` applied: per node the commands run and the commands that undo them (built
  from the values read just before), the finding, ``status`` ``applied`` or ``undone``, and the
  before/after comparison of ``doctor --verify``. A fix is recorded as ``applying`` before anything
  is changed (so a crash mid-way leaves the undo behind) and removed again if applying fails and is
  rolled back; with the recording process (``pid``, ``pid_start``, ``boot_id``, schema 7), so one left
  ``applying`` by a process that is gone reads as ``interrupted`` and can be undone.
* ``runs.energy`` (schema 6) - JSON, null unless the run had a power source (``--power``/``--watts``):
  the sources (kind, rate, declared or measured) and the energy of every benchmark it ran, whole (start to
  end as clusterbench saw it); a figure with a timed phase carries that phase's energy in
  ``params.energy`` (see :mod:`clusterbench.energy`).
* ``results(id, run_id, seq, benchmark, metric, value, unit, higher_is_better, params, samples,
  summary, limit_json, limits, warnings, kernel, measured_at)`` - JSON columns hold the
  :class:`~clusterbench.benchmarks.base.Result` fields of the same name.

Schema history and upgrades: :mod:`clusterbench.store.schema`.

Errors say what is wrong: a store locked by another process ("locked ... wait or retry", after
``CLUSTERBENCH_DB_TIMEOUT`` seconds, default 30), a directory, FIFO, device or socket, an unwritable file or folder (or a
read-only file system), a full disk; only a file SQLite reports as damaged is "corrupted" (with the
advice to move it aside). A write cut by ``kill -9`` is rolled back by SQLite on the next open, read-only
ones included, and by PostgreSQL at once (a server down, refusing the login, read-only for the user or
killed mid-write: one line each, see :meth:`.backends.postgres.PostgresBackend.error`).
"""
from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from clusterbench import __version__
from clusterbench.errors import StoreError, UsageError
from clusterbench.store.liveness import _recorder_alive, boot_id, process_start
from clusterbench.store.names import (TAG_RE, _LAST_RE, _like_literal, _tag_hint, check_note, check_tag, id_prefix,
                                      run_filter)
from clusterbench.store.backends import backend_for, location, without_passwords
from clusterbench.store.opening import busy_timeout
from clusterbench.benchmarks.declare import Result
from clusterbench.records import Run
from clusterbench.records import StoredFigure  # noqa: F401 (the type figures() returns)
from clusterbench.store.rows import _figure_dict, _fix_dict, _result_dict, _stored_figure, _tabled_figure
from clusterbench.store.schema import DDL, STORE_SCHEMA, UPGRADES, upgraded_tables

#: run ids per query when many runs are read at once (SQLite's bound on ? parameters is 999 in old builds)
CHUNK = 500
#: what a listing of runs reads of each (not its probe, builds, warnings or cluster: kilobytes of JSON)
LIST_COLUMNS = ("id", "started", "ended", "status", "error", "command", "host", "pid", "clusterbench_version",
                "profile", "note", "pid_start", "boot_id")

def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class Store:
    """A handle on the results store. Every write is its own transaction."""

    def __init__(self, path: str | Path | None = None, readonly: bool = False) -> None:
        if path is not None and not str(path).strip():  # '--db ""' must not quietly mean the default store
            raise UsageError("the results store path is empty (--db '')",
                             "give a file path, or leave --db out for $CLUSTERBENCH_DB or the default store")
        self.timeout = busy_timeout()
        self.backend = backend_for(location(path), self.timeout)
        self.path = self.backend.location  # a Path (SQLite) or the URL as given (PostgreSQL)
        self.name = self.backend.name  # what messages print (a URL's password masked)
        try:
            self.db = self.backend.connect(readonly)
            self._check_schema(readonly)
        except StoreError:
            raise
        except self.backend.errors as exc:
            raise self.backend.error(exc) from exc
        except OSError as exc:
            raise StoreError(f"cannot open the results store {self.name} ({exc.strerror})",
                             "choose a file in a writable folder with --db") from exc

    # -- schema -------------------------------------------------------------------------------
    def _check_schema(self, readonly: bool) -> None:
        # One statement, one snapshot: read apart, another process creating the store between the two
        # reads made a brand-new store look like a foreign SQLite file.
        tables = self.backend.tables(self.db)
        if "meta" in tables:
            row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            try:
                found = int(row[0]) if row else None
            except (TypeError, ValueError):
                raise StoreError(f"results store {self.name} records schema version {row[0]!r}, not a number",
                                 "it was not written by clusterbench: " + self.backend.fix_for()) from None
            self.schema = found
            if found in UPGRADES and not readonly:
                with self._tx():  # another process may have upgraded it since it was read: read again
                    row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                    found = int(row[0]) if row and str(row[0]).isdigit() else found
                    for v in range(found, STORE_SCHEMA):
                        for stmt in UPGRADES[v]:
                            self._upgrade(stmt)
                    self.backend.analyze(self.db, upgraded_tables(found))
                    self.db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(STORE_SCHEMA),))
                self.schema = STORE_SCHEMA
                return
            if found in UPGRADES:  # read-only: read it as it is
                return
            if found != STORE_SCHEMA:
                raise StoreError(
                    f"results store {self.name} has schema {found}, this clusterbench reads {STORE_SCHEMA}",
                    "use the clusterbench version that wrote it, or " + self.backend.fix_for())
            return
        if tables:
            raise StoreError(f"{self.name} is {self.backend.kind} but not a clusterbench results store",
                             self.backend.fix_for())
        if readonly:
            raise StoreError(f"results store {self.name} is empty", "run a benchmark first")
        self.schema = STORE_SCHEMA
        with self._tx():
            if self.backend.tables(self.db):
                created_meanwhile = True  # by another process opening the new store at the same time
            else:
                created_meanwhile = False
                for stmt in DDL.strip().split(";"):
                    if stmt.strip():
                        self.db.execute(self.backend.ddl(stmt))
                self.db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(STORE_SCHEMA),))
                self.db.execute("INSERT INTO meta VALUES ('created_by', ?)", (f"clusterbench {__version__}",))
        if created_meanwhile:
            self._check_schema(readonly)  # judge what it wrote like any existing store

    def _upgrade(self, stmt: str) -> None:
        """One upgrade statement; an ``ADD COLUMN`` of a column the store already has is skipped."""
        add = re.match(r"ALTER TABLE (\w+) ADD COLUMN (\w+)", stmt)
        if add and add[2] in self.backend.columns(self.db, add[1]):
            return
        self.db.execute(self.backend.ddl(stmt))

    @contextmanager
    def _tx(self) -> Iterator[None]:
        try:
            self.backend.begin(self.db)
            try:
                yield
                self.db.execute("COMMIT")  # a failed COMMIT (busy, full) leaves the transaction open
            except BaseException:
                self._rollback()
                raise
        except self.backend.errors as exc:
            raise self.backend.error(exc) from exc

    def _rollback(self) -> None:
        """Undo the open transaction, if the database has not already (SQLite does itself on a full disk or
        an I/O error); a failing ROLLBACK (a lost connection) must not hide the error that made it necessary."""
        try:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
        except self.backend.errors:
            pass

    def check_writable(self) -> None:
        """Fail early (before measuring) when the store cannot be written."""
        with self._tx():
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('last_open', ?)", (now_iso(),))

    # -- writing ------------------------------------------------------------------------------
    def begin_run(self, record: dict) -> str:
        """Insert a run record (see :func:`clusterbench.session.new_run_record`) as ``running``. The
        record's ``pid_start`` and ``boot_id`` are stored as given; a record without them gets those
        of its ``pid`` now."""
        pid = int(record["pid"])
        record = {**record, "command": without_passwords(record["command"]),
                  "argv": [without_passwords(str(a)) for a in record["argv"]]}  # a --db URL's password is not kept
        started = record["pid_start"] if "pid_start" in record else process_start(pid)
        boot = record["boot_id"] if "boot_id" in record else boot_id()
        with self._tx():
            self.db.execute(
                "INSERT INTO runs (id, started, status, command, argv, host, pid, clusterbench_version,"
                " profile, probe, builds, cluster, pid_start, boot_id)"
                " VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (record["id"], record["started"], record["command"], json.dumps(record["argv"]), record["host"],
                 pid, record["clusterbench_version"], record["profile"], json.dumps(record["probe"]),
                 json.dumps(record.get("builds") or {}), json.dumps(record.get("cluster") or {}),
                 started, boot))
            self._set_tags(str(record["id"]), record.get("tags") or ())
            if check_note(record.get("note")):
                self.db.execute("UPDATE runs SET note=? WHERE id=?", (str(record["note"]), record["id"]))
        return str(record["id"])

    def _set_tags(self, run_id: str, tags: Any) -> None:
        for tag in tags:
            check_tag(tag)
            self.db.execute("INSERT OR IGNORE INTO run_tags VALUES (?, ?)", (run_id, tag))

    def tag_run(self, ref: str, add: Any = (), remove: Any = (), note: str | None = None) -> str:
        """Add or remove tags of a stored run (and set its note); returns the run id."""
        for tag in [*add, *remove]:
            check_tag(tag)
        check_note(note)
        run_id = self.resolve(ref)
        with self._tx():
            self._set_tags(run_id, add)
            for tag in remove:
                self.db.execute("DELETE FROM run_tags WHERE run_id=? AND tag=?", (run_id, tag))
            if note is not None:
                self.db.execute("UPDATE runs SET note=? WHERE id=?", (note or None, run_id))
        return run_id

    # -- fixes (doctor --fix / --undo) -------------------------------------------------------
    def add_fix(self, record: dict) -> str:
        """Record a fix as ``applying`` (before anything is changed): id, rule, hosts, actions, finding."""
        pid = os.getpid()
        with self._tx():
            self.db.execute(
                "INSERT INTO fixes (id, created, rule, hosts, status, actions, finding, pid, pid_start, boot_id) "
                "VALUES (?, ?, ?, ?, 'applying', ?, ?, ?, ?, ?)",
                (record["id"], record.get("created") or now_iso(), record["rule"], json.dumps(record["hosts"]),
                 json.dumps(record["actions"]), json.dumps(record["finding"]), pid, process_start(pid), boot_id()))
        return str(record["id"])

    def set_fix(self, fix_id: str, *, status: str | None = None, verify: Any = None, error: str | None = None) -> None:
        with self._tx():
            if status is not None:
                self.db.execute("UPDATE fixes SET status=?, ended=CASE WHEN ?='undone' THEN ? ELSE ended END WHERE id=?",
                                (status, status, now_iso(), fix_id))
            if verify is not None:
                self.db.execute("UPDATE fixes SET verify=? WHERE id=?", (json.dumps(verify), fix_id))
            if error is not None:
                self.db.execute("UPDATE fixes SET error=? WHERE id=?", (error, fix_id))

    def drop_fix(self, fix_id: str) -> None:
        """Forget a fix that was rolled back while being applied."""
        with self._tx():
            self.db.execute("DELETE FROM fixes WHERE id=?", (fix_id,))

    def _has_fixes(self) -> bool:
        return "fixes" in self._tables()

    def fixes(self, status: str | None = None) -> list[Run]:
        """Every recorded fix, oldest first (an older store has none)."""
        if not self._has_fixes():
            return []
        q = "SELECT * FROM fixes" + (" WHERE status=?" if status else "") + " ORDER BY created, id"
        return [_fix_dict(r) for r in self._read(q, (status,) if status else ())]

    def get_fix(self, ref: str) -> dict:
        """A fix by id or unique prefix."""
        rows = self._read("SELECT * FROM fixes WHERE id LIKE ? ESCAPE '\\'", (_like_literal(ref) + "%",)) \
            if ref and self._has_fixes() else []
        exact = [r for r in rows if r["id"] == ref]
        if exact:
            rows = exact
        if not rows:
            known = ", ".join(f["id"] for f in self.fixes()[-5:]) or "none recorded"
            raise UsageError(f"no fix '{ref}' in {self.name}", f"see 'clusterbench doctor --fixes' (recent: {known})")
        if len(rows) > 1:
            raise UsageError(f"fix '{ref}' is ambiguous ({len(rows)} match)", "give more of its id")
        return _fix_dict(rows[0])

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
            # the run's count of figures, kept with it (schema 9): a listing reads it instead of counting
            self.db.execute("UPDATE runs SET figures=? WHERE id=?", (seq + 1, run_id))

    def finish_run(self, run_id: str, status: str, error: str | None = None,
                   warnings: list[dict] | None = None, notes: list[str] | None = None,
                   ended: str | None = None, energy: dict | None = None) -> None:
        """Close a run; ``energy`` (schema 6): the run's power sources and per-benchmark energy, if any."""
        with self._tx():
            self.db.execute("UPDATE runs SET status=?, ended=?, error=?, warnings=?, notes=? WHERE id=?",
                            (status, ended or now_iso(), error, json.dumps(warnings or []), json.dumps(notes or []),
                             run_id))
            if energy is not None:
                self.db.execute("UPDATE runs SET energy=? WHERE id=?", (json.dumps(energy, default=str), run_id))

    # -- reading ------------------------------------------------------------------------------
    def _run_dict(self, row: Any, full: bool, tags: list[str] | None = None,
                  results: int | None = None) -> Run:
        status, error = row["status"], row["error"]
        if status == "running" and row["host"] == socket.gethostname() and not _recorder_alive(row):
            status, error = "incomplete", error or "the process running it died (killed or crashed)"
        run = Run(id=row["id"], started=row["started"], ended=row["ended"], status=status, error=error,
                  command=row["command"], host=row["host"], clusterbench_version=row["clusterbench_version"],
                  profile=row["profile"], pid=row["pid"], tags=self.tags(row["id"]) if tags is None else tags,
                  note=row["note"] if "note" in row.keys() else None, results=results, full=full)
        if full:
            cols = row.keys()  # older schemas lack columns ('in row' would test the values, not the names)
            run.argv = json.loads(row["argv"])
            run.probe = json.loads(row["probe"])
            run.builds = json.loads(row["builds"])
            run.warnings = json.loads(row["warnings"])
            run.notes = json.loads(row["notes"]) if "notes" in cols else []  # first schema-1 files
            run.cluster = json.loads(row["cluster"]) if "cluster" in cols else {}
            for key in ("pid_start", "boot_id"):  # as in new_run_record; null before schema 3
                setattr(run, key, row[key] if key in cols else None)
            run.energy = json.loads(row["energy"]) if "energy" in cols and row["energy"] else None
        return run

    def _has_tags(self) -> bool:
        """Schema 4 or later (a read-only older file has no run_tags table)."""
        if not hasattr(self, "_tags_table"):
            self._tags_table = "run_tags" in self._tables()
        return self._tags_table

    def _tables(self) -> set[str]:
        try:
            return self.backend.tables(self.db)
        except self.backend.errors as exc:
            raise self.backend.error(exc) from exc

    def tags(self, run_id: str) -> list[str]:
        if not self._has_tags():
            return []
        return [r[0] for r in self._read("SELECT tag FROM run_tags WHERE run_id=? ORDER BY tag", (run_id,))]

    def _tags_of(self, run_ids: list[str] | None) -> dict[str, list[str]]:
        """run id -> its tags, sorted, for these runs (None: every run) in one query per CHUNK runs."""
        out: dict[str, list[str]] = {}
        if not self._has_tags():
            return out
        if run_ids is None:
            chunks = [None]
        else:
            chunks = [run_ids[i:i + CHUNK] for i in range(0, len(run_ids), CHUNK)]
        for part in chunks:
            q = "SELECT run_id, tag FROM run_tags" + (
                f" WHERE run_id IN ({','.join('?' * len(part))})" if part is not None else "") + " ORDER BY tag"
            for run_id, tag in self._read(q, tuple(part or ())):
                out.setdefault(run_id, []).append(tag)
        return out

    def all_tags(self) -> dict[str, int]:
        """Every tag in the store and how many runs carry it."""
        if not self._has_tags():
            return {}
        return {r[0]: r[1] for r in self._read("SELECT tag, count(*) FROM run_tags GROUP BY tag ORDER BY tag")}

    def list_runs(self, limit: int | None = None, *, tag: str | None = None, benchmark: str | None = None,
                  host: str | None = None, since: str | None = None, status: str | None = None) -> list[Run]:
        """Runs, newest first, at most ``limit`` of them, filtered as :func:`~.names.run_filter` says."""
        where, args = run_filter(tag=tag, benchmark=benchmark, host=host, since=since, status=status)
        if tag is not None and not self._has_tags():
            return []
        # not the JSON a listing never shows; a running run's process only for a running run (in SQLite the
        # two columns lie past the probe's kilobytes: reading them read the probe's overflow pages)
        cols = ", ".join(f"CASE WHEN r.status='running' THEN r.{c} END AS {c}" if c in ("pid_start", "boot_id")
                         else f"r.{c}" for c in self._list_columns())
        # each run's figures as stored with it (schema 9); an older store read as it is counts them
        n = "r.figures" if self.schema >= 9 else "(SELECT count(*) FROM results x WHERE x.run_id=r.id)"
        q = f"SELECT {cols}, {n} AS n FROM runs r{where} ORDER BY r.started DESC"
        rows = self._read(q + (f" LIMIT {min(int(limit), 2 ** 63 - 1)}" if limit else ""), args)
        tags = self._tags_of(None) if len(rows) > CHUNK else self._tags_of([r["id"] for r in rows])
        return [self._run_dict(r, False, tags.get(r["id"], []), results=r["n"]) for r in rows]

    def count_runs(self, *, tag: str | None = None, benchmark: str | None = None, host: str | None = None,
                   since: str | None = None, status: str | None = None) -> int:
        """How many runs :meth:`list_runs` with the same filters lists without a limit: one COUNT (the
        indexes on ``runs`` and ``run_tags`` serve it; no run's row is read)."""
        where, args = run_filter(tag=tag, benchmark=benchmark, host=host, since=since, status=status)
        if tag is not None and not self._has_tags():
            return 0
        if tag is not None and (benchmark, host, since, status) == (None, None, None, None):
            # a row of run_tags is one run carrying the tag (its key is (run_id, tag), its foreign key cascades
            # on both back ends): counted in run_tags_tag alone, not looked up run by run (50,000 runs: 0.5-1.3 s)
            return int(self._read("SELECT count(*) FROM run_tags WHERE tag=?", (tag,))[0][0])
        return int(self._read(f"SELECT count(*) FROM runs r{where}", args)[0][0])

    def _list_columns(self) -> list[str]:
        """The columns of ``runs`` a listing reads (:meth:`_run_dict` without ``full``, and whether a
        running run's process lives), those this store's schema has."""
        if not hasattr(self, "_listed"):
            try:
                have = self.backend.columns(self.db, "runs")
            except self.backend.errors as exc:
                raise self.backend.error(exc) from exc
            self._listed = [c for c in LIST_COLUMNS if c in have]
        return self._listed

    def select_runs(self, spec: str) -> list[str]:
        """The run ids a selector names, oldest first. A selector is 'last' or 'last~N' (the Nth before
        the newest), a run id or a unique prefix of one, a tag (every run carrying it), or several of
        these joined by commas; 'run:ID' and 'tag:NAME' say which is meant when a word is both."""
        if not spec or not spec.strip():
            raise UsageError("an empty run selector selects nothing", "give a run id, a tag, 'last' or 'last~1'")
        ids: dict[str, None] = {}
        parts = [p.strip() for p in spec.split(",")]
        if not all(parts):
            raise UsageError(f"empty item in the run selector '{spec}'", "e.g. 'baseline' or 'last~1,last'")
        for part in parts:
            ids.update(dict.fromkeys(self._select_one(part)))
        order = self._started(list(ids))
        return sorted(ids, key=lambda i: order[i])

    def _started(self, ids: list[str]) -> dict[str, str]:
        """id -> started of these runs (one query per CHUNK ids)."""
        out: dict[str, str] = {}
        for i in range(0, len(ids), CHUNK):
            part = ids[i:i + CHUNK]
            out.update((r[0], r[1]) for r in self._read(
                f"SELECT id, started FROM runs WHERE id IN ({','.join('?' * len(part))})", tuple(part)))
        return out

    def _last(self, name: str, back: str | None) -> str:
        """The run 'last' or 'last~N' names (N runs before the newest); an N beyond the store's runs,
        however large, is a usage error (SQLite's integers end at 2**63)."""
        n = self._read("SELECT count(*) FROM runs")[0][0]
        if back is None or (len(back.lstrip("0")) <= 18 and int(back) < n):
            rows = self._read("SELECT id FROM runs ORDER BY started DESC LIMIT 1 OFFSET ?", (int(back or 0),))
            if rows:
                return str(rows[0]["id"])
        raise UsageError(f"'{name}' selects nothing: the store holds {n} run(s)"
                         + (f" (last~{n - 1} is the oldest)" if n > 1 else ""), "see 'clusterbench results list'")

    def _select_one(self, part: str) -> list[str]:
        kind, _, name = part.partition(":") if part.startswith(("run:", "tag:")) else ("", "", part)
        last = _LAST_RE.fullmatch(name)
        if last and kind != "tag":
            return [self._last(name, last[1])]
        tagged = []
        if kind != "run" and TAG_RE.fullmatch(name) and self._has_tags():
            tagged = [r[0] for r in self._read("SELECT run_id FROM run_tags WHERE tag=?", (name,))]
        if kind == "tag":
            if not tagged:
                raise UsageError(f"no run is tagged '{name}' in {self.name}", _tag_hint(self.all_tags()))
            return tagged
        if kind == "run":
            return [self.resolve(name)]
        match, margs = id_prefix(name)
        prefix = self._read(f"SELECT id FROM runs WHERE {match} LIMIT 2", margs)
        if tagged and prefix:
            raise UsageError(f"'{name}' is both a tag and the start of a run id",
                             f"say which: 'tag:{name}' or 'run:{name}'")
        if tagged:
            return tagged
        if not prefix:
            raise UsageError(f"no run or tag '{name}' in {self.name}",
                             "see 'clusterbench results list' (" + _tag_hint(self.all_tags()) + ")")
        return [self.resolve(name)]

    def resolve(self, ref: str) -> str:
        """A run id from a full id, a unique prefix, 'last' or 'last~N'."""
        last = _LAST_RE.fullmatch(ref)
        if last:
            return self._last(ref, last[1])
        if not ref.strip():
            raise UsageError("an empty run id selects nothing", "give a run id, a unique prefix of one, or 'last'")
        rows = self._read("SELECT id FROM runs WHERE id = ?", (ref,))  # a whole id: the primary key, no scan
        if not rows:
            match, margs = id_prefix(ref)  # a prefix, literally
            rows = self._read(f"SELECT id FROM runs WHERE {match} ORDER BY started DESC LIMIT 2", margs)
        if not rows:
            raise UsageError(f"no run '{ref}' in {self.name}", "see 'clusterbench results list'")
        if len(rows) > 1:
            n = self._read(f"SELECT count(*) FROM runs WHERE {match}", margs)[0][0]
            raise UsageError(f"run prefix '{ref}' is ambiguous ({n} runs)", "give more characters")
        return rows[0]["id"]

    def get_run(self, ref: str) -> Run:
        run_id = self.resolve(ref)
        return self._run_dict(self._read("SELECT * FROM runs WHERE id=?", (run_id,))[0], True)

    def get_runs(self, run_ids: list[str]) -> list[Run]:
        """The full records of these runs (whole ids, as :meth:`select_runs` returns them), in the order
        given: one query per CHUNK runs, where :meth:`get_run` costs a query or more per run."""
        rows: dict[str, Any] = {}
        for i in range(0, len(run_ids), CHUNK):
            part = run_ids[i:i + CHUNK]
            rows.update((r["id"], r) for r in self._read(
                f"SELECT * FROM runs WHERE id IN ({','.join('?' * len(part))})", tuple(part)))
        missing = [i for i in run_ids if i not in rows]
        if missing:
            raise UsageError(f"no run '{missing[0]}' in {self.name}", "see 'clusterbench results list'")
        tags = self._tags_of(run_ids)
        return [self._run_dict(rows[i], True, tags.get(i, [])) for i in run_ids]

    def results(self, ref: str) -> list[Result]:
        run_id = self.resolve(ref)
        return [_result_dict(r) for r in self._read(
            "SELECT * FROM results WHERE run_id=? ORDER BY seq", (run_id,))]

    def results_of(self, run_ids: list[str], full: bool = True) -> dict[str, list[Result]]:
        """run id -> its results (as :meth:`results`), for many runs in one query per CHUNK runs. Results
        whose params (limits, warnings) have the same text share one decoded object: read them, do not
        change them. Without ``full`` each result holds only what a comparison reads (benchmark, metric,
        value, unit, higher_is_better, params, samples, kernel): a third of the JSON to decode."""
        out: dict[str, list[Result]] = {i: [] for i in run_ids}
        cols = "*" if full else "run_id, seq, benchmark, metric, value, unit, higher_is_better, params, samples, kernel"
        seen: dict[str, Any] = {}  # the same figure of repeated runs has the same params: decoded once
        for i in range(0, len(run_ids), CHUNK):
            part = run_ids[i:i + CHUNK]
            for r in self._read(f"SELECT {cols} FROM results WHERE run_id IN ({','.join('?' * len(part))})"
                                " ORDER BY run_id, seq", tuple(part)):
                out[r["run_id"]].append(_result_dict(r, seen) if full else _figure_dict(r, seen))
        return out

    def benchmark_names(self) -> list[str]:
        """The benchmarks this store holds figures of."""
        return [r[0] for r in self._read("SELECT DISTINCT benchmark FROM results ORDER BY benchmark")]

    def figures(self, benchmark: str, metric: str | None = None, run_ids: list[str] | None = None,
                full: bool = True) -> list[StoredFigure]:
        """Every stored figure of ``benchmark`` (one ``metric``; of ``run_ids`` only), oldest first; each
        result dict also carries ``run_id``, ``run_started``, ``host`` and ``tags`` (one query per call,
        one more for the tags: a 200-run store tables in milliseconds). Without ``full`` a figure holds
        only what a table reads (no samples, summary, limits or warnings: most of the JSON to decode);
        figures of equal params then share one decoded object: read them, do not change them."""
        # of some runs: read their figures by the runs' index (``|| ''`` keeps the planner, SQLite's and
        # PostgreSQL's, off the metric's index, which holds every run's figures: 5 s at 100,000 runs)
        where, args = ["x.benchmark=?" if run_ids is None else "x.benchmark || '' = ?"], [benchmark]
        if metric is not None:
            where.append("x.metric=?")
            args.append(metric)
        if run_ids is not None:
            where.append(f"x.run_id IN ({','.join('?' * len(run_ids))})")
            args += run_ids
        cols = "x.*" if full else "x.run_id, x.benchmark, x.metric, x.value, x.unit, x.higher_is_better, x.params, x.kernel"
        rows = self._read(f"SELECT {cols}, r.started AS run_started, r.host AS host FROM results x"
                          " JOIN runs r ON r.id = x.run_id WHERE " + " AND ".join(where)
                          + " ORDER BY r.started, x.seq", tuple(args))
        tags: dict[str, list[str]] = {}
        if rows and self._has_tags():
            ids = sorted({r["run_id"] for r in rows})
            tags = self._tags_of(ids if len(ids) <= CHUNK else None)  # of these runs only, when few
        if full:
            return [_stored_figure(r, tags.get(r["run_id"], [])) for r in rows]
        seen: dict[str, Any] = {}
        return [_tabled_figure(r, tags.get(r["run_id"], []), seen) for r in rows]

    def count_results(self, run_id: str) -> int:
        """How many results are committed for ``run_id``."""
        return int(self._read("SELECT count(*) FROM results WHERE run_id=?", (run_id,))[0][0])

    def history(self, benchmark: str, metric: str, host: str | None = None) -> list[Result]:
        """Stored results of one metric on this host (all runs), for measured limits."""
        rows = self._read(
            "SELECT x.* FROM results x JOIN runs r ON r.id = x.run_id"
            " WHERE x.benchmark=? AND x.metric=? AND r.host=?",
            (benchmark, metric, host or socket.gethostname()))
        return [_result_dict(r) for r in rows]

    def _read(self, q: str, args: tuple = ()) -> list[Any]:
        try:
            return self.db.execute(q, args).fetchall()
        except self.backend.errors as exc:
            raise self.backend.error(exc) from exc

    def close(self) -> None:
        self.db.close()

