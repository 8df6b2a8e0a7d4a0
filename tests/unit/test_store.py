"""The pure tests (they start no process) of what tests/integration/test_store.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import json
import os
import sqlite3

import pytest

import storekit
from clusterbench.errors import StoreError
from clusterbench.store import Store


def test_roundtrip(tmp_path):
    storekit.check_roundtrip(str(tmp_path / "r.db"))


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
    storekit.check_newer_schema_is_refused(str(tmp_path / "r.db"))


def test_schema_version_that_is_not_a_number_is_one_store_error(tmp_path):
    storekit.check_schema_version_that_is_not_a_number(str(tmp_path / "r.db"))


def test_unwritable_store_path(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(StoreError, match="is not a folder"):
        Store(f / "r.db")  # parent is a regular file


def test_missing_store_readonly(tmp_path):
    with pytest.raises(StoreError, match="no results store"):
        Store(tmp_path / "none.db", readonly=True)


def test_results_are_json(tmp_path):
    storekit.check_results_are_json(str(tmp_path / "r.db"))


def test_schema1_store_is_read_then_upgraded(tmp_path):
    storekit.check_schema1_store_is_read_then_upgraded(str(tmp_path / "old.db"))
    cols = {r[1] for r in sqlite3.connect(tmp_path / "old.db").execute("PRAGMA table_info(runs)")}
    assert {"cluster", "pid_start", "boot_id", "energy"} <= cols


def test_schema5_store_gains_the_energy_column(tmp_path):
    storekit.check_schema5_store_gains_the_energy_column(str(tmp_path / "s5.db"))


def test_schema7_store_gains_the_runs_index(tmp_path):
    storekit.check_schema7_store_gains_the_runs_index(str(tmp_path / "s7.db"))


def test_schema8_store_gains_the_figure_counts(tmp_path):
    storekit.check_schema8_store_gains_the_figure_counts(str(tmp_path / "s8.db"))


def test_listing_judges_a_running_run_by_its_process(tmp_path):
    """results list reads a running run's process (pid, start time, boot) and only a running run's: one
    of this live process reads running, one whose pid was reused (another start time) incomplete."""
    from clusterbench.session import new_run_record
    from clusterbench.store.liveness import process_start

    st = Store(tmp_path / "r.db")
    live, reused = (new_run_record(["clusterbench", "run", "stream"], {}, "quick") for _ in range(2))
    reused["pid_start"] = process_start(os.getpid()) + 1
    for rec in (live, reused):
        st.begin_run(rec)
    done = new_run_record(["clusterbench", "run", "stream"], {}, "quick")
    st.begin_run(done)
    st.finish_run(done["id"], "complete")
    status = {r.id: r.status for r in Store(tmp_path / "r.db", readonly=True).list_runs()}
    assert status == {live["id"]: "running", reused["id"]: "incomplete", done["id"]: "complete"}


def test_id_prefix_ranges_cover_what_like_matches():
    """The range on lower(id) holds every id LIKE matches (ASCII case ignored, wildcards literal): the
    LIKE still decides, the range only narrows what the database reads."""
    from clusterbench.store.names import id_prefix

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE runs (id TEXT PRIMARY KEY)")
    ids = ["abc1", "ABC2", "aBd3", "ab%c", "ab_c", "abz", "ab\\x", "\ud7ffz", "\ue000y", "\U0010ffffq", "É1", "é2"]
    db.executemany("INSERT INTO runs VALUES (?)", [(i,) for i in ids])
    for ref in ["ab", "AB", "abc", "ab%", "ab_", "ab\\", "\ud7ff", "\U0010ffff", "É", "é", "z", "a"]:
        cond, args = id_prefix(ref)
        got = {r[0] for r in db.execute(f"SELECT id FROM runs WHERE {cond}", args)}
        like = {r[0] for r in db.execute("SELECT id FROM runs WHERE id LIKE ? ESCAPE '\\'",
                                         (ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",))}
        assert got == like, ref
    assert {r[0] for r in db.execute("SELECT id FROM runs WHERE " + id_prefix("AB")[0], id_prefix("AB")[1])} \
        == {"abc1", "ABC2", "aBd3", "ab%c", "ab_c", "abz", "ab\\x"}


def test_tags_selectors_and_filters(tmp_path):
    storekit.check_tags_selectors_and_filters(str(tmp_path / "r.db"))


def test_list_shows_the_newest_50_and_counts_all(tmp_path):
    storekit.check_list_shows_the_newest_50_and_counts_all(str(tmp_path / "r.db"))


def test_run_prefixes_are_literal_and_bad_ones_are_usage_errors(tmp_path, capsys):
    from clusterbench.cli import main

    db = tmp_path / "r.db"
    storekit.check_run_prefixes_are_literal(str(db))
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


def test_a_store_urls_password_is_neither_kept_nor_shown(tmp_path):
    """A --db URL with a password in a run's command line is stored with the password as ***; messages show
    the URL so too; a scheme that is no kind of store is refused, not taken for a file name."""
    from clusterbench.errors import UsageError
    from clusterbench.session import new_run_record
    from clusterbench.store.backends import masked

    url = "postgresql://alice:s3cr%40t@db.example.org:5433/cb?sslmode=require"
    assert masked(url) == "postgresql://alice:***@db.example.org:5433/cb?sslmode=require"
    st = Store(tmp_path / "r.db")
    rec = new_run_record(["clusterbench", f"--db={url}", "run", "fpu"], {}, "quick")
    run = st.get_run(st.begin_run(rec))
    assert "s3cr" not in run.command and "s3cr" not in " ".join(run.argv) and "alice:***@db.example.org" in run.command
    assert rec["argv"][1] == f"--db={url}"  # the caller's record is left as it was
    with pytest.raises(UsageError, match="unknown kind of store"):
        Store("mysql://alice:pw@host/db")
