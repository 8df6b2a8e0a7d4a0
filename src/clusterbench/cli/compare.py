"""clusterbench compare A B: did a change help? Two sides of runs, figure by figure, with statistics."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from clusterbench import SCHEMA_VERSION
from clusterbench.cli.options import JSON_DOCUMENT, json_option
from clusterbench.errors import UsageError
from clusterbench.store import Store

NAME = "compare"
INTERRUPTED = "nothing was stored or written"

#: `compare --fail-if-worse` found a significant regression (apart from the error codes 2-5)
EXIT_WORSE = 6


def add_parser(cmds: Any) -> None:
    cmp_ = cmds.add_parser(NAME, help="did a change help? two sides of runs, figure by figure, with statistics",
                           description="Compare two sides (each a run id, unique prefix, tag, 'last', 'last~N', or "
                           "several joined by commas; a tag pools all its runs). Only complete runs are pooled: a run "
                           "still running or left incomplete (interrupted, killed, a kernel failed) is left out and "
                           "named, unless --include-incomplete.")
    cmp_.add_argument("a", metavar="A", help="the baseline side")
    cmp_.add_argument("b", metavar="B", help="the changed side")
    cmp_.add_argument("--metric", help="only this metric")
    cmp_.add_argument("--benchmark", help="only this benchmark")
    cmp_.add_argument("--min-effect", type=float, default=None, metavar="PCT",
                      help="smallest change in %% called significant, 0 <= PCT < 100 (default: the method's 1)")
    cmp_.add_argument("--fail-if-worse", type=float, default=None, metavar="PCT",
                      help=f"exit {EXIT_WORSE} when a figure is significantly worse by more than PCT %%, 0 <= PCT < 100")
    cmp_.add_argument("--include-incomplete", action="store_true",
                      help="also pool runs that are still running or incomplete (left out and named by default)")
    cmp_.add_argument("--all", action="store_true", help="also list the figures with no significant difference")
    cmp_.add_argument("--per-dollar", metavar="PRICE_A,PRICE_B", default=None,
                      help="compare performance for cost (Carver 2014, ch. 6): each figure per unit of the price of its side's "
                      "cluster (rate/price, 1/(time*price) for times); currency from [cost] currency in the config")
    json_option(cmp_, JSON_DOCUMENT)


def handle(args: argparse.Namespace) -> int:
    from clusterbench.report.compare import compare_sides, format_comparison
    from clusterbench.ui import dump_json

    for opt, value, eg in (("--fail-if-worse", args.fail_if_worse, 5), ("--min-effect", args.min_effect, 1)):
        if value is not None and not 0 <= value < 100:
            raise UsageError(f"{opt} {value:g} is not a percentage from 0 up to (not including) 100",
                             f"e.g. {opt} {eg}")
    prices = None
    currency = ""
    if args.per_dollar is not None:
        from clusterbench import config

        try:
            prices = tuple(float(x) for x in args.per_dollar.split(","))
        except ValueError:
            prices = ()
        if len(prices) != 2 or not all(0 < p < float("inf") for p in prices):
            raise UsageError(f"--per-dollar {args.per_dollar} is not two positive prices",
                             "give the price of A's cluster and of B's, e.g. --per-dollar 600,2400")
        currency = config.cost_model().currency
    doc = compare_sides(Store(args.db, readonly=True), args.a, args.b, benchmark=args.benchmark, metric=args.metric,
                        min_effect=args.min_effect, prices=prices, currency=currency,  # type: ignore[arg-type]
                        include_incomplete=args.include_incomplete)
    worse = args.fail_if_worse is not None and doc["worst_change_pct"] is not None \
        and doc["worst_change_pct"] < -args.fail_if_worse
    doc["fail_if_worse"] = {"pct": args.fail_if_worse, "failed": worse} if args.fail_if_worse is not None else None
    if args.json:
        dump_json({"schema": SCHEMA_VERSION, **doc})
    else:
        sys.stdout.write(format_comparison(doc, show_all=args.all))
        if worse:
            sys.stdout.write(f"worse by more than {args.fail_if_worse:g}% (--fail-if-worse): exit {EXIT_WORSE}\n")
    return EXIT_WORSE if worse else 0
