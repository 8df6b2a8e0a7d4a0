#!/usr/bin/env python3
"""`report` and `compare` on a large tag (issue 23, item 7): a store of RUNS runs, timed with the CLI.

The store is built from one real run: `clusterbench --db SEED run fpu --quick --tag big` (20 figures),
whose run row is then copied RUNS times inside SQLite with new ids, later start times and the same tag
(`big`); the first half also carries `half-a`, the second `half-b`. Each copy's samples are the seed's
times a small random factor (fixed seed), so the two halves are not identical to the last bit, as real
runs are not. Then, ROUNDS times each (wall time of the whole command, Python start included):

    clusterbench --db STORE report big -o DIR --force
    clusterbench --db STORE compare half-a half-b

    .venv/bin/python speed/scale_store.py [--runs 3000] [--rounds 3] [--seed-db FILE] [--log FILE]

Uses a temporary folder, never the user's store. The raw timings go to --log (default
speed/results-2026-11-26-amd-epyc-2vcpu-scale.txt, appended). `build_store` is also what
tests/integration/test_scale.py uses to build its few-hundred-run store.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CB = [sys.executable, "-m", "clusterbench"]
LOG = REPO / "speed" / "results-2026-11-26-amd-epyc-2vcpu-scale.txt"


def seed_run(db: Path, bench: str = "fpu", env: dict | None = None) -> None:
    """One real small run into ``db``, tagged ``big``."""
    p = subprocess.run([*CB, "--db", str(db), "run", bench, "--quick", "--tag", "big"], capture_output=True,
                       text=True, check=False, env=env)
    if p.returncode != 0:
        raise SystemExit(f"run {bench} --quick failed ({p.returncode}): {p.stderr.strip()[-500:]}")


def _scaled_fraction(doc, f: float):
    if isinstance(doc, list):
        return [_scaled_fraction(x, f) for x in doc]
    if isinstance(doc, dict):
        return {k: v * f if k == "fraction" and isinstance(v, float) else _scaled_fraction(v, f) for k, v in doc.items()}
    return doc


def build_store(seed_db: Path, out_db: Path, runs: int, *, jitter: float = 0.01, seed: int = 23) -> list[str]:
    """Copy the newest complete run of ``seed_db`` ``runs`` times into ``out_db`` (a copy of the seed
    file, the seed run itself removed): new ids, start times one second apart, tag ``big`` on all,
    ``half-a`` on the first half and ``half-b`` on the second. Each copy's samples, value, summary and
    limit fractions are the seed's times a factor 1 + N(0, ``jitter``). Returns the new ids, oldest first."""
    out_db.write_bytes(seed_db.read_bytes())
    rng = random.Random(seed)
    con = sqlite3.connect(out_db)
    con.row_factory = sqlite3.Row
    src = con.execute("SELECT * FROM runs WHERE status='complete' ORDER BY started DESC LIMIT 1").fetchone()
    if src is None:
        raise SystemExit(f"{seed_db} holds no complete run to copy")
    results = con.execute("SELECT * FROM results WHERE run_id=? ORDER BY seq", (src["id"],)).fetchall()
    run_cols = [k for k in src.keys()]
    res_cols = [k for k in results[0].keys() if k != "id"] if results else []
    start = datetime.fromisoformat(src["started"])
    ids = []
    with con:
        con.execute("DELETE FROM run_tags")
        con.execute("DELETE FROM results")
        con.execute("DELETE FROM runs")
        for i in range(runs):
            rid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            row = dict(src)
            row["id"] = rid
            row["started"] = (start + timedelta(seconds=i)).isoformat(timespec="milliseconds")
            row["ended"] = (start + timedelta(seconds=i, milliseconds=900)).isoformat(timespec="milliseconds")
            con.execute(f"INSERT INTO runs ({','.join(run_cols)}) VALUES ({','.join('?' * len(run_cols))})",
                        [row[k] for k in run_cols])
            for r in results:
                f = 1.0 + rng.gauss(0.0, jitter)
                rr = dict(r)
                rr["run_id"] = rid
                rr["samples"] = json.dumps([s * f for s in json.loads(r["samples"])])
                rr["value"] = r["value"] * f
                # what follows from the value moves with it, as in a real run: the summary, the limit's fraction
                rr["summary"] = json.dumps({k: v * f if isinstance(v, float) and k != "cv" else v
                                            for k, v in json.loads(r["summary"]).items()})
                for col in ("limit_json", "limits"):
                    if r[col]:
                        rr[col] = json.dumps(_scaled_fraction(json.loads(r[col]), f))
                con.execute(f"INSERT INTO results ({','.join(res_cols)}) VALUES ({','.join('?' * len(res_cols))})",
                            [rr[k] for k in res_cols])
            tags = ["big", "half-a" if i < runs // 2 else "half-b"]
            con.executemany("INSERT INTO run_tags (run_id, tag) VALUES (?, ?)", [(rid, t) for t in tags])
            ids.append(rid)
    con.execute("VACUUM")
    con.close()
    return ids


def timed(argv: list[str], env: dict | None = None) -> tuple[float, int, str]:
    t0 = time.monotonic()
    p = subprocess.run([*CB, *argv], capture_output=True, text=True, check=False, env=env)
    return time.monotonic() - t0, p.returncode, (p.stderr.strip().splitlines() or [""])[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed-db", type=Path, help="a store whose newest complete run is copied (default: a new fpu run)")
    ap.add_argument("--label", default="", help="a word for the log (e.g. before, after)")
    ap.add_argument("--only", choices=("report", "compare"), help="time one command only")
    ap.add_argument("--log", type=Path, default=LOG)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    with tempfile.TemporaryDirectory(prefix="cb-scale-") as tmp:
        base = Path(tmp)
        seed = args.seed_db
        if seed is None:
            seed = base / "seed.db"
            seed_run(seed, env=env)
        store = base / "scale.db"
        t0 = time.monotonic()
        build_store(seed, store, args.runs)
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=False).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "diff", "--quiet", "--", "src"], check=False).returncode
        say(f"== {datetime.now().isoformat(timespec='seconds')} {args.label} commit {rev} "
            f"({'src changed since' if dirty else 'clean'}); "
            f"{os.cpu_count()} cpus, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        say(f"store: {args.runs} copies of one `run fpu --quick` (20 figures), tags big ({args.runs}), half-a "
            f"({args.runs // 2}), half-b ({args.runs - args.runs // 2}); built in {time.monotonic() - t0:.1f} s, "
            f"{store.stat().st_size / 2 ** 20:.1f} MiB")
        for rnd in range(1, args.rounds + 1):
            if args.only != "compare":
                s, rc, last = timed(["--db", str(store), "report", "big", "-o", str(base / "rep"), "--force"], env)
                say(f"round {rnd}: report big ({args.runs} runs)          {s:7.2f} s  exit {rc}  {last[:120]}")
            if args.only != "report":
                s, rc, last = timed(["--db", str(store), "compare", "half-a", "half-b"], env)
                say(f"round {rnd}: compare half-a half-b ({args.runs // 2} vs {args.runs - args.runs // 2})  "
                    f"{s:7.2f} s  exit {rc}  {last[:120]}")
            say(f"         load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with open(args.log, "a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
