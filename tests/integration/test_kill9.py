"""Issue 14 #1: kill -9 of clusterbench leaves nothing behind: not mpirun, not the ranks, not hpcc,
not the temporary cb-mpi-*/cb-hpl-* folders. Real processes, a real SIGKILL, bounded in time."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import prockit

# each test finds its own processes by its own marker: the parallel pass runs them beside another test
pytestmark = [pytest.mark.integration, pytest.mark.parallel]

IS_ROOT = os.geteuid() == 0


def _kernel_running(marker: str, names: tuple[str, ...]) -> bool:
    for pid in prockit.carrying(marker):
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            continue
        if any(Path(exe).name == n for n in names):
            return True
    return False


@pytest.mark.parametrize("argv,kernels", [
    (["run", "pingpong", "--time-budget", "60"], ("pingpong",)),
    (["run", "hpl", "--n", "12000"], ("hpl",)),
    (["run", "hpl", "--n", "12000", "--engine", "hpcc"], ("hpcc",)),
], ids=["pingpong", "hpl", "hpl-hpcc"])
def test_kill_9_leaves_no_process_and_no_folder(argv, kernels, tmp_path) -> None:
    marker = f"CB_KILL9_TEST={os.getpid()}-{time.monotonic_ns()}"
    key, value = marker.split("=")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, key: value, "TMPDIR": str(tmp)}
    extra = ["--allow-root"] if IS_ROOT else []
    cb = subprocess.Popen([sys.executable, "-m", "clusterbench", *argv, *extra], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=False)
    try:
        deadline = time.monotonic() + 90
        while not _kernel_running(marker, kernels):
            assert cb.poll() is None, f"clusterbench ended before its ranks ran: {cb.stderr.read()[-400:]!r}"
            assert time.monotonic() < deadline, "the ranks never started"
            time.sleep(0.2)
        assert [p for p in prockit.carrying(marker) if p != cb.pid]  # mpirun and the ranks are running now
        assert list(tmp.glob("cb-*")), "the run's temporary folder exists while it runs"
        cb.send_signal(signal.SIGKILL)
        cb.wait()
        left: list[int] = []
        for _ in range(100):  # 10 s: the parallel pass's room for a time bound (test_parallel_marks.ROOM_S)
            left = prockit.carrying(marker)
            if not left and not list(tmp.glob("cb-*")):
                break
            time.sleep(0.1)
        names = [Path(f"/proc/{p}/comm").read_text().strip() for p in left if Path(f"/proc/{p}/comm").exists()]
        assert not left, f"left running 10 s after kill -9: {names}"
        assert not list(tmp.glob("cb-*")), "temporary folders left behind"
    finally:
        for p in prockit.carrying(marker):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
