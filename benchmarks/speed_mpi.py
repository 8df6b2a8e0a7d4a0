"""Draft speed script for issue 3 (not yet in the README): shm 8 B latency: clusterbench pingpong vs NetPIPE (NPopenmpi) and hpcc MinPingPongLatency_usec,
same two cores (0,1), interleaved rounds, best of each side."""
import os, re, subprocess, sys, tempfile, time
from pathlib import Path
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src")); sys.path.insert(0, str(REPO / "benchmarks"))
from speed_node import hpcc
from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext
from clusterbench.probe import probe

P = probe()
ROOT = ["--allow-run-as-root"] if os.geteuid() == 0 else []

def ours(budget=1.0, huge=False):
    ctx = RunContext(probe=P, profile="default", timeout=300)
    b = get_benchmark("pingpong")
    p = b.resolve(ctx, {"sizes": [8, 2000000], "transport": "shm", "time_budget": budget, "allow_root": True, "cpus": [0, 1], "hugepages": huge})
    b.prepare(ctx, p)
    res = b.run(ctx, p)
    lat = next(r for r in res if r.metric == "latency" and r.params["size_bytes"] == 8)
    bw = next(r for r in res if r.metric == "bandwidth" and r.params["size_bytes"] == 2000000)
    a = lat.params["all"]
    return {"value": lat.value, "min": a["min"], "median": a["median"], "mean": a["mean"], "p99": a["p99"], "bw2MB_max": bw.value,
            "bw2MB_median": bw.params["all"]["median"]}

def netpipe():
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["mpirun", *ROOT, "-np", "2", "--map-by", "core", "--bind-to", "core",
                        "--mca", "pml", "ob1", "--mca", "btl", "self,vader", "NPopenmpi", "-l", "8", "-u", "8", "-p", "0"],
                       cwd=d, capture_output=True, timeout=120)
        line = Path(d, "np.out").read_text().split()
        return float(line[2]) * 1e6

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
rows = []
for i in range(rounds):
    o = ours(); oh = ours(huge=True); o['bw2MB_thp'] = oh['bw2MB_max']; n = netpipe(); h = hpcc(2, 2000)
    rows.append((o, n, h.get("MinPingPongLatency_usec"), h.get("AvgPingPongLatency_usec"), h.get("MaxPingPongBandwidth_GBytes")))
    print(f"round {i}: ours value (batch) {o['value']:.3f} min {o['min']:.3f} median {o['median']:.3f} mean {o['mean']:.3f} us, bw(2MB) {o['bw2MB_max']:.0f} MB/s | "
          f"NetPIPE {n:.3f} us | hpcc MinPingPongLatency {rows[-1][2]} Avg {rows[-1][3]} MaxPingPongBW {rows[-1][4]} GB/s", flush=True)
best = lambda k: min(r[0][k] for r in rows)
print("best ours THP bw2MB %.0f" % max(r[0]["bw2MB_thp"] for r in rows))
print("best ours: value (batch mean) %.3f us" % best("value"))
print("best ours: min %.3f median %.3f mean %.3f us; bw2MB %.0f MB/s" % (best("min"), best("median"), best("mean"), max(r[0]["bw2MB_max"] for r in rows)))
print("best NetPIPE %.3f us, best hpcc Min %.3f us, hpcc MaxPingPongBandwidth %.2f GB/s" % (min(r[1] for r in rows), min(r[2] for r in rows), max(r[4] for r in rows)))
