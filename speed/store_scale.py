#!/usr/bin/env python3
"""The store at a site's scale on both back ends (issue 28 #2): 100,000 runs and 2,000,000 figures.

The SQLite store is built as speed/scale_store.py builds its own (RUNS copies of one real `run fpu
--quick`, 20 figures each, samples jittered; tags big, half-a, half-b), plus the tags small-a (the 5
oldest runs) and small-b (the 5 newest); it is then moved into a PostgreSQL server of its own
(tests/pgkit.py: a temporary directory, loopback, stopped and removed at the end) with `clusterbench
results copy`, timed. Then, ROUNDS times on each back end (wall time of the whole command, Python's
start included, output captured):

    results list --limit 50 | results list (the newest 50 since --all came; every run before)
    results list --all (every run; a tree without --all: not run) | results list --tag small-b
    results table fpu --rows run --runs small-a,small-b | results table fpu --rows host (every run's figure)
    compare small-a small-b

    .venv/bin/python speed/store_scale.py [--runs 100000] [--rounds 3] [--log FILE] [--store FILE] [--old TREE]
                                          [--skip TEXT ...]

--old TREE also times an older checkout of clusterbench (its src/ on PYTHONPATH), interleaved with this tree
command by command, each on a store of its own: the SQLite store copied and opened for writing once by its
tree (an older schema is upgraded in place then: timed), and in PostgreSQL a database each tree fills with
its own `results copy` (timed), round 1 on PostgreSQL of that tree right after its copy (then the next
tree's copy); lines say `old` or `new` after the back end. After each copy: whether the tables have the
planner's statistics yet, and autovacuum's workers at work.

--skip TEXT leaves out the commands whose text holds TEXT (repeatable; e.g. --skip 'rows host').

--store FILE measures a store built before (by this script's build, e.g. kept from an earlier session: a
100,000-run build takes ~15 minutes under load) instead of building one: it is copied, the copy opened for
writing once (an older schema is upgraded in place then: timed), and the tags small-a and small-b added when
it lacks them.

The issue asks each of results list, results table and compare of two tags to take at most 1 s.
Raw lines go to --log (default speed/logs/store-scale.txt, appended line by line).
"""
from __future__ import annotations

import argparse
import os
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
from scale_store import build_store, seed_run, timed  # noqa: E402

LOG = REPO / "speed" / "logs" / "store-scale.txt"
COMMANDS = [
    ["results", "list", "--limit", "50"],
    ["results", "list"],
    ["results", "list", "--all"],
    ["results", "list", "--tag", "small-b"],
    ["results", "table", "fpu", "--rows", "run", "--runs", "small-a,small-b"],
    ["results", "table", "fpu", "--rows", "host"],
    ["compare", "small-a", "small-b"],
]


def _opened(store: Path, env: dict) -> str:
    """Open an SQLite store for writing once (an older schema is upgraded then), add the tags small-a and
    small-b when it lacks them; what happened, for the log."""
    with sqlite3.connect(store) as con:
        schema = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
    s, rc, last = timed(["--db", str(store), "results", "tag", "last", "--note", ""], env)  # a write: upgrades
    with sqlite3.connect(store) as con:
        if not con.execute("SELECT 1 FROM run_tags WHERE tag='small-a'").fetchone():
            ids = [r[0] for r in con.execute("SELECT id FROM runs ORDER BY started")]
            con.executemany("INSERT INTO run_tags VALUES (?, ?)", [(i, "small-a") for i in ids[:5]]
                            + [(i, "small-b") for i in ids[-5:]])
    return f"opened for writing (schema {schema} then) in {s:.2f} s, exit {rc}"


