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
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from speedkit import cpu_model, log_file, save_log

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

CB = [sys.executable, "-m", "clusterbench"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--log", default=None)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (the virtual cluster)")
    tmp = Path(tempfile.mkdtemp(prefix="cb-verify-"))
    env = {**os.environ, "CLUSTERBENCH_SIM_PREFIX": "cbvfy-", "CLUSTERBENCH_SIM_STATE": str(tmp / "sim"),
           "CLUSTERBENCH_DB": str(tmp / "r.db"), "PYTHONPATH": str(REPO / "src")}
    lines = ["# doctor --verify jumbo-unused on a 2-node virtual cluster (nodes at MTU 1500, switch 9000, offloads off)",
             f"# {time.strftime('%Y-%m-%d %H:%M:%S')} on {cpu_model()}, {os.cpu_count()} cpus, {platform.release()}"]
    try:
        # the "switch" (bridge, head) passes jumbo frames; the two nodes use 1500, as doctor's jumbo-unused finds
        subprocess.run([*CB, "sim-cluster", "up", "--nodes", "2", "--mtu", "9000", "--offload", "off"], env=env,
                       check=True, capture_output=True, text=True)
        for ns in ("cbvfy-n1", "cbvfy-n2"):
            subprocess.run(["ip", "-n", ns, "link", "set", "dev", "cb0", "mtu", "1500"], check=True)
        hosts = "cbvfy-n1,cbvfy-n2"
        bench = f"run bw --hosts {hosts} --transport tcp --sizes 4194304 --direction uni"
        cmd = [*CB, "doctor", "--hosts", hosts, "--verify", "jumbo-unused", "--benchmark", bench,
               "--repeat", str(args.repeat), "--keep", "never", "--yes", "--allow-root", "--json"]
        lines.append("$ clusterbench " + " ".join(cmd[3:]))
        t0 = time.monotonic()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        lines.append(f"# {time.monotonic() - t0:.0f} s, exit {p.returncode}")
        if p.returncode != 0:
            lines.append(p.stderr.strip())
            raise SystemExit("\n".join(lines))
        res = json.loads(p.stdout)
        cmp_ = res["comparison"]
        for m in cmp_["matches"]:
            c = m.get("comparison") or {}
            lines.append(f"{m['benchmark']} {m['metric']} {json.dumps(m.get('params') or {}, sort_keys=True)}: "
                         f"median A {c.get('median_a'):.1f} -> B {c.get('median_b'):.1f} {m.get('unit', '')}, "
                         f"ratio {c.get('ratio'):.2f} [95% CI {c.get('ci_low'):.2f}, {c.get('ci_high'):.2f}], "
                         f"{c.get('verdict')}, p_adj {c.get('p_adjusted')}")
        lines.append(f"decision: {json.dumps(res['decision'], sort_keys=True)}")
        txt = subprocess.run([*CB, "compare", res["decision"]["tags"]["before"], res["decision"]["tags"]["after"]],
                             env=env, capture_output=True, text=True).stdout
        lines += ["", "$ clusterbench compare BEFORE AFTER", txt.rstrip()]
    finally:
        subprocess.run([*CB, "sim-cluster", "down"], env=env, capture_output=True)
    print("\n".join(lines))
    save_log(log_file(args.log, f"{platform.node() or 'host'}-doctor-verify"), lines, "log")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
