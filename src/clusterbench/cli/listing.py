"""clusterbench list: the benchmarks, their metrics, units and limits."""
from __future__ import annotations

import argparse
from typing import Any

from clusterbench import SCHEMA_VERSION
from clusterbench.benchmarks import all_benchmarks
from clusterbench.cli.options import json_option

NAME = "list"
INTERRUPTED = "nothing was stored or written"


def add_parser(cmds: Any) -> None:
    json_option(cmds.add_parser(NAME, help="the benchmarks, their metrics, units and limits"))


def handle(args: argparse.Namespace) -> int:
    from clusterbench.ui import dump_json, print_table

    rows, doc = [], {}
    for name, cls in all_benchmarks().items():
        doc[name] = cls.declaration()
        for m in cls.metrics:
            rows.append([name, m.name, m.unit, "higher" if m.higher_is_better else "lower", ",".join(m.limits)])
    if args.json:
        dump_json({"schema": SCHEMA_VERSION, "benchmarks": doc})
    else:
        print_table(rows, ["benchmark", "metric", "unit", "better", "limits"])
    return 0
