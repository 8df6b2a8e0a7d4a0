"""The store under faults (issue 14 #5, #6): real SQLite locks held by a second process, a directory or
an unwritable folder as --db, and a recorded process whose pid now belongs to someone else."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clikit import run_or_fail

from clusterbench.errors import StoreError
from clusterbench.session import new_run_record
from clusterbench.store import STORE_SCHEMA, Store
from clusterbench.store.liveness import process_start

CLI = [sys.executable, "-m", "clusterbench"]


def _cli(*args: str, env: dict | None = None, user: int | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, user=user,
                          env={**os.environ, **(env or {})})


@pytest.fixture
def store_file(tmp_path: Path) -> Path:
    p = tmp_path / "r.db"
    st = Store(p)
    st.finish_run(st.begin_run(new_run_record(["clusterbench", "run", "x"], {}, "quick")), "complete")
    st.close()
    return p


class _Locker:
    """A second process holding an EXCLUSIVE lock on the store until stopped (or, with ``reader``, the
    SHARED lock of an open read transaction: writers may start but cannot commit)."""

    CODE = ("import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
            "c.execute(sys.argv[2]); c.execute('SELECT count(*) FROM runs').fetchall(); "
            "print('locked', flush=True); sys.stdin.read()")

    def __init__(self, path: Path, reader: bool = False) -> None:
        begin = "BEGIN" if reader else "BEGIN EXCLUSIVE"
        self.proc = subprocess.Popen([sys.executable, "-c", self.CODE, str(path), begin], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout and self.proc.stdout.readline().strip() == "locked"

    def release(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.mark.parallel
@pytest.mark.integration
@pytest.mark.parametrize("command", [("results", "list"), ("run", "fpu", "--quick")])
def test_a_locked_store_is_reported_as_locked_not_corrupted(store_file: Path, command: tuple) -> None:
    locker = _Locker(store_file)
    try:
        t0 = time.monotonic()
        p = _cli("--db", str(store_file), *command, env={"CLUSTERBENCH_DB_TIMEOUT": "0.5"})
        waited = time.monotonic() - t0
    finally:
        locker.release()
    assert p.returncode == 5, p.stderr
    assert "is locked by another process (waited 0.5 s)" in p.stderr and "retry" in p.stderr
    assert "corrupt" not in p.stderr and "aside" not in p.stderr  # never advice that can lose data
    assert len(p.stderr.strip().splitlines()) == 1 and waited < 30
    after = _cli("--db", str(store_file), "results", "list")
    assert after.returncode == 0 and "complete" in after.stdout
    with sqlite3.connect(store_file) as db:  # the refused run wrote nothing
        assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 1


@pytest.mark.parallel
@pytest.mark.integration
def test_a_lock_taken_after_opening_is_named_in_writes_and_reads(store_file: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The store was opened fine, then another process locks it: the next write (a transaction) and the
    next read each say 'locked', waited the configured time, and work again once it is released."""
    monkeypatch.setenv("CLUSTERBENCH_DB_TIMEOUT", "0.3")
    st = Store(store_file)
    locker = _Locker(store_file)
    try:
        for attempt in (st.check_writable, lambda: st.begin_run(new_run_record(["c"], {}, "quick")),
                        lambda: st.list_runs()):
            t0 = time.monotonic()
            with pytest.raises(StoreError, match=r"is locked by another process \(waited 0.3 s\)") as ei:
                attempt()
            assert 0.25 < time.monotonic() - t0 < 10  # it did wait, and not the default 30 s
            assert "corrupt" not in str(ei.value) and "aside" not in str(ei.value)
    finally:
        locker.release()
    st.begin_run(new_run_record(["c"], {}, "quick"))
    assert len(st.list_runs()) == 2


