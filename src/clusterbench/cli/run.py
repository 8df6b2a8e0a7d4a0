"""clusterbench run BENCHMARK: run a benchmark and store its results (`run cluster`: see cluster)."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from clusterbench.benchmarks import all_benchmarks
from clusterbench.cli import cluster
from clusterbench.cli.options import NOT_STORED, add_param, common_run_options, subcommands
from clusterbench.errors import ClusterbenchError, UsageError
from clusterbench.store import Store

NAME = "run"
INTERRUPTED = "finished results were kept, the run is marked incomplete"


def add_parser(cmds: Any) -> None:
    run = cmds.add_parser(NAME, help="run a benchmark and store its results")
    benches = subcommands(run, "benchmark", metavar="BENCHMARK")
    for name, cls in all_benchmarks().items():
        sub = benches.add_parser(name, aliases=list(cls.aliases), help=cls.describe(), description=cls.describe())
        common_run_options(sub)
        for p in cls.params:
            add_param(sub, p)

    # not a benchmark: the whole cluster characterised, the same command as `cluster run`
    cluster.add_run_cluster_parser(benches, "cluster")


def handle(args: argparse.Namespace) -> int:
    return NOT_BENCHMARKS.get(args.benchmark, run_benchmark)(args)


def run_benchmark(args: argparse.Namespace) -> int:
    from clusterbench import session
    from clusterbench.progressbar import RichProgress
    from clusterbench.ui import dump_json, print_results, print_summary, write_lines

    from clusterbench.benchmarks import ALIASES
    from clusterbench.benchmarks.base import Composite

    args.benchmark = ALIASES.get(args.benchmark, args.benchmark)  # an old name still runs
    cls = all_benchmarks()[args.benchmark]
    is_suite = issubclass(cls, Composite)
    given = {p.name: getattr(args, p.name) for p in cls.params if getattr(args, p.name, None) is not None}
    store = None if args.no_store else Store(args.db)
    use_bar = sys.stderr.isatty() and not args.json
    progress = RichProgress() if use_bar else None
    argv = ["clusterbench", *sys.argv[1:]]
    kwargs = dict(profile=args.profile or "default", store=store, use_store=not args.no_store, argv=argv,
                  timeout=args.timeout, oversubscribe=args.oversubscribe, progress=progress, tags=args.tags,
                  note=args.note, power=args.power, watts=args.watts, power_interval=args.power_interval)
    try:
        if progress is not None:
            with progress:
                report = session.run([args.benchmark], {args.benchmark: given}, **kwargs)  # type: ignore[arg-type]
        else:
            report = session.run([args.benchmark], {args.benchmark: given}, **kwargs)  # type: ignore[arg-type]
    except (ClusterbenchError, KeyboardInterrupt) as exc:
        with session.shielded(discard=True):  # a second Ctrl-C must not swallow what was kept
            last = getattr(exc, "report", None)
            shown = bool(last and last.results and not args.json)
            if shown:
                print_results(last.results)
            kept = _kept(store, last.run.id) if last and store is not None else None
            if kept:  # a run that kept no figure: the error's line alone (compare and report leave it out)
                sys.stderr.write(f"clusterbench: run {last.run.id} kept {kept}, marked incomplete\n")
            if store is None and isinstance(exc, KeyboardInterrupt):  # INTERRUPTED speaks of a stored run
                exc.outcome = NOT_STORED + ("; the finished results are shown above" if shown else "")  # type: ignore[attr-defined]
        raise
    if args.json:
        doc = report.document()
        if is_suite:
            from clusterbench.benchmarks import summarize_results
            doc["summary"] = summarize_results(report.results)
        dump_json(doc)
    else:
        results = report.results
        if is_suite and not getattr(args, "verbose", False) and print_summary(results):
            ref = (f"clusterbench results show {report.run.id[:8]} (or --verbose)" if store is not None
                   else "rerun with --verbose")
            benches = len({r.benchmark for r in results})
            write_lines([f"{len(results)} figures from {benches} benchmark{'s' if benches != 1 else ''}; "
                         f"every figure's row: {ref}"])
        else:
            print_results(results)
            if is_suite:
                print_summary(results)
        write_lines(f"note: {note}" for note in report.run.notes or [])
        write_lines(f"warning [{w['code']}]: {w['message']}; {w['remedy']}" for w in report.run.warnings or [])
        if report.run.energy:
            from clusterbench.energy.text import energy_lines
            write_lines(energy_lines(report.run.energy, report.results))
            write_lines(_cost_lines(report))
        if store is not None:
            write_lines([f"run {report.run.id} stored in {store.name}"])
    return 0


#: `run` sub-commands that are not benchmarks, and their handlers
NOT_BENCHMARKS = {"cluster": cluster.run_cluster}


def _cost_lines(report: Any) -> list[str]:
    """Per-price figures and the energy cost of a metered run, when [cost] is configured (a bad [cost]
    table is one warning line here: the run is already stored)."""
    from clusterbench import config
    from clusterbench.report.energy import cost_lines, energy_cost

    try:
        model = config.cost_model()
    except UsageError as exc:
        return [f"warning [cost]: {exc}"]
    return cost_lines(energy_cost([report.run], report.results, model))


def _kept(store: Store, run_id: str) -> str | None:
    """How many results the store really holds for the run (a full disk may have refused some); None
    when it holds none."""
    try:
        n = store.count_results(run_id)
        return f"{n} result(s)" if n else None
    except ClusterbenchError:
        return "an unknown number of results (the store cannot be read)"
