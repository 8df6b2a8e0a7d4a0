"""clusterbench's MPI ping-pong beside the peer tools' conventions, in one run (issue 8, part 2).

On the shared-memory pair (2 ranks on cpus 0 and 1, Open MPI ob1 + vader), interleaved round by
round because the machine is shared and noisy; per-round ratios are what count (their median is
reported, and the ratio of the best figures beside it).

Bandwidth at 16 KiB, 64 KiB, 256 KiB and 1 MiB (MB = 1e6 B; size / half round trip):
 * clusterbench ``pingpong`` with its default, separate send and receive buffers (the headline is
   the best of 5 batch-timed loops; ``batch_mean``, the average over all loops, is shown too);
 * the OSU/IMB convention, measured here by a ten-line MPI_Send/MPI_Recv ping-pong loop written in
   C below and compiled with mpicc: separate send and receive buffers on both ranks (osu_latency's
   s_buf/r_buf, page-aligned and touched as OSU allocates them; IMB PingPong's s_buffer/r_buffer),
   a warm-up excluded (OSU's skip: 100 round trips, 10 above 8 KiB), the average over the timed loop
   (OSU's and IMB's figure), half round trip;
   its loop is sized to about the same time as clusterbench's (OSU's fixed counts are shorter);
   IMB and OSU themselves are not Debian packages. Target: ours within +-10 % of it.
 * for contrast, clusterbench ``--buffers shared`` (each message is the data just received) and
   the same C loop with one buffer per rank, and NetPIPE (``NPopenmpi``, Debian netpipe-openmpi),
   which by default (without -I) also sends from and receives into one buffer (netpipe.c, cache
   mode: "We use only one buffer"); NetPIPE's figure is the best of 3 trials, its MB/s computed
   here from its time column (its Mbps column is 2^20 bit/s).

8 B latency: clusterbench ``pingpong`` vs hpcc's MinPingPongLatency_usec (Debian ``hpcc``, N = 2000,
run as speed_node.py does) and NetPIPE's 8 B time. Target <= 1.05 x the lower of the two.

Usage: ``.venv/bin/python speed/speed_peers.py [--rounds 5] [--budget 0.3] [--log FILE]`` (as root
it passes --allow-run-as-root to mpirun). The raw log goes to
speed/results-<date>-<machine>-peers.txt unless --log is given.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speed_mpi import BTL, PROBE, ROOT, netpipe, ours, pick  # noqa: E402
from speed_node import hpcc  # noqa: E402
from speedkit import RawLog, log_file  # noqa: E402

SIZES = [16384, 65536, 262144, 1 << 20]
LAT = 8
MPIRUN = ["mpirun", *ROOT, "-np", "2", "--map-by", "core", "--bind-to", "core", "--mca", "pml", "ob1",
          "--mca", "btl", BTL["shm"]]

# The OSU/IMB ping-pong convention (argv: separate|shared, seconds per size, sizes...). "shared"
# (r = s) is the contrast: each message is the data just received, as NetPIPE's default.
REFERENCE_C = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int me; MPI_Init(&argc, &argv); MPI_Comm_rank(MPI_COMM_WORLD, &me);
    int shared = !strcmp(argv[1], "shared"); double budget = atof(argv[2]);
    for (int a = 3; a < argc; a++) {
        int n = atoi(argv[a]); long skip = n > 8192 ? 10 : 100, iters = skip;
        char *s, *r; long pg = sysconf(_SC_PAGESIZE);  /* page-aligned and touched, as OSU's buffers */
        if (posix_memalign((void **)&s, pg, n + 1) || (!shared && posix_memalign((void **)&r, pg, n + 1))) return 1;
        if (shared) r = s;
        memset(s, 'a', n + 1); memset(r, 'b', n + 1);
        for (int timed = 0; timed < 2; timed++) {  /* the warm-up (excluded) sizes the timed loop */
            MPI_Barrier(MPI_COMM_WORLD); double t0 = MPI_Wtime();
            for (long i = 0; i < iters; i++) {
                if (me == 0) { MPI_Send(s, n, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
                               MPI_Recv(r, n, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
                else { MPI_Recv(r, n, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                       MPI_Send(s, n, MPI_CHAR, 0, 1, MPI_COMM_WORLD); }
            }
            double half = (MPI_Wtime() - t0) / iters / 2;
            if (timed && me == 0) printf("%d %ld %.6f %.3f\n", n, iters, half * 1e6, n / half / 1e6);
            long next = (long)(budget / (2 * half)); iters = next > 100 ? next : 100;
            MPI_Bcast(&iters, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        }
        if (r != s) free(r);
        free(s);
    }
    MPI_Finalize(); return 0;
}
"""