@pytest.mark.parallel
@pytest.mark.integration
def test_a_commit_refused_by_a_reader_is_rolled_back_and_the_store_stays_usable(
        store_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader's open transaction lets a write start but not commit: after the wait the write is
    'locked', undone (nothing half-stored), and the next write works once the reader is gone (a
    failed COMMIT used to leave the transaction open: 'cannot start a transaction within a transaction')."""
    monkeypatch.setenv("CLUSTERBENCH_DB_TIMEOUT", "0.3")
    st = Store(store_file)
    reader = _Locker(store_file, reader=True)
    try:
        with pytest.raises(StoreError, match=r"is locked by another process \(waited 0.3 s\)"):
            st.begin_run(new_run_record(["c"], {}, "quick"))
    finally:
        reader.release()
    assert len(st.list_runs()) == 1  # the refused run was rolled back
    st.begin_run(new_run_record(["c"], {}, "quick"))
    assert len(st.list_runs()) == 2


@pytest.mark.parallel
@pytest.mark.integration
def test_the_wait_for_a_lock_is_bounded_and_then_succeeds(store_file: Path) -> None:
    """Within the timeout a lock that is released in time is simply waited for."""
    locker = _Locker(store_file)
    proc = subprocess.Popen([*CLI, "--db", str(store_file), "results", "list"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "CLUSTERBENCH_DB_TIMEOUT": "20"})
    time.sleep(1.0)
    locker.release()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "complete" in out


def _as_nobody(*args: str, hidepid: bool = False) -> subprocess.CompletedProcess:
    """The CLI as the unprivileged user ``nobody`` (root ignores permissions): Debian's python3 with
    this checkout and the virtual environment's packages on its path, since the environment's own
    interpreter may live under /root. With ``hidepid``, in a mount namespace whose /proc hides other
    users' processes (``hidepid=2``, as hardened hosts mount it)."""
    import site
    import sysconfig

    paths = [str(Path(__file__).resolve().parents[2] / "src"), sysconfig.get_paths()["purelib"],
             *site.getsitepackages()]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(paths), "HOME": "/nonexistent"}
    cmd = ["/usr/bin/python3", "-m", "clusterbench", *args]
    if hidepid:
        cmd = ["unshare", "-m", "sh", "-c", 'mount -t proc -o hidepid=2 proc /proc && exec "$@"', "sh",
               "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd="/")
    return subprocess.run(cmd, capture_output=True, text=True,
                          timeout=120, user=65534, group=65534, extra_groups=[], env=env, cwd="/")


@pytest.mark.parallel
@pytest.mark.integration
def test_an_unwritable_folder_or_file_is_named_as_such() -> None:
    """As an ordinary user: a store in a folder it cannot write, and a store file it cannot write,
    each get their own one-line reason, not 'corrupted'."""
    import shutil
    import tempfile

    if os.geteuid() != 0 or not os.path.exists("/usr/bin/python3"):
        pytest.skip("needs root (to switch to nobody) and /usr/bin/python3")
    probe = _as_nobody("--version")
    if probe.returncode != 0:
        pytest.skip(f"clusterbench cannot be imported as nobody here: {probe.stderr.strip()[-200:]}")
    top = Path(tempfile.mkdtemp(prefix="cb-store-perm-"))
    try:
        top.chmod(0o755)  # nobody may look inside, not write
        p = _as_nobody("--db", str(top / "r.db"), "run", "fpu", "--quick")
        assert p.returncode == 5, p.stderr
        assert f"its folder {top} is not writable (permission denied)" in p.stderr and "corrupt" not in p.stderr
        st = Store(top / "s.db")
        st.finish_run(st.begin_run(new_run_record(["clusterbench", "run", "x"], {}, "quick")), "complete")
        st.close()
        (top / "s.db").chmod(0o644)
        p = _as_nobody("--db", str(top / "s.db"), "run", "fpu", "--quick")
        assert p.returncode == 5 and "is not writable (permission denied)" in p.stderr, p.stderr
        p = _as_nobody("--db", str(top / "s.db"), "results", "list")  # reading it is fine
        assert p.returncode == 0 and "complete" in p.stdout, p.stderr
        assert not (top / "r.db").exists()
    finally:
        shutil.rmtree(top)


@pytest.mark.integration
def test_a_store_on_a_read_only_mount_says_so() -> None:
    """A store on a read-only bind mount (root cannot write it either): writing is refused as 'read-only
    file system' (not 'permission denied', not 'corrupted'), a new store there names its folder, and
    reading still works."""
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="cb-store-rofs-"))
    mounted = False
    try:
        st = Store(top / "r.db")
        st.finish_run(st.begin_run(new_run_record(["clusterbench", "run", "x"], {}, "quick")), "complete")
        st.close()
        bind = subprocess.run(["mount", "--bind", "-o", "ro", str(top), str(top)], capture_output=True, text=True)
        mounted = bind.returncode == 0
        if mounted:
            remount = subprocess.run(["mount", "-o", "remount,ro,bind", str(top)], capture_output=True, text=True)
            assert remount.returncode == 0, remount.stderr
        else:
            pytest.skip(f"cannot make a read-only bind mount here: {bind.stderr.strip()}")
        expected = {top / "r.db": f"results store {top / 'r.db'} is not writable (read-only file system)",
                    top / "new.db": f"its folder {top} is not writable (read-only file system)"}
        for target, wording in expected.items():
            p = _cli("--db", str(target), "run", "fpu", "--quick")
            assert p.returncode == 5 and wording in p.stderr, p.stderr
            assert "corrupt" not in p.stderr and "aside" not in p.stderr
        p = _cli("--db", str(top / "r.db"), "results", "list")
        assert p.returncode == 0 and "complete" in p.stdout, p.stderr
    finally:
        if mounted:
            subprocess.run(["umount", str(top)], check=True)
        shutil.rmtree(top)


