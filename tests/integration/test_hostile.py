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

from clusterbench import files
from clusterbench.energy import figures as E
from clusterbench.energy.build import build_meter
from clusterbench.energy.source import Sample
from clusterbench.energy.spec import check_specs
from clusterbench.errors import UsageError

REPO = Path(__file__).resolve().parents[2]


# -- the bounded reader ------------------------------------------------------------------------
def test_devices_fifos_directories_and_missing_files_are_refused_without_reading(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no writer: a plain open() would block for good
    for path, needle in ((Path("/dev/zero"), "is a character device, not a regular file"),
                         (fifo, r"is a FIFO \(pipe\), not a regular file"),
                         (tmp_path, "is a directory, not a regular file"),
                         (tmp_path / "nope", "does not exist")):
        t = time.monotonic()
        with pytest.raises(UsageError, match=needle) as ei:
            files.read_text(path, "hostfile")
        assert time.monotonic() - t < 1 and "\n" not in str(ei.value) and str(path) in str(ei.value)


def test_a_file_beyond_its_kind_s_limit_is_refused_in_one_line(tmp_path):
    big = tmp_path / "hosts"
    with open(big, "wb") as fh:  # sparse: 2 MiB of holes, nothing written
        fh.truncate(2 * files.MiB)
    with pytest.raises(UsageError, match=r"larger than the 1 MiB clusterbench reads of a hostfile"):
        files.read_text(big, "hostfile")
    assert len(files.read_bytes(big, "power log")) == 2 * files.MiB  # a power log may be larger


def test_binary_content_is_named_by_offset_and_never_echoed(tmp_path):
    f = tmp_path / "x"
    f.write_bytes(b"node1\n\x1b[2J\xff\xfe")
    with pytest.raises(UsageError) as ei:
        files.read_text(f, "hostfile")
    assert "is not text (byte 10 is not UTF-8)" in str(ei.value) and "\x1b" not in str(ei.value)
    f.write_bytes(b"node1\n\0node2\n")
    with pytest.raises(UsageError, match="byte 6 is a NUL"):
        files.read_text(f, "hostfile")
    assert files.printable("a\x1b[2Jb\rc" + "x" * 100, 10) == "a\\x1b[2Jb\\rcxx..."


def test_hostfile_and_config_go_through_the_reader(tmp_path, monkeypatch):
    from clusterbench import config
    from clusterbench.launch.mpi.hosts import parse_hostfile

    with pytest.raises(UsageError, match="hostfile /dev/zero is a character device"):
        parse_hostfile("/dev/zero")
    (tmp_path / "h").write_text("node1 slots=2\n\x1b]0;pwned\x07 slots=1\n")
    with pytest.raises(UsageError) as ei:
        parse_hostfile(tmp_path / "h")
    assert "\x1b" not in str(ei.value) and "\\x1b]0;pwned" in str(ei.value)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    cfg = tmp_path / "clusterbench" / "config.toml"
    cfg.parent.mkdir()
    cfg.write_bytes(b"\x00\x01\xfftoml")
    with pytest.raises(UsageError, match="config file .* is not text"):
        config.load()
    cfg.write_text("allow_run_as_root = true\n[costs]\nnode = 35\n")
    with pytest.raises(UsageError, match="unknown key or table 'costs'.*the known ones are allow_run_as_root, cost"):
        config.load()
    cfg.write_text("allow_run_as_root = true\n[cost]\nnode = 35\n")
    assert config.load()["cost"] == {"node": 35}


def test_cli_config_binary_is_one_line_not_an_internal_error(tmp_path, monkeypatch, capsys):
    from clusterbench.cli import main

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "clusterbench").mkdir()
    (tmp_path / "clusterbench" / "config.toml").write_bytes(bytes(range(256)))
    assert main(["compare", "a", "b", "--per-dollar", "1,2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not text" in err and "internal error" not in err


# -- energy: zero, not finite, beyond a node ------------------------------------------------------
def test_power_a_node_cannot_draw_is_missing_with_its_reason(tmp_path):
    t0 = 1_795_000_000.0
    m = build_meter(["cmd:meter"], nodes=["n1"])
    src = m.sources[0]
    src.samples = [Sample(t0 + i, t0 + i - 1000, watts=0.0) for i in range(4)]
    e = m.energy(t0 + 0.5, t0 + 2.5, wait=False)
    assert "joules" not in e and "measured nothing" in e["missing"] and e["missing"].startswith("n1: ")
    log = tmp_path / "n1.csv"
    log.write_text("time,watts\n" + "".join(f"{t0 + i:.1f},{1.5e308 if i in (2, 3) else 30}\n" for i in range(5)))
    e = build_meter([f"csv:{log}"], nodes=["n1"]).energy(t0 + 0.5, t0 + 3.5, wait=False)
    assert "joules" not in e and "not a finite number" in e["missing"]  # the trapezoid overflowed to inf
    log.write_text("time,watts\n" + "".join(f"{t0 + i:.1f},{5e5 if i == 2 else 30}\n" for i in range(5)))
    e = build_meter([f"csv:{log}"], nodes=["n1"]).energy(t0 + 0.5, t0 + 3.5, wait=False)
    assert "a sample of 5e+05 W, above the 20000 W any node can draw" in e["missing"]
    assert E.implausible_power(30.0, 30.0) is None and E.implausible_power(30.0, 30.0, 4) is None
    assert "below the 0.4 W" in E.implausible_power(1.0, 0.3, 4)


def test_declared_power_is_bounded_per_node_and_per_cluster_meter():
    with pytest.raises(UsageError, match="1e-300 W is not a power a running node draws"):
        check_specs([], 1e-300)
    assert build_meter(["cluster=watts:40"], nodes=["a", "b", "c", "d"]).sources[0].watts == 40
    with pytest.raises(UsageError, match="give 0.4 to 80000 W for the 4 node"):
        build_meter(["cluster=watts:0.3"], nodes=["a", "b", "c", "d"])


def test_power_log_problems_refused_at_the_start(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    for spec, needle in ((f"csv:{empty}", "is empty"), ("csv:/dev/zero", "is a character device"),
                         (f"csv:{tmp_path}", "is a directory")):
        with pytest.raises(UsageError, match=needle) as ei:
            build_meter([spec]).check()
        assert "\n" not in str(ei.value)
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"time,watts\n1795000000,3\n\x1b[31m\xff,\xfe\n")
    with pytest.raises(UsageError) as ei:
        build_meter([f"csv:{binary}"]).check()
    assert "is not text" in str(ei.value) and "\x1b" not in str(ei.value)
    back = tmp_path / "back.csv"
    back.write_text("time,watts\n1795000002,3\n1795000001,3\n")
    with pytest.raises(UsageError, match="line 3: its time '1795000001' is before the line above's"):
        build_meter([f"csv:{back}"]).check()


# -- pdes with nothing to measure ---------------------------------------------------------------
def test_pdes_end_not_past_the_lookahead_is_refused(ctx, monkeypatch):
    from clusterbench.benchmarks import get_benchmark

    monkeypatch.setenv("CLUSTERBENCH_ALLOW_RUN_AS_ROOT", "1")
    with pytest.raises(UsageError, match="--end 1e-300 is not past the lookahead 1"):
        get_benchmark("pdes").resolve(ctx, {"end": 1e-300, "sync": "sequential"})


# -- a fix whose process was killed while applying it ---------------------------------------------
def test_a_fix_left_applying_by_a_dead_process_reads_interrupted(tmp_path):
    from clusterbench.store import Store

    st = Store(tmp_path / "r.db")
    st.add_fix({"id": "thp-1", "rule": "thp", "hosts": None, "actions": {"localhost": {"do": ["x"], "undo": ["y"]}},
                "finding": []})
    assert st.get_fix("thp-1")["status"] == "applying"  # this process lives: it is being applied
    st.db.execute("UPDATE fixes SET pid_start = pid_start + 1")  # the recording process is another one now
    st.db.commit()
    f = st.get_fix("thp-1")
    assert f["status"] == "interrupted" and "applying was interrupted" in f["error"] and "pid" not in f


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
