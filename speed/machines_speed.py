#!/usr/bin/env python3
"""The virtual cluster of machines at 4, 16 and 32 nodes: bring-up time and memory per node,
preflight, install, MPI hello, and sweep network's orchestration cost (issue 24's speed targets).

For each size N (own prefix and state directory), in order:

    clusterbench sim-cluster up --machines --nodes N     time; MemAvailable before - after, per node
    clusterbench cluster preflight --hosts ... --no-mpi   time (ssh, names, resolution, versions,
                                                          memory, clock of every node)
    clusterbench cluster install --hosts ...              time from a warm wheel cache (the head's
                                                          wheels made once before the first size);
                                                          nodes empty: venv, wheels and kernels
    clusterbench cluster preflight --hosts ...            time, and the MPI hello's own time
                                                          (its kernel staged and run on every node)
    clusterbench sweep network --hosts ... (R times)      orchestration per node (wall - measuring)
    clusterbench sim-cluster down                         time

Every command's wall time is measured from here (Python's start included) and the log keeps each
command's own figures, with the machine's load average when it started. Root only.

    .venv/bin/python speed/machines_speed.py [--sizes 4,16,32] [--repeat 2] [--log FILE]
                                             [--prefix cbmsp-] [--state DIR]
                                             [--src LABEL=DIR,...] [--rounds 1] [--preflights 1]

(``--prefix``/``--state``: the virtual cluster's names and state folder, so that runs beside other
virtual clusters on the same machine do not meet. ``--src``: the clusterbench source folders to
measure, e.g. ``main=/tmp/main/src,new=src``, one after the other within each of ``--rounds``
rounds (interleaved, so that the machine's load falls on both alike; each gets its own cluster,
brought up, installed from its own wheels and brought down); ``--preflights``: the preflight with
MPI that many times per cluster. ``--repeat 0``: no sweep.)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from speedkit import RawLog, cpu_model

REPO = Path(__file__).resolve().parents[1]
CB = [sys.executable, "-m", "clusterbench"]
PREFIX = "cbmsp-"


def mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def run(args: list[str], env: dict[str, str], log, timeout: float = 1800) -> tuple[float, subprocess.CompletedProcess]:
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    p = subprocess.run([*CB, *args], capture_output=True, text=True, env=env, timeout=timeout)
    dt = time.monotonic() - t0
    log(f"$ clusterbench {' '.join(args if len(' '.join(args)) < 160 else args[:3] + ['...'])}  "
        f"[{dt:.2f} s, exit {p.returncode}, load {load:.1f}]")
    if p.returncode not in (0,):
        log("  stderr: " + (p.stderr.strip().splitlines() or [""])[-1])
    return dt, p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4,16,32")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--pair-budget", type=float, default=0.2)
    ap.add_argument("--log", default=None)
    ap.add_argument("--prefix", default=PREFIX, help="the virtual cluster's name prefix")
    ap.add_argument("--state", default=None, help="its state folder (default: a new temporary one)")
    ap.add_argument("--src", default=None, help="LABEL=DIR,...: clusterbench source folders to measure in turn "
                    "(default: this checkout's src)")
    ap.add_argument("--rounds", type=int, default=1, help="rounds over the sizes and sources")
    ap.add_argument("--preflights", type=int, default=1, help="preflights with MPI per cluster")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (the virtual cluster)")
    tmp = Path(tempfile.mkdtemp(prefix="cb-machines-speed-"))
    base_env = {**os.environ, "CLUSTERBENCH_SIM_PREFIX": args.prefix,
                "CLUSTERBENCH_SIM_STATE": args.state or str(tmp / "sim"),
                "CLUSTERBENCH_DB": str(tmp / "r.db"), "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"}
    srcs = [tuple(x.split("=", 1)) if "=" in x else (x, x) for x in args.src.split(",")] if args.src else \
        [("this", str(REPO / "src"))]
    srcs = [(label, str(Path(d).resolve())) for label, d in srcs]
    log = RawLog(args.log, "w")

    log(f"# machines speed, {time.strftime('%Y-%m-%d %H:%M:%S')}; {cpu_model()}, {os.cpu_count()} cpus; "
        f"load {os.getloadavg()[0]:.1f}; clusterbench from {', '.join(f'{lb}={d}' for lb, d in srcs)}; "
        f"Python bytecode caches {'not written' if os.environ.get('PYTHONDONTWRITEBYTECODE') else 'written'}")
    for label, src in srcs:  # the warm wheel cache of each source
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, "-c", "from clusterbench.cluster.install import prepare_wheels; "
                            "print(prepare_wheels()[1])"], capture_output=True, text=True,
                           env={**base_env, "PYTHONPATH": src}, timeout=1800)
        log(f"wheels of {label} ready (digest {p.stdout.strip() or p.stderr.strip()[-200:]}) in "
            f"{time.monotonic() - t0:.2f} s")
    summary = []
    plan = [(r, label, src, n) for r in range(args.rounds) for n in [int(x) for x in args.sizes.split(",")]
            for label, src in srcs]
    for rnd, label, src, n in plan:
        env = {**base_env, "PYTHONPATH": src}
        hosts = ",".join(f"node{k}" for k in range(1, n + 1))
        log(f"\n## {n} machines, {label}, round {rnd + 1} (load {os.getloadavg()[0]:.1f})")
        run(["sim-cluster", "down"], env, log)
        before = mem_available()
        up_s, p = run(["sim-cluster", "up", "--machines", "--nodes", str(n), "--json"], env, log)
        if p.returncode:
            return 1
        time.sleep(1.0)
        per_node = (before - mem_available()) / n
        log(f"up: {up_s:.2f} s ({up_s / n:.3f} s per node); memory {per_node / 2**20:.1f} MiB per node "
            "(MemAvailable before - after)")
        pre_s, p = run(["cluster", "preflight", "--hosts", hosts, "--no-mpi", "--json"], env, log)
        doc = json.loads(p.stdout)
        log(f"preflight without MPI: {pre_s:.2f} s (its own {doc['seconds']:.2f} s); "
            f"{len(doc['problems'])} problem(s) (clusterbench is not installed yet)")
        inst_s, p = run(["cluster", "install", "--hosts", hosts, "--json"], env, log)
        doc = json.loads(p.stdout)
        log(f"install: {inst_s:.2f} s (its own {doc['seconds']:.2f} s); "
            + ", ".join(f"{s}: {sum(1 for r in doc['nodes'].values() if r['status'] == s)}"
                        for s in sorted({r['status'] for r in doc['nodes'].values()})))
        pre2 = []
        for _ in range(args.preflights):
            pre2_s, p = run(["cluster", "preflight", "--hosts", hosts, "--json"], env, log)
            doc = json.loads(p.stdout)
            hello = (doc.get("mpi") or {}).get("hello") or {}
            launch = (doc.get("mpi") or {}).get("launch") or {}
            log(f"preflight with MPI: {pre2_s:.2f} s (its own {doc['seconds']:.2f} s); MPI launch (hostname) "
                f"{launch.get('seconds')} s, MPI hello {hello.get('seconds')} s ({hello.get('ranks')} ranks, exchange "
                f"{hello.get('exchange_s')} s); ok={doc['ok']}")
            pre2.append(pre2_s)
        per = []
        for r in range(args.repeat):
            s_s, p = run(["sweep", "network", "--hosts", hosts, "--oversubscribe", "--pair-budget",
                          str(args.pair_budget), "--bw-size", str(1 << 20), "--no-store", "--json"], env, log)
            if p.returncode == 0:
                d = json.loads(p.stdout)
                o = d.get("orchestration") or {}
                per.append(o.get("per_node_s"))
                log(f"sweep network {r + 1}: {s_s:.2f} s from here; wall {o.get('wall_s')} s, measuring "
                    f"{o.get('measured_s')} s, orchestration {o.get('seconds')} s = {o.get('per_node_s')} s per node")
        down_s, _ = run(["sim-cluster", "down"], env, log)
        summary.append((label, rnd, n, up_s, per_node, pre_s, inst_s, pre2, hello.get("seconds"), per, down_s))
    log("\n## summary")
    log("source | round | nodes | up s | MiB/node | preflight s (no MPI) | install s | preflight s (MPI) | hello s | "
        "sweep orchestration s/node | down s")
    for label, rnd, n, up_s, mem, pre_s, inst_s, pre2, hello_s, per, down_s in summary:
        log(f"{label} | {rnd + 1} | {n} | {up_s:.2f} | {mem / 2**20:.1f} | {pre_s:.2f} | {inst_s:.2f} | "
            f"{', '.join(f'{x:.2f}' for x in pre2)} | {hello_s} | "
            f"{', '.join(f'{x:.2f}' for x in per if x is not None) or '-'} | {down_s:.2f}")
    if len(srcs) > 1:
        log("\n## preflight with MPI, median per source (all rounds), and the ratio to the first source")
        import statistics

        med = {lb: statistics.median([x for s_ in summary if s_[0] == lb for x in s_[7]]) for lb, _ in srcs}
        for lb, _ in srcs:
            log(f"{lb}: median {med[lb]:.2f} s; {srcs[0][0]}/{lb} = {med[srcs[0][0]] / med[lb]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
