"""The store's tests that hold on every back end, each a function of the store's location (a file path or
a postgresql:// URL): tests/unit/test_store.py runs them on SQLite, tests/integration/test_store_backends.py
on SQLite and on a PostgreSQL server of the tests' own (tests/pgkit.py)."""
from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest

from clusterbench.benchmarks.base import Result
from clusterbench.errors import StoreError, UsageError
from clusterbench.session import new_run_record
from clusterbench.store import STORE_SCHEMA, Store
from clusterbench.store.backends import backend_for, location


def result(value: float = 1.0, benchmark: str = "stream", metric: str = "triad", **params: Any) -> Result:
    return Result(benchmark=benchmark, metric=metric, value=value, unit="MB/s", higher_is_better=True,
                  params=params or {"threads": 1}, samples=[value, value * 0.9],
                  summary={"n": 2, "best": value, "median": value, "min": value, "max": value, "mean": value,
                           "stdev": 0, "cv": 0.0})


def raw(where: str) -> Any:
    """A connection to the store's database past the Store's checks (autocommit; the store's SQL dialect)."""
    return backend_for(location(where), 30.0).connect(False)


def raw_script(where: str, script: str) -> None:
    """Statements (';'-separated) written straight into the database, the schema's types translated."""
    backend = backend_for(location(where), 30.0)
    db = backend.connect(False)
    for stmt in script.split(";"):
        if stmt.strip():
            db.execute(backend.ddl(stmt))
    db.close()


def check_roundtrip(where: str) -> None:
    st = Store(where)
    rid = st.begin_run(new_run_record(["clusterbench", "run", "stream"], {"hostname": "x"}, "quick"))
    st.add_build(rid, "stream", {"compiler": "cc"})
    st.add_result(rid, result(5.0))
    st.finish_run(rid, "complete")
    run = st.get_run(rid[:8])
    assert run.status == "complete" and run.builds["stream"]["compiler"] == "cc"
    assert run.probe == {"hostname": "x"}
    res = st.results("last")
    assert res[0].value == 5.0 and res[0].samples == [5.0, 4.5]
    assert st.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(STORE_SCHEMA)
    st.close()


def check_results_are_json(where: str) -> None:
    st = Store(where)
    rid = st.begin_run(new_run_record(["c"], {}, "default"))
    st.add_result(rid, result(1 / 3))
    row = st.db.execute("SELECT params, samples, summary, value FROM results").fetchone()
    assert json.loads(row["params"]) == {"threads": 1}
    assert json.loads(row["samples"]) == [1 / 3, 1 / 3 * 0.9]
    assert json.loads(row["summary"])["best"] == 1 / 3 and row["value"] == 1 / 3  # every digit of a double
    st.close()


def check_newer_schema_is_refused(where: str) -> None:
    Store(where).close()
    raw(where).execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(StoreError, match="schema 99"):
        Store(where)


def check_schema_version_that_is_not_a_number(where: str) -> None:
    Store(where).close()
    raw(where).execute("UPDATE meta SET value='two' WHERE key='schema_version'")
    for readonly in (False, True):
        with pytest.raises(StoreError, match="records schema version 'two', not a number"):
            Store(where, readonly=readonly)


def check_foreign_tables_are_refused(where: str) -> None:
    raw_script(where, "CREATE TABLE t (x INTEGER)")
    with pytest.raises(StoreError, match="not a clusterbench results store"):
        Store(where)


SCHEMA1_RUNS = """CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
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


def check_schema1_store_is_read_then_upgraded(where: str) -> None:
    """A store written by schema 1 reads as it is read-only, and is upgraded in place
    when opened for writing (1 -> 2 -> ... -> 9); old runs read back with an empty cluster record, and the memory
    benchmark's old name 'bandwidth' is stored as 'membw'."""
    raw_script(where, SCHEMA1_RUNS)
    ro = Store(where, readonly=True)
    assert ro.schema == 1 and ro.get_run("old-run").cluster == {}
    assert ro.results("old-run")[0].benchmark == "bandwidth"  # read-only: read as it is
    ro.close()
    st = Store(where)
    assert st.schema == STORE_SCHEMA == 9 and st.fixes() == [] and st.get_run("old-run").tags == []
    assert st.results("old-run")[0].benchmark == "membw" and st.results("old-run")[0].value == 9000.0
    assert {"cluster", "pid_start", "boot_id", "energy"} <= st.backend.columns(st.db, "runs")
    assert st.get_run("old-run").cluster == {} and st.get_run("old-run").energy is None
    rec = new_run_record(["clusterbench"], {}, "quick")
    rec["cluster"] = {"hosts": ["a", "b"], "nodes": {}}
    st.begin_run(rec)
    assert st.get_run(rec["id"]).cluster["hosts"] == ["a", "b"]
    assert st.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "9"
    assert "runs_started" in indexes(where, "runs")
    assert [r.results for r in st.list_runs() if r.id == "old-run"] == [1]  # its figure counted at the upgrade
    st.close()


