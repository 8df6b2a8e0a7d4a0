"""The store on both back ends (issue 28 #2): the store's tests (tests/storekit.py) on an SQLite file and on a
PostgreSQL server of the tests' own (tests/pgkit.py); the same commands giving the same answers on both;
``results copy`` SQLite -> PostgreSQL -> SQLite compared row by row; many processes writing at once."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pgkit
import pytest
import storekit

from clusterbench.session import new_run_record
from clusterbench.store import Store

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass

CLI = [sys.executable, "-m", "clusterbench"]
CHECKS = ["check_roundtrip", "check_results_are_json", "check_newer_schema_is_refused",
          "check_schema_version_that_is_not_a_number", "check_foreign_tables_are_refused",
          "check_schema1_store_is_read_then_upgraded", "check_schema5_store_gains_the_energy_column",
          "check_schema7_store_gains_the_runs_index",
          "check_schema8_store_gains_the_figure_counts",
          "check_run_prefixes_are_literal", "check_tags_selectors_and_filters",
          "check_list_shows_the_newest_50_and_counts_all"]
pg_shared, pg_url, store_at = pgkit.pg_shared, pgkit.pg_url, pgkit.store_at  # the fixtures
TABLES = {"runs": "id", "run_tags": "run_id, tag", "fixes": "id", "results": "id"}


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("check", CHECKS)
def test_store_on_each_back_end(store_at: str, check: str) -> None:
    getattr(storekit, check)(store_at)


def _history(path: Path) -> None:
    """A small history with every kind of row: runs (one with energy and a note), tags, figures, a fix."""
    st = Store(path)
    for i in range(6):
        rec = new_run_record(["clusterbench", "run", "stream"], {"hostname": "n1", "cpu": {"model": "x\u00e9"}}, "quick")
        rec["tags"] = ["side-a" if i < 3 else "side-b"]  # no run id starts so
        rid = st.begin_run(rec)
        for t in (1, 2):
            for k in range(3):
                st.add_result(rid, storekit.result(1000.0 / 3 + i * 0.1 + k * 0.01 + t, threads=t))
        st.tag_run(rid, note=f"note {i}: \x1b[31m 'quoted' \\ %_" if i == 0 else None)
        st.finish_run(rid, "complete", energy={"joules": 1.5e-9 * i} if i == 1 else None)
    st.add_fix({"id": "fix-1", "rule": "governor", "hosts": ["n1"], "actions": [{"do": "x"}], "finding": {}})
    st.close()


def _rows(path: Path) -> dict[str, list]:
    db = sqlite3.connect(path)
    return {t: db.execute(f"SELECT * FROM {t} ORDER BY {key}").fetchall() for t, key in TABLES.items()}


def test_copy_sqlite_to_postgresql_and_back_is_lossless(tmp_path: Path, pg_url: str) -> None:
    """Every row of every table comes back as it was, and both back ends answer the same commands alike."""
    a, c = tmp_path / "a.db", tmp_path / "c.db"
    _history(a)
    p = _cli("results", "copy", "--from", str(a), "--to", pg_url)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("copied 6 runs (36 figures, 6 tags, 1 fixes)") and "cb-secret" not in p.stdout
    p = _cli("results", "copy", "--from", pg_url, "--to", str(c), "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["copied"] == {"runs": 6, "run_tags": 6, "fixes": 1, "results": 36}
    assert _rows(a) == _rows(c)
    for cmd in (["results", "list", "--json"], ["results", "show", "last", "--json"], ["compare", "side-a", "side-b", "--json"],
                ["results", "table", "stream", "--metric", "triad", "--rows", "threads", "--cols", "tag", "--json"],
                ["results", "list", "--tag", "side-b"], ["compare", "side-a", "side-b"]):
        here, there = _cli("--db", str(a), *cmd), _cli(*cmd, env={"CLUSTERBENCH_DB": pg_url})
        assert here.returncode == there.returncode == 0, there.stderr
        assert here.stdout == there.stdout, cmd


def test_copy_refuses_a_non_empty_target_unless_merging(tmp_path: Path, pg_url: str) -> None:
    a = tmp_path / "a.db"
    _history(a)
    assert _cli("results", "copy", "--from", str(a), "--to", pg_url).returncode == 0
    p = _cli("results", "copy", "--from", str(a), "--to", pg_url)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "--merge" in p.stderr, p.stderr
    extra = tmp_path / "extra.db"
    st = Store(extra)
    rid = st.begin_run(new_run_record(["clusterbench", "run", "stream"], {}, "quick"))
    st.add_result(rid, storekit.result(7.0))
    st.close()
    p = _cli("results", "copy", "--from", str(extra), "--to", pg_url, "--merge", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["copied"]["runs"] == 1
    p = _cli("results", "copy", "--from", str(a), "--to", pg_url, "--merge", "--json")
    assert json.loads(p.stdout)["skipped"] == {"runs": 6, "fixes": 1} and json.loads(p.stdout)["copied"]["results"] == 0
    merged = Store(pg_url, readonly=True)
    assert len(merged.list_runs()) == 7 and merged.results(rid)[0].value == 7.0
    p = _cli("results", "copy", "--from", str(tmp_path / "none.db"), "--to", str(tmp_path / "t.db"))
    assert p.returncode == 5 and not (tmp_path / "t.db").exists()  # a missing source creates no target


def test_copy_of_a_schema8_store_counts_each_runs_figures(tmp_path: Path, pg_url: str) -> None:
    """A schema-8 source (no runs.figures) is read as it is; each copy, PostgreSQL or SQLite, holds every
    run's number of figures (schema 9's upgrade applied to what was copied) and lists as the source does."""
    a = tmp_path / "a.db"
    _history(a)
    listed = _cli("--db", str(a), "results", "list", "--json").stdout
    db = sqlite3.connect(a)
    db.execute("ALTER TABLE runs DROP COLUMN figures")
    db.execute("UPDATE meta SET value='8' WHERE key='schema_version'")
    db.commit()
    db.close()
    for target in (pg_url, str(tmp_path / "t.db")):
        p = _cli("results", "copy", "--from", str(a), "--to", target)
        assert p.returncode == 0, p.stderr
        st = Store(target, readonly=True)
        assert st.schema == 9 and [r[0] for r in st.db.execute("SELECT figures FROM runs").fetchall()] == [6] * 6
        st.close()
        assert _cli("--db", target, "results", "list", "--json").stdout == listed


def _with_statistics(url: str) -> set[tuple[str, str]]:
    """The (table, column) pairs PostgreSQL's planner has statistics for (pg_stats: ANALYZE's)."""
    db = storekit.raw(url)
    got = {(r[0], r[1]) for r in db.execute("SELECT tablename, attname FROM pg_stats WHERE schemaname = current_schema()")}
    db.close()
    return got


def test_copy_and_upgrade_leave_postgresql_with_planner_statistics(tmp_path: Path, pg_url: str) -> None:
    """`results copy` ANALYZEs the tables it wrote and an upgrade those it changed, so the first queries after
    either are planned with statistics (a few rows: autovacuum would not have analyzed them at all)."""
    a = tmp_path / "a.db"
    _history(a)
    p = _cli("results", "copy", "--from", str(a), "--to", pg_url)
    assert p.returncode == 0, p.stderr
    # every table, and the expression of the index runs_id_lower (lower(id)), which only ANALYZE gathers
    assert {t for t, _ in _with_statistics(pg_url)} == {"runs", "run_tags", "results", "fixes", "runs_id_lower"}
    db = storekit.raw(pg_url)
    db.execute("ALTER TABLE runs DROP COLUMN figures")
    db.execute("UPDATE meta SET value='8' WHERE key='schema_version'")
    db.close()
    assert ("runs", "figures") not in _with_statistics(pg_url)
    Store(pg_url).close()  # opened for writing: upgraded to schema 9, runs.figures added and filled in
    assert ("runs", "figures") in _with_statistics(pg_url)


WRITER = """
import sys
from clusterbench.store import Store
from clusterbench.session import new_run_record
sys.path.insert(0, sys.argv[3])
import storekit
st = Store(sys.argv[1])
for r in range(int(sys.argv[2])):
    rid = st.begin_run(new_run_record(["clusterbench", "run", "stream"], {}, "quick"))
    for k in range(4):
        st.add_result(rid, storekit.result(float(k), threads=k))
    st.tag_run(rid, add=["w"])
    st.finish_run(rid, "complete")
    print(rid, flush=True)
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_many_processes_writing_at_once_store_every_run_once(tmp_path: Path, backend: str,
                                                            request: pytest.FixtureRequest) -> None:
    """8 processes (the first creating the store at the same time as the others) write 5 runs of 4
    figures each: every run stored once, complete, with its figures numbered 0..3."""
    where = str(tmp_path / "r.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    tests = str(Path(__file__).resolve().parents[1])
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, where, "5", tests], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(8)]
    acked = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        acked += out.split()
    st = Store(where, readonly=True)
    runs = st.list_runs()
    assert len(acked) == len(set(acked)) == 40 and sorted(r.id for r in runs) == sorted(acked)
    assert all(r.status == "complete" and r.results == 4 and r.tags == ["w"] for r in runs)
    seqs = st.db.execute("SELECT run_id, seq FROM results ORDER BY run_id, seq").fetchall()
    assert len(seqs) == 160 and {tuple(r) for r in seqs} == {(i, k) for i in acked for k in range(4)}
