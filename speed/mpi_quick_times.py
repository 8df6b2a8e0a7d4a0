#!/usr/bin/env python3
"""Wall time of `run mpi --quick` on 2 virtual nodes and of `run coll --quick` on 4 (with `--ops barrier`
beside it: the launch alone), as docs/mpi-network.md quotes them.

    sim-cluster up --nodes 2;  R x  run mpi --quick --hosts N1:1,N2:1 --allow-root
    sim-cluster up --nodes 4;  R x (run coll --quick --hosts N1,...,N4 --oversubscribe --allow-root,
                                    the same with --ops barrier)

Each command's wall time as the caller sees it (Python's start included), its exit status and the load
average when it started. Own prefix, state folder and store. Root only.

    .venv/bin/python speed/mpi_quick_times.py [--repeat 2] [--coll-nodes 4[,8]] [--coll-only] [--log FILE]
"""
from __future__ import annotations

import argparse
import os

from speedkit import SimWorld

PREFIX = "cbmqt-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--coll-nodes", default="4", help="virtual nodes for run coll --quick, e.g. 4,8")
    ap.add_argument("--coll-only", action="store_true", help="leave out run mpi --quick")
    ap.add_argument("--log", default=None)
    args = ap.parse_args()
    world = SimWorld.begin(PREFIX, "mpi-quick-times", args.log,
                           "run mpi --quick (2 virtual nodes) and run coll --quick (4), wall time per command")
    log = world.log

    def failed(p) -> str:
        return "" if p.returncode == 0 else f": {(p.stderr.strip() or p.stdout.strip())[-300:]}"

    try:
        if not args.coll_only:
            hosts = ",".join(f"{h}:1" for h in world.up(2))
            log(f"$ clusterbench run mpi --quick --hosts {hosts} --allow-root")
            for r in range(args.repeat):
                world.timed(f"run mpi --quick, 2 nodes, run {r + 1}", ["run", "mpi", "--quick", "--hosts", hosts,
                                                                         "--allow-root"], failed)
        for n in (int(x) for x in args.coll_nodes.split(",")):
            hosts = ",".join(world.up(n))
            log(f"$ clusterbench run coll --quick --hosts {hosts} --oversubscribe --allow-root [--ops barrier]")
            for r in range(args.repeat):
                world.timed(f"run coll --quick, {n} nodes, run {r + 1}",
                            ["run", "coll", "--quick", "--hosts", hosts, "--oversubscribe", "--allow-root"], failed)
                world.timed(f"run coll --quick --ops barrier, {n} nodes, run {r + 1}",
                            ["run", "coll", "--quick", "--ops", "barrier", "--hosts", hosts, "--oversubscribe",
                             "--allow-root"], failed)
    finally:
        world.down()
    log(f"# load {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
