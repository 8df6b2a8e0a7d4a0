#!/usr/bin/env python3
"""`clusterbench check` as a nightly gate, measured on this machine (issue 28, section 1):

(a) false alarms: NIGHTS checks of an unchanged node against one baseline; a night that exits 6
    (a figure significantly worse by at least --min-effect) is a false alarm. Target: at most 1 of 20.
    A night that exits 7 (cannot judge: too noisy to exclude a loss of --min-effect, ...) is neither.
(b) detection: NIGHTS checks with an injected slowdown of about SLOW (5%). A night that exits 6
    detected it. Target: at least 19 of 20.

Two injections (--inject):

cpu (default): the suite is `intcpu` (1 thread pinned to cpu 0, a whole-run events/s rate and a mean
    latency over --seconds); the slowdown is a competing process pinned to the benchmark's cpu, busy
    SLOW of the time (1 ms busy, then asleep for the rest of a 1/SLOW ms period), so a whole-run rate
    on that cpu loses about SLOW. On a shared machine the other load moves this figure far more.
net: the suite is one MPI bandwidth run, `bw` over tcp between the two nodes of a virtual cluster
    (`sim-cluster up --nodes 2 --rate RATE`, brought up and taken down by this script), a message of
    --size bytes, a window of 4, --seconds of timed iterations: bound by the link's tc tbf rate, not by
    the cpu. The slowdown is the tbf rate lowered by SLOW on every node's link (`tc qdisc replace`
    in the nodes' namespaces, as `sim-cluster up` sets it) for the slowed nights, and put back after.
    The cluster's prefix is $CLUSTERBENCH_SIM_PREFIX, else `cbal-` (never the user's `cbsim-`).

Each check runs the suite 3 times (the check's default). Unchanged and slowed nights alternate, so a
slow hour on this shared machine falls on both. Every night's outcome, exit code, ratio, interval and
p are logged; the slowdown the injection really caused is the median ratio of the slowed nights.

    .venv/bin/python speed/check_alarms.py [--inject cpu|net] [--nights 20] [--slow 0.05] [--min-effect 3]
        [--seconds S] [--rate 100mbit] [--size 1048576] [--repeat N] [--baseline-repeat N] [--log FILE]

Uses a temporary store (--db), never the user's. The log goes to
speed/results-<date>-<machine>-check-alarms.txt (cpu) or ...-check-alarms-net.txt (net) unless --log
is given. The net mode needs root (network namespaces, tc) and Open MPI.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from speedkit import log_file, save_log

REPO = Path(__file__).resolve().parents[1]
CB = [sys.executable, "-m", "clusterbench"]

SUITE = """name = "alarms"
version = 1
repeat = 3
[[run]]
benchmark = "intcpu"
params = {{ threads = 1, cpus = [0], max_prime = 2000, time = {seconds}, samples = 10, sweep = false }}
"""

NET_SUITE = """name = "alarms-net"
version = 1
repeat = 3
[[run]]
benchmark = "bw"
params = {{ sizes = [{size}], window = 4, transport = "tcp", time_budget = {seconds}, direction = "uni" }}
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


class CpuInjection:
    """intcpu on cpu 0; slowed: a competitor on cpu 0, busy `slow` of the time."""
    metric = "events_per_s"

    def __init__(self, args: argparse.Namespace) -> None:
        self.slow = args.slow
        self.seconds = 1.0 if args.seconds is None else args.seconds
        self.comp: subprocess.Popen | None = None

    def describe(self) -> str:
        return f"intcpu --time {self.seconds:g}"

    def suite(self) -> str:
        return SUITE.format(seconds=self.seconds)

    def hosts(self) -> list[str]:
        return []

    def slowed(self, on: bool) -> None:
        if on:
            self.comp = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", COMPETITOR, str(self.slow)])
            time.sleep(0.2)
        elif self.comp is not None:
            self.comp.kill()
            self.comp.wait()
            self.comp = None

    def close(self) -> None:
        self.slowed(False)


