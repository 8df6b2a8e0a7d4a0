#!/usr/bin/env python3
"""The `compare A B` verdict (analysis/compare.py) measured on real runs (issue 10).

(a) False-positive rate: PAIRS pairs of identical sides, each side RUNS runs of
        clusterbench --db TMP run fpu --samples 10 --min-time 0.02
    (all five operations, 20 figures a run; a run takes ~4 s), A's runs then B's runs, as a user
    compares "before" with "after". A pair is a false positive when its comparison calls ANY figure
    better or worse. Target: at most 1 of 20 (5%). For contrast, the first run of each side is also
    compared on its samples alone (one run per side, samples taken as independent: the rule without
    runs as the unit of replication).
(b) Power: RUNS runs of `run stream --threads 1 --no-sweep` against RUNS runs of `--threads 2`:
    must be significant, with a ratio near the thread scaling the runs show (median of the runs'
    medians, 2 threads over 1).

    .venv/bin/python speed/compare_fpr.py [--pairs 20] [--runs 3] [--log FILE]

Uses a temporary store (--db), never the user's. The log goes to
speed/results-<date>-<machine>-compare-fpr.txt unless --log is given.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from speedkit import log_file, save_log

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from clusterbench.analysis import compare as C
from clusterbench.analysis import matching as M
from clusterbench.analysis import verdict as V
from clusterbench.benchmarks import all_benchmarks
from clusterbench.store import Store

CB = [sys.executable, "-m", "clusterbench"]
FPU = ["run", "fpu", "--samples", "10", "--min-time", "0.02"]
STREAM = ["run", "stream", "--no-sweep", "--ntimes", "20"]


def machine_name() -> str:
    from clusterbench.probe import probe

    cpu = probe()["cpu"]
    model = str(cpu.get("model_name") or platform.machine()).lower().replace(" ", "-")
    return f"{model}-{os.cpu_count()}vcpu"


class Runner:
    def __init__(self, db: str, say) -> None:
        self.db, self.say = db, say
        self.count = 0

    def run(self, argv: list[str]) -> str:
        before = {r["id"] for r in Store(self.db, readonly=True).list_runs()} if Path(self.db).exists() else set()
        t0 = time.monotonic()
        proc = subprocess.run([*CB, "--db", self.db, *argv], check=False, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
        new = [r["id"] for r in Store(self.db, readonly=True).list_runs() if r["id"] not in before]
        self.count += 1
        self.say(f"    run {self.count:3d} {' '.join(argv)}  {time.monotonic() - t0:4.1f} s  -> {new[0][:8]}")
        return new[0]

    def side(self, runs: list[str]) -> tuple[list[dict], dict[str, list[dict]]]:
        store = Store(self.db, readonly=True)
        return [store.get_run(r) for r in runs], {r: store.results(r) for r in runs}


def judged(cmp: C.Comparison) -> str:
    s = cmp.summary
    return (f"better {s['better']}, worse {s['worse']}, no significant difference {s['no significant difference']}, "
            f"cannot judge {s['cannot judge']}")


def false_positives(runner: Runner, keys: dict, pairs: int, runs: int, say) -> tuple[int, int]:
    say(f"(a) {pairs} pairs of identical sides, {runs} runs of `{' '.join(FPU)}` per side (A's runs, then B's)")
    fp = single_fp = 0
    figures = figures_called = cannot = 0
    for i in range(pairs):
        a = [runner.run(FPU) for _ in range(runs)]
        b = [runner.run(FPU) for _ in range(runs)]
        runs_a, res_a = runner.side(a)
        runs_b, res_b = runner.side(b)
        cmp = C.compare(runs_a, res_a, runs_b, res_b, keys)
        called = [m for m in cmp.matches if m.comparison.significant]
        fp += bool(called)
        figures += len(cmp.matches)
        figures_called += len(called)
        cannot += cmp.summary["cannot judge"]
        # the same pair, one run per side, samples taken as independent (no run-level test, no Holm)
        one = M.match_figures([{**r, "run_id": None} for r in res_a[a[0]]],
                              [{**r, "run_id": None} for r in res_b[b[0]]], keys)[0]
        one_called = []
        for m in one:
            c = V.compare_samples(list(m.samples_a), list(m.samples_b), m.higher_is_better)
            if c.significant:
                one_called.append(f"{m.label} {c.change_pct:+.1f}%")
        single_fp += bool(one_called)
        worst = sorted(cmp.matches, key=lambda m: m.comparison.p_adjusted if m.comparison.p_adjusted is not None
                       else 2.0)[:1]
        say(f"  pair {i + 1:2d}: {judged(cmp)}; env changes {len(cmp.env)}"
            + (f"; CALLED: {', '.join(f'{m.label} {m.comparison.change_pct:+.1f}%' for m in called)}" if called else "")
            + (f"; smallest adjusted p {worst[0].comparison.p_adjusted:.3g} ({worst[0].label}, "
               f"{worst[0].comparison.change_pct:+.1f}%)" if worst and worst[0].comparison.p_adjusted is not None
               else ""))
        say(f"           one run per side, samples alone: {len(one_called)} of {len(one)} figures called"
            + (f" (e.g. {'; '.join(one_called[:3])})" if one_called else ""))
    say(f"(a) result: {fp} of {pairs} pairs of identical sides called different (target <= 1 of 20, 5%); "
        f"figures called {figures_called} of {figures}, cannot judge {cannot} of {figures}")
    say(f"    without runs as the unit (one run per side, samples alone): {single_fp} of {pairs} pairs called different")
    return fp, single_fp


def power(runner: Runner, keys: dict, runs: int, say) -> None:
    say(f"(b) {runs} runs of `{' '.join(STREAM)} --threads 1` against {runs} runs of `--threads 2`")
    a = [runner.run([*STREAM, "--threads", "1"]) for _ in range(runs)]
    b = [runner.run([*STREAM, "--threads", "2"]) for _ in range(runs)]
    runs_a, res_a = runner.side(a)
    runs_b, res_b = runner.side(b)
    cmp = C.compare(runs_a, res_a, runs_b, res_b, keys)
    say(f"    {judged(cmp)}; worst change {cmp.worst_change_pct}")
    for e in cmp.env:
        say(f"    env: {e.label}")
    say("    | figure | run medians A (MB/s) | run medians B (MB/s) | scaling of run medians | ratio [95% CI] | "
        "p (MW) | p (runs) | p adj | CV A/B | verdict |")
    say("    |---|---|---|---|---|---|---|---|---|---|")
    for m in cmp.matches:
        c = m.comparison
        med_a = [statistics.median([x for x, r in zip(m.samples_a, m.sample_runs_a) if r == run]) for run in m.runs_a]
        med_b = [statistics.median([x for x, r in zip(m.samples_b, m.sample_runs_b) if r == run]) for run in m.runs_b]
        scaling = statistics.median(med_b) / statistics.median(med_a)
        say(f"    | {m.label} | {', '.join(f'{x:.0f}' for x in med_a)} | {', '.join(f'{x:.0f}' for x in med_b)} | "
            f"{scaling:.2f} | {c.ratio:.2f} [{c.ci_low:.2f}, {c.ci_high:.2f}] | {c.p_value:.2g} | "
            f"{c.p_runs if c.p_runs is None else format(c.p_runs, '.2g')} | "
            f"{c.p_adjusted if c.p_adjusted is None else format(c.p_adjusted, '.2g')} | "
            f"{c.cv_a:.1%}/{c.cv_b:.1%} | {c.verdict} |")
        for w in c.warnings:
            say(f"      warning [{w['code']}]: {w['message']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3, help="runs per side")
    ap.add_argument("--log", help="log file (default: speed/results-<date>-<machine>-compare-fpr.txt)")
    args = ap.parse_args()
    log_path = log_file(args.log, f"{machine_name()}-compare-fpr")
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    keys = {name: cls.key_params for name, cls in all_benchmarks().items()}
    with tempfile.TemporaryDirectory(prefix="cb-compare-fpr-") as tmp:
        runner = Runner(str(Path(tmp) / "results.db"), say)
        say(f"machine: {platform.node()}, {os.cpu_count()} CPUs, load average {os.getloadavg()}, "
            f"{time.strftime('%Y-%m-%d %H:%M:%S')}")
        say(f"method: {C.METHOD}")
        t0 = time.monotonic()
        fp, _single_fp = false_positives(runner, keys, args.pairs, args.runs, say)
        power(runner, keys, args.runs, say)
        say(f"load average at the end {os.getloadavg()}; {runner.count} runs in {time.monotonic() - t0:.0f} s")
    verdict = "met" if fp <= max(1, args.pairs // 20) else "NOT met"
    say(f"false-positive target (<= 5% of pairs): {verdict} ({fp} of {args.pairs})")
    save_log(log_path, lines, "log")
    return 0 if verdict == "met" else 1


if __name__ == "__main__":
    sys.exit(main())
