"""clusterbench results list|tag|table|show|place|export: the stored runs."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from clusterbench import SCHEMA_VERSION
from clusterbench.benchmarks import find_benchmark
from clusterbench.cli import results_copy
from clusterbench.cli.options import json_option, note as note_text, positive_int, strlist, subcommands
from clusterbench.errors import UsageError
from clusterbench.store import Store
from clusterbench.store.names import NOTE_LIMIT

NAME = "results"
#: the runs `results list` shows unless --limit or --all says otherwise (the newest)
LIST_DEFAULT = 50
INTERRUPTED = None


def add_parser(cmds: Any) -> None:
    res = cmds.add_parser(NAME, help="stored runs")
    rsub = subcommands(res, "action")
    ls = rsub.add_parser("list", help="list runs")
    json_option(ls)
    many = ls.add_mutually_exclusive_group()
    many.add_argument("--limit", type=positive_int, default=LIST_DEFAULT,
                      help=f"the newest N runs (N >= 1; default {LIST_DEFAULT})")
    many.add_argument("--all", dest="limit", action="store_const", const=None, default=LIST_DEFAULT,
                      help="every run that matches")
    ls.add_argument("--tag", help="only runs carrying this tag")
    ls.add_argument("--benchmark", help="only runs with figures of this benchmark")
    ls.add_argument("--host", help="only runs recorded on this host")
    ls.add_argument("--since", help="only runs started at or after this date (YYYY-MM-DD[THH:MM], UTC)")
    tag = rsub.add_parser("tag", help="add tags to a stored run, --remove some, or set its --note")
    tag.add_argument("run", help="run id, unique prefix, 'last' or 'last~N'")
    tag.add_argument("tags", nargs="*", metavar="TAG")
    tag.add_argument("--remove", action="append", default=[], metavar="TAG", help="remove this tag (repeatable)")
    tag.add_argument("--note", type=note_text, help=f"replace the run's note ('' clears it; at most {NOTE_LIMIT} "
                     "characters)")
    json_option(tag)
    tab = rsub.add_parser("table", help="one metric of one benchmark as a table: rows and columns by parameter")
    tab.add_argument("benchmark")
    tab.add_argument("--metric", help="the metric (default: the benchmark's first)")
    tab.add_argument("--rows", type=strlist, required=True, help="parameters (or tag, host, run) for the rows")
    tab.add_argument("--cols", type=strlist, default=[], help="parameters (or tag, host, run) for the columns")
    tab.add_argument("--runs", help="only these runs (a selector: ids, tags, 'last~1,last'; not empty)")
    tab.add_argument("--agg", choices=("best", "median", "mean", "last"), default="best",
                     help="several figures in a cell: best (default), median, mean or the newest")
    json_option(tab)
    show = rsub.add_parser("show", help="show one run (id, unique prefix, or 'last')")
    show.add_argument("run")
    json_option(show)
    plc = rsub.add_parser("place", help="where a run's HPL/HPCG figures would rank on the Green500, TOP500 and "
                          "HPCG lists (the lists' published figures, as far as clusterbench's data holds them)")
    plc.add_argument("run", nargs="?", default="last", help="run id, unique prefix, 'last' (default) or 'last~N'")
    plc.add_argument("--list", dest="lists", action="append", choices=("green500", "top500", "hpcg"), default=None,
                     help="the list (repeatable; default: every list the run has a figure for)")
    plc.add_argument("--edition", default=None, metavar="YYYY-MM",
                     help="the list's edition, e.g. 2022-06, or 'all' (default: the newest in the data)")
    json_option(plc)
    from clusterbench.export import formats

    exp = rsub.add_parser("export", help="export one run (openmetrics and bundle: several)")
    exp.add_argument("run", help="run id, unique prefix or 'last'; openmetrics and bundle also take a selector: a tag, "
                                 "'last~1,last'")
    exp.add_argument("--format", choices=list(formats()), required=True,
                     help=", ".join(f.help for f in formats().values()))
    exp.add_argument("-o", "--output", help="file; '-' or none: stdout. An existing file needs --force; devices "
                                            "and FIFOs are written directly")
    exp.add_argument("--force", action="store_true", help="overwrite an existing -o file")
    exp.add_argument("--no-timestamps", dest="timestamps", action="store_false",
                     help="openmetrics: no sample timestamps (node_exporter's textfile collector refuses them)")
    imp = rsub.add_parser("import", help="put the runs of a result bundle (results export --format bundle) into the "
                                         "store, all or none")
    imp.add_argument("bundle", metavar="BUNDLE", help="the bundle's file")
    imp.add_argument("--force", action="store_true", help="replace a stored run that has the same id and other content")
    json_option(imp)
    results_copy.add_parser(rsub)


def handle(args: argparse.Namespace) -> int:
    return ACTIONS[args.action](args)


def list_runs(args: argparse.Namespace) -> int:
    from clusterbench.ui import dump_json, print_table, write_lines

    store = Store(args.db, readonly=True)
    if args.benchmark is not None:  # the registry only to check a name given
        from clusterbench.report.compare import check_benchmark
        check_benchmark(store, args.benchmark)
    where = {"tag": args.tag, "benchmark": args.benchmark, "host": args.host, "since": args.since}
    runs = store.list_runs(args.limit, **where)
    # how many matched in all: counted (one indexed COUNT) only when the limit may have cut the listing
    total = len(runs) if args.limit is None or len(runs) < args.limit else max(store.count_runs(**where), len(runs))
    if args.json:
        dump_json({"schema": SCHEMA_VERSION, "runs": runs, "total": total})
        return 0
    print_table([[r.id[:8], r.started[:19], r.status, str(r.results), r.host,
                  ",".join(r.tags), r.command + (f"  # {r.note}" if r.note else "")]
                 for r in runs], ["run", "started", "status", "results", "host", "tags", "command"])
    if total > len(runs):
        write_lines([f"the newest {len(runs)} of {total} runs; all of them: --all (or --limit N for the newest N)"])
    return 0


def tag(args: argparse.Namespace) -> int:
    from clusterbench.ui import dump_json, write_lines

    if not args.tags and not args.remove and args.note is None:
        raise UsageError("results tag needs a TAG, --remove TAG or --note", "e.g. clusterbench results tag last baseline")
    store = Store(args.db)
    run_id = store.tag_run(args.run, add=args.tags, remove=args.remove, note=args.note)
    run = store.get_run(run_id)
    if args.json:
        dump_json({"schema": SCHEMA_VERSION, "run": run.id, "tags": run.tags, "note": run.note})
    else:
        write_lines([f"run {run_id[:8]}: tags {', '.join(run.tags) or '(none)'}"
                     + (f"; note: {run.note}" if run.note else "")])
    return 0


def table(args: argparse.Namespace) -> int:
    from clusterbench.analysis.table import format_table, pivot
    from clusterbench.ui import dump_json, print_table

    store = Store(args.db, readonly=True)
    cls = find_benchmark(args.benchmark)
    if cls is None:
        raise UsageError(f"unknown benchmark '{args.benchmark}'", "see 'clusterbench list'")
    metric = args.metric or cls.metrics[0].name
    if metric not in {m.name for m in cls.metrics}:
        raise UsageError(f"{args.benchmark} has no metric '{metric}'",
                         f"use one of {', '.join(m.name for m in cls.metrics)}")
    run_ids = store.select_runs(args.runs) if args.runs is not None else None  # '' is refused, not "all"
    pivoted = pivot(store.figures(args.benchmark, metric, run_ids, full=False), args.rows, args.cols, args.agg)
    if args.json:
        dump_json({"schema": SCHEMA_VERSION, "table": pivoted.as_dict()})
    else:
        lines = format_table(pivoted)
        sys.stdout.write(f"{pivoted.benchmark} {pivoted.metric} ({pivoted.unit}, {pivoted.agg} of each cell, "
                         f"{'higher' if pivoted.higher_is_better else 'lower'} is better)\n")
        print_table(lines[1:], lines[0])
    return 0


def place(args: argparse.Namespace) -> int:
    from clusterbench.report.placement import format_lines, place_run
    from clusterbench.ui import dump_json, write_lines

    store = Store(args.db, readonly=True)
    run = store.get_run(args.run)
    entries = place_run(store.results(run.id), lists=args.lists, edition=args.edition)
    if args.json:
        dump_json({"schema": SCHEMA_VERSION, "run": run.id, "placements": entries})
    else:
        write_lines([f"run {run.id[:8]} ({run.host}, {run.started[:19]})", *format_lines(entries)])
    return 0


def show(args: argparse.Namespace) -> int:
    from clusterbench.ui import dump_json, print_results

    store = Store(args.db, readonly=True)
    run = store.get_run(args.run)
    results = store.results(run.id)
    if args.json:
        dump_json({"schema": SCHEMA_VERSION, "run": run, "results": results})
    else:
        from clusterbench.text import run_command
        from clusterbench.ui import write_lines

        # the command shell-quoted from its argv (a paste runs it, not a $(...) in its note); every
        # stored text made safe for a terminal (write_lines, print_results)
        write_lines([f"run {run.id}  {run.status}  {run.started} .. {run.ended or '-'}",
                     f"host {run.host}  command: {run_command(run)}"])
        if run.tags or run.note:
            write_lines([f"tags {', '.join(run.tags) or '(none)'}"
                         + (f"; note: {run.note}" if run.note else "")])
        if run.error:
            write_lines([f"error: {run.error}"])
        print_results(results)
        write_lines(f"note: {note}" for note in run.notes or [])
        write_lines(f"warning [{w['code']}]: {w['message']}; {w['remedy']}" for w in run.warnings or [])
    return 0


def export(args: argparse.Namespace) -> int:
    from clusterbench.export import export as export_runs, get_format

    store = Store(args.db, readonly=True)
    if get_format(args.format).several:
        runs = store.get_runs(store.select_runs(args.run))
    else:
        runs = [store.get_run(args.run)]
    export_runs([(run, store.results(run.id)) for run in runs], args.format, args.output, force=args.force,
                timestamps=args.timestamps)
    return 0


def import_bundle(args: argparse.Namespace) -> int:
    from clusterbench.bundle import read_file
    from clusterbench.bundle.importing import import_bundle as put
    from clusterbench.ui import dump_json, write_lines

    doc = read_file(args.bundle)  # refused before the store is opened
    done = put(Store(args.db), doc, force=args.force)
    if args.json:
        dump_json({"schema": SCHEMA_VERSION, **done})
    else:
        write_lines([f"imported run {i[:8]}" + (" (replaced the stored one)" if i in done["replaced"] else "")
                     for i in done["runs"]])
    return 0


ACTIONS = {"list": list_runs, "tag": tag, "table": table, "show": show, "place": place, "export": export,
           "import": import_bundle,
           "copy": results_copy.run}