class NetInjection:
    """bw over tcp between two virtual nodes; slowed: every node's tbf rate lowered by `slow`."""
    metric = "bw"

    def __init__(self, args: argparse.Namespace) -> None:
        sys.path.insert(0, str(REPO / "src"))
        from clusterbench.launch.simcluster.state import TBF_LATENCY, parse_rate

        self.latency = TBF_LATENCY
        self.rate_bps = parse_rate(args.rate)
        self.slow_bps = int(round(self.rate_bps * (1 - args.slow)))
        self.size = args.size
        self.seconds = 2.0 if args.seconds is None else args.seconds
        self.env = {**os.environ, "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"}
        self.env.setdefault("CLUSTERBENCH_SIM_PREFIX", "cbal-")
        os.environ.update(self.env)  # the checks run in this cluster too
        self.up = False
        self.sim(["up", "--nodes", "2", "--rate", f"{self.rate_bps}bit"])
        self.up = True
        st = json.loads(self.sim(["status", "--json"]))
        self.mtu = int(st["mtu"])
        self.links = [(n["namespace"], n["iface"]) for n in st["nodes"]]
        self.names = [n["name"] for n in st["nodes"]]

    def sim(self, cmd: list[str]) -> str:
        p = subprocess.run([*CB, "sim-cluster", *cmd], capture_output=True, text=True, timeout=120, env=self.env)
        if p.returncode != 0:
            raise SystemExit(f"sim-cluster {' '.join(cmd)} failed (exit {p.returncode}): {p.stderr.strip()[-500:]}")
        return p.stdout

    def describe(self) -> str:
        return (f"bw over tcp, {self.size} B x window 4, --time-budget {self.seconds:g}, between 2 virtual nodes "
                f"(prefix {self.env['CLUSTERBENCH_SIM_PREFIX']}) at tbf {self.rate_bps / 1e6:g} Mbit/s, "
                f"slowed {self.slow_bps / 1e6:g} Mbit/s")

    def suite(self) -> str:
        return NET_SUITE.format(size=self.size, seconds=self.seconds)

    def hosts(self) -> list[str]:
        return ["--hosts", ",".join(self.names)]

    def set_rate(self, rate_bps: int) -> None:
        # the qdisc `sim-cluster up` puts on every node's link (lifecycle's tbf arguments: a burst of 2 ms
        # at the rate or a 64 KiB GSO packet and an MTU, whichever is larger)
        burst = max(rate_bps // 8 // 500, 65536 + self.mtu)
        for ns, dev in self.links:
            subprocess.run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{rate_bps}bit",
                            "burst", str(burst), "latency", self.latency], check=True, timeout=30)

    def slowed(self, on: bool) -> None:
        self.set_rate(self.slow_bps if on else self.rate_bps)

    def close(self) -> None:
        if self.up:
            self.set_rate(self.rate_bps)
            self.sim(["down", "--force"])
            self.up = False


def tests(doc: dict, metric: str) -> str:
    """The two tests behind p (the check's p is the larger, adjusted): Mann-Whitney on the samples and the
    t-test on the run medians, which with 3 runs a side has 4 degrees of freedom."""
    for m in (doc.get("comparison") or {}).get("matches") or []:
        c = m.get("comparison") or {}
        if m.get("metric") == metric and c:
            fmt = lambda x: "nan" if x is None else f"{x:.3g}"  # noqa: E731
            return f" (Mann-Whitney {fmt(c.get('p_value'))}, t on run medians {fmt(c.get('p_runs'))})"
    return ""


def run_medians(db: str, run_ids: list[str], metric: str) -> str:
    """Each run's median of the figure, in run order (read from the temporary store): shows a run the
    rest of the machine slowed, which the summary line hides."""
    con = sqlite3.connect(db)
    try:
        meds = []
        for rid in run_ids:
            row = con.execute("select samples from results where run_id = ? and metric = ?", (rid, metric)).fetchone()
            meds.append(f"{statistics.median(json.loads(row[0])):.4g}" if row and row[0] else "-")
    finally:
        con.close()
    return " ".join(meds)


