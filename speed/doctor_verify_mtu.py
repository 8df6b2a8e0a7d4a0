#!/usr/bin/env python3
"""The verified A/B of one doctor fix on the virtual cluster (issue 11).

A 2-node virtual cluster with offloads off (every frame MTU-sized, as on a wire) whose bridge and head
take MTU 9000 (the switch passes jumbo frames) while both nodes' interfaces are at 1500, then

    clusterbench doctor --hosts N1,N2 --verify jumbo-unused \\
        --benchmark "run bw --hosts N1,N2 --transport tcp --sizes 4194304 --direction uni" \\
        --repeat R --keep never --yes --allow-root --json

i.e. R runs of MPI bandwidth at 4 MiB before, `ip link set dev cb0 mtu 9000` on both nodes (the fix
doctor built from the MTU it read), R runs after, `compare` of the two tags (ratio of medians with its
95% bootstrap interval, Mann-Whitney and the run-level t-test), and the fix undone (--keep never) so the
cluster is left as it was. Root only. Uses its own sim-cluster prefix and a temporary store.

    .venv/bin/python speed/doctor_verify_mtu.py [--repeat 3] [--log FILE]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import time

from speedkit import SimWorld

PREFIX = "cbvfy-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--log", default=None)
    args = ap.parse_args()
    world = SimWorld.begin(PREFIX, "doctor-verify", args.log, "doctor --verify jumbo-unused on a 2-node virtual "
                           "cluster (nodes at MTU 1500, switch 9000, offloads off)")
    log = world.log
    try:
        # the "switch" (bridge, head) passes jumbo frames; the two nodes use 1500, as doctor's jumbo-unused finds
        names = world.up(2, "--mtu", "9000", "--offload", "off")
        for ns in names:  # the nodes' namespaces are named as the nodes
            subprocess.run(["ip", "-n", ns, "link", "set", "dev", "cb0", "mtu", "1500"], check=True, timeout=30)
        hosts = ",".join(names)
        bench = f"run bw --hosts {hosts} --transport tcp --sizes 4194304 --direction uni"
        argv = ["doctor", "--hosts", hosts, "--verify", "jumbo-unused", "--benchmark", bench,
                "--repeat", str(args.repeat), "--keep", "never", "--yes", "--allow-root", "--json"]
        log("$ clusterbench " + " ".join(argv))
        t0 = time.monotonic()
        p = world.cmd(argv, timeout=3600)
        log(f"# {time.monotonic() - t0:.0f} s, exit {p.returncode}")
        if p.returncode != 0:
            log(p.stderr.strip())
            return 1
        res = json.loads(p.stdout)
        for m in res["comparison"]["matches"]:
            c = m.get("comparison") or {}
            log(f"{m['benchmark']} {m['metric']} {json.dumps(m.get('params') or {}, sort_keys=True)}: "
                f"median A {c.get('median_a'):.1f} -> B {c.get('median_b'):.1f} {m.get('unit', '')}, "
                f"ratio {c.get('ratio'):.2f} [95% CI {c.get('ci_low'):.2f}, {c.get('ci_high'):.2f}], "
                f"{c.get('verdict')}, p_adj {c.get('p_adjusted')}")
        log(f"decision: {json.dumps(res['decision'], sort_keys=True)}")
        txt = world.cmd(["compare", res["decision"]["tags"]["before"], res["decision"]["tags"]["after"]]).stdout
        log()
        log("$ clusterbench compare BEFORE AFTER")
        log(txt.rstrip())
    finally:
        world.down()
        log.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
