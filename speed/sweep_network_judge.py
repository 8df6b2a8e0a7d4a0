#!/usr/bin/env python3
"""How often `sweep network`'s judge finds a faulty node, and flags a healthy one, when each sweep runs
once (issue 23 item 5): no retry until it flags, as a user runs it.

Virtual clusters at MTU 9000 with offloads off (every frame MTU-sized, as on a wire), own prefix and
state directory. Faults are put in and taken out between sweeps on the same cluster, as the tests do:
a node rate-limited with tc (`tc -n NODE qdisc replace dev cb0 root tbf rate R ...`) and a node at MTU
1500 (`ip -n NODE link set dev cb0 mtu 1500`). Cases, interleaved per trial so the machine's load
drifts across all of them alike:

    4 nodes: healthy; one fault (n2 at 50 Mbit/s); two faults (n2 at 50 Mbit/s, n3 at MTU 1500)
    8 nodes: healthy; one fault (n4 at 100 Mbit/s); two faults (n4 at 100 Mbit/s, n7 at MTU 1500)
    32 nodes (MTU 1500, offloads on, as the test): healthy, pair budget 0.1 s, 1 MiB

Each sweep is

    clusterbench sweep network --hosts N1,...,NN --allow-root --oversubscribe --pair-budget 0.3 \\
        --no-store --json

and the log keeps every command, the text the command prints without --json (rendered from its JSON
by the same formatter), and per sweep: which faulty node was flagged (with how far below the
reference its best link was), which healthy nodes and links were flagged, each metric's verdict
(judged / too noisy) and the load average. The summary gives per case the detections of each faulty
node, the healthy nodes and links flagged and the 'too noisy' verdicts. Root only. Log:
speed/results-<date>-<machine>-sweep-judge.txt unless --log is given.

    .venv/bin/python speed/sweep_network_judge.py [--trials 5] [--big 2] [--log FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from speedkit import log_file, save_log

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

CB = [sys.executable, "-m", "clusterbench"]
PREFIX = "cbsj-"
TBF_LATENCY = "20ms"


def machine_name() -> str:
    from clusterbench.probe import probe

    cpu = probe()["cpu"]
    model = str(cpu.get("model_name") or platform.machine()).lower().replace(" ", "-")
    return f"{model}-{os.cpu_count()}vcpu"


def node(i: int) -> str:
    return f"{PREFIX}n{i}"


# case name -> (nodes, {node index: ("rate", bit/s) | ("mtu", 1500)})
CASES = {
    4: [("4 healthy", {}), ("4 one fault", {2: ("rate", 50_000_000)}),
        ("4 two faults", {2: ("rate", 50_000_000), 3: ("mtu", 1500)})],
    8: [("8 healthy", {}), ("8 one fault", {4: ("rate", 100_000_000)}),
        ("8 two faults", {4: ("rate", 100_000_000), 7: ("mtu", 1500)})],
}


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, s: str = "") -> None:
        self.lines.append(s)
        print(s, flush=True)

    def sh(self, argv: list[str], env: dict, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess:
        self("$ " + " ".join(argv))
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
        for stream in (p.stdout, p.stderr):
            if stream.strip():
                self(stream.rstrip())
        if p.returncode:
            self(f"(exit {p.returncode})")
            if check:
                raise SystemExit(f"failed: {' '.join(argv)}")
        return p


def tbf(rate_bps: int, mtu: int = 9000) -> list[str]:
    burst = max(rate_bps // 8 // 500, 65536 + mtu)  # as sim-cluster's --rate and the tests
    return ["tbf", "rate", f"{rate_bps}bit", "burst", str(burst), "latency", TBF_LATENCY]


def set_faults(log: Log, env: dict, n: int, faults: dict) -> None:
    """Every node healthy (default qdisc, MTU 9000), then the case's faults."""
    for i in range(1, n + 1):
        ns = node(i)
        subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", "cb0", "root"], capture_output=True)
        subprocess.run(["ip", "-n", ns, "link", "set", "dev", "cb0", "mtu", "9000"], check=True)
    for i, (kind, v) in faults.items():
        if kind == "rate":
            log.sh(["tc", "-n", node(i), "qdisc", "replace", "dev", "cb0", "root", *tbf(v)], env)
        else:
            log.sh(["ip", "-n", node(i), "link", "set", "dev", "cb0", "mtu", str(v)], env)


def best_factor(doc: dict, nd: str) -> float:
    best = max(max(p["measurements"]["bandwidth_MBps"]) for p in doc["pairs"] if nd in p["nodes"])
    ref = doc["judge"]["bandwidth"].get("reference") or 0
    return ref / best if best else float("inf")


