#!/usr/bin/env python3
"""clusterbench's node kernels beside the reference tools, in one run (issue #2's speed targets).

The machines are shared and noisy, so the script interleaves rounds (ours, reference, ours,
reference, ...) and compares the best of each side; the ratio is what counts, not the absolutes.

    python benchmarks/speed_node.py [--rounds 3] [--hpcc-n 10000] [--json out.json]

Comparisons (target in brackets):
  stream triad, all cores     vs likwid-bench stream_mem_<isa>, same threads, same total bytes   [>= 0.97]
  stream triad, all cores     vs hpcc StarSTREAM_Triad x processes, same vector length           [>= 1.00]
  peak, 1 and all cores       vs likwid-bench peakflops_<isa>_fma, same threads                  [>= 0.98]
  dgemm single                vs hpcc SingleDGEMM_Gflops, same n, same BLAS (OpenBLAS)           [>= 0.98]
  run node --quick            wall time, cold kernel cache and warm                              [<= 60 s]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from clusterbench import session  # noqa: E402
from clusterbench.probe import probe  # noqa: E402
from speedkit import hpcc_summary, hpccinf  # noqa: E402


def ours(name: str, params: dict, p: dict) -> list:
    rep = session.run([name], {name: params}, profile="default", use_store=False, probe_data=p)
    return rep.results


def best(results: list, metric: str, **match: object) -> float:
    vals = [r.value for r in results if r.metric == metric and all(r.params.get(k) == v for k, v in match.items())]
    if not vals:
        raise SystemExit(f"no {metric} {match} in our results")
    return max(vals)


def likwid(test: str, workgroup: str) -> dict[str, float]:
    out = subprocess.run(["likwid-bench", "-t", test, "-w", workgroup], capture_output=True, text=True, timeout=600)
    vals = {}
    for key in ("MByte/s", "MFlops/s", "Time"):
        m = re.search(rf"^{re.escape(key)}:\s+([0-9.e+-]+)", out.stdout, re.M)
        if m:
            vals[key] = float(m.group(1))
    if not vals:
        raise SystemExit(f"likwid-bench {test} printed no figures: {out.stderr[-300:]}")
    return vals


def likwid_best(prefix: str) -> str:
    listed = subprocess.run(["likwid-bench", "-a"], capture_output=True, text=True).stdout
    names = {ln.split(" - ")[0].strip() for ln in listed.splitlines() if " - " in ln}
    flags = Path("/proc/cpuinfo").read_text()
    for isa, flag in (("avx512", "avx512f"), ("avx", "avx"), ("sse", "sse2")):
        for cand in (f"{prefix}_{isa}_fma" if prefix.startswith("peak") else f"{prefix}_{isa}",):
            if cand in names and flag in flags:
                return cand
    return prefix


def hpcc(np_: int, n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        Path(d, "hpccinf.txt").write_text(hpccinf(n, 192, q=np_, device=8))
        cmd = ["mpirun", "--oversubscribe", "-np", str(np_), "hpcc"]
        if os.geteuid() == 0:
            cmd.insert(1, "--allow-run-as-root")
        subprocess.run(cmd, cwd=d, capture_output=True, timeout=3600,
                       env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
        text = Path(d, "hpccoutf.txt").read_text()
    return hpcc_summary(text)


def node_quick_wall(cold: bool) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    with tempfile.TemporaryDirectory() as d:
        if cold:
            env["CLUSTERBENCH_CACHE"] = d
        env["CLUSTERBENCH_DB"] = str(Path(d) / "r.db")
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-m", "clusterbench.cli", "run", "node", "--quick", "--json"], env=env,
                       check=True, capture_output=True, timeout=900)
        return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hpcc-n", type=int, default=10000, help="HPL N for hpcc (sizes its STREAM and DGEMM)")
    ap.add_argument("--skip", default="", help="comma list of: likwid-stream,hpcc,peak,node")
    ap.add_argument("--openblas-coretype", help="set OPENBLAS_CORETYPE for both sides (OpenBLAS misdetects new CPUs)")
    ap.add_argument("--json", help="write the raw figures here")
    args = ap.parse_args()
    skip = set(args.skip.split(","))
    if args.openblas_coretype:  # inherited by hpcc and by our dgemm kernel alike
        os.environ["OPENBLAS_CORETYPE"] = args.openblas_coretype
    p = probe()
    n = int(p["topology"]["cores"])
    raw: dict[str, dict[str, list[float]]] = {}

    def add(key: str, side: str, value: float) -> None:
        raw.setdefault(key, {}).setdefault(side, []).append(value)
        print(f"  {key:<28} {side:<10} {value:12.1f}", flush=True)

    stream_test, peak_test = likwid_best("stream_mem"), likwid_best("peakflops")
    for rnd in range(args.rounds):
        print(f"round {rnd + 1}/{args.rounds}", flush=True)
        if "likwid-stream" not in skip:
            res = ours("stream", {"threads": n, "sweep": False, "variant": "both"}, p)
            elems = res[0].params["array_elements"]
            add("triad_vs_likwid", "ours", best(res, "triad", threads=n))
            add("triad_vs_likwid", "likwid", likwid(stream_test, f"N:{3 * 8 * elems // 1000}kB:{n}")["MByte/s"])
        if "peak" not in skip:
            for t in sorted({1, n}):
                res = ours("peak", {"threads": t, "sp": False}, p)
                add(f"peak_{t}t", "ours", best(res, "gflops", threads=t))
                add(f"peak_{t}t", "likwid", likwid(peak_test, f"N:{24 * t}kB:{t}")["MFlops/s"] / 1000)
        if "hpcc" not in skip:
            h = hpcc(n, args.hpcc_n)
            vec, dn = int(h["STREAM_VectorSize"]), int(h["DGEMM_N"])
            res = ours("stream", {"threads": n, "sweep": False, "variant": "both", "array_elements": vec}, p)
            add("triad_vs_hpcc", "ours", best(res, "triad", threads=n, variant="regular"))
            add("triad_nt_vs_hpcc", "ours", best(res, "triad", threads=n, variant="nt"))
            add("triad_vs_hpcc", "hpcc", h["StarSTREAM_Triad"] * 1000 * n)
            add("triad_nt_vs_hpcc", "hpcc", h["StarSTREAM_Triad"] * 1000 * n)
            res = ours("dgemm", {"mode": "single", "n": dn}, p)
            add("dgemm_single", "ours", best(res, "gflops", mode="single"))
            add("dgemm_single", "hpcc", h["SingleDGEMM_Gflops"])
    if "node" not in skip:
        add("node_quick_wall_s", "cold", node_quick_wall(cold=True))
        add("node_quick_wall_s", "warm", node_quick_wall(cold=False))

    cpu = p["cpu"]
    print(f"\nmachine: {cpu.get('model_name')} ({cpu.get('microarchitecture')}), {n} cores, "
          f"{platform.node()}, {time.strftime('%Y-%m-%d')}; best of {args.rounds} interleaved rounds\n")
    print("| comparison | clusterbench | reference | ratio | target |")
    print("|---|---|---|---|---|")
    targets = {"triad_vs_likwid": (f"likwid-bench {stream_test}", 0.97, "MB/s"),
               "triad_vs_hpcc": ("hpcc StarSTREAM_Triad x procs (ours: regular stores, as hpcc)", 1.0, "MB/s"),
               "triad_nt_vs_hpcc": ("hpcc StarSTREAM_Triad x procs (ours: non-temporal stores)", 1.0, "MB/s"),
               "dgemm_single": ("hpcc SingleDGEMM", 0.98, "Gflop/s")}
    for t in sorted({1, n}):
        targets[f"peak_{t}t"] = (f"likwid-bench {peak_test}, {t} thread(s)", 0.98, "Gflop/s")
    for key, (ref, target, unit) in targets.items():
        if key not in raw:
            continue
        sides = raw[key]
        o = max(sides["ours"])
        r = max(v for s, vals in sides.items() if s != "ours" for v in vals)
        print(f"| {key} vs {ref} | {o:.1f} {unit} | {r:.1f} {unit} | {o / r:.3f} | >= {target} |")
    if "node_quick_wall_s" in raw:
        w = raw["node_quick_wall_s"]
        print(f"| run node --quick wall | cold cache {w['cold'][0]:.1f} s, warm {w['warm'][0]:.1f} s | | | <= 60 s |")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": cpu, "raw": raw}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
