#!/usr/bin/env python3
"""`clusterbench check` as a nightly gate, measured on this machine (issue 28, section 1):

(a) false alarms: NIGHTS checks of an unchanged node against one baseline; a night that exits 6
    (a figure significantly worse by at least --min-effect) is a false alarm. Target: at most 1 of 20.
    A night that exits 7 (cannot judge: too noisy to exclude a loss of --min-effect, ...) is neither.
(b) detection: NIGHTS checks with an injected slowdown of about SLOW (5%): a competing process pinned
    to the benchmark's cpu, busy SLOW of the time (1 ms busy, then asleep for the rest of a 1/SLOW ms
    period), so a whole-run rate on that cpu loses about SLOW. A night that exits 6 detected it.
    Target: at least 19 of 20.

The suite: `intcpu` (1 thread pinned to cpu 0, a whole-run events/s rate and a mean latency over
--seconds), repeated as the check does (3 runs a night). Unchanged and slowed nights alternate, so a
slow hour on this shared machine falls on both. Every night's outcome, exit code, ratio, interval and
p are logged; the slowdown the competitor really caused is the median ratio of the slowed nights.

    .venv/bin/python speed/check_alarms.py [--nights 20] [--slow 0.05] [--min-effect 3] [--seconds 1] [--log FILE]

Uses a temporary store (--db), never the user's. The log goes to
speed/results-<date>-<machine>-check-alarms.txt unless --log is given.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CB = [sys.executable, "-m", "clusterbench"]

SUITE = """name = "alarms"
version = 1
repeat = 3
[[run]]
benchmark = "intcpu"
params = {{ threads = 1, cpus = [0], max_prime = 2000, time = {seconds}, samples = 10, sweep = false }}
"""

#: the competitor: busy for 1 ms, then asleep, so it takes about `slow` of one cpu
COMPETITOR = """
import sys, time
busy = 0.001
period = busy / float(sys.argv[1])
while True:
    t = time.perf_counter()
    while time.perf_counter() - t < busy:
        pass
    time.sleep(max(0.0, period - (time.perf_counter() - t)))
"""


def machine_name() -> str:
    sys.path.insert(0, str(REPO / "src"))
    from clusterbench.probe import probe

    cpu = probe()["cpu"]
    model = str(cpu.get("model_name") or platform.machine()).lower().replace(" ", "-")
    return f"{model}-{os.cpu_count()}vcpu"


def check(db: str, suite: Path, extra: list[str]) -> dict:
    p = subprocess.run([*CB, "--db", db, "check", str(suite), "--json", *extra], capture_output=True, text=True,
                       timeout=600)
    if p.returncode not in (0, 6, 7):
        raise SystemExit(f"check failed (exit {p.returncode}): {p.stderr.strip()[-500:]}")
    return json.loads(p.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nights", type=int, default=20)
    ap.add_argument("--slow", type=float, default=0.05, help="the competitor's share of the cpu (default 0.05)")
    ap.add_argument("--min-effect", type=float, default=3.0)
    ap.add_argument("--seconds", type=float, default=1.0, help="intcpu --time per run")
    ap.add_argument("--log", default=None)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a competitor running is killed on the way out
    log_path = Path(args.log) if args.log else REPO / "speed" / (
        f"results-{time.strftime('%Y-%m-%d')}-{machine_name()}-check-alarms.txt")
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    say(f"# speed/check_alarms.py {time.strftime('%Y-%m-%dT%H:%M:%S%z')} on {platform.node()} "
        f"({os.cpu_count()} cpus); nights {args.nights}, slowdown {args.slow:.0%}, --min-effect {args.min_effect:g}%, "
        f"intcpu --time {args.seconds:g}")
    with tempfile.TemporaryDirectory(prefix="cb-check-alarms-") as tmp:
        db = str(Path(tmp) / "r.db")
        suite = Path(tmp) / "alarms.toml"
        suite.write_text(SUITE.format(seconds=args.seconds))
        base = check(db, suite, ["--baseline", "base", "--update-baseline"])
        say(f"baseline: {len(base['runs'])} runs, outcome {base['outcome']} (nothing to judge)")
        opts = ["--baseline", "base", "--min-effect", str(args.min_effect)]
        results: dict[str, list[dict]] = {"unchanged": [], "slowed": []}
        for night in range(args.nights):
            for kind in ("unchanged", "slowed") if night % 2 == 0 else ("slowed", "unchanged"):
                comp = None
                if kind == "slowed":
                    comp = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", COMPETITOR, str(args.slow)])
                    time.sleep(0.2)
                t0 = time.monotonic()
                try:
                    doc = check(db, suite, opts)
                finally:
                    if comp is not None:
                        comp.kill()
                        comp.wait()
                figs = {f["metric"]: f for f in doc["figures"]}
                ev = figs.get("events_per_s") or {}
                say(f"night {night + 1:2d} {kind:9s} exit {doc['exit_code']} {doc['outcome']:12s} "
                    f"events_per_s ratio {ev.get('ratio') or float('nan'):.4f} "
                    f"[{ev.get('ci_low') or float('nan'):.4f}, {ev.get('ci_high') or float('nan'):.4f}] "
                    f"p {ev.get('p') if ev.get('p') is not None else float('nan'):.3g} "
                    f"({time.monotonic() - t0:.0f} s)")
                results[kind].append(doc)
    say("")
    for kind, docs in results.items():
        n = len(docs)
        fails = sum(d["exit_code"] == 6 for d in docs)
        cj = sum(d["exit_code"] == 7 for d in docs)
        ratios = [f["ratio"] for d in docs for f in d["figures"] if f["metric"] == "events_per_s" and f.get("ratio")]
        med = statistics.median(ratios) if ratios else float("nan")
        say(f"{kind:9s} nights {n}: exit 6 (fail) {fails}, exit 7 (cannot judge) {cj}, exit 0 {n - fails - cj}; "
            f"median events_per_s ratio {med:.4f}")
    un = sum(d["exit_code"] == 6 for d in results["unchanged"])
    sl = sum(d["exit_code"] == 6 for d in results["slowed"])
    say(f"false alarms {un}/{args.nights} (target <= 1/20): {'met' if un <= args.nights / 20 else 'NOT met'}")
    say(f"detected {sl}/{args.nights} (target >= 19/20): {'met' if sl >= args.nights * 19 / 20 else 'NOT met'}")
    log_path.write_text("\n".join(lines) + "\n")
    print(f"log: {log_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
