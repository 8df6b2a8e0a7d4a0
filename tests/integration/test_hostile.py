"""Faults a hostile probe found (round 2): every file a user names is read through one bounded
reader (a device, a FIFO, an oversized or binary file is one line, never a hang or an
out-of-memory); whatever clusterbench starts dies with it, however it dies (a child clusterbench
of ``doctor --verify`` and its kernel included); energy that is zero, not finite or beyond any
node's power is missing with the reason; a pdes run that commits no event is refused; SIGTERM
exits 143; a fix left ``applying`` by a killed process reads as interrupted and can be undone."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


# -- with real processes ------------------------------------------------------------------------
def _cli(*args: str, timeout: float = 60, db: Path | None = None, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"}
    return subprocess.run([sys.executable, "-m", "clusterbench", *(["--db", str(db)] if db else []), *args],
                          capture_output=True, text=True, timeout=timeout, env=env, **kw)


def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # 1 GiB: the old reader died here


@pytest.mark.integration
def test_hostfile_dev_zero_and_a_fifo_are_one_line_errors(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        t = time.monotonic()
        p = _cli("run", "pingpong", "--hostfile", path, timeout=30, db=tmp_path / "r.db", preexec_fn=_limit_memory)
        err = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(err) == 1 and "not a regular file" in err[0], p.stderr
        assert time.monotonic() - t < 20
    assert not (tmp_path / "r.db").exists() or sqlite3.connect(tmp_path / "r.db").execute(
        "SELECT count(*) FROM runs").fetchone()[0] == 0


@pytest.mark.integration
def test_sigterm_ends_any_command_with_143():
    p = subprocess.Popen([sys.executable, "-m", "clusterbench", "run", "memlat", "--no-store"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 143 and "interrupted (signal SIGTERM)" in err, (p.returncode, err)


def _children(pid: int) -> list[str]:
    try:
        return [c for t in Path(f"/proc/{pid}/task").iterdir() for c in (t / "children").read_text().split()]
    except OSError:
        return []


@pytest.mark.integration
def test_sigterm_of_a_run_with_no_store_does_not_speak_of_a_kept_run(tmp_path):
    """``run memlat --no-store`` stopped said "finished results were kept, the run is marked incomplete"
    though nothing is stored; with a store it still says so (and it is true)."""
    for no_store in (True, False):
        cmd = [sys.executable, "-m", "clusterbench", "--db", str(tmp_path / "r.db"), "run", "memlat",
               *(["--no-store"] if no_store else [])]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not _children(p.pid) and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)  # its kernel is running: the run has begun (and its signal handling with it)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
        assert p.returncode == 143, err
        if no_store:
            assert "interrupted (signal SIGTERM); nothing was stored (--no-store)" in err, err
            assert "kept" not in err and "incomplete" not in err and not (tmp_path / "r.db").exists(), err
        else:
            assert "the run is marked incomplete" in err, err


def _procs() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every live process."""
    out = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                stat = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except (OSError, IndexError):
                continue
            if stat[0] != b"Z":
                out[int(pid)] = (int(stat[1]), cmd)
    return out


def _tree(root: int) -> dict[int, str]:
    """``root`` and every live descendant of it: pid -> command line."""
    procs = _procs()
    found = {root: procs[root][1]} if root in procs else {}
    grew = True
    while grew:
        grew = False
        for pid, (ppid, cmd) in procs.items():
            if ppid in found and pid not in found:
                found[pid] = cmd
                grew = True
    return found


