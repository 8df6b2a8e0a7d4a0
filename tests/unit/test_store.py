"""The pure tests (they start no process) of what tests/integration/test_store.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import json
import sqlite3

import pytest

from clusterbench.benchmarks.base import Result
from clusterbench.errors import StoreError
from clusterbench.session import new_run_record
from clusterbench.store import STORE_SCHEMA, Store


def _result(value: float = 1.0) -> Result:
    return Result(benchmark="stream", metric="triad", value=value, unit="MB/s", higher_is_better=True,
                  params={"threads": 1}, samples=[value, value * 0.9],
                  summary={"n": 2, "best": value, "median": value, "min": value, "max": value, "mean": value,
                           "stdev": 0, "cv": 0.0})


def test_roundtrip(tmp_path):
    st = Store(tmp_path / "r.db")
    rid = st.begin_run(new_run_record(["clusterbench", "run", "stream"], {"hostname": "x"}, "quick"))
    st.add_build(rid, "stream", {"compiler": "cc"})
    st.add_result(rid, _result(5.0))
    st.finish_run(rid, "complete")
    run = st.get_run(rid[:8])
    assert run.status == "complete" and run.builds["stream"]["compiler"] == "cc"
    assert run.probe == {"hostname": "x"}
    res = st.results("last")
    assert res[0].value == 5.0 and res[0].samples == [5.0, 4.5]
    assert st.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(STORE_SCHEMA)


def test_corrupted_store_is_refused(tmp_path):
    p = tmp_path / "bad.db"
    p.write_bytes(b"this is not an sqlite file" * 100)
    with pytest.raises(StoreError, match="corrupted"):
        Store(p)


def test_foreign_sqlite_is_refused(tmp_path):
    p = tmp_path / "other.db"
    sqlite3.connect(p).execute("CREATE TABLE t (x)")
    with pytest.raises(StoreError, match="not a clusterbench results store"):
        Store(p)


def test_newer_schema_is_refused(tmp_path):
    p = tmp_path / "r.db"
    Store(p).close()
    con = sqlite3.connect(p)
    con.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    con.commit()
    with pytest.raises(StoreError, match="schema 99"):
        Store(p)


def test_schema_version_that_is_not_a_number_is_one_store_error(tmp_path):
    p = tmp_path / "r.db"
    Store(p).close()
    con = sqlite3.connect(p)
    con.execute("UPDATE meta SET value='two' WHERE key='schema_version'")
    con.commit()
    con.close()
    for readonly in (False, True):
        with pytest.raises(StoreError, match="records schema version 'two', not a number"):
            Store(p, readonly=readonly)


def test_unwritable_store_path(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(StoreError, match="is not a folder"):
        Store(f / "r.db")  # parent is a regular file


def test_missing_store_readonly(tmp_path):
    with pytest.raises(StoreError, match="no results store"):
        Store(tmp_path / "none.db", readonly=True)


def test_results_are_json(tmp_path):
    st = Store(tmp_path / "r.db")
    rid = st.begin_run(new_run_record(["c"], {}, "default"))
    st.add_result(rid, _result())
    row = st.db.execute("SELECT params, samples, summary FROM results").fetchone()
    assert json.loads(row["params"]) == {"threads": 1}
    assert json.loads(row["samples"]) == [1.0, 0.9]
    assert json.loads(row["summary"])["best"] == 1.0


_SCHEMA1_RUNS = """CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (id TEXT PRIMARY KEY, started TEXT NOT NULL, ended TEXT,
    status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'incomplete')), error TEXT,
    command TEXT NOT NULL, argv TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL,
    clusterbench_version TEXT NOT NULL, profile TEXT, probe TEXT NOT NULL, builds TEXT NOT NULL DEFAULT '{}',
    warnings TEXT NOT NULL DEFAULT '[]', notes TEXT NOT NULL DEFAULT '[]');
CREATE TABLE results (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL REFERENCES runs(id)
    ON DELETE CASCADE, seq INTEGER NOT NULL, benchmark TEXT NOT NULL, metric TEXT NOT NULL, value REAL NOT NULL,
    unit TEXT NOT NULL, higher_is_better INTEGER NOT NULL, params TEXT NOT NULL, samples TEXT NOT NULL,
    summary TEXT NOT NULL, limit_json TEXT, limits TEXT NOT NULL, warnings TEXT NOT NULL, kernel TEXT,
    measured_at TEXT NOT NULL);
INSERT INTO meta VALUES ('schema_version', '1');
INSERT INTO runs (id, started, ended, status, command, argv, host, pid, clusterbench_version, probe)
    VALUES ('old-run', '2026-11-21T00:00:00Z', '2026-11-21T00:01:00Z', 'complete', 'clusterbench run bandwidth',
            '[]', 'h', 1, '0.1', '{}');
