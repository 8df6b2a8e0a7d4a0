#!/usr/bin/env python3
"""Wall time of `run mpi --quick` on 2 virtual nodes and of `run coll --quick` on 4 (with `--ops barrier`
beside it: the launch alone), as docs/mpi-network.md quotes them.

    sim-cluster up --nodes 2;  R x  run mpi --quick --hosts N1:1,N2:1 --allow-root
    sim-cluster up --nodes 4;  R x (run coll --quick --hosts N1,...,N4 --oversubscribe --allow-root,
                                    the same with --ops barrier)

Each command's wall time as the caller sees it (Python's start included), its exit status and the load
average when it started. Own prefix, state folder and store. Root only.

    .venv/bin/python speed/mpi_quick_times.py [--repeat 2] [--log FILE]
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from speedkit import RawLog, cpu_model, log_file

REPO = Path(__file__).resolve().parents[1]
CB = [sys.executable, "-m", "clusterbench"]
PREFIX = "cbmqt-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--log", default=None)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (the virtual cluster)")
    tmp = Path(tempfile.mkdtemp(prefix="cb-mpi-quick-"))
    env = {**os.environ, "CLUSTERBENCH_SIM_PREFIX": PREFIX, "CLUSTERBENCH_SIM_STATE": str(tmp / "sim"),
           "CLUSTERBENCH_DB": str(tmp / "r.db"), "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1", "PYTHONPATH": str(REPO / "src")}
    log = RawLog(log_file(args.log, f"{platform.node() or 'host'}-mpi-quick-times"), "w")
    log(f"# run mpi --quick (2 virtual nodes) and run coll --quick (4), wall time per command, "
        f"{time.strftime('%Y-%m-%d %H:%M:%S')}; {cpu_model()}, {os.cpu_count()} cpus, {platform.release()}")

    def timed(what: str, argv: list[str]) -> None:
        load = os.getloadavg()[0]
        t0 = time.monotonic()
        p = subprocess.run([*CB, *argv], capture_output=True, text=True, env=env, timeout=900)
        wall = time.monotonic() - t0
        tail = "" if p.returncode == 0 else f": {(p.stderr.strip() or p.stdout.strip())[-300:]}"
        log(f"{what}: {wall:.1f} s, exit {p.returncode}, load {load:.1f} at its start{tail}")

    def cluster(n: int) -> list[str]:
        subprocess.run([*CB, "sim-cluster", "down", "--force"], env=env, capture_output=True, timeout=300)
        subprocess.run([*CB, "sim-cluster", "up", "--nodes", str(n)], env=env, check=True, capture_output=True,
                       timeout=600)
        return [f"{PREFIX}n{i}" for i in range(1, n + 1)]

    try:
        names = cluster(2)
        hosts = ",".join(f"{h}:1" for h in names)
        log(f"$ clusterbench run mpi --quick --hosts {hosts} --allow-root")
        for r in range(args.repeat):
            timed(f"run mpi --quick, 2 nodes, run {r + 1}", ["run", "mpi", "--quick", "--hosts", hosts, "--allow-root"])
        names = cluster(4)
        hosts = ",".join(names)
        log(f"$ clusterbench run coll --quick --hosts {hosts} --oversubscribe --allow-root [--ops barrier]")
        for r in range(args.repeat):
            timed(f"run coll --quick, 4 nodes, run {r + 1}",
                  ["run", "coll", "--quick", "--hosts", hosts, "--oversubscribe", "--allow-root"])
            timed(f"run coll --quick --ops barrier, 4 nodes, run {r + 1}",
                  ["run", "coll", "--quick", "--ops", "barrier", "--hosts", hosts, "--oversubscribe", "--allow-root"])
    finally:
        subprocess.run([*CB, "sim-cluster", "down", "--force"], env=env, capture_output=True, timeout=300)
    log(f"# load {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