@pytest.mark.parallel
@pytest.mark.integration
def test_a_reused_pid_does_not_keep_a_dead_run_running(tmp_path: Path) -> None:
    """'running' means: that very process (pid and start time) is alive on this host. A live process
    that has the recorded pid but started at another time (pid reuse) does not count."""
    other = subprocess.Popen(["sleep", "60"])
    try:
        st = Store(tmp_path / "r.db")
        rec = new_run_record(["clusterbench", "run", "x"], {}, "quick")
        rec["pid"], rec["pid_start"] = other.pid, process_start(other.pid)  # as if that process ran it
        rid = st.begin_run(rec)
        assert st.get_run(rid).status == "running"
        started = process_start(other.pid)
        assert started is not None
        st.db.execute("UPDATE runs SET pid_start=? WHERE id=?", (started + 1, rid))  # the same pid, reborn
        run = st.get_run(rid)
        assert run.status == "incomplete" and "died" in run.error
        st.db.execute("UPDATE runs SET pid_start=? WHERE id=?", (started, rid))
        assert st.get_run(rid).status == "running"
        st.db.execute("UPDATE runs SET boot_id='another-boot' WHERE id=?", (rid,))
        assert st.get_run(rid).status == "incomplete"  # recorded before a reboot
    finally:
        other.kill()
        other.wait()
    st.db.execute("UPDATE runs SET boot_id=NULL WHERE id=?", (rid,))
    assert st.get_run(rid).status == "incomplete"  # the process is gone


