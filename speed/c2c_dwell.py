"""How long the distance between cpu 0 and cpu 1 stays on one level (issue 26, docs/collectives.md,
"What the level is").

On the 2-vCPU VM the round trip of one cache line between the two vCPUs sits on one of two levels (about
100 and about 500 ns), and OSU's and clusterbench's collectives follow it. osu_why.py --levels showed it
changes within a second; this measures how long each level lasts and how much of the time each holds,
which decides how long a measurement must run to see both levels in their proportions rather than one.

Two threads pinned to cpus 0 and 1 pass one cache line back and forth (atomics, no MPI) for --seconds;
every batch of --batch round trips is timed (CLOCK_MONOTONIC) and printed. Batches are split into the
two levels at the widest gap of their sorted times' logarithms (no threshold assumed), consecutive
batches on one level are one stay, and the log holds every stay (start, length, median round trip) and
then the summary: each level's median round trip, share of the time, number of stays and their median,
10th and 90th percentile length.

Usage::

    .venv/bin/python speed/c2c_dwell.py [--seconds 20] [--batch 2000] [--log speed/logs/c2c-dwell.txt]
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static _Alignas(64) atomic_int flag;
static atomic_int stop;
static int pin(int c) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(c, &s); return pthread_setaffinity_np(pthread_self(), sizeof s, &s); }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void *pong(void *a) {
    (void)a;
    if (pin(1)) { fprintf(stderr, "cannot pin to cpu 1\n"); exit(2); }
    while (!atomic_load(&stop)) if (atomic_load(&flag) == 1) atomic_store(&flag, 0);
    return 0;
}
int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 20; long batch = argc > 2 ? atol(argv[2]) : 2000;
    if (pin(0)) { fprintf(stderr, "cannot pin to cpu 0\n"); return 2; }
    pthread_t t; pthread_create(&t, 0, pong, 0);
    double t0 = now();
    while (now() - t0 < secs) {
        double a = now();
        for (long i = 0; i < batch; i++) { atomic_store(&flag, 1); while (atomic_load(&flag) != 0) ; }
        double b = now();
        printf("%.6f %.1f\n", b - t0, (b - a) / batch * 1e9);
    }
    atomic_store(&stop, 1); pthread_join(t, 0); return 0;
}
"""


def split(values: list[float]) -> float:
    """The threshold between two levels: the middle of the widest gap between sorted log-values (of the
    central 98%, so a few preempted batches do not make their own level)."""
    logs = sorted(math.log(v) for v in values if v > 0)
    lo, hi = int(len(logs) * 0.01), int(len(logs) * 0.99)
    core = logs[lo:hi] or logs
    gap, at = max((core[i + 1] - core[i], i) for i in range(len(core) - 1))
    return math.exp((core[at] + core[at + 1]) / 2)


def pct(v: list[float], q: float) -> float:
    s = sorted(v)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--batch", type=int, default=2000, help="round trips per timed batch")
    ap.add_argument("--log", default="speed/logs/c2c-dwell.txt")
    args = ap.parse_args()
    if not 1 <= args.seconds <= 600 or not 10 <= args.batch <= 10**6:
        sys.exit("c2c_dwell: --seconds must be in [1, 600] and --batch in [10, 1000000]")
    if (os.cpu_count() or 1) < 2:
        sys.exit("c2c_dwell: needs cpus 0 and 1")
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "dwell.c").write_text(SRC)
        subprocess.run(["cc", "-O2", "-pthread", "-o", f"{d}/dwell", f"{d}/dwell.c"], check=True, timeout=120)
        load0 = os.getloadavg()[0]
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        out = subprocess.run([f"{d}/dwell", str(args.seconds), str(args.batch)], capture_output=True, text=True,
                             check=True, timeout=args.seconds + 60).stdout
    rows = [(float(a), float(b)) for a, b in (ln.split() for ln in out.splitlines())]
    cut = split([ns for _, ns in rows])
    stays: list[tuple[str, float, float, list[float]]] = []  # level, start, end, round trips
    prev_end = 0.0
    for t_end, ns in rows:
        lvl = "near" if ns < cut else "far"
        if stays and stays[-1][0] == lvl:
            stays[-1] = (lvl, stays[-1][1], t_end, stays[-1][3] + [ns])
        else:
            stays.append((lvl, prev_end, t_end, [ns]))
        prev_end = t_end
    lines = [f"# speed/c2c_dwell.py {started}, {args.seconds:g} s, batches of {args.batch} round trips, "
             f"load {load0:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; {len(rows)} batches",
             f"# levels split at {cut:.0f} ns (the widest gap of the batches' log round trips)",
             "# stay: level start_s length_ms median_ns batches"]
    lines += [f"stay {lvl} {a:.3f} {1000 * (b - a):.1f} {statistics.median(v):.0f} {len(v)}" for lvl, a, b, v in stays]
    total = rows[-1][0]
    for lvl in ("near", "far"):
        mine = [s for s in stays if s[0] == lvl]
        if not mine:
            lines.append(f"level {lvl}: none")
            continue
        lens = [1000 * (b - a) for _, a, b, _ in mine]
        lines.append(f"level {lvl}: median round trip {statistics.median([x for s in mine for x in s[3]]):.0f} ns, "
                     f"{100 * sum(lens) / 1000 / total:.1f}% of the time, {len(mine)} stays, length median "
                     f"{statistics.median(lens):.0f} ms, p10 {pct(lens, 0.1):.0f} ms, p90 {pct(lens, 0.9):.0f} ms, "
                     f"longest {max(lens):.0f} ms")
    Path(args.log).parent.mkdir(parents=True, exist_ok=True)
    Path(args.log).write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:2] + [ln for ln in lines if ln.startswith("level ")]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