def sweep(log: Log, env: dict, n: int, extra: list[str], case: str, bad: set[str], stats: dict) -> None:
    from clusterbench.sweep.network import format_sweep_network

    hosts = ",".join(node(i) for i in range(1, n + 1))
    cmd = [*CB, "sweep", "network", "--hosts", hosts, "--allow-root", "--oversubscribe", *extra, "--no-store", "--json"]
    load = os.getloadavg()[0]
    log(f"## {case}: faulty {sorted(bad) or 'none'}; load average {load:.1f}")
    log("$ clusterbench " + " ".join(cmd[3:]))
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    took = time.monotonic() - t0
    s = stats.setdefault(case, {"sweeps": 0, "failed": 0, "detected": {}, "healthy_nodes": [], "healthy_links": [],
                                "noisy": {"latency": 0, "bandwidth": 0}, "loads": [], "factors": {}})
    if p.returncode != 0:
        log(f"(exit {p.returncode} after {took:.1f} s) {p.stderr.strip()[-600:]}")
        s["failed"] += 1
        return
    doc = json.loads(p.stdout)
    for ln in format_sweep_network(doc):
        log(ln)
    s["sweeps"] += 1
    s["loads"].append(load)
    flagged_nodes = {f["node"] for f in doc["flags"]["nodes"]}
    slow_bw = {f["node"] for f in doc["flags"]["nodes"] if f["metric"] == "bandwidth"}
    healthy_nodes = sorted(flagged_nodes - bad)
    healthy_links = sorted({f"{f['pair']} ({f['metric']})" for f in doc["flags"]["links"]
                            if not bad & set(f["nodes"])})
    s["healthy_nodes"].append(healthy_nodes)
    s["healthy_links"].append(healthy_links)
    verdicts = []
    for m in ("latency", "bandwidth"):
        st = doc["judge"][m]["status"]
        verdicts.append(f"{m} {st}")
        if st == "too noisy":
            s["noisy"][m] += 1
    found = []
    for nd in sorted(bad):
        hit = nd in slow_bw
        s["detected"].setdefault(nd, []).append(hit)
        f = best_factor(doc, nd)
        s["factors"].setdefault(nd, []).append(f)
        found.append(f"{nd} {'FLAGGED' if hit else 'missed'} (best link x{f:.2f} below the reference)")
    log(f"=> {took:.1f} s; {'; '.join(verdicts)}; faulty: {', '.join(found) or '-'}; healthy nodes flagged: "
        f"{', '.join(healthy_nodes) or 'none'}; healthy links flagged: {len(healthy_links)}"
        + (f" ({', '.join(healthy_links[:8])}{' ...' if len(healthy_links) > 8 else ''})" if healthy_links else ""))
    log()


def summary(stats: dict) -> list[str]:
    out = ["", "# summary (each sweep run once; 'too noisy' = the judge's verdict for that metric)"]
    for case, s in stats.items():
        n = s["sweeps"]
        loads = s["loads"]
        head = (f"{case}: {n} sweeps" + (f", {s['failed']} failed" if s["failed"] else "")
                + (f" (load {min(loads):.1f}-{max(loads):.1f})" if loads else ""))
        parts = []
        for nd, hits in s["detected"].items():
            fs = s["factors"][nd]
            parts.append(f"{nd} flagged {sum(hits)}/{len(hits)} (best link x{min(fs):.2f}-x{max(fs):.2f} "
                         "below the reference)")
        hn = sum(1 for x in s["healthy_nodes"] if x)
        hl = [len(x) for x in s["healthy_links"]]
        parts.append(f"sweeps flagging a healthy node: {hn}/{n}"
                     + (f" ({'; '.join(', '.join(x) for x in s['healthy_nodes'] if x)})" if hn else ""))
        parts.append(f"healthy links flagged per sweep: {', '.join(map(str, hl)) or '-'}")
        parts.append(f"too noisy: latency {s['noisy']['latency']}/{n}, bandwidth {s['noisy']['bandwidth']}/{n}")
        out.append(head + ": " + "; ".join(parts))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5, help="sweeps per case of 4 and 8 nodes (default 5)")
    ap.add_argument("--big", type=int, default=2, help="healthy 32-node sweeps (default 2)")
    ap.add_argument("--sizes", default="4,8", help="cluster sizes of the fault cases (default 4,8)")
    ap.add_argument("--log", default=None)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (the virtual cluster)")
    tmp = Path(tempfile.mkdtemp(prefix="cb-sweep-judge-"))
    env = {**os.environ, "CLUSTERBENCH_SIM_PREFIX": PREFIX, "CLUSTERBENCH_SIM_STATE": str(tmp / "sim"),
           "CLUSTERBENCH_DB": str(tmp / "r.db"), "PYTHONPATH": str(REPO / "src"), "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"}
    log = Log()
    load = os.getloadavg()
    log(f"# sweep network's judge on faulty and healthy virtual clusters, each sweep run once ({args.trials} trials "
        f"per case of {args.sizes} nodes, {args.big} healthy 32-node sweeps)")
    log(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} on {platform.processor() or platform.machine()}, {os.cpu_count()} "
        f"cpus, {platform.release()}, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the start "
        "(other sessions share the machine)")
    stats: dict = {}
    t_start = time.monotonic()
    try:
        for n in [int(x) for x in args.sizes.split(",")]:
            subprocess.run([*CB, "sim-cluster", "down", "--force"], env=env, capture_output=True)
            log.sh([*CB, "sim-cluster", "up", "--nodes", str(n), "--mtu", "9000", "--offload", "off"], env)
            for t in range(args.trials):
                for case, faults in CASES[n]:
                    set_faults(log, env, n, faults)
                    sweep(log, env, n, ["--pair-budget", "0.3"], case,
                          {node(i) for i in faults}, stats)
            log.sh([*CB, "sim-cluster", "down", "--force"], env, check=False)
        if args.big:
            log.sh([*CB, "sim-cluster", "up", "--nodes", "32"], env)
            for _ in range(args.big):
                sweep(log, env, 32, ["--pair-budget", "0.1", "--bw-size", str(1 << 20), "--timeout", "240"],
                      "32 healthy", set(), stats)
    finally:
        subprocess.run([*CB, "sim-cluster", "down", "--force"], env=env, capture_output=True)
    for ln in summary(stats):
        log(ln)
    log(f"# whole script {time.monotonic() - t_start:.0f} s")
    save_log(log_file(args.log, f"{machine_name()}-sweep-judge"), log.lines, "log")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
