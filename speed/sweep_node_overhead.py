#!/usr/bin/env python3
"""Orchestration cost of `sweep node` per node at 4, 16 and 32 virtual nodes (docs/sweep.md).

For each size, a virtual cluster of N nodes (own prefix, own state directory), then R times

    clusterbench sweep node --hosts N1,...,NN --benchmark "peak --seconds 0.1 --samples 1" \\
        --allow-root --oversubscribe --no-store --json

and from each document's ``timing``: the job's wall time, the slowest node's benchmark time and their
difference, the orchestration cost (every agent's Python start and probe, MPI's start and end, the
gathering), in total and per node; and the command's wall time as the caller sees it. The cluster is
taken down after each size. Root only.

    .venv/bin/python speed/sweep_node_overhead.py [--sizes 4,16,32] [--repeat 2] [--log FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from speedkit import cpu_model, log_file, save_log

REPO = Path(__file__).resolve().parents[1]
CB = [sys.executable, "-m", "clusterbench"]
PREFIX = "cbswn-"
BENCHMARK = "peak --seconds 0.1 --samples 1"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4,16,32")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--log", default=None)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (the virtual cluster)")
    tmp = Path(tempfile.mkdtemp(prefix="cb-sweep-node-speed-"))
    env = {**os.environ, "CLUSTERBENCH_SIM_PREFIX": PREFIX, "CLUSTERBENCH_SIM_STATE": str(tmp / "sim"),
           "CLUSTERBENCH_DB": str(tmp / "r.db"), "PYTHONPATH": str(REPO / "src"), "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"}
    load = os.getloadavg()
    lines = [f"# sweep node orchestration cost per node, virtual clusters of {args.sizes} nodes "
             f"(--benchmark \"{BENCHMARK}\", {args.repeat} sweeps each)",
             f"# {time.strftime('%Y-%m-%d %H:%M:%S')} on {cpu_model()}, {os.cpu_count()} cpus, {platform.release()}, "
             f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the start",
             "# columns: nodes | job wall s | slowest node's benchmark s | orchestration s | per node s | command wall s",
             "# (orchestration = job wall - the slowest node's benchmark: the agents' start and probe, MPI's start "
             "and end, the gathering)"]
    summary = []
    try:
        for n in [int(x) for x in args.sizes.split(",")]:
            subprocess.run([*CB, "sim-cluster", "down", "--force"], env=env, capture_output=True, timeout=300)
            t0 = time.monotonic()
            subprocess.run([*CB, "sim-cluster", "up", "--nodes", str(n)], env=env, check=True, capture_output=True,
                           text=True, timeout=600)
            lines.append(f"## {n} nodes: sim-cluster up {time.monotonic() - t0:.1f} s (not part of the sweep)")
            hosts = ",".join(f"{PREFIX}n{i}" for i in range(1, n + 1))
            per_node = []
            for r in range(args.repeat):
                cmd = [*CB, "sweep", "node", "--hosts", hosts, "--benchmark", BENCHMARK, "--allow-root",
                       "--oversubscribe", "--no-store", "--json"]
                if r == 0:
                    lines.append(f"$ clusterbench sweep node --hosts {PREFIX}n1,...,{PREFIX}n{n} --benchmark "
                                 f"\"{BENCHMARK}\" " + " ".join(cmd[cmd.index(BENCHMARK) + 1:]))
                t1 = time.monotonic()
                p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
                outer = time.monotonic() - t1
                if p.returncode != 0:
                    lines.append(f"{n:3d} nodes, sweep {r + 1}: exit {p.returncode} after {outer:.1f} s: "
                                 f"{p.stderr.strip()[-300:]}")
                    continue
                t = json.loads(p.stdout)["timing"]
                lines.append(f"{n:3d} nodes | {t['wall_s']:6.1f} | {t['bench_max_s']:5.1f} | {t['orchestration_s']:5.1f}"
                             f" | {t['orchestration_per_node_s']:5.2f} | {outer:6.1f}")
                per_node.append(t["orchestration_per_node_s"])
            subprocess.run([*CB, "sim-cluster", "down", "--force"], env=env, capture_output=True, timeout=300)
            if per_node:
                summary.append(f"{n:3d} nodes: orchestration per node median {statistics.median(per_node):.2f} s "
                               f"(min {min(per_node):.2f}, max {max(per_node):.2f}, {len(per_node)} sweeps)")
    finally:
        subprocess.run([*CB, "sim-cluster", "down", "--force"], env=env, capture_output=True, timeout=300)
    load = os.getloadavg()
    lines += ["", f"# load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the end", "# summary", *summary]
    print("\n".join(lines))
    save_log(log_file(args.log, f"{platform.node() or 'host'}-sweep-node-overhead"), lines, "log")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
