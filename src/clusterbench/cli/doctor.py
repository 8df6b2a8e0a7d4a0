"""clusterbench doctor: what holds this node or cluster back: findings, fixes, undo."""
from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from clusterbench.cli.options import allow_root_option, host_options, json_option, positive_int
from clusterbench.errors import UsageError
from clusterbench.store import Store

NAME = "doctor"
INTERRUPTED = "finished results were kept, the run is marked incomplete"


def add_parser(cmds: Any) -> None:
    doc = cmds.add_parser(NAME, help="what holds this node or cluster back: findings, fixes, undo (read-only)")
    host_options(doc, "the Slurm allocation's nodes inside one, else this machine")
    doc.add_argument("--timeout", type=float, default=60.0, help="seconds per host (default 60)")
    doc.add_argument("--remote-python", help="python with clusterbench installed on the hosts (default python3)")
    json_option(doc, "print one JSON document (doctor_schema 1)")
    doc.add_argument("--during", choices=("mpi", "hpl", "none"), default="none",
                     help="also read NET_RX/NET_TX softirqs per CPU on every node over a network load "
                     "(mpi: run bw over TCP between the first two hosts; hpl: run hpl --n 6000)")
    allow_root_option(doc, "let Open MPI run as root (--during, --verify)")
    act = doc.add_mutually_exclusive_group()
    act.add_argument("--fix", metavar="RULE", help="apply RULE's fix on every node where it fires (needs --yes); "
                     "the previous values are recorded for --undo")
    act.add_argument("--undo", metavar="FIX_ID", help="restore what a recorded fix changed")
    act.add_argument("--verify", metavar="RULE", help="A/B: --benchmark before, RULE's fix, after; compare; "
                     "keep or undo the fix (--keep)")
    act.add_argument("--fixes", action="store_true", help="list the recorded fixes")
    doc.add_argument("--yes", action="store_true", help="really change the nodes (--fix, --verify)")
    doc.add_argument("--benchmark", metavar="\"run ...\"", help='for --verify: the run command, e.g. "run hpl --n 20000"')
    doc.add_argument("--repeat", type=positive_int, default=3, help="for --verify: runs a side (default 3)")
    doc.add_argument("--keep", choices=("if-better", "always", "never"), default="if-better",
                     help="for --verify: keep the fix if-better (a figure significantly better, none worse; default), "
                     "always, or never")


def handle(args: argparse.Namespace) -> int:
    from clusterbench import doctor
    from clusterbench.ui import dump_json, write_lines

    def out(doc: dict, lines: list[str]) -> int:
        if args.json:
            dump_json({"doctor_schema": doctor.DOCTOR_SCHEMA, **doc})
        else:
            write_lines(lines)
        return 0

    from clusterbench.launch import allocation

    hosts = doctor.hosts_from(args.hosts, args.hostfile) or allocation.hosts()
    if args.benchmark and not args.verify:
        raise UsageError("--benchmark is for --verify", "add --verify RULE, or drop --benchmark")
    if args.fixes:
        fixes = Store(args.db, readonly=True).fixes()
        return out({"fixes": fixes}, doctor.format_fixes(fixes))
    for opt in ("fix", "undo", "verify"):
        if getattr(args, opt) is not None and not getattr(args, opt).strip():
            raise UsageError(f"--{opt} is empty", "give a fix id (see 'clusterbench doctor --fixes')" if opt == "undo"
                             else "give a rule, e.g. --fix mtu-mismatch (see 'clusterbench doctor')")
    if args.undo:
        res = doctor.undo_fix(Store(args.db), args.undo)
        return out({"fix": res}, doctor.format_fix(res, applied=True))
    if args.fix:
        plan = doctor.plan_fix(args.fix, hosts, timeout=args.timeout, python=args.remote_python)
        if not args.yes or not plan["actions"]:
            return out({"plan": plan, "applied": False}, doctor.format_fix(plan, applied=False))
        res = doctor.apply_fix(plan, Store(args.db))
        return out({"fix": res, "applied": True}, doctor.format_fix(res, applied=True))
    if args.verify:
        if not args.benchmark:
            raise UsageError("--verify needs --benchmark", 'e.g. --benchmark "run hpl --n 20000"')
        from clusterbench.cli import check_command_line

        # the whole command line checked before any run, not only its benchmark's name
        check_command_line(doctor.benchmark_argv(args.benchmark), f"--benchmark {shlex.quote(args.benchmark)}")
        if not args.yes:
            plan = doctor.plan_fix(args.verify, hosts, timeout=args.timeout, python=args.remote_python)
            return out({"plan": plan, "applied": False}, doctor.format_fix(plan, applied=False))
        from clusterbench.report.compare import format_comparison

        res = doctor.verify_fix(args.verify, args.benchmark, Store(args.db), hosts, repeat=args.repeat, keep=args.keep,
                                allow_root=args.allow_root, timeout=args.timeout, python=args.remote_python,
                                say=lambda s: write_lines([f"doctor --verify: {s}"], sys.stderr))
        d = res["decision"]
        lines = [*format_comparison(res["comparison"]).rstrip("\n").split("\n"), "",
                 f"fix {res['fix']['id']}: {'kept' if d['kept'] else 'undone'} (--keep {d['keep']}: "
                 f"{d['better']} figure(s) significantly better, {d['worse']} worse)"]
        if d["kept"]:
            lines.append(f"undo it later with: clusterbench doctor --undo {res['fix']['id']}")
        return out(res, lines)
    res = doctor.diagnose(hosts, timeout=args.timeout, python=args.remote_python, during=args.during,
                          allow_root=args.allow_root, db=args.db)
    if args.json:
        dump_json(res)
    else:
        write_lines(doctor.format_doctor(res))
    return 0  # findings are not errors