@pytest.mark.integration
def test_a_run_of_another_user_hidden_by_hidepid_still_reads_as_running() -> None:
    """/proc mounted hidepid=2 hides root's processes from nobody: the start time cannot be read, so the
    pid alone decides (it exists: EPERM), and a live run is not declared dead; a gone one still is."""
    import shutil
    import tempfile

    if os.geteuid() != 0 or not shutil.which("unshare") or not os.path.exists("/usr/bin/python3"):
        pytest.skip("needs root, unshare and /usr/bin/python3 (a private /proc, then nobody)")
    probe = _as_nobody("--version", hidepid=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a hidepid /proc or import clusterbench as nobody: {probe.stderr.strip()[-200:]}")
    top = Path(tempfile.mkdtemp(prefix="cb-store-hidepid-"))
    other = subprocess.Popen(["sleep", "60"])
    try:
        top.chmod(0o755)
        st = Store(top / "r.db")
        rec = new_run_record(["clusterbench", "run", "x"], {}, "quick")
        rec["pid"], rec["pid_start"] = other.pid, process_start(other.pid)
        rid = st.begin_run(rec)
        (top / "r.db").chmod(0o644)
        shown = _as_nobody("--db", str(top / "r.db"), "results", "show", rid, "--json", hidepid=True)
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["run"]["status"] == "running"
        other.kill()
        other.wait()
        shown = _as_nobody("--db", str(top / "r.db"), "results", "show", rid, "--json", hidepid=True)
        assert shown.returncode == 0 and json.loads(shown.stdout)["run"]["status"] == "incomplete", shown.stderr
    finally:
        other.kill()
        other.wait()
        shutil.rmtree(top)


@pytest.mark.parallel
@pytest.mark.integration
def test_process_start_reads_past_a_command_name_with_spaces_and_parentheses(tmp_path: Path) -> None:
    """A process named 'x) 1 (2 3' started just now: its start time (field 22, counted after the
    last ')') is 'now' in clock ticks since boot; counting after the first ')' would read another field."""
    import shutil

    odd = tmp_path / "x) 1 (2 3"
    shutil.copy("/bin/sleep", odd)
    child = subprocess.Popen([str(odd), "30"])
    try:
        time.sleep(0.2)
        assert Path(f"/proc/{child.pid}/comm").read_text().strip() == odd.name
        ticks = process_start(child.pid)
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        assert ticks is not None and abs(ticks / os.sysconf("SC_CLK_TCK") - uptime) < 5
    finally:
        child.kill()
        child.wait()
    assert process_start(child.pid) is None  # gone
    assert process_start(2 ** 22 + 12345) is None  # above pid_max


@pytest.mark.integration
def test_a_full_disk_is_named_and_what_was_committed_is_kept() -> None:
    """The store on a real 1 MiB tmpfs that fills up: the write that does not fit says 'disk is full ...
    free space' (not 'corrupted'), the figures committed before it are intact, and once space is freed
    the same store takes writes again."""
    import shutil
    import tempfile

    from clusterbench.benchmarks.base import Result

    top = Path(tempfile.mkdtemp(prefix="cb-store-full-"))
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(top)], capture_output=True,
                           text=True)
    if mount.returncode != 0:
        shutil.rmtree(top)
        pytest.skip(f"cannot mount a small tmpfs here: {mount.stderr.strip()}")
    try:
        st = Store(top / "r.db")
        rid = st.begin_run(new_run_record(["clusterbench", "run", "x"], {}, "quick"))

        def figure(n: int) -> Result:
            return Result(benchmark="stream", metric="triad", value=float(n), unit="MB/s", higher_is_better=True,
                          params={"n": n}, samples=[float(n)] * 4000, summary={"n": 4000})  # ~30 kB a row

        st.add_result(rid, figure(0))
        fd = os.open(top / "filler", os.O_WRONLY | os.O_CREAT)  # take what is left, unbuffered
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        with pytest.raises(StoreError, match="is full") as ei:
            for n in range(1, 100):
                st.add_result(rid, figure(n))
        assert "free space" in str(ei.value) and "corrupt" not in str(ei.value) and "aside" not in str(ei.value)
        kept = len(st.results(rid))
        assert kept >= 1 and [r.value for r in st.results(rid)] == [float(n) for n in range(kept)]
        (top / "filler").unlink()
        st.add_result(rid, figure(1000))
        st.finish_run(rid, "complete")
        assert len(st.results(rid)) == kept + 1 and st.get_run(rid).status == "complete"
        st.close()
    finally:
        subprocess.run(["umount", "-l", str(top)], check=False)
        shutil.rmtree(top, ignore_errors=True)


