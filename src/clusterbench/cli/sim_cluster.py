"""clusterbench sim-cluster up|status|hosts|down: the virtual cluster of network namespaces."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from clusterbench.cli.options import json_option, subcommands
from clusterbench.errors import EnvironmentProblem, UsageError

NAME = "sim-cluster"
INTERRUPTED = None


def add_parser(cmds: Any) -> None:
    sim = cmds.add_parser(NAME, help="a virtual cluster of network namespaces on this machine (root)")
    ssub = subcommands(sim, "action")
    sup = ssub.add_parser("up", help="create (or keep) the virtual cluster")
    sup.add_argument("--nodes", type=int, default=2, help="number of nodes (default 2)")
    sup.add_argument("--mtu", type=int, default=1500, help="MTU of every link (default 1500)")
    sup.add_argument("--rate", help="rate limit per node link, as tc writes it (e.g. 1gbit, 100mbit)")
    sup.add_argument("--delay", help="one-way delay per node link (needs netem in the kernel), e.g. 1ms")
    sup.add_argument("--machines", action="store_true",
                     help="every node a machine of its own: its own root filesystem (an overlay), host name "
                     "(node1...), PID namespace and sshd; the head reaches the nodes through real ssh")
    sup.add_argument("--break", dest="breaks", action="append", default=[], metavar="NODE:KIND[=VALUE]",
                     help="with --machines, for tests: make a node differ or fail (no-sshd, password, unknown-key, "
                     "hostname=NAME, hosts-missing=NODE, reverse=NODE, no-compiler, no-mpi, disk=SIZE, version, changed-key, "
                     "hang); repeatable")
    sup.add_argument("--offload", choices=("on", "off"), default="on",
                     help="veth segmentation/receive offloads (default on, Linux's default; 'off' sends "
                     "MTU-sized frames as on a wire, so MTU shows in bandwidth; needs ethtool)")
    for name, text in (("status", "check the cluster against what was recorded (exit 0: up, or no cluster at all; "
                                  "3: a recorded cluster is broken or an earlier one left namespaces)"),
                       ("hosts", "the nodes, for --hosts or a hostfile"), ("down", "remove everything it made")):
        ssub.add_parser(name, help=text)
    for sp in ssub.choices.values():
        json_option(sp)
    ssub.choices["down"].add_argument("--force", action="store_true",
                                      help="also when a job runs inside (its processes are killed and listed); "
                                      "without it, down refuses and lists them")


def handle(args: argparse.Namespace) -> int:
    return ACTIONS[args.action](args)


def up(args: argparse.Namespace) -> int:
    from clusterbench.launch import simcluster as sc
    from clusterbench.ui import dump_json, print_table, write_lines

    c = sc.up(args.nodes, mtu=args.mtu, rate=args.rate, delay=args.delay, offload=args.offload == "on",
              machines=args.machines, breaks=args.breaks)
    doc = c.to_json()
    rows = [[n.name, n.namespace, n.address, str(c.mtu), c.rate or "-"] for n in [c.head, *c.nodes]]
    if args.json:
        dump_json(doc)
    else:
        print_table(rows, ["node", "namespace", "address", "mtu", "rate"])
        write_lines([*(f"note: {note}" for note in c.notes), f"mpirun options: {' '.join(sc.mpirun_args(c))}"])
    return 0


def down(args: argparse.Namespace) -> int:
    from clusterbench.launch import simcluster as sc
    from clusterbench.ui import dump_json, write_lines

    using = sc.processes()  # the cluster has no process of its own: each one is a job's
    if using and not args.force:
        raise UsageError(f"a job is using the virtual cluster: {len(using)} process(es) run inside it "
                         f"({sc.describe_processes(using)})", "wait for it to end, or add --force to kill them")
    removed = sc.down()
    if args.json:
        dump_json({"removed": removed, "killed": using})
    else:
        write_lines([f"removed {len(removed)} namespace(s): {', '.join(removed) or '-'}"])
        if using:
            write_lines([f"killed {len(using)} process(es) of a job that used it:",
                         *(f"  pid {p['pid']} ({p['namespace']}): {p['command']}" for p in using)])
    return 0


def hosts(args: argparse.Namespace) -> int:
    from clusterbench.launch import simcluster as sc
    from clusterbench.ui import dump_json

    hs = sc.hosts()
    if args.json:
        dump_json({"hosts": hs, "host_arg": sc.host_arg(), "mpirun_args": sc.mpirun_args()})
    else:
        sys.stdout.write(sc.hostfile_text())
    return 0


def status(args: argparse.Namespace) -> int:
    from clusterbench.launch import simcluster as sc
    from clusterbench.ui import dump_json, print_table, write_lines

    st = sc.status()
    if args.json:
        dump_json(st)
    else:
        rows = [[n["name"], n["address"], str(n["mtu"]), str(n.get("rate_bps") or "-"), n["state"]]
                for n in ([st["head"]] if st.get("head") else []) + st["nodes"]]
        if not st.get("recorded", True):
            sys.stdout.write("no sim-cluster is up\n")
        else:
            print_table(rows, ["node", "address", "mtu", "rate_bps", "state"])
        write_lines(f"problem: {p}" for p in st["problems"])
    # "no cluster" is an answer, not a failure (scripts read "up" from --json); a broken one is the
    # environment's problem: exit 3 as for every environment problem (it was an undocumented 1)
    return 0 if st["up"] or not st["problems"] else EnvironmentProblem.exit_code


ACTIONS = {"up": up, "down": down, "hosts": hosts, "status": status}