def main() -> int:
    import pgkit

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--log", type=Path, default=LOG)
    ap.add_argument("--store", type=Path, help="an SQLite store built before (copied, never changed)")
    ap.add_argument("--old", type=Path, help="an older checkout of clusterbench, timed beside this tree")
    ap.add_argument("--skip", action="append", default=[], metavar="TEXT", help="leave out commands holding TEXT")
    args = ap.parse_args()
    commands = [c for c in COMMANDS if not any(t in " ".join(c) for t in args.skip)]
    trees = {"new": REPO} if args.old is None else {"old": args.old.resolve(), "new": REPO}
    envs = {}
    for name, tree in trees.items():
        envs[name] = {**os.environ, "PYTHONPATH": str(tree / "src")}
        envs[name].pop("CLUSTERBENCH_DB", None)
    args.log.parent.mkdir(parents=True, exist_ok=True)

    def say(text: str) -> None:  # each line to the log as it comes: a cut run keeps what it measured
        print(text, flush=True)
        with open(args.log, "a", encoding="utf-8") as f:
            f.write(text + "\n")

    def load() -> str:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())

    def rev(tree: Path) -> str:
        return subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=False).stdout.strip()

    revs = "; ".join(f"{name} tree commit {rev(tree)}" for name, tree in trees.items()) if args.old else \
        f"commit {rev(REPO)}"
    say(f"== {datetime.now().isoformat(timespec='seconds')} {revs}; {os.cpu_count()} cpus, load average {load()}")
    with tempfile.TemporaryDirectory(prefix="cb-store-scale-") as tmp:
        base = Path(tmp)
        stores = {name: base / f"scale-{name}.db" for name in trees}
        first = stores[next(iter(trees))]
        t0 = time.monotonic()
        if args.store is not None:
            shutil.copyfile(args.store, first)
            built = f"copied from {args.store} in {time.monotonic() - t0:.1f} s"
        else:
            seed = base / "seed.db"
            seed_run(seed, env=envs[next(iter(trees))])  # by the oldest tree: each tree opens it as a user would
            build_store(seed, first, args.runs)
            built = f"built in {time.monotonic() - t0:.1f} s"
        for name, store in stores.items():
            if store != first:
                shutil.copyfile(first, store)
            built += f"; {name + ' tree: ' if args.old else ''}{_opened(store, envs[name])}"
        with sqlite3.connect(first) as con:
            runs = con.execute("SELECT count(*) FROM runs").fetchone()[0]
            figures = con.execute("SELECT count(*) FROM results").fetchone()[0]
        say(f"sqlite store: {runs} runs, {figures} figures, tags big, half-a, half-b, small-a (5), small-b (5); "
            f"{built}, {first.stat().st_size / 2 ** 20:.1f} MiB")

        def has(name: str, cmd: list[str]) -> bool:  # a tree without --all does not know it
            return "--all" not in cmd or '"--all"' in (trees[name] / "src/clusterbench/cli/results.py").read_text()

        def one(rnd: int, backend: str, name: str, cmd: list[str]) -> None:
            if has(name, cmd):
                where = str(stores[name]) if backend == "sqlite" else urls[name]
                s, rc, last = timed(["--db", where, *cmd], envs[name])
                label = f"{backend:10s} {name}" if args.old else f"{backend:10s}"
                say(f"round {rnd} {label} {' '.join(cmd):58s} {s:7.2f} s  exit {rc}  {last[:100]}")

        with pgkit.pg_server() as server:
            urls: dict[str, str] = {}

            def stats(db: str) -> str:
                rows = server.sql("SELECT relname, last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL FROM "
                                  "pg_stat_user_tables WHERE relname IN ('runs', 'run_tags', 'results') ORDER BY 1", db=db)
                busy = server.sql("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'")
                return (", ".join(f"{r[0]} {'analyzed' if r[1] else 'not analyzed'}" for r in rows)
                        + f"; autovacuum workers at work: {busy[0][0]}")

            for cmd in commands:  # round 1 on SQLite first, as before
                for name in trees:
                    one(1, "sqlite", name, cmd)
            for name in trees:  # each tree's own copy, its round 1 on PostgreSQL right after it
                db = server.new_database()
                urls[name] = server.url("cb", db)
                s, rc, last = timed(["results", "copy", "--from", str(stores[name]), "--to", urls[name]], envs[name])
                size = server.sql("SELECT pg_size_pretty(pg_database_size(current_database()))", db=db)
                say(f"postgresql store{' of the ' + name + ' tree' if args.old else ''}: results copy from the sqlite "
                    f"store {s:.1f} s, exit {rc} ({last[:160]}); {size[0][0]}; {stats(db)}")
                for cmd in commands:
                    one(1, "postgresql", name, cmd)
                say(f"         {stats(db)}")
            say(f"         load average {load()}")
            for rnd in range(2, args.rounds + 1):
                for backend in ("sqlite", "postgresql"):
                    for cmd in commands:
                        for name in trees:
                            one(rnd, backend, name, cmd)
                say(f"         load average {load()}")
    say("")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
