#!/usr/bin/env python3
"""`tune coll` on 4 virtual nodes, as docs/tune.md quotes it: the slow tier's case (tests/integration/
test_coll_tune_virtual.py) run by hand with its output kept.

    sim-cluster up --nodes 4 --mtu 9000 --rate 1gbit
    R x  tune coll --op allreduce --hosts N1,...,N4 --oversubscribe --sizes 262144 --algorithms 2
                   --budget 240s --max-rounds 8 --output FILE

Open MPI's default allreduce against its algorithm 2 (nonoverlapping) at 256 KiB: the tuner's own output,
verbatim, its wall time and exit status, the load average at its start, and whether it wrote the rules
file. Own prefix, state folder and store. Root only.

    .venv/bin/python speed/tune_coll_virtual.py [--repeat 1] [--log FILE]
"""
from __future__ import annotations

import argparse
import os
import time

from speedkit import SimWorld

PREFIX = "cbtcv-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--log", default=None)
    args = ap.parse_args()
    world = SimWorld.begin(PREFIX, "tune-coll-virtual", args.log, "tune coll on 4 virtual nodes (mtu 9000, tbf 1gbit)")
    log = world.log
    try:
        hosts = ",".join(world.up(4, "--mtu", "9000", "--rate", "1gbit"))
        for r in range(args.repeat):
            out = world.tmp / f"tune-{r}.rules"
            argv = ["tune", "coll", "--op", "allreduce", "--hosts", hosts, "--oversubscribe", "--sizes", "262144",
                    "--algorithms", "2", "--budget", "240s", "--max-rounds", "8", "--output", str(out)]
            log(f"$ clusterbench {' '.join(argv)}")
            load = os.getloadavg()[0]
            t0 = time.monotonic()
            p = world.cmd(argv)
            wall = time.monotonic() - t0
            for line in (p.stdout + p.stderr).splitlines():
                log(f"| {line}")
            log(f"tune {r + 1}: {wall:.1f} s, exit {p.returncode}, load {load:.1f} at its start, "
                f"rules file {'written' if out.exists() else 'not written'}")
    finally:
        world.down()
    log(f"# load {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
