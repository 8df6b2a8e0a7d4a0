#!/usr/bin/env python3
"""Does clusterbench's own process disturb the MPI benchmark it runs? (issue 26; docs/collectives.md)

``run coll`` (or ``--bench pingpong|bw``) once per round from each of two source trees (``--tree LABEL=PATH``, PATH's ``src`` on
PYTHONPATH; e.g. a worktree of the commit before a change and this tree), rounds interleaved and the
order flipped each round, and per size the OSU-convention average beside the median iteration (p50 of the
max over ranks). A tail that only the average carries, in one tree and not the other, is time taken from
the ranks during the timed loop. The raw log keeps every launch's figures.

Usage::

    .venv/bin/python speed/coll_parent_tail.py --tree before=/tmp/wt --tree after=. [--op reduce]
        [--sizes 1024,2048,4096,8192] [--rounds 8] --log speed/logs/coll-parent-tail.txt
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def command(bench: str, op: str, sizes: str, iters: int, warmup: int, extra: list[str]) -> list[str]:
    if bench == "coll":
        return ["run", "coll", "--ops", op, "--sizes", sizes, "--max-iters", str(iters), "--warmup", str(warmup),
                "--time-budget", "60"]
    return ["run", bench, "--sizes", sizes, "--transport", "shm", *extra]  # pingpong, bw: --extra or their defaults


def pair(bench: str, op: str, res: dict) -> tuple[int, float, float] | None:
    """(size, average, median iteration) of one figure; for bw the times per byte (1/MB/s) so that a
    tail reads the same way (average above the median)."""
    p = res["params"]
    if bench == "coll" and res["metric"] == "latency" and res["benchmark"] == op:
        return int(p["size_bytes"]), float(res["value"]), float(p["p50_us"])
    if bench == "pingpong" and res["metric"] == "latency" and p.get("batch_mean"):
        return int(p["size_bytes"]), float(p["batch_mean"]), float(p["all"]["median"])
    if bench == "bw" and res["metric"] == "bw" and p["all"].get("median"):
        return int(p["size_bytes"]), 1.0 / float(res["value"]), 1.0 / float(p["all"]["median"])
    return None


def one(tree: Path, bench: str, op: str, sizes: str, iters: int, warmup: int,
        extra: list[str]) -> dict[int, tuple[float, float]]:
    cmd = [sys.executable, "-m", "clusterbench", *command(bench, op, sizes, iters, warmup, extra), "--allow-root",
           "--json", "--no-store"]
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "CLUSTERBENCH_ALLOW_RUN_AS_ROOT": "1"}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if r.returncode:
        raise SystemExit(f"{tree}: run coll failed ({r.returncode}): {r.stderr[-800:]}")
    out = {}
    for res in json.loads(r.stdout)["results"]:
        got = pair(bench, op, res)
        if got:
            out[got[0]] = got[1:]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", action="append", required=True, help="LABEL=PATH of a source tree (twice)")
    ap.add_argument("--bench", default="coll", choices=("coll", "pingpong", "bw"))
    ap.add_argument("--op", default="reduce", help="coll's op")
    ap.add_argument("--extra", default="", help="more options for pingpong and bw, e.g. '--time-budget 0.02'")
    ap.add_argument("--sizes", default="1024,2048,4096,8192")
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--log", required=True)
    a = ap.parse_args()
    trees = [(t.split("=", 1)[0], Path(t.split("=", 1)[1]).resolve()) for t in a.tree]
    with open(a.log, "w") as log:
        def say(line: str) -> None:
            print(line)
            log.write(line + "\n")
            log.flush()
        say(f"# coll_parent_tail.py {time.strftime('%Y-%m-%d %H:%M:%S')}, load {os.getloadavg()[0]:.2f}; "
            + (f"{a.op} {a.sizes} B, {a.iters} timed + {a.warmup} warm-up" if a.bench == "coll" else
             f"{a.bench} {a.sizes} B, options {a.extra or '(none)'}") + ", 2 ranks; trees "
            + ", ".join(f"{lab}={p}" for lab, p in trees))
        say("# per launch and size: average / median iteration (us; bw: s/MB, i.e. 1 / MB/s); "
            "tail = average / median iteration" + ("; pingpong's average: batch_mean (all timed loops)"
                                                   if a.bench == "pingpong" else ""))
        tails: dict[str, list[float]] = {lab: [] for lab, _ in trees}
        for i in range(a.rounds):
            for lab, tree in (trees if i % 2 == 0 else trees[::-1]):
                got = one(tree, a.bench, a.op, a.sizes, a.iters, a.warmup, a.extra.split())
                worst = max(avg / p50 for avg, p50 in got.values())
                tails[lab].append(worst)
                say(f"r{i} {lab}: " + " ".join(f"{s}:{avg:.4g}/{p50:.4g}" for s, (avg, p50) in sorted(got.items()))
                    + f" | largest tail {worst:.2f} (load {os.getloadavg()[0]:.2f})")
        for lab, v in tails.items():
            say(f"summary {lab}: launches with a tail above 1.3 at some size: {sum(t > 1.3 for t in v)} of {len(v)}; "
                f"largest tail per launch {min(v):.2f}-{max(v):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
