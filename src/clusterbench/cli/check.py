"""clusterbench check SUITE --baseline TAG: a regression gate (runs a suite, judges every figure
against the baseline with compare's statistics, exits non-zero on a real regression)."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from clusterbench import SCHEMA_VERSION
from clusterbench.check.verdict import EXIT_CANNOT_JUDGE, EXIT_FAIL
from clusterbench.cli.options import host_options, json_option

NAME = "check"
INTERRUPTED = "the finished runs are kept with the check's tag, the interrupted one is marked incomplete; nothing " \
              "was judged and the baseline is unchanged"

EXIT_TEXT = (f"exit codes: 0 pass; {EXIT_FAIL} a figure is significantly worse by at least --min-effect; "
             f"{EXIT_CANNOT_JUDGE} cannot judge (no baseline, too few runs or samples, too noisy to exclude a loss of "
             "--min-effect, a figure with no baseline figure): never a pass; 2 bad input (suite, options, a baseline of another cluster); 3 environment; "
             "4 a kernel failed; 5 the store")


def percent(text: str) -> float:
    try:
        return float(text.strip().rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage like 3% or 3") from None


def add_parser(cmds: Any) -> None:
    from clusterbench.check.suite import DEFAULT_REPEAT, standard_suites

    sub = cmds.add_parser(NAME, help="regression gate: run a suite, judge every figure against a baseline tag",
                          description="Run SUITE (a suite file, or a standard suite: "
                          f"{', '.join(standard_suites())}), every run {DEFAULT_REPEAT} times unless the suite or "
                          "--repeat says otherwise (compare takes the run as the unit of replication: 2 or more a "
                          "side), tag the runs, and compare every figure with the runs tagged TAG. Fails only when "
                          "a figure is significantly worse AND worse by at least --min-effect (see the exit codes below).",
                          epilog=EXIT_TEXT)
    sub.add_argument("suite", metavar="SUITE", help="a suite file (.toml) or a standard suite's name")
    sub.add_argument("--baseline", required=True, metavar="TAG", help="the tag of the baseline's runs")
    host_options(sub)
    sub.add_argument("--min-effect", type=percent, default=3.0, metavar="PCT",
                     help="the smallest loss that fails, in %% (default 3%%)")
    sub.add_argument("--alpha", type=float, default=0.01,
                     help="significance level, p-values adjusted over the figures (default 0.01)")
    sub.add_argument("--repeat", type=int, default=None, metavar="N",
                     help="runs of each suite entry (default: the suite's, else 3; at least 2)")
    sub.add_argument("--tag", default=None, help="tag of this check's runs (default: check-SUITE-UTCTIME)")
    sub.add_argument("--timeout", type=float, default=None, help="seconds before a kernel is killed")
    sub.add_argument("--oversubscribe", action="store_true",
                     help="allow more threads or ranks than PUs (a virtual cluster of more nodes than cpus)")
    sub.add_argument("--junit", metavar="FILE", help="write JUnit XML (one test case per figure), replacing FILE")
    sub.add_argument("--perflog", metavar="FILE", help="append ReFrame-perflog-compatible lines to FILE")
    sub.add_argument("--update-baseline", action="store_true",
                     help="after judging, move TAG from the baseline's runs of this suite to this check's runs")
    sub.add_argument("--allow-different-cluster", action="store_true",
                     help="judge against a baseline measured on other nodes or CPUs (refused by default)")
    sub.add_argument("-v", "--verbose", action="store_true", help="also list every figure that passes")
    json_option(sub, f"print one JSON document (schema {SCHEMA_VERSION}, check_schema)")


def handle(args: argparse.Namespace) -> int:
    from clusterbench import __version__
    from clusterbench.check import junit, perflog, suite as suites
    from clusterbench.check.runner import Options, run_check
    from clusterbench.check.text import lines
    from clusterbench.check.verdict import Figure
    from clusterbench.store import Store
    from clusterbench.ui import dump_json, write_lines

    suite = suites.load(args.suite).with_hosts(args.hosts, args.hostfile)
    opts = Options(args.baseline, args.min_effect, args.alpha, args.repeat, args.tag, args.update_baseline,
                   args.allow_different_cluster, args.timeout, args.oversubscribe)
    _check_outputs(args)
    doc = run_check(Store(args.db), suite, opts, say=lambda s: write_lines([s], sys.stderr))
    figures = [Figure(**f) for f in doc["figures"]]
    info = {"suite": suite.name, "version": suite.version, "baseline": args.baseline, "tag": doc["tag"],
            "timestamp": doc["started"], "hostname": doc["hostname"], "seconds": doc["seconds"],
            "min_effect_pct": args.min_effect, "alpha": args.alpha, "outcome": doc["outcome"]}
    if args.junit:
        from clusterbench.export.writing import write
        write(junit.render(figures, info), args.junit, force=True)
    if args.perflog:
        hosts = args.hosts or doc["hostname"]
        perflog.append(args.perflog, perflog.lines(figures, {**info, "version": __version__, "hosts": hosts,
                                                             "jobids": doc["jobids"]}))
    if args.json:
        dump_json({"schema": SCHEMA_VERSION, **doc})
    else:
        write_lines(lines(doc, verbose=args.verbose))
    return int(doc["exit_code"])


def _check_outputs(args: argparse.Namespace) -> None:
    """--junit and --perflog must be writable places: refused before anything runs."""
    import os

    from clusterbench.errors import UsageError

    for opt, path in (("--junit", args.junit), ("--perflog", args.perflog)):
        if path is None:
            continue
        if not path or os.path.isdir(path):
            raise UsageError(f"{opt} {path!r} is not a file name", f"give {opt} a file to write")
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            raise UsageError(f"{opt} {path}: cannot write in {folder}", "choose a writable folder")
