"""The pure tests (they start no process) of what tests/integration/test_store_faults.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from clusterbench.errors import StoreError, UsageError
from clusterbench.session import new_run_record
from clusterbench.store import STORE_SCHEMA, Store
from clusterbench.store.liveness import process_start


def test_a_bad_busy_timeout_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for bad in ("soon", "-1", "nan", "inf", "1e12"):  # inf and 1e12 became no wait at all in SQLite
        monkeypatch.setenv("CLUSTERBENCH_DB_TIMEOUT", bad)
        with pytest.raises(UsageError, match="CLUSTERBENCH_DB_TIMEOUT"):
            Store(tmp_path / "r.db")
    assert not (tmp_path / "r.db").exists()
    for good, ms in (("0.5", 500), ("2147483", 2147483000), ("", 30000)):  # what SQLite will really wait
        monkeypatch.setenv("CLUSTERBENCH_DB_TIMEOUT", good)
        st = Store(tmp_path / "r.db")
        assert st.db.execute("PRAGMA busy_timeout").fetchone()[0] == ms
        st.close()


def test_a_directory_as_the_store_is_named_as_such(tmp_path: Path) -> None:
    for readonly in (False, True):
        with pytest.raises(StoreError, match="is a directory, not a file") as ei:
            Store(tmp_path, readonly=readonly)
        assert "corrupt" not in str(ei.value) and "aside" not in str(ei.value)


def test_the_run_record_identifies_its_process(tmp_path: Path) -> None:
    """new_run_record records this process's start time and the boot id; they are stored, read back in
    the same shape, and the run reads as running while this very process lives."""
    rec = new_run_record(["clusterbench", "run", "x"], {}, "quick")
    assert rec["pid"] == os.getpid() and rec["pid_start"] == process_start(os.getpid())
    assert isinstance(rec["pid_start"], int)
    assert rec["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    st = Store(tmp_path / "r.db")
    run = st.get_run(st.begin_run(rec))
    assert run.status == "running"
    assert (run.pid, run.pid_start, run.boot_id) == (rec["pid"], rec["pid_start"], rec["boot_id"])


def test_a_schema_2_store_is_upgraded_in_place(tmp_path: Path) -> None:
    """Schema 2 (clusterbench 0.2/0.3) -> 3: the two process-identity columns are added, the memory
    benchmark's old name is renamed, every run and figure is kept; read-only it is read as it is."""
    p = tmp_path / "r.db"
    st = Store(p)
    rid = st.begin_run(new_run_record(["clusterbench", "run", "bandwidth"], {}, "quick"))
    st.finish_run(rid, "complete")
    st.close()
    with sqlite3.connect(p) as db:  # make it exactly what schema 2 wrote
        db.execute("ALTER TABLE runs DROP COLUMN pid_start")
        db.execute("ALTER TABLE runs DROP COLUMN boot_id")
        db.execute("INSERT INTO results (run_id, seq, benchmark, metric, value, unit, higher_is_better, params,"
                   " samples, summary, limits, warnings, measured_at) VALUES (?, 0, 'bandwidth', 'read', 1.5e4,"
                   " 'MB/s', 1, '{}', '[15000.0]', '{\"best\": 15000.0}', '[]', '[]', 'now')", (rid,))
        db.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    ro = Store(p, readonly=True)
    assert ro.schema == 2 and ro.get_run(rid).status == "complete"
    assert ro.results(rid)[0].benchmark == "bandwidth"
    ro.close()
    st = Store(p)
    assert st.schema == STORE_SCHEMA and st.results(rid)[0].benchmark == "membw"
    assert st.get_run(rid).status == "complete"
    assert {"pid_start", "boot_id"} <= {r[1] for r in st.db.execute("PRAGMA table_info(runs)")}


# The DDL of the first release (commit dffbb54), verbatim: schema 1 before 'notes' joined it unversioned.
_FIRST_RELEASE_DDL = """
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
    warnings TEXT NOT NULL DEFAULT '[]'
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
INSERT INTO meta VALUES ('schema_version', '1');
INSERT INTO runs (id, started, ended, status, command, argv, host, pid, clusterbench_version, probe, warnings)
    VALUES ('first', '2026-11-21T00:00:00Z', '2026-11-21T00:01:00Z', 'complete', 'clusterbench run bandwidth',
            '["clusterbench", "run", "bandwidth"]', 'h', 1, '0.1', '{"hostname": "h"}', '[]');
INSERT INTO results (run_id, seq, benchmark, metric, value, unit, higher_is_better, params, samples, summary,
    limits, warnings, measured_at)
    VALUES ('first', 0, 'bandwidth', 'write', 7000.0, 'MB/s', 1, '{"threads": 2}', '[7000.0]', '{"best": 7000.0}',
            '[]', '[]', '2026-11-21T00:00:30Z');
"""


