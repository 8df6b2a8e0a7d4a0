"""clusterbench sweep node|network: every node or every link at once: outlier nodes, slow links."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from clusterbench.benchmarks import all_benchmarks
from clusterbench.cli.options import NOT_STORED, allow_root_option, host_options, json_option, mpi_option, subcommands, tag_options
from clusterbench.errors import UsageError
from clusterbench.store import Store

NAME = "sweep"
INTERRUPTED = "finished results were kept, the run is marked incomplete"

#: the nodes of a sweep when neither --hosts nor --hostfile is given
SLURM_DEFAULT = "the Slurm allocation"


def add_parser(cmds: Any) -> None:
    swp = cmds.add_parser(NAME, help="every node or every link at once: outlier nodes, slow links")
    swsub = subcommands(swp, "action")
    # -- sweep node (owner: clusterbench.sweep.node) --
    swn = swsub.add_parser("node", help="the quick node profile (or one benchmark) on every node at once, "
                           "one launcher job; outlier nodes per metric (median and MAD)")
    host_options(swn, SLURM_DEFAULT)
    swn.add_argument("--benchmark", default=None, metavar='"NAME [OPTIONS]"',
                     help="one node benchmark instead of the quick node profile, with its run options, "
                     'e.g. "peak --seconds 0.3" (quick profile unless --full is among them)')
    mpi_option(swn)
    allow_root_option(swn)
    swn.add_argument("--remote-python", help="python with clusterbench installed on the nodes (default: this one, "
                     "which needs a shared filesystem; or $CLUSTERBENCH_REMOTE_PYTHON)")
    swn.add_argument("--node-cpus", action="append", default=[], metavar="NODE=CPUS",
                     help="virtual cluster: the cpus of a node, e.g. cbsim-n1=0 (repeatable; default one cpu each, "
                     "round robin)")
    swn.add_argument("--oversubscribe", action="store_true",
                     help="virtual cluster: allow more nodes than cpus (the nodes share cpus, busy loops even the "
                     "shares out, figures are per share; refused without it)")
    swn.add_argument("--timeout", type=float, default=None, help="seconds for the whole sweep (default 900)")
    swn.add_argument("--lost-after", type=float, default=None, metavar="S",
                     help="seconds a node's agent may send nothing (its figures, its beat every second) before "
                     "the node is taken for lost and the others go on (default 10; raise it on a network "
                     "that stalls)")
    swn.add_argument("--no-store", action="store_true", help="do not store the figures")
    json_option(swn, "print one JSON document (sweep_schema 1)")
    tag_options(swn)
    # -- end sweep node --
    # -- sweep network (owner: clusterbench.sweep.network) --
    swk = swsub.add_parser("network", help="latency and bandwidth of every pair of nodes (n-1 rounds, each node "
                           "in one pair at a time); slow links and slow nodes")
    host_options(swk, SLURM_DEFAULT)
    mpi_option(swk)
    allow_root_option(swk)
    swk.add_argument("--transport", default=None, help="MPI transport between nodes (as for run pingpong)")
    swk.add_argument("--pair-budget", type=float, default=None,
                     help="seconds each pair measures (default 1; a round takes about this long)")
    swk.add_argument("--bw-size", type=int, default=None, help="bandwidth message size in bytes (default 4194304)")
    swk.add_argument("--passes", type=int, default=None,
                     help="run the tournament N times, keep each pair's best pass (default 1)")
    swk.add_argument("--remeasure", type=float, default=None,
                     help="measure again the pairs more than this factor from the best pair, before judging them "
                          "(default 1.15; 0: off)")
    swk.add_argument("--oversubscribe", action="store_true",
                     help="allow more nodes than cores of this machine (a virtual cluster)")
    swk.add_argument("--timeout", type=float, default=None, help="seconds for the whole sweep")
    swk.add_argument("--no-store", action="store_true", help="do not store the figures")
    json_option(swk, "print one JSON document (sweep_schema 2)")
    tag_options(swk)
    # -- end sweep network --


def handle(args: argparse.Namespace) -> int:
    try:
        return ACTIONS[args.action](args)
    except KeyboardInterrupt as exc:
        if getattr(args, "no_store", False):  # INTERRUPTED speaks of a stored run
            exc.outcome = NOT_STORED  # type: ignore[attr-defined]
        raise


# -- node (owner: clusterbench.sweep.node) --
def node(args: argparse.Namespace) -> int:
    import shlex

    from clusterbench import doctor
    from clusterbench.benchmarks import ALIASES
    from clusterbench.cli import parser
    from clusterbench.sweep import node as sweep_node
    from clusterbench.progressbar import RichProgress
    from clusterbench.ui import dump_json, write_lines

    hosts = doctor.hosts_from(args.hosts, args.hostfile)
    name, given, profile = None, {}, "quick"
    if args.benchmark is not None:
        words = shlex.split(args.benchmark)
        if not words:
            raise UsageError("--benchmark is empty", 'give a node benchmark, e.g. --benchmark "peak --seconds 0.3"')
        name = ALIASES.get(words[0], words[0])
        if name not in sweep_node.node_benchmarks():
            raise UsageError(f"'{words[0]}' is not a node benchmark",
                             f"choose from {', '.join(sweep_node.node_benchmarks())}")
        ns = parser().parse_args(["run", name, *words[1:]])  # its own options, checked as `run` checks them
        given = {p.name: getattr(ns, p.name) for p in all_benchmarks()[name].params
                 if getattr(ns, p.name, None) is not None}
        profile = ns.profile or "quick"
    node_cpus = sweep_node.parse_node_cpus(args.node_cpus)
    store = None if args.no_store else Store(args.db)
    progress = RichProgress() if sys.stderr.isatty() and not args.json else None
    kwargs = dict(given=given, profile=profile, mpi=args.mpi, allow_root=args.allow_root, timeout=args.timeout,
                  store=store, use_store=not args.no_store, python=args.remote_python,
                  node_cpus=node_cpus, tags=args.tags, note=args.note, oversubscribe=args.oversubscribe,
                  lost_after=args.lost_after, argv=["clusterbench", *sys.argv[1:]], progress=progress)
    if progress is not None:
        with progress:
            doc = sweep_node.sweep_node(hosts, name, **kwargs)  # type: ignore[arg-type]
    else:
        doc = sweep_node.sweep_node(hosts, name, **kwargs)  # type: ignore[arg-type]
    if args.json:
        dump_json(doc)
    else:
        write_lines(sweep_node.format_sweep_node(doc))
    return 4 if doc["failed"] else 0
# -- end node --


# -- network (owner: clusterbench.sweep.network) --
def network(args: argparse.Namespace) -> int:
    from clusterbench import doctor
    from clusterbench.sweep import network as sweep_network
    from clusterbench.ui import dump_json, write_lines

    from clusterbench.launch import allocation

    hosts = doctor.hosts_from(args.hosts, args.hostfile) or allocation.hosts()
    sweep_network.check_hosts(hosts)
    doc = sweep_network.sweep_network(
        hosts, pair_budget=args.pair_budget, bw_size=args.bw_size, passes=args.passes, remeasure=args.remeasure,
        mpi=args.mpi,
        transport=args.transport, allow_root=args.allow_root, oversubscribe=args.oversubscribe, timeout=args.timeout,
        store=None if args.no_store else Store(args.db), use_store=not args.no_store, tags=args.tags,
        note=args.note, argv=["clusterbench", *sys.argv[1:]])
    if args.json:
        dump_json(doc)
    else:
        write_lines(sweep_network.format_sweep_network(doc))
    return 0
# -- end network --


ACTIONS = {"node": node, "network": network}
