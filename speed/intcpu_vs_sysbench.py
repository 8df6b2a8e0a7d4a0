#!/usr/bin/env python3
"""`clusterbench run intcpu` beside `sysbench cpu` (Debian's sysbench 1.0), issue 12's speed target.

Same definition on both sides (an event = trial division of 3..max_prime-1 in 64-bit integers,
sqrt bound in double; events per second = total events / total time), same max-prime, same
thread count, same time limit (sysbench's default 10 s). Interleaved rounds: in each round every
configuration runs once on each side, the side that goes first alternating between rounds, so a
noisy minute does not always fall on the same side. Reported per configuration: best and median
of each side, their ratios (intcpu / sysbench) and the median of the per-round ratios (each
round's pair ran back to back, under the same load).

    .venv/bin/python speed/intcpu_vs_sysbench.py [--rounds 5] [--time 10] [--max-primes 10000,20000]
                                                 [--threads 1,2] [--log FILE]

Target: intcpu >= 1.0 x sysbench events/s, judged four ways (printed at the end): the ratio of
the bests, the median of the per-round ratios, the ratio of the medians, and events per
CPU-second (events / user+system time of the process, from getrusage: the comparison with the
time the scheduler actually gave each side, much less sensitive to other load on a shared
machine). Short runs (--time 2) with many rounds let both sides catch the quiet moments of a
busy machine; sysbench's default is 10 s. The raw log goes to
speed/results-<date>-<machine>-intcpu.txt unless --log is given. Each side runs as it does by
default: intcpu pins its threads (one per cpu, as every clusterbench kernel), sysbench leaves
them to the scheduler; intcpu also checks every event's prime count (sysbench counts nothing:
its compiler drops the unused count).
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from clusterbench import session  # noqa: E402
from clusterbench.probe import probe  # noqa: E402
from speedkit import RawLog, log_file  # noqa: E402

TARGET = 1.0


def machine_name(p: dict) -> str:
    model = (p.get("cpu") or {}).get("model_name") or "cpu"
    return re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-") + f"-{len(os.sched_getaffinity(0))}vcpu"


def child_cpu_s() -> float:
    """CPU seconds (user + system) of this script's finished children so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def sysbench(max_prime: int, threads: int, seconds: float) -> dict:
    cmd = ["sysbench", "cpu", f"--cpu-max-prime={max_prime}", f"--threads={threads}", f"--time={seconds:g}", "run"]
    cpu0 = child_cpu_s()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds * 3 + 60).stdout
    cpu = child_cpu_s() - cpu0

    def num(pattern: str) -> float:
        m = re.search(pattern, out)
        if not m:
            raise SystemExit(f"sysbench printed no '{pattern}':\n{out[-500:]}")
        return float(m.group(1))

    events = num(r"total number of events:\s+([0-9]+)")
    return {"eps": num(r"events per second:\s+([0-9.]+)"), "events": events,
            "time": num(r"total time:\s+([0-9.]+)s"), "p95": num(r"95th percentile:\s+([0-9.]+)"),
            "cpu": cpu, "epc": events / cpu}


def ours(max_prime: int, threads: int, seconds: float, p: dict) -> dict:
    cpu0 = child_cpu_s()  # the kernel is this script's child (the session starts it and waits for it)
    rep = session.run(["intcpu"], {"intcpu": {"max_prime": max_prime, "threads": threads, "time": seconds,
                                              "sweep": False}},
                      profile="default", use_store=False, probe_data=p)
    cpu = child_cpu_s() - cpu0
    r = next(r for r in rep.results if r.metric == "events_per_s" and r.params["threads"] == threads)
    return {"eps": r.value, "events": r.params["total_events"], "time": r.params["total_time_s"],
            "p95": r.params["latency_p95_ms"], "primes": r.params["expected_primes"], "cpu": cpu,
            "epc": r.params["total_events"] / cpu}


