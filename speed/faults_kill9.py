"""Fault injection (issue 14 #1): kill -9 clusterbench while its kernels run, for every MPI
benchmark and `run node`, on this node and across a 2-node virtual cluster, and count what is
left 5 s later: processes that inherited the run's marker variable (mpirun, orted, ranks, hpcc,
the watchdog, kernels) and cb-* temporary folders. Every row must read 0 / 0.

Usage (root, for the virtual cluster): .venv/bin/python speed/faults_kill9.py [--log FILE]
It brings a 2-node sim-cluster up (and down again if it was not up before).
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CB = [sys.executable, "-m", "clusterbench"]
HOSTS = ["--hosts", "cbsim-n1,cbsim-n2"]
SCENARIOS = [  # (name, argv, kernel executables that show the run is under way)
    ("pingpong", ["run", "pingpong", "--time-budget", "60"], ("pingpong",)),
    ("bw", ["run", "bw", "--time-budget", "60"], ("mpibw",)),
    ("multipair", ["run", "multipair", "--time-budget", "60"], ("mpibw", "multipair")),
    ("ring", ["run", "ring", "--measurements", "1000", "--loop-time", "0.05"], ("ring",)),
    ("placement", ["run", "placement", "--time-budget", "60"], ("pingpong", "placement")),
    ("hpl", ["run", "hpl", "--n", "14000"], ("hpl",)),
    ("hpl hpcc", ["run", "hpl", "--n", "14000", "--engine", "hpcc"], ("hpcc",)),
    ("mpi suite", ["run", "mpi"], ("pingpong", "mpibw", "ring", "multipair", "placement")),
    ("tcp", ["run", "tcp", "--seconds", "30"], ("tcp",)),
]
NODE = ("node", ["run", "node"], ("stream", "peak", "fpu", "membw", "memlat", "dgemm"))


def marked(marker: bytes) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker in (d / "environ").read_bytes():
                    pids.append(int(d.name))
            except OSError:
                pass
    return pids


def running(marker: bytes, names: tuple[str, ...]) -> bool:
    for pid in marked(marker):
        try:
            if Path(os.readlink(f"/proc/{pid}/exe")).name in names:
                return True
        except OSError:
            pass
    return False


def scenario(name: str, argv: list[str], names: tuple[str, ...], where: str) -> str:
    marker = f"CB_FAULT_{os.getpid()}_{time.monotonic_ns()}"
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, marker: "1", "TMPDIR": tmp, "CLUSTERBENCH_DB": str(Path(tmp, "r.db"))}
        extra = (HOSTS if where == "sim-cluster" and name not in ("node",) else []) + ["--allow-root"] * (
            os.geteuid() == 0 and name not in ("node", "tcp"))  # tcp and node start no mpirun
        cb = subprocess.Popen([*CB, *argv, *extra], env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
        t0 = time.monotonic()
        while not running(marker.encode(), names):
            if cb.poll() is not None:
                return f"{name:<10} {where:<12} {'-':>9} {'-':>8}  ended before its kernels ran: " \
                       f"{cb.stderr.read().decode()[-160:].strip()}"
            if time.monotonic() - t0 > 120:
                cb.kill()
                return f"{name:<10} {where:<12} {'-':>9} {'-':>8}  kernels never seen"
            time.sleep(0.2)
        before = len(marked(marker.encode())) - 1
        cb.send_signal(signal.SIGKILL)
        cb.wait()
        time.sleep(5)
        left = marked(marker.encode())
        folders = list(Path(tmp).glob("cb-*"))
        comm = [Path(f"/proc/{p}/comm").read_text().strip() for p in left if Path(f"/proc/{p}/comm").exists()]
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return (f"{name:<10} {where:<12} {len(left):>9} {len(folders):>8}  ({before} processes ran at the kill"
                + (f"; left: {', '.join(comm)}" if comm else "") + ")")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log")
    args = ap.parse_args()
    was_up = "no sim-cluster is up" not in subprocess.run([*CB, "sim-cluster", "status"], capture_output=True,
                                                          text=True).stdout
    if not was_up:
        subprocess.run([*CB, "sim-cluster", "up", "--nodes", "2"], check=True, capture_output=True)
    lines = [f"# faults_kill9.py {time.strftime('%Y-%m-%d %H:%M:%S')}; kill -9 of clusterbench once its kernels "
             "run; counted 5 s later",
             f"{'scenario':<10} {'where':<12} {'processes':>9} {'folders':>8}"]
    print("\n".join(lines), flush=True)
    try:
        for where in ("local", "sim-cluster"):
            for name, argv, names in [*SCENARIOS, NODE] if where == "local" else SCENARIOS:
                line = scenario(name, argv, names, where)
                print(line, flush=True)
                lines.append(line)
    finally:
        if not was_up:
            subprocess.run([*CB, "sim-cluster", "down"], capture_output=True)
    if args.log:
        Path(args.log).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
