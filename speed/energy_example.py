#!/usr/bin/env python3
"""docs/energy.md's examples, run and logged whole: HPL with a declared power (no meter exists on a VM),
its cost lines from a ``[cost]`` table, and its place on the lists (the page quotes them as excerpts).

    clusterbench run hpl --n 6000 --allow-root --watts 35          (config: no [cost] table)
    clusterbench run hpl --n 6000 --allow-root --watts 35          (config: EUR, node_price 600, switch 25,
                                                                     0.30 per kWh, 4 years)
    clusterbench results place
    clusterbench results place --list green500 --edition 2020-06
    clusterbench results place --list top500 --edition 2018-11

A store and a config folder of its own (``XDG_CONFIG_HOME``), so nothing of the user's is read or written.

    .venv/bin/python speed/energy_example.py [--log FILE]
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from speedkit import RawLog, cpu_model, log_file

REPO = Path(__file__).resolve().parents[1]
CB = [sys.executable, "-m", "clusterbench"]
COST = "[cost]\ncurrency = \"EUR\"\nnode_price = 600\nswitch_price = 25\npower_price_kwh = 0.30\nlifetime_years = 4\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", default=None)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cb-energy-example-"))
    (tmp / "clusterbench").mkdir()
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp), "CLUSTERBENCH_DB": str(tmp / "r.db"),
           "PYTHONPATH": str(REPO / "src"), "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"}
    log = RawLog(log_file(args.log, f"{platform.node() or 'host'}-energy-example"), "w")
    log(f"# docs/energy.md's examples, {time.strftime('%Y-%m-%d %H:%M:%S')}; {cpu_model()}, {os.cpu_count()} cpus, "
        f"{platform.release()}; no power meter here: 35 W is declared (--watts), not measured")

    def cb(*argv: str) -> int:
        log(f"# load {os.getloadavg()[0]:.1f}")
        log("$ clusterbench " + " ".join(argv))
        p = subprocess.run([*CB, *argv], capture_output=True, text=True, env=env, timeout=900, cwd=tmp)
        for line in (p.stdout + p.stderr).splitlines():
            log(line)
        log(f"# exit {p.returncode}")
        return p.returncode

    cb("run", "hpl", "--n", "6000", "--allow-root", "--watts", "35")
    (tmp / "clusterbench" / "config.toml").write_text(COST)
    log("# config.toml from here on: " + COST.replace("\n", "; ").strip("; "))
    cb("run", "hpl", "--n", "6000", "--allow-root", "--watts", "35")
    cb("results", "place")
    cb("results", "place", "--list", "green500", "--edition", "2020-06")
    cb("results", "place", "--list", "top500", "--edition", "2018-11")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
