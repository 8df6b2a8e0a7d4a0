#!/usr/bin/env python3
"""How long tests take that the docs quote a time for (a test's own run, as a user runs it): each pytest node
id (or folder) given is run on its own, in this tree, with pytest's durations, and the log keeps what pytest
printed (the tests' own lines, pytest's durations and summary), the wall time seen from here (Python's start included), the exit status and
the load average at its start. Run as root for the tests of virtual clusters.

    .venv/bin/python speed/test_times.py [--log FILE] [--pytest-args '...'] NODEID ...

e.g. ``tests/integration/test_sweep_node.py::test_killed_agents_lose_only_their_nodes``. Each test's line
in the log: ``test NODEID: WALL s, exit N, load L at its start``, then pytest's lines prefixed ``| ``.
"""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import subprocess
import sys
import time

from speedkit import REPO, RawLog, cpu_model, load, log_file


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("nodeids", nargs="+")
    ap.add_argument("--pytest-args", default="", help="more pytest arguments, one string (e.g. '-m \"not slow\"')")
    ap.add_argument("--log", default=None)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds each node id may run (default 1800)")
    args = ap.parse_args()
    log = RawLog(log_file(args.log, f"{platform.node() or 'host'}-test-times"), "w")
    log(f"# test times, {time.strftime('%Y-%m-%d %H:%M:%S')}; {cpu_model()}, {os.cpu_count()} cpus, "
        f"{platform.release()}; load {load()} at the start (other work on the machine)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(REPO / "src")
    env.setdefault("CLUSTERBENCH_ALLOW_RUN_AS_ROOT", "1")
    for nodeid in args.nodeids:
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-s", "--durations=5",
                *shlex.split(args.pytest_args), nodeid]
        log(f"$ python -m pytest {' '.join(argv[3:])}")
        load_at = os.getloadavg()[0]
        t0 = time.monotonic()
        p = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env, timeout=args.timeout)
        wall = time.monotonic() - t0
        for line in [ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip()]:
            log(f"| {line}")
        log(f"test {nodeid}: {wall:.1f} s, exit {p.returncode}, load {load_at:.1f} at its start")
    log(f"# load {load()} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