def check_schema5_store_gains_the_energy_column(where: str) -> None:
    """5 -> 6 adds runs.energy (null for older runs); a run closed with its energy reads it back."""
    st = Store(where)
    old = new_run_record(["clusterbench"], {}, "quick")
    st.begin_run(old)
    st.close()
    db = raw(where)
    db.execute("ALTER TABLE runs DROP COLUMN energy")
    db.execute("UPDATE meta SET value='5' WHERE key='schema_version'")
    db.close()
    ro = Store(where, readonly=True)
    assert ro.schema == 5 and ro.get_run(old["id"]).energy is None  # read as it is
    ro.close()
    st = Store(where)
    assert st.schema == STORE_SCHEMA and st.get_run(old["id"]).energy is None
    rec = new_run_record(["clusterbench"], {}, "quick")
    st.begin_run(rec)
    energy = {"sources": {"n1": {"kind": "watts", "declared": True}}, "benchmarks": [{"benchmark": "hpl", "joules": 3.0}]}
    st.finish_run(rec["id"], "complete", energy=energy)
    assert st.get_run(rec["id"]).energy == energy
    st.close()


def indexes(where: str, table: str) -> set[str]:
    """The names of ``table``'s indexes, on either back end."""
    db = raw(where)
    q = ("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = ?"
         if where.startswith("postgres") else "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?")
    names = {r[0] for r in db.execute(q, (table,)).fetchall()}
    db.close()
    return names


def check_schema7_store_gains_the_runs_index(where: str) -> None:
    """7 -> 8 adds the indexes runs_started (the runs in time order) and runs_id_lower (a run by a prefix of
    its id): a schema-7 store reads as it is read-only, without them, and gains them when opened for
    writing; its runs list newest first, and a prefix in either case finds its run, either way."""
    st = Store(where)
    recs = [new_run_record(["clusterbench", "run", "stream"], {}, "quick") for _ in range(3)]
    for i, rec in enumerate(recs):
        rec["started"] = f"2026-11-2{i}T00:00:00.000+00:00"
        st.begin_run(rec)
    st.close()
    db = raw(where)
    db.execute("DROP INDEX runs_started")
    db.execute("DROP INDEX runs_id_lower")
    db.execute("UPDATE meta SET value='7' WHERE key='schema_version'")
    db.close()
    newest_first = [r["id"] for r in reversed(recs)]
    ro = Store(where, readonly=True)
    assert ro.schema == 7 and [r.id for r in ro.list_runs()] == newest_first
    assert [r.id for r in ro.list_runs(1)] == newest_first[:1] and ro.resolve("last~1") == newest_first[1]
    assert ro.resolve(recs[0]["id"][:13].upper()) == recs[0]["id"]
    ro.close()
    assert not {"runs_started", "runs_id_lower"} & indexes(where, "runs")
    st = Store(where)
    assert st.schema == STORE_SCHEMA == 9 and {"runs_started", "runs_id_lower"} <= indexes(where, "runs")
    assert [r.id for r in st.list_runs()] == newest_first and st.resolve("last") == newest_first[0]
    assert st.resolve(recs[0]["id"][:13].upper()) == recs[0]["id"]
    assert st.select_runs(f"{recs[1]['id'][:13]},{recs[2]['id'][:13].upper()}") == [recs[1]["id"], recs[2]["id"]]
    assert st.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "9"
    st.close()


