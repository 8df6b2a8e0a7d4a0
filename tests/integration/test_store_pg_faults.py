"""The shared store on PostgreSQL under faults (issue 28, "Bad input and faults"): the server down or stopped
while a process writes, a wrong password, a user who may only read, a writer killed inside its transaction
and one waiting for another's lock. Each: one line (exit 5), nothing half-written, no process left behind."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pgkit
import pytest
import storekit

from clusterbench.errors import StoreError
from clusterbench.session import new_run_record
from clusterbench.store import Store

CLI = [sys.executable, "-m", "clusterbench"]
TESTS = str(Path(__file__).resolve().parents[1])
pg_shared, pg_own, pg_url = pgkit.pg_shared, pgkit.pg_own, pgkit.pg_url  # the fixtures


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def _one_line(p: subprocess.CompletedProcess, *words: str) -> str:
    err = p.stderr.strip()
    assert p.returncode == 5 and len(err.splitlines()) == 1, (p.returncode, p.stderr)
    assert all(w in err for w in words) and "secret" not in err and "Traceback" not in err, err
    return err


def _store_with_a_run(url: str) -> str:
    st = Store(url)
    rid = st.begin_run(new_run_record(["clusterbench", "run", "stream"], {}, "quick"))
    st.add_result(rid, storekit.result(3.0))
    st.finish_run(rid, "complete")
    st.close()
    return rid


@pytest.mark.parallel
def test_server_down_wrong_password_and_read_only_user(pg_own: pgkit.PgServer) -> None:
    db = pg_own.new_database()
    url = pg_own.url("cb", db)
    rid = _store_with_a_run(url)
    # a user who may only read: reading works, any write is refused before anything is measured
    ro = pg_own.url("cbro", db)
    assert _cli("--db", ro, "results", "list").returncode == 0
    _one_line(_cli("--db", ro, "results", "tag", "last", "x"), "read-only for this user", "GRANT")
    _one_line(_cli("--db", ro, "run", "fpu", "--quick"), "read-only")
    # a wrong password
    _one_line(_cli("--db", pg_own.url("cb", db, password="wrong"), "results", "list"), "refused the login")
    assert Store(url, readonly=True).get_run(rid).tags == [] and len(Store(url).list_runs()) == 1
    # the server down: refused connections, the same one line from every command
    pg_own.stop()
    for args in (("results", "list"), ("results", "tag", "last", "x"), ("run", "fpu", "--quick")):
        _one_line(_cli("--db", url, *args), "cannot reach the results store server", "pg_isready")
    _one_line(_cli("results", "list", env={"CLUSTERBENCH_DB": url}), "cannot reach")
    pg_own.start()
    st = Store(url, readonly=True)
    assert [r.id for r in st.list_runs()] == [rid] and st.get_run(rid).tags == []  # nothing was written


WRITER = """
import sys
sys.path.insert(0, sys.argv[2])
import storekit
from clusterbench.errors import StoreError
from clusterbench.errors import StoreError
from clusterbench.session import new_run_record
from clusterbench.store import Store
try:
    st = Store(sys.argv[1])
    for r in range(500):
        rid = st.begin_run(new_run_record(["clusterbench", "run", "stream"], {}, "quick"))
        for k in range(4):
            st.add_result(rid, storekit.result(float(k), threads=k))
        st.finish_run(rid, "complete")
        print(rid, flush=True)
except StoreError as e:
    print(e, file=sys.stderr)
    sys.exit(5)
