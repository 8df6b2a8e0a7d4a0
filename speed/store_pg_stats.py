#!/usr/bin/env python3
"""Why PostgreSQL's first commands after `results copy` were slow (issue 28 #2): the same commands on one
copied store, before and after ANALYZE, with autovacuum off so nothing gathers statistics in between.

A 100,000-run SQLite store built by speed/store_scale.py (--store FILE: copied, tags small-a and small-b
added when missing) is moved into a PostgreSQL server of its own (tests/pgkit.py; autovacuum off;
after the copy, auto_explain logging the plan of every statement over 50 ms) with `results copy` of the tree given by
--copy-tree (default: this one); then ROUNDS times each command (wall time, Python's start included), then
ANALYZE of the four tables (timed), then ROUNDS times again. Each command's server-side statements and
their time are read from the server's log. Last, what a command's start costs: Python, importing psycopg,
connecting. Raw lines to --log (default speed/logs/store-scale.txt); the plans of the slow statements to
--plans (default speed/logs/store-pg-stats-plans.txt).

    .venv/bin/python speed/store_pg_stats.py --store FILE [--rounds 3] [--copy-tree TREE]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "speed"), str(REPO / "tests")]
from scale_store import timed  # noqa: E402
from store_scale import _opened  # noqa: E402

LOG = REPO / "speed" / "logs" / "store-scale.txt"
PLANS = REPO / "speed" / "logs" / "store-pg-stats-plans.txt"
COMMANDS = [
    ["results", "list", "--limit", "50"],
    ["results", "list", "--tag", "small-b"],
    ["results", "table", "fpu", "--rows", "run", "--runs", "small-a,small-b"],
    ["compare", "small-a", "small-b"],
]
#: the server's settings; statements are logged (and explained) only from after the copy (LOGGING: its
#: 2,000,000 INSERTs logged with their parameters wrote gigabytes of log and slowed it down)
SETTINGS = {"autovacuum": "off", "auto_explain.log_min_duration": "50", "auto_explain.log_analyze": "on",
            "auto_explain.log_buffers": "on"}
LOGGING = ("ALTER SYSTEM SET log_min_duration_statement = 0", "ALTER SYSTEM SET session_preload_libraries = 'auto_explain'",
           "SELECT pg_reload_conf()")


def _statements(log: str) -> list[tuple[float, str]]:
    """(ms, statement) of each statement the server logged (log_min_duration_statement)."""
    out = []
    for m in re.finditer(r"LOG:  duration: ([\d.]+) ms  (?:statement|execute [^:]*): (.*)", log):
        out.append((float(m[1]), " ".join(m[2].split())))
    return out


def main() -> int:
    import pgkit

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", type=Path, required=True, help="an SQLite store built by store_scale.py (copied)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--copy-tree", type=Path, default=REPO, help="the clusterbench checkout whose results copy runs")
    ap.add_argument("--log", type=Path, default=LOG)
    ap.add_argument("--plans", type=Path, default=PLANS)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(args.copy_tree.resolve() / "src")}
    env.pop("CLUSTERBENCH_DB", None)

    def say(text: str) -> None:
        print(text, flush=True)
        with open(args.log, "a", encoding="utf-8") as f:
            f.write(text + "\n")

    def load() -> str:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())

    rev = subprocess.run(["git", "-C", str(args.copy_tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True, check=False).stdout.strip()
    say(f"== {datetime.now().isoformat(timespec='seconds')} PostgreSQL before and after ANALYZE (speed/store_pg_stats.py), "
        f"results copy and commands of commit {rev}; autovacuum off; {os.cpu_count()} cpus, load average {load()}")
    with tempfile.TemporaryDirectory(prefix="cb-pg-stats-") as tmp, pgkit.pg_server(settings=SETTINGS) as server:
        store = Path(tmp) / "s.db"
        shutil.copyfile(args.store, store)
        opened = _opened(store, env)
        with sqlite3.connect(store) as con:
            runs = con.execute("SELECT count(*) FROM runs").fetchone()[0]
        db = server.new_database()
        url = server.url("cb", db)
        s, rc, last = timed(["results", "copy", "--from", str(store), "--to", url], env)
        say(f"sqlite store: {runs} runs, {opened}; results copy into PostgreSQL {s:.1f} s, exit {rc} {last[:100]}")
        server.sql(*LOGGING)
        time.sleep(1)

        def state() -> str:
            rows = server.sql("SELECT c.relname, c.reltuples::bigint, (SELECT count(*) FROM pg_stats p WHERE "
                              "p.tablename = c.relname AND p.schemaname = 'public'), s.last_analyze IS NOT NULL, "
                              "s.last_autoanalyze IS NOT NULL FROM pg_class c JOIN pg_stat_user_tables s ON "
                              "s.relid = c.oid WHERE c.relname IN ('runs', 'run_tags', 'results') ORDER BY 1", db=db)
            return "; ".join(f"{r[0]}: reltuples {r[1]}, columns with statistics {r[2]}, analyzed {r[3] or r[4]}"
                             for r in rows)

        plans = []

        def rounds(phase: str) -> None:
            say(f"{phase}: {state()}")
            for rnd in range(1, args.rounds + 1):
                for cmd in COMMANDS:
                    mark = len(server.log())
                    s, rc, last = timed(["--db", url, *cmd], env)
                    time.sleep(0.2)  # the server's last log lines
                    text = server.log()[mark:]
                    st = _statements(text)
                    slow = max(st, default=(0.0, ""))
                    say(f"{phase} round {rnd} {' '.join(cmd):58s} {s:6.2f} s  exit {rc}; server: {len(st)} statements "
                        f"{sum(t for t, _ in st) / 1000:.3f} s, slowest {slow[0] / 1000:.3f} s: {slow[1][:90]}")
                    if rnd == 1 and "Query Text" in text:
                        plans.append(f"### {phase}, {' '.join(cmd)}\n" + "\n".join(
                            line for line in text.splitlines() if "duration:" not in line or "plan:" in line
                            or "Query Text" in line))
            say(f"         load average {load()}")

        rounds("no statistics")
        for table in ("runs", "run_tags", "results", "fixes"):
            t0 = time.monotonic()
            server.sql(f"ANALYZE {table}", db=db)
            say(f"ANALYZE {table} {time.monotonic() - t0:.2f} s")
        rounds("analyzed")
        starts = {"python -c pass": ["-c", "pass"],
                  "python -c 'import psycopg'": ["-c", "import psycopg"],
                  "python: import psycopg, connect, SET, close": [
                      "-c", f"import psycopg; c = psycopg.connect({url!r}); c.execute('SET lock_timeout = 30000'); c.close()"]}
        for name, argv in starts.items():
            times = []
            for _ in range(5):
                t0 = time.monotonic()
                subprocess.run([sys.executable, *argv], env=env, check=True)
                times.append(time.monotonic() - t0)
            say(f"start: {name:48s} median {sorted(times)[2]:.3f} s (5 times: {' '.join(f'{t:.3f}' for t in times)})")
        args.plans.write_text("".join(p + "\n\n" for p in plans))
        say(f"(plans of the statements over 50 ms, round 1 of each phase: {os.path.relpath(args.plans, REPO)})")
    say("")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