def check_schema8_store_gains_the_figure_counts(where: str) -> None:
    """8 -> 9 keeps each run's number of figures with the run (runs.figures): a schema-8 store reads as it
    is read-only (each run's figures counted), and gains the column, filled in, when opened for writing;
    a figure written or a run imported since counts as well, and every listing says what it said before."""
    from dataclasses import replace

    from clusterbench.store.imports import insert_runs

    st = Store(where)
    ids = []
    for n in (0, 1, 3):
        rec = new_run_record(["clusterbench", "run", "stream"], {}, "quick")
        ids.append(st.begin_run(rec))
        for k in range(n):
            st.add_result(rec["id"], result(float(k + 1)))
        st.finish_run(rec["id"], "complete")
    counts = {r.id: r.results for r in st.list_runs()}
    assert counts == dict(zip(ids, (0, 1, 3)))
    assert {r[0]: r[1] for r in st.db.execute("SELECT id, figures FROM runs").fetchall()} == counts
    st.close()
    db = raw(where)
    db.execute("ALTER TABLE runs DROP COLUMN figures")
    db.execute("UPDATE meta SET value='8' WHERE key='schema_version'")
    db.close()
    ro = Store(where, readonly=True)
    assert ro.schema == 8 and {r.id: r.results for r in ro.list_runs()} == counts  # read as it is: counted
    ro.close()
    db = raw(where)
    assert "figures" not in backend_for(location(where), 30.0).columns(db, "runs")
    db.close()
    st = Store(where)
    assert st.schema == STORE_SCHEMA == 9 and {r.id: r.results for r in st.list_runs()} == counts
    assert {r[0]: r[1] for r in st.db.execute("SELECT id, figures FROM runs").fetchall()} == counts
    st.add_result(ids[0], result(9.0))
    insert_runs(st, [(st.get_run(ids[2]), [*st.results(ids[2]), replace(result(4.0), measured_at="2026-11-27T00:00:00Z")])],
                replace=True)  # as results import does
    assert {r.id: r.results for r in st.list_runs()} == {**counts, ids[0]: 1, ids[2]: 4}
    assert st.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "9"
    st.close()


def check_run_prefixes_are_literal(where: str) -> list[str]:
    """Wildcards in a run prefix are characters, not patterns; prefixes ignore ASCII case (SQLite's LIKE)."""
    st = Store(where)
    ids = []
    for n in range(2):  # two ids sharing the prefix "abc"
        rec = new_run_record(["clusterbench", "run", "stream"], {"hostname": "x"}, "quick")
        rec["id"] = f"abc{n}" + rec["id"][4:]
        rid = st.begin_run(rec)
        st.finish_run(rid, "complete")
        ids.append(rid)
    assert st.resolve(ids[0][:12]) == ids[0] and st.resolve(ids[0][:12].upper()) == ids[0]
    suffix = ids[0][-6:]
    for ref, message in ((f"%{suffix}", "no run"), ("%", "no run"), ("_", "no run"), ("\\", "no run"),
                         ("", "empty run id"), ("  ", "empty run id"), ("zz", "no run")):
        with pytest.raises(UsageError, match=message):
            st.resolve(ref)
    with pytest.raises(UsageError, match=r"run prefix 'abc' is ambiguous \(2 runs\)"):
        st.resolve("abc")
    st.close()
    return ids


def check_tags_selectors_and_filters(where: str) -> None:
    """Tags, selectors, list filters, figures and history answer alike on every back end."""
    st = Store(where)
    made = []
    for i in range(4):
        rec = new_run_record(["clusterbench", "run", "stream" if i % 2 else "fpu"], {"hostname": "x"}, "quick")
        rec["started"] = f"2026-11-2{i}T00:00:00.000+00:00"
        rec["tags"] = ["even" if i % 2 == 0 else "odd"]
        rid = st.begin_run(rec)
        st.add_result(rid, result(10.0 + i, threads=i))
        st.add_result(rid, result(20.0 + i, metric="copy", threads=i))
        st.finish_run(rid, "complete", warnings=[{"code": "w", "message": "m", "remedy": "r"}], notes=["n"])
        made.append(rid)
    st.tag_run(made[0], add=["base", "Zed", "alpha"], note="first\nline")
    assert st.get_run(made[0]).tags == ["Zed", "alpha", "base", "even"]  # byte order, as SQLite sorts
    assert st.all_tags() == {"Zed": 1, "alpha": 1, "base": 1, "even": 2, "odd": 2}
    assert st.select_runs("even") == [made[0], made[2]] and st.select_runs("last~1,last") == made[2:]
    assert [r.id for r in st.list_runs(tag="odd")] == [made[3], made[1]]
    assert [r.id for r in st.list_runs(benchmark="fpu")] == [made[2], made[0]]  # by its command
    assert [r.id for r in st.list_runs(since="2026-11-22")] == [made[3], made[2]]
    assert [r.results for r in st.list_runs(limit=2)] == [2, 2]
    assert st.get_run(made[0]).note == "first\nline" and st.get_run(made[0]).warnings[0]["code"] == "w"
    figs = st.figures("stream", "triad")
    assert [f.value for f in figs] == [10.0, 11.0, 12.0, 13.0] and figs[0].tags == ["Zed", "alpha", "base", "even"]
    assert [len(v) for v in st.results_of(made, full=False).values()] == [2, 2, 2, 2]
    assert st.benchmark_names() == ["stream"] and st.count_results(made[1]) == 2
    assert [r.value for r in st.history("stream", "copy", host=st.get_run(made[0]).host)] == [20.0, 21.0, 22.0, 23.0]
    st.tag_run(made[0], remove=["Zed"], note="")
    assert st.get_run(made[0]).tags == ["alpha", "base", "even"] and st.get_run(made[0]).note is None
    st.add_fix({"id": "fix-1", "rule": "governor", "hosts": ["a"], "actions": [{"do": "x"}], "finding": {"f": 1}})
    st.set_fix("fix-1", status="applied", verify={"ok": True})
    assert st.get_fix("fix-1")["status"] == "applied" and st.fixes("applied")[0]["verify"] == {"ok": True}
    st.set_fix("fix-1", status="undone")
    assert st.get_fix("fix")["ended"] and st.fixes()[0]["status"] == "undone"
    st.check_writable()
    st.check_writable()  # the upsert of meta's last_open
    st.close()


