"""clusterbench cluster check|install|preflight|run (and `run cluster`, the same as `cluster run`)."""
from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from clusterbench import SCHEMA_VERSION
from clusterbench.cli.options import (JSON_DOCUMENT, allow_root_option, host_options, json_option, mpi_option,
                                      subcommands)
from clusterbench.errors import UsageError
from clusterbench.store import Store

NAME = "cluster"
INTERRUPTED = None

#: the nodes of install, preflight and run when neither --hosts nor --hostfile is given
SLURM_DEFAULT = "the Slurm allocation"

RUN_CLUSTER_HELP = ("the whole cluster characterised in one command, within --budget: preflight, the quick node "
                    "profile on every node, the network matrix, HPL across all nodes, doctor; one tagged set of runs "
                    "(also: clusterbench cluster run)")


def add_parser(cmds: Any) -> None:
    clu = cmds.add_parser(NAME, help="compare the nodes of a cluster")
    csub = subcommands(clu, "action")
    chk = csub.add_parser("check", help="list every difference between nodes that changes results")
    host_options(chk, SLURM_DEFAULT, hostfile=False)
    chk.add_argument("--keep-going", action="store_true", help="compare the hosts that answer; list the others (exit 3 if fewer than two answer)")
    chk.add_argument("--timeout", type=float, default=60.0, help="seconds per host (default 60)")
    chk.add_argument("--remote-python", help="python with clusterbench installed on the hosts (default python3)")
    json_option(chk)
    ins = csub.add_parser("install", help="this clusterbench on every node over ssh (a virtual environment in the "
                          "home directory, no internet or root needed on the nodes), its MPI kernels built there")
    pre = csub.add_parser("preflight", help="can this cluster run MPI? ssh, names, versions, memory, clocks, an MPI "
                          "launch and hello: every problem named, per node, in seconds")
    for sp in (ins, pre):
        host_options(sp, SLURM_DEFAULT)
        json_option(sp, JSON_DOCUMENT)
    ins.add_argument("--no-kernels", action="store_true", help="do not build the MPI kernels on the nodes now "
                     "(they are built at the first run)")
    pre.add_argument("--no-mpi", action="store_true", help="skip the MPI launch and hello")
    mpi_option(pre, "the hello")
    allow_root_option(pre)

    add_run_cluster_parser(csub, "run")


def add_run_cluster_parser(sub: Any, name: str) -> None:
    """`cluster run`, or `run cluster` (``sub``: the sub-commands of cluster or of run)."""
    sp = sub.add_parser(name, help=RUN_CLUSTER_HELP, description=RUN_CLUSTER_HELP)
    host_options(sp, SLURM_DEFAULT)
    sp.add_argument("--budget", default="15m", help="wall time for everything, e.g. 15m, 4m, 1h (default 15m); "
                    "each stage gets a share, HPL's N follows the time left for it")
    sp.add_argument("--tag", help="tag of every run stored (default cluster-YYYYmmdd-HHMM)")
    sp.add_argument("--tune-share", type=float, default=0.0, metavar="FRACTION",
                    help="part of HPL's time for a short tune of NB and grid first (default 0: no tune)")
    sp.add_argument("--oversubscribe", action="store_true", help="virtual cluster: allow more nodes than cpus")
    allow_root_option(sp)
    sp.add_argument("--remote-python", help="python with clusterbench installed on the nodes (default: "
                    "cluster install's, on separate machines; this one on a shared filesystem)")
    json_option(sp, "print one JSON document (run_cluster_schema 1)")


def handle(args: argparse.Namespace) -> int:
    return ACTIONS[args.action](args)


def cluster_hosts(args: argparse.Namespace) -> list[Any]:
    """--hosts or --hostfile as Host objects (or the Slurm allocation's nodes)."""
    from clusterbench.launch import mpi as M

    if args.hosts and args.hostfile:
        raise UsageError("--hosts and --hostfile both given", "give one of them")
    if args.hosts:
        return M.parse_hosts(args.hosts)
    if args.hostfile:
        return M.parse_hostfile(args.hostfile)
    from clusterbench.launch import allocation

    found = allocation.hosts()
    if found:
        return [M.Host(h) for h in found]
    raise UsageError("no nodes given", "give --hostfile FILE (one 'name slots=N' per line) or --hosts node1,node2")