@pytest.mark.integration
def test_doctor_verify_killed_by_sigkill_leaves_no_child_clusterbench_nor_kernel(sim_cluster, mpi, tmp_path):
    """Two virtual nodes at MTU 1500: jumbo-unused fires, so --verify starts its 'before' runs, each a
    child `clusterbench run memlat`. kill -9 of doctor while the child's kernel runs: the child and its
    kernel end within seconds, and the child's run is not stored as complete."""
    c = sim_cluster(2)
    hosts = ",".join(n.name for n in c.nodes)
    db = tmp_path / "r.db"
    doctor = subprocess.Popen(
        [sys.executable, "-m", "clusterbench", "--db", str(db), "doctor", "--hosts", hosts, "--verify", "jumbo-unused",
         "--benchmark", "run memlat", "--repeat", "2", "--yes", "--allow-root"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        tree: dict[int, str] = {}
        while time.monotonic() < deadline:
            assert doctor.poll() is None, doctor.communicate()
            tree = _tree(doctor.pid)
            if any("/memlat" in cmd and "clusterbench" not in cmd for cmd in tree.values()):
                break
            time.sleep(0.1)
        assert any(" run memlat" in cmd for cmd in tree.values()), tree  # the child clusterbench
        assert any("/memlat" in cmd for cmd in tree.values()), tree  # and its kernel
        time.sleep(0.5)  # the kernel is measuring
        tree = _tree(doctor.pid)
        os.kill(doctor.pid, signal.SIGKILL)
        doctor.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and set(tree) & set(_procs()):
            time.sleep(0.1)
        left = {pid: cmd for pid, cmd in tree.items() if pid in _procs()}
        assert left == {}, left
    finally:
        if doctor.poll() is None:
            doctor.kill()
    rows = sqlite3.connect(db).execute("SELECT status, error FROM runs").fetchall()
    assert rows and all(s == "incomplete" for s, _ in rows), rows  # closed by its SIGTERM, never 'complete'


@pytest.mark.integration
def test_a_zero_watt_meter_leaves_the_energy_missing_and_no_per_watt(mpi, tmp_path):
    p = _cli("run", "hpl", "--n", "600", "--power", "cmd:echo 0", "--json", db=tmp_path / "r.db", timeout=120)
    assert p.returncode == 0, p.stderr
    by = {r["metric"]: r for r in json.loads(p.stdout)["results"]}
    assert "gflops_per_watt" not in by and by["rmax"]["value"] > 0
    assert "measured nothing" in by["rmax"]["params"]["energy"]["missing"]
    assert "energy-missing" in [w["code"] for w in by["rmax"]["warnings"]]


@pytest.mark.integration
def test_pdes_that_commits_no_event_is_refused_not_stored_as_a_rate(tmp_path):
    p = _cli("run", "pdes", "--sync", "sequential", "--lookahead", "0", "--end", "1e-300", "--repeat", "1",
             "--json", db=tmp_path / "r.db", timeout=120)
    assert p.returncode == 2 and "committed no event before --end 1e-300" in p.stderr, p.stderr
    n = sqlite3.connect(tmp_path / "r.db").execute("SELECT count(*) FROM results").fetchone()[0]
    assert n == 0


@pytest.mark.integration
def test_a_fix_killed_while_applying_can_be_undone(tmp_path):
    """A process records a fix and is killed with SIGKILL before it finishes: `doctor --fixes` shows it
    interrupted, `doctor --undo` runs its undo commands and marks it undone."""
    db = tmp_path / "r.db"
    undone = tmp_path / "undone"
    code = ("import os, signal, sys; from clusterbench.store import Store; "
            f"Store({str(db)!r}).add_fix({{'id': 'rps-dead', 'rule': 'rps-single-queue', 'hosts': None, "
            f"'actions': {{'localhost': {{'do': ['true'], 'undo': ['touch {undone}']}}}}, 'finding': []}}); "
            "os.kill(os.getpid(), signal.SIGKILL)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30)
    assert p.returncode == -signal.SIGKILL
    p = _cli("doctor", "--fixes", db=db)
    assert "rps-dead  interrupted" in p.stdout, p.stdout
    p = _cli("doctor", "--undo", "rps-dead", db=db)
    assert p.returncode == 0 and undone.exists(), p.stderr
    assert "undone" in _cli("doctor", "--fixes", db=db).stdout


@pytest.mark.integration
def test_verify_checks_the_nested_command_line_before_anything_runs(tmp_path):
    t = time.monotonic()
    p = _cli("doctor", "--verify", "thp", "--benchmark", "run stream --threads abc", "--yes", db=tmp_path / "r.db")
    err = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(err) == 1 and "--benchmark 'run stream --threads abc'" in err[0], p.stderr
    assert "invalid int value" in err[0] and time.monotonic() - t < 15
    p = _cli("doctor", "--undo", "", db=tmp_path / "r.db")
    assert p.returncode == 2 and "--undo is empty" in p.stderr