def test_a_first_release_store_without_notes_reads_and_upgrades_1_to_3(tmp_path: Path) -> None:
    """The first release's schema-1 file has no runs.notes (added later without a version bump): read-only
    it reads with notes = [], and written to it goes 1 -> 2 -> 3 (notes, cluster, pid_start, boot_id added,
    'bandwidth' renamed 'membw'), old rows intact, and a new run can be closed in it."""
    p = tmp_path / "first.db"
    with sqlite3.connect(p) as db:
        db.executescript(_FIRST_RELEASE_DDL)
    ro = Store(p, readonly=True)
    run = ro.get_run("first")
    assert ro.schema == 1 and run.notes == [] and run.cluster == {} and run.status == "complete"
    assert ro.results("first")[0].benchmark == "bandwidth"
    ro.close()
    st = Store(p)
    cols = {r[1] for r in st.db.execute("PRAGMA table_info(runs)")}
    assert st.schema == STORE_SCHEMA and {"notes", "cluster", "pid_start", "boot_id", "note"} <= cols
    assert st.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(STORE_SCHEMA)
    old = st.get_run("first")
    assert (old.notes, old.argv, old.probe) == ([], ["clusterbench", "run", "bandwidth"], {"hostname": "h"})
    (res,) = st.results("first")
    assert (res.benchmark, res.metric, res.value, res.params) == ("membw", "write", 7000.0, {"threads": 2})
    rid = st.begin_run(new_run_record(["clusterbench", "run", "membw"], {}, "quick"))
    st.finish_run(rid, "complete", notes=["a note"])
    assert st.get_run(rid).notes == ["a note"] and st.get_run(rid).status == "complete"
    st.close()
    assert Store(p).schema == STORE_SCHEMA  # opening an upgraded file again changes nothing


def test_only_a_damaged_file_is_called_corrupted(tmp_path: Path) -> None:
    """A store whose pages were overwritten is 'corrupted' (with the advice to move it aside); an
    SQLite error that says nothing about the file (here a constraint: a run id stored twice) is not."""
    p = tmp_path / "r.db"
    st = Store(p)
    rec = new_run_record(["clusterbench", "run", "x"], {}, "quick")
    st.begin_run(rec)
    with pytest.raises(StoreError) as ei:
        st.begin_run(rec)
    assert "UNIQUE constraint failed" in str(ei.value)
    assert "corrupt" not in str(ei.value) and "aside" not in str(ei.value)
    st.close()
    data = bytearray(p.read_bytes())
    page = 4096 if len(data) >= 3 * 4096 else len(data) // 3  # past the header page: the tables' b-trees
    data[page:2 * page] = b"\xa5" * page
    p.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="corrupted") as ei:
        st = Store(p, readonly=True)
        st.list_runs()
    assert "aside" in str(ei.value)


def test_an_empty_db_path_is_refused_not_the_default_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture) -> None:
    from clusterbench.cli import main

    monkeypatch.setenv("CLUSTERBENCH_DB", str(tmp_path / "default.db"))
    Store().close()  # the default store exists: '--db ""' used to read (and write) it
    for path in ("", "  "):
        with pytest.raises(UsageError, match="results store path is empty"):
            Store(path)
        assert main(["--db", path, "results", "list"]) == 2
        assert "results store path is empty" in capsys.readouterr().err


def test_a_device_or_socket_as_the_store_is_refused_before_sqlite_opens_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """/dev/zero read as "store is empty" (exit 5); the store is a regular file or does not exist yet.
    (A FIFO, which hung SQLite's first read, is tested with a real process in tests/integration.)"""
    import socket

    from clusterbench.cli import main

    sock_path = tmp_path / "s.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    link = tmp_path / "link.db"
    link.symlink_to("/dev/zero")  # stat follows the symlink, as SQLite does
    try:
        for path, kind in (("/dev/zero", "a character device"), (sock_path, "a socket"),
                           (link, "a character device")):
            for readonly in (False, True):
                with pytest.raises(StoreError, match=f"is {kind}, not a regular file") as ei:
                    Store(path, readonly=readonly)
                assert str(path) in str(ei.value) and "--db" in ei.value.fix and "empty" not in str(ei.value)
        monkeypatch.setenv("CLUSTERBENCH_DB", "/dev/zero")
        assert main(["results", "list"]) == 5
        err = capsys.readouterr().err
        assert "/dev/zero is a character device, not a regular file" in err and "empty" not in err
    finally:
        sock.close()
