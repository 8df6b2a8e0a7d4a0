#!/usr/bin/env python3
"""What one timer call costs, as docs/mpi-network.md quotes it: `run pingpong` times every iteration with one
MPI_Wtime() call per round trip (chained), so each round trip carries one call's cost.

A loop of back-to-back MPI_Wtime() calls, built with mpicc -O2 (in a temporary folder) and run as one rank
(mpirun -n 1; --allow-run-as-root when root): per round, the average cost of a call over 10,000,000 calls; and
the same for clock_gettime(CLOCK_MONOTONIC) (cb_now(), the node kernels' timer). The load average is logged
(other work on the machine lengthens a round, never shortens it, so the best round is the cost).

    .venv/bin/python speed/timer_cost.py [--rounds 5] [--log FILE]
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from speedkit import RawLog, cpu_model, load, log_file

SOURCE = r"""
#include <mpi.h>
#include <stdio.h>
#include <time.h>
static double mono(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec + 1e-9 * ts.tv_nsec; }
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    const long n = 10000000; volatile double sink = 0;
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    for (int r = 0; r < rounds; r++) {
        double t0 = mono();
        for (long i = 0; i < n; i++) sink += MPI_Wtime();
        double t1 = mono();
        for (long i = 0; i < n; i++) sink += mono();
        double t2 = mono();
        printf("round %d: MPI_Wtime %.1f ns a call, clock_gettime %.1f ns a call\n", r + 1, 1e9 * (t1 - t0) / n,
               1e9 * (t2 - t1) / n);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--log", default=None)
    args = ap.parse_args()
    missing = [tool for tool in ("mpicc", "mpirun") if not shutil.which(tool)]
    if missing:
        sys.exit(f"timer_cost: {' and '.join(missing)} not on PATH; install an MPI (e.g. apt-get install openmpi-bin "
                 f"libopenmpi-dev) or put its bin folder on PATH")
    log = RawLog(log_file(args.log, f"{platform.node() or 'host'}-timer-cost"), "w")
    log(f"# timer cost, {time.strftime('%Y-%m-%d %H:%M:%S')}; {cpu_model()}, {os.cpu_count()} cpus, "
        f"{platform.release()}; load {load()} at the start (other work on the machine)")
    cs = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource")
    log(f"clocksource: {cs.read_text().strip() if cs.exists() else 'unknown'}")
    with tempfile.TemporaryDirectory(prefix="cb-timer-") as tmp:
        src, exe = Path(tmp) / "t.c", Path(tmp) / "t"
        src.write_text("#include <stdlib.h>\n" + SOURCE)
        subprocess.run(["mpicc", "-O2", "-o", str(exe), str(src)], check=True, timeout=120)
        root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
        p = subprocess.run(["mpirun", *root, "-n", "1", str(exe), str(args.rounds)], capture_output=True, text=True,
                           timeout=600, check=True)
        for line in p.stdout.splitlines():
            log(line)
    log(f"# load {load()} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
