"""clusterbench report RUN|TAG...: an HTML page with plots of runs."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from clusterbench import SCHEMA_VERSION
from clusterbench.cli.options import json_option
from clusterbench.errors import UsageError
from clusterbench.store import Store

NAME = "report"
INTERRUPTED = "the report was not written (nothing in the -o folder was changed; its temporary folder was removed)"


def add_parser(cmds: Any) -> None:
    rpt = cmds.add_parser(NAME, help="an HTML page with plots of runs (self-contained, opens offline)",
                          description="An HTML page with plots of the runs the selectors name (a selector's complete "
                          "runs of one configuration are one column, their figures pooled). -o is a new or empty "
                          "folder, or an earlier report with --force, which replaces only the files that report "
                          "wrote (listed in its .clusterbench-report.json) and keeps anything else; a folder of "
                          "other files and no report is refused.")
    rpt.add_argument("runs", nargs="+", metavar="RUN|TAG", help="run ids, prefixes, tags, 'last', 'last~N'")
    rpt.add_argument("-o", "--output", default="report",
                     help="output folder (default ./report): new, empty, or an earlier report")
    rpt.add_argument("--compare", action="store_true",
                     help="with exactly two selectors: also compare them (the comparison chart)")
    rpt.add_argument("--force", action="store_true",
                     help="replace an earlier report in that folder: only the files it wrote (its manifest, "
                     ".clusterbench-report.json), anything else there is kept")
    rpt.add_argument("--include-incomplete", action="store_true",
                     help="also pool runs that are still running or incomplete (left out and named by default)")
    json_option(rpt)


def handle(args: argparse.Namespace) -> int:
    from clusterbench import config
    from clusterbench.report.compare import compare_sides, require_runs, select
    from clusterbench.report.html import write_report
    from clusterbench.ui import dump_json

    if args.compare and len(args.runs) != 2:
        raise UsageError("--compare needs exactly two selectors", "e.g. clusterbench report baseline jumbo --compare")
    store = Store(args.db, readonly=True)
    selections = [select(store, spec, include_incomplete=args.include_incomplete) for spec in args.runs]
    for sel in selections:
        require_runs(sel, "selector")
    comparison = None
    if args.compare:
        comparison = compare_sides(store, args.runs[0], args.runs[1], include_incomplete=args.include_incomplete)
    done = write_report(store, selections, Path(args.output), comparison=comparison, cost=config.cost_model(),
                        force=args.force)
    ids = list(dict.fromkeys(str(r.id) for sel in selections for r in sel.runs))
    if args.json:
        dump_json({"schema": SCHEMA_VERSION, "report": str(done), "runs": ids,
                   "left_out": [x for sel in selections for x in sel.left_out]})
    else:
        sys.stdout.write(f"report of {len(ids)} run(s): {done}\n")
        from clusterbench.analysis.compare import left_out_text

        for sel in selections:
            if sel.left_out:
                sys.stdout.write(f"{sel.selector}: left out {left_out_text(sel.left_out)} "
                                 "(--include-incomplete includes them)\n")
    return 0