INSERT INTO results (run_id, seq, benchmark, metric, value, unit, higher_is_better, params, samples, summary,
    limits, warnings, measured_at)
    VALUES ('old-run', 0, 'bandwidth', 'read', 9000.0, 'MB/s', 1, '{"threads": 1}', '[9000.0]', '{"best": 9000.0}',
            '[]', '[]', '2026-11-21T00:00:30Z');
"""


def test_schema1_store_is_read_then_upgraded(tmp_path):
    """A store written by schema 1 reads as it is read-only, and is upgraded in place (1 -> 2 -> ... -> 7)
    when opened for writing; old runs read back with an empty cluster record, and the memory
    benchmark's old name 'bandwidth' is stored as 'membw'."""
    p = tmp_path / "old.db"
    db = sqlite3.connect(p)
    db.executescript(_SCHEMA1_RUNS)
    db.close()
    ro = Store(p, readonly=True)
    assert ro.schema == 1 and ro.get_run("old-run").cluster == {}
    assert ro.results("old-run")[0].benchmark == "bandwidth"  # read-only: read as it is
    ro.close()
    st = Store(p)
    assert st.schema == STORE_SCHEMA == 7 and st.fixes() == [] and st.get_run("old-run").tags == []
    assert st.results("old-run")[0].benchmark == "membw" and st.results("old-run")[0].value == 9000.0
    cols = {r[1] for r in st.db.execute("PRAGMA table_info(runs)")}
    assert {"cluster", "pid_start", "boot_id", "energy"} <= cols
    assert st.get_run("old-run").cluster == {} and st.get_run("old-run").energy is None
    rec = new_run_record(["clusterbench"], {}, "quick")
    rec["cluster"] = {"hosts": ["a", "b"], "nodes": {}}
    st.begin_run(rec)
    assert st.get_run(rec["id"]).cluster["hosts"] == ["a", "b"]
    assert st.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "7"


def test_schema5_store_gains_the_energy_column(tmp_path):
    """5 -> 6 adds runs.energy (null for older runs); a run closed with its energy reads it back."""
    p = tmp_path / "s5.db"
    st = Store(p)
    old = new_run_record(["clusterbench"], {}, "quick")
    st.begin_run(old)
    st.close()
    with sqlite3.connect(p) as db:
        db.execute("ALTER TABLE runs DROP COLUMN energy")
        db.execute("UPDATE meta SET value='5' WHERE key='schema_version'")
    ro = Store(p, readonly=True)
    assert ro.schema == 5 and ro.get_run(old["id"]).energy is None  # read as it is
    ro.close()
    st = Store(p)
    assert st.schema == 7 and st.get_run(old["id"]).energy is None
    rec = new_run_record(["clusterbench"], {}, "quick")
    st.begin_run(rec)
    energy = {"sources": {"n1": {"kind": "watts", "declared": True}}, "benchmarks": [{"benchmark": "hpl", "joules": 3.0}]}
    st.finish_run(rec["id"], "complete", energy=energy)
    assert st.get_run(rec["id"]).energy == energy


def test_newer_store_is_refused(tmp_path):
    p = tmp_path / "new.db"
    Store(p).close()
    db = sqlite3.connect(p)
    db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="schema 99"):
        Store(p)


def test_run_prefixes_are_literal_and_bad_ones_are_usage_errors(tmp_path, capsys):
    from clusterbench.cli import main
    from clusterbench.errors import UsageError

    db = tmp_path / "r.db"
    st = Store(db)
    ids = []
    for n in range(2):  # two ids sharing the prefix "abc"
        rec = new_run_record(["clusterbench", "run", "stream"], {"hostname": "x"}, "quick")
        rec["id"] = f"abc{n}" + rec["id"][4:]
        rid = st.begin_run(rec)
        st.finish_run(rid, "complete")
        ids.append(rid)
    assert st.resolve(ids[0][:12]) == ids[0]
    suffix = ids[0][-6:]
    for ref, message in ((f"%{suffix}", "no run"), ("%", "no run"), ("_", "no run"), ("\\", "no run"),
                         ("", "empty run id"), ("  ", "empty run id"), ("zz", "no run")):
        with pytest.raises(UsageError, match=message):  # wildcards are characters, not patterns
            st.resolve(ref)
    st.close()
    # ambiguous and unknown prefixes exit 2 (usage), not 5 (store); --limit must be >= 1
    assert main(["--db", str(db), "results", "show", "zz"]) == 2
    assert main(["--db", str(db), "results", "show", "abc"]) == 2
    assert "run prefix 'abc' is ambiguous (2 runs)" in capsys.readouterr().err
    for bad in ("0", "-1"):
        with pytest.raises(SystemExit) as ex:
            main(["--db", str(db), "results", "list", "--limit", bad])
        assert ex.value.code == 2
    assert main(["--db", str(db), "results", "list", "--limit", "1", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["runs"]) == 1
