"""Interrupted and failing runs: finished results are kept, the run is marked incomplete, and no
kernel process is left behind."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

import prockit

# every test here starts real processes, finds only its own (prockit) and bounds nothing tightly: the
# parallel pass runs them two at a time
pytestmark = [pytest.mark.integration, pytest.mark.parallel]


def _env() -> dict[str, str]:
    return dict(os.environ)  # clusterbench as the test session imports it (installed in its environment)


def _default_sigint() -> None:
    """Ctrl-C as a terminal delivers it: a suite started in the background of a non-interactive shell
    (`nohup ... &`, some CI runners) inherits SIGINT ignored, and Python then never raises
    KeyboardInterrupt in the child."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "clusterbench.cli", *args], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_default_sigint)


def _count(db: str, table: str) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    except sqlite3.Error:
        return 0


def _wait_results(db: str, n: int, proc: subprocess.Popen, limit: float = 120) -> None:
    deadline = time.monotonic() + limit
    while _count(db, "results") < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no results in time"
        time.sleep(0.05)


def _kernel_pids() -> list[int]:
    """This test's kernel processes (tests/prockit.py: never another test's, which may run beside it)."""
    return prockit.kernels()


def _run_row(db: str) -> tuple[str, str | None, int]:
    con = sqlite3.connect(db)
    rid, status, error = con.execute("SELECT id, status, error FROM runs").fetchone()
    n = con.execute("SELECT count(*) FROM results WHERE run_id=?", (rid,)).fetchone()[0]
    return status, error, n