"""


@pytest.mark.parallel
def test_server_stopped_while_writing(pg_own: pgkit.PgServer) -> None:
    """The server killed (immediate stop) under a writer: the writer fails at once with one line, and after
    the restart every acknowledged run is whole; the one in flight reads as incomplete, never half a figure, or,
    where the server committed its finish and died before the reply reached the writer, as complete and whole."""
    url = pg_own.url("cb", pg_own.new_database())
    Store(url).close()
    w = subprocess.Popen([sys.executable, "-c", WRITER, url, TESTS], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    acked = [w.stdout.readline().strip() for _ in range(3)]
    pg_own.stop("immediate")
    try:
        out, err = w.communicate(timeout=60)
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
    acked += out.split()
    assert w.returncode == 5 and len(err.strip().splitlines()) == 1, err
    assert "lost the connection" in err or "cannot reach" in err, err
    pg_own.start()
    st = Store(url, readonly=True)
    runs = {r.id: r for r in st.list_runs()}
    assert set(acked) <= set(runs) and len(runs) - len(acked) <= 1
    for rid, run in runs.items():
        if rid in acked:
            assert run.status == "complete" and run.results == 4
        elif run.status == "complete":  # finish_run's commit landed and its reply was lost with the server: whole
            assert run.results == 4, (rid, run.results)
        else:  # begun, not finished (its figures may all be in: the server died before finish_run): its writer is gone
            assert run.status == "incomplete" and "died" in run.error and run.results <= 4
        assert [r.params["threads"] for r in st.results(rid)] == list(range(run.results))


HOLDER = """
import sys
from clusterbench.errors import StoreError
from clusterbench.session import new_run_record
from clusterbench.store import Store
st = Store(sys.argv[1])
with st._tx():
    rec = new_run_record(["clusterbench", "run", "held"], {}, "quick")
    st.db.execute("INSERT INTO runs (id, started, status, command, argv, host, pid, clusterbench_version, probe)"
                  " VALUES (?, ?, 'running', 'held', '[]', 'h', 1, '0', '{}')", (rec["id"], rec["started"]))
    print(rec["id"], flush=True)
    sys.stdin.read()
"""


def test_writer_killed_inside_its_transaction_and_a_held_lock(pg_url: str, pg_shared: pgkit.PgServer) -> None:
    """A writer holding the store's write lock: another waits CLUSTERBENCH_DB_TIMEOUT seconds and says
    'locked'; killed (-9) inside its transaction, nothing of it stays, its connection is gone and the next
    writer goes on at once."""
    rid = _store_with_a_run(pg_url)
    h = subprocess.Popen([sys.executable, "-c", HOLDER, pg_url], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        assert h.stdout.readline().strip()  # inside its transaction, holding the lock
        t = time.monotonic()
        _one_line(_cli("--db", pg_url, "results", "tag", "last", "x", env={"CLUSTERBENCH_DB_TIMEOUT": "1"}),
                  "is locked by another process (waited 1 s)")
        assert time.monotonic() - t < 60
        assert _cli("--db", pg_url, "results", "list").returncode == 0  # readers do not wait
        os.kill(h.pid, signal.SIGKILL)
        h.wait(timeout=30)
    finally:
        if h.poll() is None:
            h.kill()
            h.wait()
    p = _cli("--db", pg_url, "results", "tag", rid, "after", env={"CLUSTERBENCH_DB_TIMEOUT": "20"})
    assert p.returncode == 0, p.stderr
    st = Store(pg_url, readonly=True)
    assert [r.id for r in st.list_runs()] == [rid] and st.get_run(rid).tags == ["after"]  # not the held run
    db = pg_url.rsplit("/", 1)[1]
    for _ in range(50):  # the server notices the closed socket: no session of the killed writer stays
        left = pg_shared.sql(f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{db}' AND pid <> pg_backend_pid()"
                             " AND application_name = 'clusterbench' AND state LIKE 'idle in transaction%'")
        if not left[0][0]:
            break
        time.sleep(0.1)
    assert not left[0][0]


def test_a_nul_in_a_text_is_refused_in_one_line(pg_url: str) -> None:
    """PostgreSQL's text cannot hold NUL (SQLite's can; no command line can carry one, a note from Python can):
    the write is refused in one line, nothing of it kept."""
    rid = _store_with_a_run(pg_url)
    st = Store(pg_url)
    with pytest.raises(StoreError, match="cannot hold a NUL") as err:
        st.tag_run(rid, add=["keep"], note="a\x00b")
    assert "\n" not in str(err.value) and "secret" not in str(err.value)
    assert Store(pg_url, readonly=True).get_run(rid).tags == []