def _cli_out(*argv: str) -> tuple[int, str]:
    """``clusterbench ARGV`` in-process: its exit code and what it printed."""
    from clusterbench.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


def check_list_shows_the_newest_50_and_counts_all(where: str) -> None:
    """`results list` shows the newest 50 runs and a last line with how many matched and how to see them all;
    --all shows every one; --json says how many matched in "total"; Store.count_runs counts as list_runs lists."""
    st = Store(where)
    made = []
    for i in range(53):
        rec = new_run_record(["clusterbench", "run", "stream" if i % 2 else "fpu"], {"hostname": "x"}, "quick")
        rec["started"] = f"2026-11-{1 + i // 24:02d}T{i % 24:02d}:00:00.000+00:00"
        rec["tags"] = ["odd" if i % 2 else "even"]
        made.append(st.begin_run(rec))
        st.finish_run(made[-1], "complete")
    newest = made[::-1]
    for filters in ({}, {"tag": "odd"}, {"benchmark": "fpu"}, {"since": "2026-11-02"}, {"tag": "none"}):
        assert st.count_runs(**filters) == len(st.list_runs(**filters)), filters
    st.close()

    def listed(text: str) -> list[str]:  # the run column of a text listing, its header and last line left out
        return [line.split()[0] for line in text.splitlines()[1:] if not line.startswith("the newest")]

    code, out = _cli_out("--db", where, "results", "list")
    assert code == 0 and listed(out) == [r[:8] for r in newest[:50]]
    assert out.splitlines()[-1] == "the newest 50 of 53 runs; all of them: --all (or --limit N for the newest N)"
    code, out = _cli_out("--db", where, "results", "list", "--all")
    assert code == 0 and listed(out) == [r[:8] for r in newest] and "the newest" not in out
    code, out = _cli_out("--db", where, "results", "list", "--limit", "60")
    assert code == 0 and len(listed(out)) == 53 and "the newest" not in out
    code, out = _cli_out("--db", where, "results", "list", "--tag", "odd", "--limit", "2")
    assert code == 0 and listed(out) == [newest[1][:8], newest[3][:8]]
    assert out.splitlines()[-1].startswith("the newest 2 of 26 runs; ")
    for argv, ids, total in ((("results", "list", "--json"), newest[:50], 53),
                             (("results", "list", "--json", "--all"), newest, 53),
                             (("results", "list", "--json", "--tag", "even"), newest[::2], 27),
                             (("results", "list", "--json", "--tag", "odd", "--limit", "1"), newest[1:2], 26)):
        code, out = _cli_out("--db", where, *argv)
        doc = json.loads(out)
        assert code == 0 and [r["id"] for r in doc["runs"]] == ids and doc["total"] == total, argv
    with pytest.raises(SystemExit) as exc:  # argparse: --all and --limit together are a usage error
        _cli_out("--db", where, "results", "list", "--all", "--limit", "3")
    assert exc.value.code == 2
