#!/usr/bin/env python3
"""docs/cluster.md's `run cluster` example, run and logged whole: three machines of the virtual cluster,
clusterbench installed on them, then `run cluster` with a 4-minute budget.

    sim-cluster up --machines --nodes 3; sim-cluster hosts | grep slots > nodes
    cluster install --hostfile nodes
    run cluster --hostfile nodes --budget 4m --oversubscribe --tag rc-a
    sim-cluster down --force

Own prefix, state folder and store. Root only.

    .venv/bin/python speed/run_cluster_example.py [--log FILE] [--prefix cbrce-]
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
    ap.add_argument("--prefix", default="cbrce-")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (the virtual cluster)")
    tmp = Path(tempfile.mkdtemp(prefix="cb-run-cluster-"))
    env = {**os.environ, "CLUSTERBENCH_SIM_PREFIX": args.prefix, "CLUSTERBENCH_SIM_STATE": str(tmp / "sim"),
           "CLUSTERBENCH_DB": str(tmp / "r.db"), "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1", "PYTHONPATH": str(REPO / "src")}
    nodes = tmp / "nodes"
    log = RawLog(log_file(args.log, f"{platform.node() or 'host'}-run-cluster-example"), "w")
    log(f"# docs/cluster.md's run cluster example on 3 machines of the virtual cluster, {time.strftime('%Y-%m-%d %H:%M:%S')}; "
        f"{cpu_model()}, {os.cpu_count()} cpus, {platform.release()}")

    def cb(*argv: str, timeout: float = 900, stderr_mark: bool = False) -> int:
        log(f"# load {os.getloadavg()[0]:.1f}")
        log("$ clusterbench " + " ".join(a if a != str(nodes) else "nodes" for a in argv))
        t0 = time.monotonic()
        p = subprocess.run([*CB, *argv], capture_output=True, text=True, env=env, timeout=timeout, cwd=tmp)
        for line in p.stderr.splitlines():
            log(line + ("     (stderr)" if stderr_mark else ""))
        for line in p.stdout.splitlines():
            log(line)
        log(f"# exit {p.returncode}, {time.monotonic() - t0:.1f} s")
        return p.returncode

    try:
        if cb("sim-cluster", "up", "--machines", "--nodes", "3") != 0:
            return 1
        hosts = subprocess.run([*CB, "sim-cluster", "hosts"], capture_output=True, text=True, env=env, timeout=120)
        nodes.write_text("".join(ln + "\n" for ln in hosts.stdout.splitlines() if "slots" in ln))
        log("$ clusterbench sim-cluster hosts | grep slots > nodes")
        cb("cluster", "install", "--hostfile", str(nodes))
        cb("run", "cluster", "--hostfile", str(nodes), "--budget", "4m", "--oversubscribe", "--tag", "rc-a",
           timeout=900, stderr_mark=True)
    finally:
        cb("sim-cluster", "down", "--force", timeout=300)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
