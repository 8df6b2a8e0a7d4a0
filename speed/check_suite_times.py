#!/usr/bin/env python3
"""Wall time of each standard `check` suite, as docs/check.md's table quotes it: per suite, the first
baseline (`--update-baseline`, which judges nothing) and then one check against it, default repeats.
`node`, `mpi` and `hpl` run on this machine; `health` on 2 virtual nodes (`sim-cluster up --nodes 2`; or
``--health-nodes N``, with ``--oversubscribe`` when N exceeds the cpus).

    clusterbench check SUITE --baseline b-SUITE --update-baseline [--hosts N1,N2]    (timed, exit 7)
    clusterbench check SUITE --baseline b-SUITE [--hosts N1,N2]                      (timed)

Each command's wall time as the caller sees it, its exit status and the load average when it started.
Own store, prefix and state folder. Root only (the virtual cluster).

    .venv/bin/python speed/check_suite_times.py [--suites node,mpi,hpl,health] [--log FILE]
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
PREFIX = "cbcst-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suites", default="node,mpi,hpl,health")
    ap.add_argument("--health-nodes", type=int, default=2,
                    help="virtual nodes for health (default 2; more than the cpus adds --oversubscribe)")
    ap.add_argument("--log", default=None)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (the virtual cluster)")
    tmp = Path(tempfile.mkdtemp(prefix="cb-check-times-"))
    env = {**os.environ, "CLUSTERBENCH_SIM_PREFIX": PREFIX, "CLUSTERBENCH_SIM_STATE": str(tmp / "sim"),
           "CLUSTERBENCH_DB": str(tmp / "r.db"), "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1", "PYTHONPATH": str(REPO / "src")}
    log = RawLog(log_file(args.log, f"{platform.node() or 'host'}-check-suite-times"), "w")
    log(f"# check's standard suites, wall time of the first baseline and of one check, default repeats, "
        f"{time.strftime('%Y-%m-%d %H:%M:%S')}; {cpu_model()}, {os.cpu_count()} cpus, {platform.release()}")

    def timed(what: str, argv: list[str]) -> None:
        log("$ clusterbench " + " ".join(argv))
        load = os.getloadavg()[0]
        t0 = time.monotonic()
        p = subprocess.run([*CB, *argv], capture_output=True, text=True, env=env, timeout=900)
        wall = time.monotonic() - t0
        first = next((ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip()), "")
        log(f"{what}: {wall:.1f} s, exit {p.returncode}, load {load:.1f} at its start; {first[:200]}")

    try:
        for suite in args.suites.split(","):
            hosts: list[str] = []
            if suite == "health":
                n = args.health_nodes
                subprocess.run([*CB, "sim-cluster", "up", "--nodes", str(n)], env=env, check=True, capture_output=True,
                               timeout=600)
                hosts = ["--hosts", ",".join(f"{PREFIX}n{i}" for i in range(1, n + 1))]
                hosts += ["--oversubscribe"] if n > (os.cpu_count() or 1) else []
            base = ["check", suite, "--baseline", f"b-{suite}", *hosts]
            timed(f"{suite} baseline", [*base, "--update-baseline"])
            timed(f"{suite} check", base)
    finally:
        subprocess.run([*CB, "sim-cluster", "down", "--force"], env=env, capture_output=True, timeout=300)
    log(f"# load {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
