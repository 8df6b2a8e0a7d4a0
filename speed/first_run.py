#!/usr/bin/env python3
"""The README's first multi-node run, rehearsed on four machines of the virtual cluster, each command's
output kept whole (README.md and docs/cluster.md quote it as excerpts of this log).

    sim-cluster up --machines --nodes 4; sim-cluster hosts | grep slots > nodes
    cluster preflight --hostfile nodes --allow-root     (before the install: the version problem)
    cluster install --hostfile nodes
    cluster preflight --hostfile nodes --allow-root     (ready, the MPI hello)
    run hpl --hostfile nodes --n 3000 --oversubscribe --allow-root
    sim-cluster down --force

Own prefix, state folder and store. Root only.

    .venv/bin/python speed/first_run.py [--log FILE] [--prefix cbfr-]
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", default=None)
    ap.add_argument("--prefix", default="cbfr-")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (the virtual cluster)")
    tmp = Path(tempfile.mkdtemp(prefix="cb-first-run-"))
    env = {**os.environ, "CLUSTERBENCH_SIM_PREFIX": args.prefix, "CLUSTERBENCH_SIM_STATE": str(tmp / "sim"),
           "CLUSTERBENCH_DB": str(tmp / "r.db"), "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1", "PYTHONPATH": str(REPO / "src")}
    nodes = tmp / "nodes"
    log = RawLog(log_file(args.log, f"{platform.node() or 'host'}-first-run"), "w")
    log(f"# the README's first multi-node run on 4 machines of the virtual cluster, {time.strftime('%Y-%m-%d %H:%M:%S')}; "
        f"{cpu_model()}, {os.cpu_count()} cpus, {platform.release()}; load {os.getloadavg()[0]:.1f} at the start")

    def cb(*argv: str, timeout: float = 900) -> int:
        log("$ clusterbench " + " ".join(a if a != str(nodes) else "nodes" for a in argv))
        t0 = time.monotonic()
        p = subprocess.run([*CB, *argv], capture_output=True, text=True, env=env, timeout=timeout, cwd=tmp)
        for line in (p.stdout + p.stderr).splitlines():
            log(line)
        log(f"# exit {p.returncode}, {time.monotonic() - t0:.1f} s, load {os.getloadavg()[0]:.1f}")
        return p.returncode

    try:
        if cb("sim-cluster", "up", "--machines", "--nodes", "4") != 0:
            return 1
        hosts = subprocess.run([*CB, "sim-cluster", "hosts"], capture_output=True, text=True, env=env, timeout=120)
        nodes.write_text("".join(ln + "\n" for ln in hosts.stdout.splitlines() if "slots" in ln))
        log("$ clusterbench sim-cluster hosts | grep slots > nodes")
        cb("cluster", "preflight", "--hostfile", str(nodes), "--allow-root")
        cb("cluster", "install", "--hostfile", str(nodes))
        cb("cluster", "preflight", "--hostfile", str(nodes), "--allow-root")
        cb("run", "hpl", "--hostfile", str(nodes), "--n", "3000", "--oversubscribe", "--allow-root")
    finally:
        cb("sim-cluster", "down", "--force", timeout=300)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
