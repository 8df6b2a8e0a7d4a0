"""clusterbench tune hpl|coll: search a benchmark's parameters within a time budget."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from clusterbench.benchmarks import all_benchmarks
from clusterbench.cli.options import add_param, intlist, json_option, strlist, subcommands, tag_options
from clusterbench.session import DEFAULT_TIMEOUT
from clusterbench.store import Store
from clusterbench.text import terminal_text

NAME = "tune"
INTERRUPTED = "finished trials were kept, the run is marked incomplete"

#: hpl's own parameters that tune hpl passes to every trial
HPL_BASE = ("hosts", "hostfile", "openblas_coretype", "transport", "engine", "seed", "allow_root")
#: the collective benchmark's own parameters that tune coll passes to every launch
COLL_BASE = ("ranks", "hosts", "hostfile", "mpi", "transport", "allow_root")


def add_parser(cmds: Any) -> None:
    tune = cmds.add_parser(NAME, help="search a benchmark's parameters within a time budget (every trial stored)")
    tsub = subcommands(tune, "target")
    th = tsub.add_parser("hpl", help="NB x grid x topology (x BLAS): dgemm against NB, short runs, confirmation at N")
    th.add_argument("--budget", default="20m", help="wall time for the whole tune, e.g. 20m, 90s, 1h (default 20m)")
    size = th.add_mutually_exclusive_group()
    size.add_argument("--mem", type=float, default=0.8, help="N from this fraction of MemAvailable (default 0.8)")
    size.add_argument("--n", type=int, help="matrix order N")
    th.add_argument("--nb-list", type=intlist, help="NB candidates (default 32,64,96,...,512)")
    th.add_argument("--topologies", type=strlist, default=["pure", "hybrid"], help="pure,hybrid (default both)")
    th.add_argument("--blas-list", type=strlist, help="BLAS libraries (default: openblas, blis, mkl where installed)")
    th.add_argument("--top", type=int, default=3, help="configurations confirmed at full N (default 3)")
    th.add_argument("--no-resume", action="store_true", help="measure again what this tune already stored")
    for opt in HPL_BASE:
        p = next(x for x in all_benchmarks()["hpl"].params if x.name == opt)
        add_param(th, p)
    th.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds before one trial is killed")
    th.add_argument("--oversubscribe", action="store_true", help="allow more ranks than cores")
    json_option(th, "print the tune as one JSON document")
    tag_options(th)
    add_coll_parser(tsub)


def add_coll_parser(tsub: Any) -> None:
    from clusterbench.benchmarks.mpi.coll import OPS

    tc = tsub.add_parser("coll", help="the MPI's own collective algorithms per message size: interleaved rounds "
                         "against the default, verified; writes Open MPI's rules file or MPICH's selection "
                         "file (its CVARs where that cannot be built)")
    tc.add_argument("--op", required=True, help=f"the collective: {', '.join(OPS)}")
    tc.add_argument("--budget", default="10m", help="wall time for the whole tune, e.g. 10m, 90s (default 10m)")
    tc.add_argument("--sizes", type=intlist, help="message sizes in bytes, OSU's convention (default: the op's)")
    tc.add_argument("--algorithms", type=strlist, help="candidates, ids or names (default: every one the MPI has)")
    tc.add_argument("--output", help="the file written (default tune-coll-OP.rules for Open MPI, .json for "
                    "MPICH's selection file, .env for its CVARs)")
    for opt in COLL_BASE:
        p = next(x for x in all_benchmarks()["allreduce"].params if x.name == opt)
        add_param(tc, p)
    tc.add_argument("--time-per-size", type=float, default=None,
                    help="seconds of timed iterations per size in each launch (default 0.02)")
    tc.add_argument("--max-rounds", type=int, default=30, help="interleaved rounds at most per phase (default 30)")
    tc.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds before one launch is killed")
    tc.add_argument("--oversubscribe", action="store_true", help="allow more ranks than cores")
    json_option(tc, "print the tune as one JSON document")
    tag_options(tc)


def handle(args: argparse.Namespace) -> int:
    return TARGETS[args.target](args)


def tune_hpl(args: argparse.Namespace) -> int:
    from clusterbench.tuning import hpl as tuner
    from clusterbench.ui import dump_json, write_text

    space = tuner.Space(nbs=args.nb_list or tuner.DEFAULT_NBS, topologies=args.topologies, blas=args.blas_list)
    base = {k: getattr(args, k) for k in HPL_BASE}

    def progress(ev: dict) -> None:
        t = ev.get("trial")
        if args.json or ev["event"] not in ("done", "failed", "reused") or t is None:
            return
        what = f"{t.value:.2f} Gflop/s" if t.value else (t.note or "")[:80]
        sys.stderr.write(terminal_text(f"[{ev['elapsed_s']:6.0f} s] {ev['event']:7s} {t.key}: {what}") + "\n")

    report = tuner.tune(space, args.n, tuner.parse_budget(args.budget), Store(args.db), mem=args.mem, base=base,
                        resume=not args.no_resume, progress=progress, top_k=args.top, timeout=args.timeout,
                        oversubscribe=args.oversubscribe, argv=["clusterbench", *sys.argv[1:]], tags=args.tags,
                        note=args.note)
    if args.json:
        dump_json(report.document())
    else:
        write_text(tuner.format_report(report))
    return 0 if report.best is not None else 4


def tune_coll(args: argparse.Namespace) -> int:
    from clusterbench.tuning import coll as tuner
    from clusterbench.ui import dump_json, write_text

    base = {k: getattr(args, k) for k in COLL_BASE}
    base["time_budget"] = args.time_per_size

    def progress(ev: dict) -> None:
        if args.json:
            return
        sys.stderr.write(terminal_text(f"[{ev['elapsed_s']:6.0f} s] {ev['phase']} round {ev['round']}: "
                                       f"{ev['undecided']}/{ev['sizes']} size(s) undecided, {ev['active']} "
                                       f"setting(s), ETA {ev['eta_s']:.0f} s") + "\n")

    report = tuner.tune(args.op, budget_s=args.budget, base=base, sizes=args.sizes, algorithms=args.algorithms,
                        output=args.output, store=Store(args.db), timeout=args.timeout,
                        oversubscribe=args.oversubscribe, progress=progress, argv=["clusterbench", *sys.argv[1:]],
                        tags=args.tags, note=args.note, max_rounds=args.max_rounds)
    if args.json:
        dump_json(report.document())
    else:
        write_text(tuner.format_report(report))
    return 0 if report.runs else 4  # every launch failed: nothing measured


TARGETS = {"hpl": tune_hpl, "coll": tune_coll}
