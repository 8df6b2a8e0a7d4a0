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

from speedkit import SimWorld

PREFIX = "cbcst-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suites", default="node,mpi,hpl,health")
    ap.add_argument("--health-nodes", type=int, default=2,
                    help="virtual nodes for health (default 2; more than the cpus adds --oversubscribe)")
    ap.add_argument("--log", default=None)
    args = ap.parse_args()
    world = SimWorld.begin(PREFIX, "check-suite-times", args.log,
                           "check's standard suites, wall time of the first baseline and of one check, default repeats")
    log = world.log

    def first(p) -> str:
        return "; " + next((ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip()), "")[:200]

    def timed(what: str, argv: list[str]) -> None:
        log("$ clusterbench " + " ".join(argv))
        world.timed(what, argv, first)

    try:
        for suite in args.suites.split(","):
            hosts: list[str] = []
            if suite == "health":
                n = args.health_nodes
                hosts = ["--hosts", ",".join(world.up(n))]
                hosts += ["--oversubscribe"] if n > (os.cpu_count() or 1) else []
            base = ["check", suite, "--baseline", f"b-{suite}", *hosts]
            timed(f"{suite} baseline", [*base, "--update-baseline"])
            timed(f"{suite} check", base)
    finally:
        world.down()
    log(f"# load {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