INJECTIONS = {"cpu": CpuInjection, "net": NetInjection}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inject", choices=sorted(INJECTIONS), default="cpu",
                    help="cpu: a competitor on intcpu's cpu; net: a lower tbf rate under bw on a virtual cluster")
    ap.add_argument("--nights", type=int, default=20)
    ap.add_argument("--slow", type=float, default=0.05, help="the slowdown injected (default 0.05)")
    ap.add_argument("--min-effect", type=float, default=3.0)
    ap.add_argument("--seconds", type=float, default=None,
                    help="intcpu --time per run (cpu, default 1) or bw --time-budget (net, default 2)")
    ap.add_argument("--rate", default="100mbit", help="net: the virtual links' tbf rate (default 100mbit)")
    ap.add_argument("--size", type=int, default=1 << 20, help="net: bw's message size in bytes (default 1 MiB)")
    ap.add_argument("--repeat", type=int, default=None, help="runs a check (default: the suite's, 3)")
    ap.add_argument("--baseline-repeat", type=int, default=None,
                    help="runs of the baseline (check --update-baseline --repeat N; default: as --repeat)")
    ap.add_argument("--log", default=None)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # an injection in place is undone on the way out
    suffix = "" if args.inject == "cpu" else f"-{args.inject}"
    log_path = log_file(args.log, f"{machine_name()}-check-alarms{suffix}")
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    inj = INJECTIONS[args.inject](args)
    metric = inj.metric
    try:
        say(f"# speed/check_alarms.py --inject {args.inject} {time.strftime('%Y-%m-%dT%H:%M:%S%z')} on "
            f"{platform.node()} ({os.cpu_count()} cpus); nights {args.nights}, slowdown {args.slow:.0%}, "
            f"--min-effect {args.min_effect:g}%, {inj.describe()}, runs a night {args.repeat or 'as the suite'}, "
            f"baseline runs {args.baseline_repeat or args.repeat or 'as the suite'}")
        with tempfile.TemporaryDirectory(prefix="cb-check-alarms-") as tmp:
            db = str(Path(tmp) / "r.db")
            suite = Path(tmp) / "alarms.toml"
            suite.write_text(inj.suite())
            t0 = time.monotonic()
            rep = [] if args.repeat is None else ["--repeat", str(args.repeat)]
            brep = rep if args.baseline_repeat is None else ["--repeat", str(args.baseline_repeat)]
            base = check(db, suite, ["--baseline", "base", "--update-baseline", *inj.hosts(), *brep])
            say(f"baseline: {len(base['runs'])} runs, outcome {base['outcome']} (nothing to judge) "
                f"({time.monotonic() - t0:.0f} s); run medians {run_medians(db, base['runs'], metric)}")
            opts = ["--baseline", "base", "--min-effect", str(args.min_effect), *inj.hosts(), *rep]
            results: dict[str, list[dict]] = {"unchanged": [], "slowed": []}
            for night in range(args.nights):
                for kind in ("unchanged", "slowed") if night % 2 == 0 else ("slowed", "unchanged"):
                    inj.slowed(kind == "slowed")
                    t0 = time.monotonic()
                    try:
                        doc = check(db, suite, opts)
                    finally:
                        inj.slowed(False)
                    figs = {f["metric"]: f for f in doc["figures"]}
                    fig = figs.get(metric) or {}
                    say(f"night {night + 1:2d} {kind:9s} exit {doc['exit_code']} {doc['outcome']:12s} "
                        f"{metric} ratio {fig.get('ratio') or float('nan'):.4f} "
                        f"[{fig.get('ci_low') or float('nan'):.4f}, {fig.get('ci_high') or float('nan'):.4f}] "
                        f"p {fig.get('p') if fig.get('p') is not None else float('nan'):.3g}{tests(doc, metric)} "
                        f"({time.monotonic() - t0:.0f} s); run medians {run_medians(db, doc['runs'], metric)}")
                    results[kind].append(doc)
    finally:
        inj.close()
    say("")
    for kind, docs in results.items():
        n = len(docs)
        fails = sum(d["exit_code"] == 6 for d in docs)
        cj = sum(d["exit_code"] == 7 for d in docs)
        ratios = [f["ratio"] for d in docs for f in d["figures"] if f["metric"] == metric and f.get("ratio")]
        med = statistics.median(ratios) if ratios else float("nan")
        say(f"{kind:9s} nights {n}: exit 6 (fail) {fails}, exit 7 (cannot judge) {cj}, exit 0 {n - fails - cj}; "
            f"median {metric} ratio {med:.4f}")
    un = sum(d["exit_code"] == 6 for d in results["unchanged"])
    sl = sum(d["exit_code"] == 6 for d in results["slowed"])
    say(f"false alarms {un}/{args.nights} (target <= 1/20): {'met' if un <= args.nights / 20 else 'NOT met'}")
    say(f"detected {sl}/{args.nights} (target >= 19/20): {'met' if sl >= args.nights * 19 / 20 else 'NOT met'}")
    save_log(log_path, lines, "log")
    return 0


if __name__ == "__main__":
    sys.exit(main())