_KILLED_WRITER = """
import os, signal, sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA cache_size=1")  # spill to the file: the journal then holds the pages to restore
c.execute("BEGIN IMMEDIATE")
c.execute("UPDATE runs SET probe=?", ("x" * 200000,))
for i in range(100):
    c.execute("INSERT INTO meta VALUES (?, ?)", ("k%d" % i, "y" * 5000))
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parallel
@pytest.mark.integration
def test_a_writer_killed_mid_transaction_does_not_block_reading() -> None:
    """kill -9 inside a write leaves a hot journal, which read-only SQLite refuses ('readonly database').
    Reading commands undo it (SQLite's own rollback) and show what was committed; a user who cannot
    write the store is told what is going on and who can fix it."""
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="cb-store-hot-"))
    try:
        top.chmod(0o755)
        st = Store(top / "r.db")
        rid = st.begin_run(new_run_record(["clusterbench", "run", "x"], {"hostname": "h"}, "quick"))
        st.finish_run(rid, "complete")
        st.close()
        (top / "r.db").chmod(0o644)
        killed = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(top / "r.db")], capture_output=True)
        assert killed.returncode == -9 and (top / "r.db-journal").stat().st_size > 0
        if os.geteuid() == 0 and os.path.exists("/usr/bin/python3") and _as_nobody("--version").returncode == 0:
            p = _as_nobody("--db", str(top / "r.db"), "results", "list")
            assert p.returncode == 5 and "unfinished write of a killed process" in p.stderr, p.stderr
            assert "as its owner" in p.stderr and "corrupt" not in p.stderr
        p = _cli("--db", str(top / "r.db"), "results", "show", rid, "--json")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["run"]["probe"] == {"hostname": "h"}  # the killed write was undone
        with sqlite3.connect(top / "r.db") as db:
            assert db.execute("SELECT count(*) FROM meta WHERE key LIKE 'k%'").fetchone()[0] == 0
    finally:
        shutil.rmtree(top)


_OPEN_WHEN_TOLD = """
import os, sys, time
from clusterbench.store import Store
while not os.path.exists(sys.argv[2]):
    time.sleep(0.005)
Store(sys.argv[1]).close()
"""


# the two races below stay in the serial pass: beside another test the four processes may not all be
# waiting within the 0.6 s, and the race would then go untested while the test still passed
@pytest.mark.integration
def test_concurrent_writers_upgrade_an_old_store_once(tmp_path: Path) -> None:
    """Four processes open the same schema-2 store for writing at once: every one succeeds (the loser
    of the race used to fail with 'duplicate column name: pid_start'), the file ends at schema 3 with
    its run intact."""
    for round_ in range(6):  # a race: each round loses it with the old code about one time in three
        p = tmp_path / f"r{round_}.db"
        st = Store(p)
        rid = st.begin_run(new_run_record(["clusterbench", "run", "bandwidth"], {}, "quick"))
        st.finish_run(rid, "complete")
        st.close()
        with sqlite3.connect(p) as db:  # back to what schema 2 wrote
            db.execute("ALTER TABLE runs DROP COLUMN pid_start")
            db.execute("ALTER TABLE runs DROP COLUMN boot_id")
            db.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
        go = tmp_path / f"go{round_}"
        procs = [subprocess.Popen([sys.executable, "-c", _OPEN_WHEN_TOLD, str(p), str(go)], stderr=subprocess.PIPE,
                                  text=True) for _ in range(4)]
        time.sleep(0.6)  # all started and waiting
        go.touch()
        for proc in procs:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
        st = Store(p, readonly=True)
        assert st.schema == STORE_SCHEMA and st.get_run(rid).status == "complete"
        st.close()


@pytest.mark.integration
def test_concurrent_writers_create_a_new_store_once(tmp_path: Path) -> None:
    """Four processes open the same not-yet-existing store at once (two first runs on a fresh machine):
    every one succeeds (the losers used to fail with 'UNIQUE constraint failed: meta.key'), and the file
    holds one schema record."""
    for round_ in range(4):
        p, go = tmp_path / f"n{round_}.db", tmp_path / f"go{round_}"
        procs = [subprocess.Popen([sys.executable, "-c", _OPEN_WHEN_TOLD, str(p), str(go)], stderr=subprocess.PIPE,
                                  text=True) for _ in range(4)]
        time.sleep(0.6)  # all started and waiting
        go.touch()
        for proc in procs:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
        with sqlite3.connect(p) as db:
            assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchall() == [(str(STORE_SCHEMA),)]




@pytest.mark.parallel
@pytest.mark.integration
def test_a_fifo_as_the_store_is_refused_at_once_not_a_hang(tmp_path: Path) -> None:
    """``--db FIFO results list`` hung in SQLite's first read and ignored SIGTERM (kill -9 needed);
    ``$CLUSTERBENCH_DB`` naming one did the same. Now one line naming the path and the fix."""
    fifo = tmp_path / "pipe.db"
    os.mkfifo(fifo)
    for args, env in ((("--db", str(fifo), "results", "list"), None),
                      (("results", "list"), {"CLUSTERBENCH_DB": str(fifo)}),
                      (("--db", str(fifo), "run", "fpu", "--quick"), None)):
        proc = run_or_fail([*CLI, *args], 60, f"clusterbench {' '.join(args)} hung on a FIFO store",
                           env={**os.environ, **(env or {})})
        err = proc.stderr
        assert proc.returncode == 5, err
        assert err.count("\n") == 1 and f"{fifo} is a FIFO (pipe), not a regular file" in err and "--db" in err, err