def build_reference(d: Path) -> Path:
    (d / "pp_ref.c").write_text(REFERENCE_C)
    subprocess.run(["mpicc", "-O2", "-o", str(d / "pp_ref"), str(d / "pp_ref.c")], check=True, capture_output=True)
    return d / "pp_ref"


def reference(exe: Path, buffers: str, budget: float, sizes: list[int]) -> dict[int, tuple[float, float]]:
    """{size: (half round trip us, MB/s)} from the C loop."""
    out = subprocess.run([*MPIRUN, str(exe), buffers, str(budget), *map(str, sizes)], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    rows = [line.split() for line in out.splitlines() if re.match(r"^\d+ \d+ ", line)]
    return {int(r[0]): (float(r[2]), float(r[3])) for r in rows}


def netpipe_bw(sizes: list[int]) -> dict[int, float]:
    """NetPIPE's MB/s (1e6 B/s, from its half-round-trip time) at each size, one run over the range."""
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([*MPIRUN, "NPopenmpi", "-l", str(min(sizes)), "-u", str(max(sizes)), "-p", "0"], cwd=d,
                       capture_output=True, timeout=300, check=True)
        rows = [line.split() for line in Path(d, "np.out").read_text().splitlines() if line.strip()]
    t = {int(r[0]): float(r[2]) for r in rows}
    return {s: s / t[s] / 1e6 for s in sizes if s in t}


def machine_name() -> str:
    model = (PROBE.get("cpu") or {}).get("model_name") or "cpu"
    return re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-") + f"-{len(os.sched_getaffinity(0))}vcpu"


def ratio_text(ratios: list[float]) -> str:
    return f"{statistics.median(ratios):.3f} ({min(ratios):.2f}-{max(ratios):.2f})"


def one_round(exe: Path, budget: float, flip: bool) -> dict:
    """One of each; ``flip``: the reference loops before clusterbench (alternate rounds, so a slow
    minute does not always fall on the same side)."""
    got: dict = {}
    steps = [("sep", lambda: ours("shm", [LAT, *SIZES], budget)[0]),
             ("ref", lambda: reference(exe, "separate", budget, [LAT, *SIZES])),
             ("shr", lambda: ours("shm", SIZES, budget, buffers="shared")[0]),
             ("ref_shared", lambda: reference(exe, "shared", budget, SIZES))]
    order = [steps[1], steps[0], steps[3], steps[2]] if flip else steps
    for key, step in order:
        got[key] = step()
    sep, ref, shr, ref_shared = got["sep"], got["ref"], got["shr"], got["ref_shared"]
    np_bw = netpipe_bw(SIZES)
    np_lat = netpipe("shm")
    h = hpcc(2, 2000)
    return {
        "ours": {s: pick(sep, "bandwidth", s).value for s in SIZES},
        "ours_mean": {s: pick(sep, "bandwidth", s).params["batch_mean"] for s in SIZES},
        "ours_buffers": {pick(sep, "bandwidth", s).params["buffers"] for s in SIZES}
        | {pick(shr, "bandwidth", s).params["buffers"] for s in SIZES},
        "ref": {s: ref[s][1] for s in SIZES},
        "ours_shared": {s: pick(shr, "bandwidth", s).value for s in SIZES},
        "ref_shared": {s: ref_shared[s][1] for s in SIZES},
        "netpipe": np_bw,
        "lat": pick(sep, "latency", LAT).value, "lat_mean": pick(sep, "latency", LAT).params["batch_mean"],
        "ref_lat": ref[LAT][0], "np_lat": np_lat, "hpcc_lat": h.get("MinPingPongLatency_usec"),
    }


def report(rows: list[dict], out) -> None:
    out("")
    out("ping-pong bandwidth, MB/s (1e6 B/s), best of the rounds; ratio = median of per-round ratios (range)")
    out(f"{'size':>8} | {'ours':>8} {'mean':>8} | {'OSU/IMB':>8} | {'ours/OSU':>19} {'mean/OSU':>6} | {'ours sh':>8} "
        f"{'loop sh':>8} {'NetPIPE':>8} | {'ours sh/loop sh':>19} | {'ours sh/NetPIPE':>19}")
    for s in SIZES:
        best = {k: max(r[k][s] for r in rows if s in r[k]) for k in ("ours", "ours_mean", "ref", "ours_shared",
                                                                     "ref_shared", "netpipe")}
        r_osu = [r["ours"][s] / r["ref"][s] for r in rows]
        r_mean = statistics.median(r["ours_mean"][s] / r["ref"][s] for r in rows)
        r_sh = [r["ours_shared"][s] / r["ref_shared"][s] for r in rows]
        r_np = [r["ours_shared"][s] / r["netpipe"][s] for r in rows if s in r["netpipe"]]
        out(f"{s // 1024:>5} KiB | {best['ours']:>8.0f} {best['ours_mean']:>8.0f} | {best['ref']:>8.0f} | "
            f"{ratio_text(r_osu):>19} {r_mean:>8.3f} | {best['ours_shared']:>8.0f} {best['ref_shared']:>8.0f} "
            f"{best['netpipe']:>8.0f} | "
            f"{ratio_text(r_sh):>19} | {ratio_text(r_np) if r_np else '-':>19}")
        out(f"{'':>8}   ours / OSU-IMB convention, best / best: {best['ours'] / best['ref']:.3f} (target 0.90-1.10); "
            f"separate / shared buffers (ours): {best['ours'] / best['ours_shared']:.2f} x")
    lat = min(r["lat"] for r in rows)
    ref_lat = min(r["ref_lat"] for r in rows)
    np_lat = min(r["np_lat"] for r in rows)
    hp_lat = min(r["hpcc_lat"] for r in rows)
    per_round = [r["lat"] / min(r["np_lat"], r["hpcc_lat"]) for r in rows]
    out("")
    out(f"8 B latency, us (best of the rounds): ours {lat:.3f} (batch mean {min(r['lat_mean'] for r in rows):.3f}) | "
        f"hpcc MinPingPongLatency {hp_lat:.3f} | NetPIPE {np_lat:.3f} | OSU/IMB loop {ref_lat:.3f}")
    out(f"  ours / min(hpcc, NetPIPE): best / best {lat / min(np_lat, hp_lat):.3f}, per round {ratio_text(per_round)} "
        "(target <= 1.05)")
    out(f"  buffers recorded by clusterbench: {sorted(set().union(*(r['ours_buffers'] for r in rows)))}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--budget", type=float, default=0.3, help="seconds of timed round trips per size (both sides)")
    ap.add_argument("--log", help="raw log (default: speed/results-<date>-<machine>-peers.txt)")
    args = ap.parse_args()
    out = RawLog(log_file(args.log, f"{machine_name()}-peers"))

    ver = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    out(f"# speed_peers.py {time.strftime('%Y-%m-%d %H:%M:%S')} on {PROBE.get('cpu', {}).get('model_name')}, "
        f"{len(os.sched_getaffinity(0))} cpus, {ver}; load {os.getloadavg()[0]:.2f}; rounds {args.rounds}, "
        f"budget {args.budget} s per size")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        exe = build_reference(Path(d))
        for i in range(args.rounds):
            r = one_round(exe, args.budget, flip=bool(i % 2))
            rows.append(r)
            out(f"round {i}: " + "; ".join(
                f"{s // 1024} KiB ours {r['ours'][s]:.0f} (mean {r['ours_mean'][s]:.0f}) osu-loop {r['ref'][s]:.0f} "
                f"| shared ours {r['ours_shared'][s]:.0f} loop {r['ref_shared'][s]:.0f} "
                f"NetPIPE {r['netpipe'].get(s, float('nan')):.0f}" for s in SIZES)
                + f"; 8 B ours {r['lat']:.3f} us (mean {r['lat_mean']:.3f}) hpcc {r['hpcc_lat']:.3f} "
                f"NetPIPE {r['np_lat']:.3f} osu-loop {r['ref_lat']:.3f}; load {os.getloadavg()[0]:.2f}")
    report(rows, out)
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
