#!/usr/bin/env python3
"""Orchestration cost of `sweep network` per node at 4, 16 and 32 virtual nodes (issue 11).

For each size, a virtual cluster of N nodes (own prefix, own state directory, default links: MTU 1500,
offloads on), then R times

    clusterbench sweep network --hosts N1,...,NN --allow-root --oversubscribe \\
        --pair-budget B --bw-size S --no-store --json

and from each document: the sweep's wall time (inside the command: this machine's probe, every node's
probe and NIC settings, the kernel build from the cache, MPI's start, the connection pass, the rounds'
barriers and gathers, MPI's end), the time measuring (per round the longest pair, summed) and their
difference, the orchestration cost, in total and per node; the kernel's own split (connection pass,
time in the kernel, MPI's start and end) from the run's note; and the command's wall time as the
caller sees it (with Python's start). The cluster is taken down after each size. Root only. A
sim-cluster launch that hangs is given up by clusterbench after 15 s and retried: such a sweep shows
about 15 s more orchestration, and the log says which.

    .venv/bin/python speed/sweep_overhead.py [--sizes 4,16,32] [--repeat 3] [--pair-budget 0.2] [--log FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from speedkit import cpu_model, log_file, save_log

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

CB = [sys.executable, "-m", "clusterbench"]
PREFIX = "cbswp-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4,16,32")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pair-budget", type=float, default=0.2)
    ap.add_argument("--bw-size", type=int, default=1 << 20)
    ap.add_argument("--log", default=None)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (the virtual cluster)")
    tmp = Path(tempfile.mkdtemp(prefix="cb-sweep-speed-"))
    env = {**os.environ, "CLUSTERBENCH_SIM_PREFIX": PREFIX, "CLUSTERBENCH_SIM_STATE": str(tmp / "sim"),
           "CLUSTERBENCH_DB": str(tmp / "r.db"), "PYTHONPATH": str(REPO / "src")}
    load = os.getloadavg()
    lines = [f"# sweep network orchestration cost per node, virtual clusters of {args.sizes} nodes "
             f"(pair budget {args.pair_budget:g} s, bandwidth at {args.bw_size} B, {args.repeat} sweeps each)",
             f"# {time.strftime('%Y-%m-%d %H:%M:%S')} on {cpu_model()}, {os.cpu_count()} cpus, {platform.release()}, "
             f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the start",
             "# columns: nodes, rounds, pairs | sweep wall s | measuring s | orchestration s | per node s | "
             "kernel: connecting s, in kernel s, with MPI start/end s | command wall s",
             "# (orchestration = sweep wall - measuring: the probes, the build from the cache, MPI's start and end, "
             "the connection pass, barriers and gathers)"]
    summary = []
    try:
        for n in [int(x) for x in args.sizes.split(",")]:
            subprocess.run([*CB, "sim-cluster", "down"], env=env, capture_output=True)
            t0 = time.monotonic()
            subprocess.run([*CB, "sim-cluster", "up", "--nodes", str(n)], env=env, check=True, capture_output=True,
                           text=True)
            lines.append(f"## {n} nodes: sim-cluster up {time.monotonic() - t0:.1f} s (not part of the sweep)")
            hosts = ",".join(f"{PREFIX}n{i}" for i in range(1, n + 1))
            per_node = []
            for r in range(args.repeat):
                cmd = [*CB, "sweep", "network", "--hosts", hosts, "--allow-root", "--oversubscribe", "--pair-budget",
                       str(args.pair_budget), "--bw-size", str(args.bw_size), "--no-store", "--json"]
                if r == 0:
                    lines.append("$ clusterbench " + " ".join(cmd[3:5]) + f" --hosts {PREFIX}n1,...,{PREFIX}n{n} "
                                 + " ".join(cmd[7:]))
                t1 = time.monotonic()
                p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
                outer = time.monotonic() - t1
                if p.returncode != 0:
                    lines.append(f"{n:3d} nodes, sweep {r + 1}: exit {p.returncode} after {outer:.1f} s: "
                                 f"{p.stderr.strip()[-300:]}")
                    continue
                doc = json.loads(p.stdout)
                o = doc["orchestration"]
                note = next((x for x in doc["notes"] if re.match(r"allpairs: \d+ nodes", x)), "")
                m = re.search(r"of ([\d.]+) s in the kernel \(([\d.]+) s connecting.*?\), ([\d.]+) s with MPI", note)
                kern = f"{m.group(2)}, {m.group(1)}, {m.group(3)}" if m else "?"
                outside = o["wall_s"] - float(m.group(3)) if m else 0.0  # probes, build, and any launch retried
                retried = outside > 10.0
                lines.append(f"{n:3d} nodes, {doc['schedule']['rounds']:2d} rounds, {doc['schedule']['pairs']:3d} pairs"
                             f" | {o['wall_s']:6.1f} | {o['measured_s']:5.1f} | {o['seconds']:5.1f} | "
                             f"{o['per_node_s']:5.2f} | {kern} | {outer:6.1f}"
                             + (f"   <- {outside:.0f} s outside MPI's run: a launch given up after 15 s and "
                                "retried" if retried else ""))
                per_node.append((o["per_node_s"], retried))
            subprocess.run([*CB, "sim-cluster", "down"], env=env, capture_output=True)
            if per_node:
                allv = [v for v, _ in per_node]
                clean = [v for v, retried in per_node if not retried]
                summary.append(f"{n:3d} nodes: orchestration per node median {statistics.median(allv):.2f} s "
                               f"(min {min(allv):.2f}, max {max(allv):.2f}, {len(allv)} sweeps)"
                               + (f"; without a retried launch median {statistics.median(clean):.2f} s "
                                  f"({len(clean)} sweeps)" if clean and len(clean) < len(allv) else ""))
    finally:
        subprocess.run([*CB, "sim-cluster", "down"], env=env, capture_output=True)
    lines += ["", "# summary", *summary]
    print("\n".join(lines))
    save_log(log_file(args.log, f"{platform.node() or 'host'}-sweep-overhead"), lines, "log")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
