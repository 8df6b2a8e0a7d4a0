#!/usr/bin/env python3
"""Staging a kernel on separate machines, before and after its stamps (issue 24's preflight target).

Every MPI launch across separate machines first asks each node whether its own build of the kernel is
there (launch/nodes.py ``stage_program``). This script brings up N machines of the virtual cluster
(``sim-cluster up --machines``), installs the ``--after`` source tree's clusterbench on them (the
nodes' side: it answers both ways), then, in interleaved rounds, starts a fresh head process from
each source tree that stages the MPI ``hello`` kernel on all N machines 3 times (its ``_STAGED``
memory cleared before each, as a new command starts), and logs wall time and the machine's busy
cpu-seconds (all processes, from /proc/stat: meaningful only on a quiet machine) of each.

    .venv/bin/python speed/stage_speed.py --before /tmp/old/src [--after src] [--nodes 32] [--rounds 3]
                                          [--log speed/logs/stage-speed.txt]
Root only.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

HEAD = r'''
import json, sys, time
from clusterbench.launch import nodes, remote
from clusterbench.kernels.build import build_kernel
from clusterbench.launch import mpi as M
def busy():
    v = list(map(int, open("/proc/stat").readline().split()[1:]))
    return sum(v) - v[3] - v[4]
hosts = [f"node{i}" for i in range(1, int(sys.argv[1]) + 1)]
b = build_kernel("hello", openmp=False, cc=M.detect_mpi().mpicc)
nodes.stage_program(hosts, [str(b.path)])  # connections opened, the kernel there
out = []
for _ in range(3):
    nodes._STAGED.clear()
    b0, t0 = busy(), time.monotonic()
    nodes.stage_program(hosts, [str(b.path)])
    out.append([round(time.monotonic() - t0, 3), (busy() - b0) / 100])
remote.stop_shared_connections()
print(json.dumps(out))
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the src folder of the tree before the change")
    ap.add_argument("--after", default=str(REPO / "src"))
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--log", default=str(REPO / "speed" / "logs" / "stage-speed.txt"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (the virtual cluster)")
    tmp = Path(tempfile.mkdtemp(prefix="cb-stage-speed-"))
    env = {**os.environ, "CLUSTERBENCH_SIM_PREFIX": "cbstg-", "CLUSTERBENCH_SIM_STATE": str(tmp / "sim"),
           "CLUSTERBENCH_DB": str(tmp / "r.db"), "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"}
    cb = [sys.executable, "-m", "clusterbench"]
    out = open(args.log, "a")

    def log(text: str) -> None:
        print(text, flush=True)
        out.write(text + "\n")
        out.flush()

    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    log(f"== {time.strftime('%Y-%m-%dT%H:%M:%S')} commit {commit}; {os.cpu_count()} cpus; load "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.nodes} machines; before {args.before}, "
        f"after {args.after}")
    after_env = {**env, "PYTHONPATH": args.after}
    hosts = ",".join(f"node{i}" for i in range(1, args.nodes + 1))
    try:
        for cmd in (["sim-cluster", "up", "--machines", "--nodes", str(args.nodes)],
                    ["cluster", "install", "--hosts", hosts]):
            p = subprocess.run([*cb, *cmd], env=after_env, capture_output=True, text=True, timeout=1200)
            if p.returncode:
                log(f"{' '.join(cmd)} failed: {p.stderr.strip()[-500:]}")
                return 1
        got: dict[str, list[float]] = {"before": [], "after": []}
        for r in range(args.rounds):
            for label, src in (("before", args.before), ("after", args.after)):
                p = subprocess.run([sys.executable, "-c", HEAD, str(args.nodes)], env={**env, "PYTHONPATH": src},
                                   capture_output=True, text=True, timeout=600)
                if p.returncode:
                    log(f"round {r + 1} {label}: failed {p.stderr.strip()[-500:]}")
                    return 1
                rows = __import__("json").loads(p.stdout)
                got[label] += [w for w, _ in rows]
                log(f"round {r + 1} {label:6s} wall s {' '.join(f'{w:.2f}' for w, _ in rows)}; busy cpu-s "
                    f"{' '.join(f'{c:.2f}' for _, c in rows)}; load {os.getloadavg()[0]:.2f}")
        mb, ma = statistics.median(got["before"]), statistics.median(got["after"])
        log(f"median wall: before {mb:.2f} s, after {ma:.2f} s, before/after {mb / ma:.2f}")
    finally:
        subprocess.run([*cb, "sim-cluster", "down", "--force"], env=after_env, capture_output=True, timeout=300)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
