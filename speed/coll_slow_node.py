#!/usr/bin/env python3
"""`run coll` on 8 virtual nodes with one node's link slowed, as docs/collectives.md quotes its note: the slow
tier's case (tests/integration/test_coll_slow_node.py) run as a user runs it, with its output kept.

    sim-cluster up --nodes 8 --mtu 9000
    tc -n N4 qdisc replace dev cb0 root tbf rate 100000000bit burst ... latency 20ms
    run coll --quick --ops allreduce,bcast,alltoall --sizes 8,65536 --hosts N1,...,N8 --oversubscribe

The command's output, verbatim (its note names the slow node and the figures it explains), its wall time,
exit status and the load average at its start. Own prefix, state folder and store. Root only.

    .venv/bin/python speed/coll_slow_node.py [--repeat 1] [--log FILE]
"""
from __future__ import annotations

import argparse
import subprocess

from speedkit import SimWorld, load

PREFIX = "cbcsn-"
RATE_BPS, MTU, TBF_LATENCY = 100_000_000, 9000, "20ms"  # as the test (and sim-cluster's own --rate) set it


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--log", default=None)
    args = ap.parse_args()
    world = SimWorld.begin(PREFIX, "coll-slow-node", args.log,
                           f"run coll on 8 virtual nodes (mtu {MTU}), n4's link at tbf {RATE_BPS // 1_000_000} Mbit/s",
                           f"; load {load()} at the start (other work on the machine)")
    log = world.log
    try:
        nodes = world.up(8, "--mtu", str(MTU))
        burst = max(RATE_BPS // 8 // 500, 65536 + MTU)
        subprocess.run(["tc", "-n", nodes[3], "qdisc", "replace", "dev", "cb0", "root", "tbf", "rate", f"{RATE_BPS}bit",
                        "burst", str(burst), "latency", TBF_LATENCY], check=True, timeout=30)
        log(f"slowed: {nodes[3]} (tbf rate {RATE_BPS}bit burst {burst} latency {TBF_LATENCY})")
        for r in range(args.repeat):
            argv = ["run", "coll", "--quick", "--ops", "allreduce,bcast,alltoall", "--sizes", "8,65536",
                    "--hosts", ",".join(nodes), "--oversubscribe"]
            log(f"$ clusterbench {' '.join(argv)}")
            p = world.timed(f"run coll {r + 1}", argv)
            for line in (p.stdout + p.stderr).splitlines():
                log(f"| {line}")
    finally:
        world.down()
    log(f"# load {load()} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
