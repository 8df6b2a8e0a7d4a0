"""Speed of clusterbench's MPI point-to-point benchmarks beside the reference tools (issue 3).

One script, interleaved round by round (ours, NetPIPE, hpcc, ours over TCP, NetPIPE over TCP, ...),
best of each side, because the machine is shared and noisy: the ratios are what count.

* shared memory, 8 B latency: clusterbench ``pingpong --transport shm`` (the batch-timed loop
  average, as OSU/IMB/hpcc report) vs NetPIPE (``NPopenmpi``, Debian ``netpipe-openmpi``) and hpcc's
  ``MinPingPongLatency_usec``, the same two cores (0, 1), Open MPI ob1 + vader. Target <= 1.05 x the
  lower of the two.
* shared memory bandwidth: ours at 2,000,000 B (hpcc's ping-pong size) and our peak over the full
  0..16 MiB sweep vs hpcc's ``MaxPingPongBandwidth_GBytes``. Target >= 0.95 x.
* TCP transport, 8 B latency: ours ``--transport tcp`` vs NetPIPE with ``--mca btl self,tcp`` on
  the same two cores (the kernel's TCP path between two processes of this node). Target <= 1.05 x.
* the full sweep (0 B..16 MiB with NetPIPE's +-3 B) wall time (target <= 20 s), repeated: the CV of
  the 8 B median across sweeps (target <= 3 % on a quiet machine).

Usage: ``python3 benchmarks/speed_mpi.py [--rounds 3] [--sweeps 5] [--log FILE]`` (as root it passes
--allow-run-as-root to mpirun).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))
from speed_node import hpcc  # noqa: E402
from speedkit import RawLog  # noqa: E402

from clusterbench.benchmarks import get_benchmark  # noqa: E402
from clusterbench.benchmarks.base import RunContext  # noqa: E402
from clusterbench.probe import probe  # noqa: E402

ROOT = ["--allow-run-as-root"] if os.geteuid() == 0 else []
BTL = {"shm": "self,vader", "tcp": "self,tcp"}
PROBE = probe()


def ours(transport: str, sizes: list[int] | None, budget: float, profile: str = "default",
         **extra) -> tuple[list, float]:
    ctx = RunContext(probe=PROBE, profile=profile, timeout=600)
    b = get_benchmark("pingpong")
    given = {"transport": transport, "allow_root": True, "cpus": [0, 1], **extra}  # extra: e.g. buffers="shared"
    if sizes:
        given["sizes"] = sizes
    if budget:
        given["time_budget"] = budget
    p = b.resolve(ctx, given)
    b.prepare(ctx, p)
    t0 = time.monotonic()
    res = b.run(ctx, p)
    return res, time.monotonic() - t0


def pick(res: list, metric: str, size: int):
    return next(r for r in res if r.metric == metric and r.params["size_bytes"] == size)


def netpipe(transport: str) -> float:
    """NetPIPE's 8 B time (half round trip), us."""
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["mpirun", *ROOT, "-np", "2", "--map-by", "core", "--bind-to", "core", "--mca", "pml", "ob1",
                        "--mca", "btl", BTL[transport], "NPopenmpi", "-l", "8", "-u", "8", "-p", "0"],
                       cwd=d, capture_output=True, timeout=120, check=True)
        return float(Path(d, "np.out").read_text().split()[2]) * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sweeps", type=int, default=5)
    ap.add_argument("--log", help="append the raw lines to this file too")
    args = ap.parse_args()
    out = RawLog(args.log)

    out(f"# speed_mpi.py {time.strftime('%Y-%m-%d %H:%M:%S')} on {PROBE.get('cpu', {}).get('model_name')}, "
        f"{len(os.sched_getaffinity(0))} cpus")
    rows = []
    for i in range(args.rounds):
        shm, _ = ours("shm", [8, 2_000_000], 1.0)
        np_shm = netpipe("shm")
        h = hpcc(2, 2000)
        tcp, _ = ours("tcp", [8], 1.0)
        np_tcp = netpipe("tcp")
        row = {"lat8": pick(shm, "latency", 8).value, "bw2MB": pick(shm, "bandwidth", 2_000_000).value,
               "np_shm": np_shm, "hpcc_lat": h.get("MinPingPongLatency_usec"),
               "hpcc_bw": h.get("MaxPingPongBandwidth_GBytes"), "tcp8": pick(tcp, "latency", 8).value,
               "np_tcp": np_tcp}
        rows.append(row)
        out(f"round {i}: shm 8 B ours {row['lat8']:.3f} us | NetPIPE {np_shm:.3f} | hpcc min {row['hpcc_lat']:.3f}; "
            f"2 MB ours {row['bw2MB']:.0f} MB/s | hpcc max {row['hpcc_bw'] * 1e3:.0f} MB/s; "
            f"tcp 8 B ours {row['tcp8']:.2f} us | NetPIPE {np_tcp:.2f}")
    sweeps, walls, peaks = [], [], []
    for i in range(args.sweeps):
        res, wall = ours("shm", None, 0)
        med8 = pick(res, "latency", 8).params["all"]["median"]
        peak = max(r.value for r in res if r.metric == "bandwidth")
        sweeps.append(med8)
        walls.append(wall)
        peaks.append(peak)
        out(f"sweep {i}: {sum(1 for r in res if r.metric == 'latency')} sizes in {wall:.1f} s, 8 B median {med8:.3f} us, "
            f"peak bandwidth {peak:.0f} MB/s")
    quick_res, quick_wall = ours("shm", None, 0, profile="quick")

    best = {k: min(r[k] for r in rows) for k in ("lat8", "np_shm", "hpcc_lat", "tcp8", "np_tcp")}
    best_bw = max(r["bw2MB"] for r in rows)
    hpcc_bw = max(r["hpcc_bw"] for r in rows) * 1e3
    ref_lat = min(best["np_shm"], best["hpcc_lat"])
    cv = statistics.stdev(sweeps) / statistics.mean(sweeps) if len(sweeps) > 1 else 0.0
    out("")
    out(f"shm 8 B latency: ours {best['lat8']:.3f} us vs min(NetPIPE {best['np_shm']:.3f}, hpcc {best['hpcc_lat']:.3f})"
        f" = {best['lat8'] / ref_lat:.3f} x (target <= 1.05)")
    out(f"shm bandwidth at 2 MB: ours {best_bw:.0f} MB/s vs hpcc MaxPingPongBandwidth {hpcc_bw:.0f} MB/s = "
        f"{best_bw / hpcc_bw:.3f} (target >= 0.95); our peak over the sweep {max(peaks):.0f} MB/s = "
        f"{max(peaks) / hpcc_bw:.3f}")
    out(f"tcp 8 B latency: ours {best['tcp8']:.2f} us vs NetPIPE {best['np_tcp']:.2f} us = "
        f"{best['tcp8'] / best['np_tcp']:.3f} x (target <= 1.05)")
    out(f"full sweep (default profile): {min(walls):.1f}-{max(walls):.1f} s (target <= 20 s); --quick "
        f"{quick_wall:.1f} s; 8 B median across {len(sweeps)} sweeps: mean {statistics.mean(sweeps):.3f} us, "
        f"CV {100 * cv:.1f} % (target <= 3 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
