"""clusterbench reproduce BUNDLE: run a result bundle's benchmarks again here, and compare."""
from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from clusterbench import SCHEMA_VERSION
from clusterbench.cli.options import json_option

NAME = "reproduce"
INTERRUPTED = "the runs finished so far are stored, tagged reproduce-<run id>"


def add_parser(cmds: Any) -> None:
    rep = cmds.add_parser(NAME, help="re-run a result bundle's benchmarks with its recorded parameters here and "
                                     "compare, naming every environment difference")
    rep.add_argument("bundle", metavar="BUNDLE", help="a file written by 'results export RUN --format bundle'")
    rep.add_argument("--hosts", help="run on these hosts instead of the recorded ones (comma-separated)")
    rep.add_argument("--all", action="store_true", help="also list the figures with no significant difference")
    json_option(rep)


def handle(args: argparse.Namespace) -> int:
    from clusterbench.bundle import read_file, runs_of
    from clusterbench.report.compare import format_comparison
    from clusterbench.reproduce import plan, rerun, judge
    from clusterbench.store import Store
    from clusterbench.text import terminal_text
    from clusterbench.ui import dump_json, write_lines

    def say(line: str) -> None:  # progress: on stderr with --json, so stdout is one document
        if args.json:
            sys.stderr.write(terminal_text(line) + "\n")
        else:
            write_lines([line])

    steps = plan(runs_of(read_file(args.bundle)), args.hosts)  # all checked before anything runs
    docs, worst = [], 0
    for step in steps:
        say(f"reproduce: run {step.run.id[:8]}: clusterbench {shlex.join(step.args)}")
        code = rerun(step, args.db, quiet_stdout=args.json)
        store = Store(args.db, readonly=True)
        ids = store.select_runs(step.tag) if code == 0 else []
        if not ids:
            say(f"reproduce: run {step.run.id[:8]} could not be run again (exit {code})")
            worst = max(worst, code or 1)
            continue
        new = store.get_runs(ids[-1:])
        doc = judge(step, new, store.results_of(ids[-1:]))
        docs.append(doc)
        if not args.json:
            print(format_comparison(doc, args.all))
    if args.json:
        dump_json({"schema": SCHEMA_VERSION, "reproduced": docs})
    return worst