def spread(vals: list[float]) -> str:
    if len(vals) < 2:
        return "-"
    return f"{statistics.stdev(vals) / statistics.fmean(vals):.1%}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--time", type=float, default=10.0, help="seconds per run, both sides (sysbench --time)")
    ap.add_argument("--max-primes", default="10000,20000")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--log", help="raw log (default: speed/results-<date>-<machine>-intcpu.txt)")
    args = ap.parse_args()
    if not shutil.which("sysbench"):
        print("sysbench is not installed: apt-get install -y sysbench")
        return 1
    p = probe()
    primes = [int(x) for x in args.max_primes.split(",")]
    threads = [int(x) for x in args.threads.split(",")]
    configs = [(m, t) for m in primes for t in threads]
    out = RawLog(log_file(args.log, f"{machine_name(p)}-intcpu"))

    ver = subprocess.run(["sysbench", "--version"], capture_output=True, text=True).stdout.strip()
    cc = subprocess.run([os.environ.get("CC", "cc"), "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    out(f"# intcpu_vs_sysbench.py {time.strftime('%Y-%m-%d %H:%M:%S')} on {p.get('cpu', {}).get('model_name')} "
        f"({p.get('cpu', {}).get('microarchitecture')}), {len(os.sched_getaffinity(0))} cpus; {ver}; intcpu built by "
        f"{cc} -O3 -march=native; load {os.getloadavg()[0]:.2f}; rounds {args.rounds}, {args.time:g} s per run")
    res: dict[tuple[int, int], dict[str, list]] = {c: {"sb": [], "cb": [], "ratio": [], "sb_epc": [], "cb_epc": []}
                                                    for c in configs}
    for rnd in range(args.rounds):
        for m, t in configs:
            first_ours = rnd % 2 == 1
            got = {}
            for side in (("cb", "sb") if first_ours else ("sb", "cb")):
                got[side] = ours(m, t, args.time, p) if side == "cb" else sysbench(m, t, args.time)
            r = res[(m, t)]
            r["sb"].append(got["sb"]["eps"])
            r["cb"].append(got["cb"]["eps"])
            r["ratio"].append(got["cb"]["eps"] / got["sb"]["eps"])
            r["sb_epc"].append(got["sb"]["epc"])
            r["cb_epc"].append(got["cb"]["epc"])
            out(f"round {rnd} max-prime {m} threads {t} ({'intcpu' if first_ours else 'sysbench'} first): "
                f"sysbench {got['sb']['eps']:.2f} events/s ({got['sb']['events']:.0f} events in "
                f"{got['sb']['time']:.3f} s, p95 {got['sb']['p95']:.2f} ms) | intcpu {got['cb']['eps']:.2f} events/s "
                f"({got['cb']['events']} events in {got['cb']['time']:.3f} s, p95 {got['cb']['p95']:.2f} ms, "
                f"{got['cb']['primes']} primes per event validated) | ratio {r['ratio'][-1]:.3f}; per CPU-second "
                f"sysbench {got['sb']['epc']:.1f} ({got['sb']['cpu']:.2f} CPU-s) intcpu {got['cb']['epc']:.1f} "
                f"({got['cb']['cpu']:.2f} CPU-s) ratio {got['cb']['epc'] / got['sb']['epc']:.3f}; "
                f"load {os.getloadavg()[0]:.2f}")
    out("")
    out(f"machine: {p.get('cpu', {}).get('model_name')}, {len(os.sched_getaffinity(0))} cpus, "
        f"{time.strftime('%Y-%m-%d')}; {args.rounds} interleaved rounds of {args.time:g} s per side and configuration")
    out("| max-prime | threads | sysbench best / median (CV) | intcpu best / median (CV) | ratio best | "
        "ratio median | median per-round ratio (range) |")
    out("|---|---|---|---|---|---|---|")
    bests, paired, of_medians, per_cpu = [], [], [], []
    for (m, t), r in res.items():
        sb, cb, rt = r["sb"], r["cb"], r["ratio"]
        med_ratio = statistics.median(cb) / statistics.median(sb)
        bests.append(max(cb) / max(sb))
        paired.append(statistics.median(rt))
        of_medians.append(med_ratio)
        out(f"| {m} | {t} | {max(sb):.2f} / {statistics.median(sb):.2f} ({spread(sb)}) | "
            f"{max(cb):.2f} / {statistics.median(cb):.2f} ({spread(cb)}) | {max(cb) / max(sb):.3f} | "
            f"{med_ratio:.3f} | {statistics.median(rt):.3f} ({min(rt):.2f}-{max(rt):.2f}) |")
    out("")
    out("Events per CPU-second (events / (user + system time of the process)): the same comparison with the time "
        "the scheduler gave each side, so less sensitive to other load")
    out("| max-prime | threads | sysbench median (CV) | intcpu median (CV) | ratio of medians |")
    out("|---|---|---|---|---|")
    for (m, t), r in res.items():
        out(f"| {m} | {t} | {statistics.median(r['sb_epc']):.1f} ({spread(r['sb_epc'])}) | "
            f"{statistics.median(r['cb_epc']):.1f} ({spread(r['cb_epc'])}) | "
            f"{statistics.median(r['cb_epc']) / statistics.median(r['sb_epc']):.3f} |")
        per_cpu.append(statistics.median(r["cb_epc"]) / statistics.median(r["sb_epc"]))
    for label, vals in (("ratio of the bests (the house's rule: each side's quietest run)", bests),
                        ("median per-round ratio (each round's pair back to back)", paired),
                        ("ratio of the medians", of_medians), ("events per CPU-second, ratio of medians", per_cpu)):
        out(f"target intcpu >= {TARGET} x sysbench, {label}: {'met' if min(vals) >= TARGET else 'NOT met'} "
            f"(lowest {min(vals):.3f})")
    out(f"load at the end {os.getloadavg()[0]:.2f}")
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