def _hosts_arg(args: argparse.Namespace) -> str | None:
    """The --hosts or --hostfile option as given, to repeat in a hint."""
    return f"--hostfile {shlex.quote(args.hostfile)}" if args.hostfile else \
        f"--hosts {args.hosts}" if args.hosts else None


def install(args: argparse.Namespace) -> int:
    from clusterbench.cluster.install import format_install, install as install_nodes
    from clusterbench.ui import dump_json, write_lines

    doc = install_nodes([h.name for h in cluster_hosts(args)], kernels=not args.no_kernels,
                  say=(lambda s: None) if args.json
                  else (lambda s: write_lines([f"cluster install: {s}"], sys.stderr)))
    if args.json:
        dump_json(doc)
    else:
        write_lines(format_install(doc))
    return 3 if doc["failed"] or doc.get("kernels_error") else 0


def preflight(args: argparse.Namespace) -> int:
    from clusterbench.benchmarks.mpi.common import allow_root_default
    from clusterbench.cluster.preflight import format_preflight, preflight as run_preflight
    from clusterbench.ui import dump_json, write_lines

    repeats = {}
    if args.hostfile:
        from clusterbench.launch.mpi.hosts import hostfile_repeats

        repeats = hostfile_repeats(args.hostfile)
    doc = run_preflight(cluster_hosts(args), mpi=not args.no_mpi, allow_root=args.allow_root or allow_root_default(),
                    mpi_kind=args.mpi, repeats=repeats)
    if args.json:
        dump_json(doc)
    else:
        write_lines(format_preflight(doc, _hosts_arg(args)))
    return 0 if doc["ok"] else 3


def check(args: argparse.Namespace) -> int:
    from clusterbench.launch.mpi.hosts import host_names
    from clusterbench.cluster.check import check as check_nodes
    from clusterbench.ui import dump_json, write_lines

    from clusterbench.launch import allocation

    hosts = list(dict.fromkeys(host_names(args.hosts) if args.hosts else allocation.hosts() or []))
    if len(hosts) < 2:
        raise UsageError("--hosts needs at least two hosts to compare", "e.g. --hosts node1,node2")
    res = check_nodes(hosts, timeout=args.timeout, keep_going=args.keep_going, python=args.remote_python)
    compared = len(res.get("answered") or []) >= 2  # with --keep-going fewer may answer: nothing compared
    if args.json:
        dump_json({"schema": SCHEMA_VERSION, **res})
        return 0 if compared else 3
    from clusterbench.cluster.check import format_check
    write_lines(format_check(res))
    return 0 if compared else 3


def run_cluster(args: argparse.Namespace) -> int:
    """run cluster / cluster run: clusterbench.cluster.characterise, printed."""
    from clusterbench.benchmarks.mpi.common import allow_root_default
    from clusterbench.cluster import characterise as ch
    from clusterbench.ui import dump_json, write_lines

    budget = ch.budget_seconds(args.budget)
    ch.split_budget(budget, args.tune_share)  # bad input refused before anything runs
    hosts = cluster_hosts(args)
    try:
        doc = ch.characterise(hosts, budget_s=budget, tag=args.tag, oversubscribe=args.oversubscribe,
                              allow_root=args.allow_root or allow_root_default(), tune_share=args.tune_share,
                              remote_python=args.remote_python, store=Store(args.db),
                              argv=["clusterbench", *sys.argv[1:]],
                              say=lambda s: write_lines([f"run cluster: {s}"], sys.stderr))
    except ch.NotReady as exc:
        write_lines([f"run cluster: preflight: {ln}" for ln in ch.not_ready_lines(exc.doc, _hosts_arg(args))],
                    sys.stderr)
        raise
    if args.json:
        dump_json(doc)
    else:
        write_lines(ch.format_summary(doc))
    from clusterbench.cluster.fit import missing_lines
    write_lines([f"run cluster: {ln}" for ln in missing_lines(doc["stages"], doc["missing"])], sys.stderr)
    return ch.exit_code(doc)


ACTIONS = {"check": check, "install": install, "preflight": preflight, "run": run_cluster}