def _prebuild() -> None:
    """Compile the kernels once so the timing of the tests below is about running them."""
    subprocess.run([sys.executable, "-m", "clusterbench.cli", "run", "fpu", "--quick", "--no-store"],
                   env=_env(), check=True, capture_output=True, timeout=300)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_keeps_finished_results(sig):
    db = os.environ["CLUSTERBENCH_DB"]
    proc = _start("run", "node", "--quick")
    _wait_results(db, 2, proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err  # 130 for Ctrl-C, 143 for SIGTERM, as a shell reports them
    assert "interrupted" in err and "incomplete" in err
    status, error, n = _run_row(db)
    want = "interrupted (Ctrl-C)" if sig == signal.SIGINT else "interrupted (signal SIGTERM)"
    assert status == "incomplete" and error == want, error
    assert f"clusterbench: {want}" in err
    assert n >= 2
    time.sleep(0.2)
    assert _kernel_pids() == []


def test_killed_kernel_marks_run_incomplete():
    db = os.environ["CLUSTERBENCH_DB"]
    proc = _start("run", "node", "--quick")
    _wait_results(db, 1, proc)
    deadline = time.monotonic() + 60
    pids: list[int] = []
    while not pids and time.monotonic() < deadline and proc.poll() is None:
        pids = _kernel_pids()
        time.sleep(0.01)
    assert pids, "no kernel process seen"
    os.kill(pids[0], signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 4, err
    assert "killed by SIGKILL" in err
    # issue 23: killed from outside while memory was fine: said so, and not "choose a smaller size"
    assert "from outside (no out-of-memory kill on this machine during the run" in err, err
    assert "smaller size" not in err and "the size is not the cause" in err
    assert len(err.strip().splitlines()) <= 2  # the error and the "kept N results" note
    status, error, n = _run_row(db)
    assert status == "incomplete" and "SIGKILL" in error
    assert n >= 1
    assert _kernel_pids() == []


def test_timeout_kills_kernel_and_keeps_run():
    db = os.environ["CLUSTERBENCH_DB"]
    _prebuild()
    proc = _start("run", "memlat", "--timeout", "0.3")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 4, err
    assert "timed out" in err
    status, error, _ = _run_row(db)
    assert status == "incomplete" and "timed out" in error
    assert _kernel_pids() == []


def test_kill_9_of_clusterbench_reads_back_incomplete():
    db = os.environ["CLUSTERBENCH_DB"]
    proc = _start("run", "node", "--quick")
    _wait_results(db, 1, proc)
    os.killpg(proc.pid, signal.SIGKILL)  # clusterbench and its kernels, no chance to clean up
    proc.communicate(timeout=30)
    from clusterbench.store import Store
    run = Store(db).list_runs()[0]
    assert run.status == "incomplete" and run.results >= 1


# -- MPI: a rank that dies or hangs mid-run ----------------------------------------------------
PINGPONG = ("run", "pingpong", "--allow-root", "--transport", "shm", "--time-budget", "0.4",
            "--sizes", "8,64,512,4096,32768,262144,1048576,4194304")


def _mpi_or_skip() -> None:
    import shutil
    if not shutil.which("mpirun") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs Open MPI (openmpi-bin, libopenmpi-dev) and two cpus")


def _rank_pids(proc: subprocess.Popen, want: int = 2, limit: float = 60) -> list[int]:
    deadline = time.monotonic() + limit
    pids: list[int] = []
    while len(pids) < want and time.monotonic() < deadline and proc.poll() is None:
        pids = _kernel_pids()
        time.sleep(0.01)
    assert len(pids) >= want, "the ranks were not seen"
    return sorted(pids)


def _cpu_seconds(pid: int) -> float:
    """User + system cpu time of a process (0 once it is gone)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_measured(proc: subprocess.Popen, seconds: float = 1.2, limit: float = 60) -> list[int]:
    """The ranks' pids once each has run ``seconds`` of cpu: pingpong's ranks spin through every timed
    loop and a size lasts its --time-budget (0.4 s), so by then sizes have been measured, whatever the
    load. (The figures reach the store when the launch ends, or fails: not while it runs.)"""
    pids = _rank_pids(proc)
    deadline = time.monotonic() + limit
    while min(_cpu_seconds(p) for p in pids) < seconds:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the ranks did not run"
        time.sleep(0.02)
    return pids


def _no_mpi_left() -> bool:
    """Neither a rank nor mpirun nor an Open MPI daemon of this test is left (after up to 5 s)."""
    return not prockit.gone_within(lambda: _kernel_pids() + prockit.named({"orted", "mpirun", "prterun"}))


def test_mpi_rank_killed_mid_run_keeps_results():
    """One rank is SIGKILLed after the first sizes were measured: a one-line error, the run is
    incomplete with what it measured (the figures the kernel printed before it failed), and neither rank, mpirun nor a daemon is left."""
    _mpi_or_skip()
    db = os.environ["CLUSTERBENCH_DB"]
    proc = _start(*PINGPONG)
    os.kill(_wait_measured(proc)[-1], signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 4, err
    assert "pingpong" in err and len(err.strip().splitlines()) <= 2, err
    status, error, n = _run_row(db)
    assert status == "incomplete" and error and n >= 2
    assert n < 16  # it did stop: 8 sizes x 2 metrics would be 16
    assert _no_mpi_left()


def test_mpi_run_interrupted_keeps_what_the_kernel_finished():
    """Ctrl-C while pingpong's kernel runs: the figures are made once the launch ends (none while the
    ranks are timed, where making them took a rank's cpu); interrupted, the sizes it finished are stored,
    the run is incomplete, and nothing is left."""
    _mpi_or_skip()
    db = os.environ["CLUSTERBENCH_DB"]
    proc = _start(*PINGPONG)
    _wait_measured(proc)
    held = _count(db, "results")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert held == 0, f"{held} figures were made while the kernel ran"
    status, error, n = _run_row(db)
    assert status == "incomplete" and error == "interrupted (Ctrl-C)", (status, error)
    assert 2 <= n < 16 and f"kept {n} result(s)" in err, (n, err)
    assert _no_mpi_left()


#: runs of the HPC Challenge kernels, HPCG and pdes that last a few seconds on 2 ranks
HPCC_KERNEL_RUNS = {
    "randomaccess": ("run", "randomaccess", "--allow-root", "--mode", "mpi", "--log2-size", "26", "--samples", "20"),
    "hpcg": ("run", "hpcg", "--allow-root", "--local", "32", "--time", "30"),
    "ptrans": ("run", "ptrans", "--allow-root", "--n", "6000", "--samples", "50"),
    "fft": ("run", "fft", "--allow-root", "--mode", "mpi", "--n", str(1 << 22), "--samples", "200"),
    "pdes": ("run", "pdes", "--allow-root", "--end", "200000", "--repeat", "1", "--no-verify"),
}


@pytest.mark.parametrize("bench", sorted(HPCC_KERNEL_RUNS))
def test_hpcc_kernel_rank_killed_stores_nothing(bench: str):
    """A rank of an HPC Challenge kernel (or HPCG) SIGKILLed mid-run: a one-line error naming the
    benchmark, exit 4, no figure stored (they are printed only after validation, at the end), and
    neither rank, mpirun nor a daemon left."""
    _mpi_or_skip()
    db = os.environ["CLUSTERBENCH_DB"]
    proc = _start(*HPCC_KERNEL_RUNS[bench])
    pids = _rank_pids(proc)
    time.sleep(1.0)
    os.kill(pids[-1], signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 4, err
    assert bench in err and len(err.strip().splitlines()) <= 2, err
    status, error, n = _run_row(db)
    assert status != "complete" and error and n == 0
    assert _no_mpi_left()


def test_mpi_rank_hanging_mid_run_is_bounded():
    """One rank is stopped (SIGSTOP: it hangs, as a rank stuck in a dead network would): the
    run's timeout ends it, the results before the hang are kept, nothing is left."""
    _mpi_or_skip()
    db = os.environ["CLUSTERBENCH_DB"]
    proc = _start(*PINGPONG, "--timeout", "7")  # its first sizes are measured within about 2 s
    pids = _wait_measured(proc)
    t0 = time.monotonic()
    os.kill(pids[-1], signal.SIGSTOP)
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - t0 < 20
    assert proc.returncode == 4, err
    assert "timed out" in err, err
    status, error, n = _run_row(db)
    assert status == "incomplete" and "timed out" in error and n >= 2
    assert _no_mpi_left()


def test_double_ctrl_c_still_says_what_was_kept():
    """Ctrl-C twice, 50 ms apart, while results stream in (issue 14 #11): the run is closed as
    interrupted, the 'kept N' line is printed, and N is what the store really holds."""
    db = os.environ["CLUSTERBENCH_DB"]
    proc = _start("run", "memlat")
    _wait_results(db, 3, proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    status, error, n = _run_row(db)
    assert status == "incomplete" and error == "interrupted (Ctrl-C)", (status, error)
    assert f"kept {n} result(s), marked incomplete" in err, err
    assert n >= 3
    time.sleep(0.2)
    assert _kernel_pids() == []
