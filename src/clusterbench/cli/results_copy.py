"""clusterbench results copy --from A --to B [--merge]: a whole history from one store to another."""
from __future__ import annotations

import argparse
from typing import Any

from clusterbench import SCHEMA_VERSION
from clusterbench.cli.options import json_option


def add_parser(rsub: Any) -> None:
    cp = rsub.add_parser("copy", help="copy every run, tag, fix and figure from one store to another (SQLite file or "
                                      "postgresql://USER@HOST[:PORT]/DB, either way), in one transaction")
    cp.add_argument("--from", dest="source", required=True, metavar="A", help="the store to copy (read only)")
    cp.add_argument("--to", dest="target", required=True, metavar="B",
                    help="the store to copy into (created if absent; refused if it holds runs, unless --merge)")
    cp.add_argument("--merge", action="store_true",
                    help="into a store that holds runs: add only the runs and fixes it lacks (by id)")
    json_option(cp)


def run(args: argparse.Namespace) -> int:
    from clusterbench.store import Store
    from clusterbench.store.copy import copy_store
    from clusterbench.ui import dump_json, write_lines

    source = Store(args.source, readonly=True)
    target = Store(args.target)
    done = copy_store(source, target, merge=args.merge)
    source.close()
    target.close()
    if args.json:
        dump_json({"schema": SCHEMA_VERSION, **done.as_dict()})
    else:
        rows = done.rows
        kept = sum(done.skipped.values())
        write_lines([f"copied {rows.get('runs', 0)} runs ({rows.get('results', 0)} figures, {rows.get('run_tags', 0)} "
                     f"tags, {rows.get('fixes', 0)} fixes) from {done.source} to {done.target}"
                     + (f"; {kept} runs and fixes already there were left as they are" if kept else "")])
    return 0
