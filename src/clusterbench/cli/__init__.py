"""The command line: parse, call the library, print. No measuring logic lives here."""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from clusterbench import SCHEMA_VERSION, __version__
from clusterbench.benchmarks import all_benchmarks
from clusterbench.benchmarks.base import Param
from clusterbench.errors import ClusterbenchError, EnvironmentProblem, UsageError
from clusterbench.session import DEFAULT_TIMEOUT
from clusterbench.store import Store
from clusterbench.store.db import NOTE_LIMIT, check_note
from clusterbench.text import terminal_text


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors that name the fix."""

    #: while set, a parse error is raised as a UsageError prefixed with this (a command line given as
    #: an option's value, e.g. doctor --verify --benchmark "run ...", checked before anything runs)
    nested: str | None = None

    def error(self, message: str) -> NoReturn:
        if _Parser.nested is not None:
            raise UsageError(f"{_Parser.nested}: {message}", f"see '{self.prog} --help'")
        sys.stderr.write(f"clusterbench: error: {terminal_text(message)}; see '{self.prog} --help'\n")
        raise SystemExit(2)


def check_command_line(argv: Sequence[str], what: str) -> argparse.Namespace:
    """Parse ``clusterbench ARGV`` as the command line would, without running it: a bad option or
    value is a UsageError naming ``what`` (the option that carried the command line)."""
    _Parser.nested = what
    try:
        return build_parser().parse_args(list(argv))
    except SystemExit:  # --help or --version inside the nested command line
        raise UsageError(f"{what}: {shlex.join(argv)} is not a command to run", "drop --help/--version") from None
    finally:
        _Parser.nested = None


def _intlist(text: str) -> list[int]:
    out: list[int] = []
    try:
        for part in text.split(","):
            if "-" in part:
                a, b = part.split("-", 1)
                out.extend(range(int(a), int(b) + 1))
            elif part:
                out.append(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a list like 1,2,4 or 0-3") from None
    return out


def _note(text: str) -> str:
    """--note's value: at most NOTE_LIMIT characters, refused while the command line is read."""
    try:
        return check_note(text) or ""
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _strlist(text: str) -> list[str]:
    return [t for t in text.split(",") if t]


def _add_param(sub: argparse.ArgumentParser, p: Param) -> None:
    flag = "--" + p.name.replace("_", "-")
    default_note = "" if p.default is None else f" (default: {p.default})"
    p = replace(p, help=p.help.replace("%", "%%"))  # argparse formats help with %: "99% intervals" is text
    if p.type is bool:
        sub.add_argument(flag, dest=p.name, action=argparse.BooleanOptionalAction, default=None, help=p.help + default_note)
        return
    conv: Any = {"intlist": _intlist, "strlist": _strlist}.get(p.type, p.type)  # type: ignore[arg-type]
    if p.type in ("intlist", "strlist"):  # argparse would test the whole list against the choices: Param.check does
        note = f" (from: {', '.join(map(str, p.choices))})" if p.choices else ""
        sub.add_argument(flag, dest=p.name, type=conv, default=None, help=p.help + note + default_note)
        return
    sub.add_argument(flag, dest=p.name, type=conv, default=None, choices=p.choices, help=p.help + default_note)


def _common_run_options(sub: argparse.ArgumentParser) -> None:
    prof = sub.add_mutually_exclusive_group()
    prof.add_argument("--quick", dest="profile", action="store_const", const="quick", help="short run (node: under a minute)")
    prof.add_argument("--full", dest="profile", action="store_const", const="full", help="thorough run")
    sub.add_argument("--json", action="store_true", help=f"print one JSON document (schema {SCHEMA_VERSION})")
    sub.add_argument("--oversubscribe", action="store_true", help="allow more threads than PUs")
    sub.add_argument("--timeout", type=float, default=None,
                     help=f"seconds before a kernel is killed (default {DEFAULT_TIMEOUT:.0f}, or longer when a "
                     "benchmark such as a large hpl needs it)")
    sub.add_argument("--no-store", action="store_true", help="do not write the results store")
    _tag_options(sub)
    _power_options(sub)


def _power_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--power", action="append", default=[], metavar="[NODE=]SPEC",
                     help="power source (repeatable, per node): rapl, ipmi, cmd:COMMAND (prints watts or joules), "
                     "csv:FILE (a time,watts log) or watts:W (declared); NODE=SPEC for one node, cluster=SPEC for "
                     "one meter of all; figures with a timed phase get their energy and Gflops/W")
    sub.add_argument("--watts", type=float, default=None, metavar="W",
                     help="declared power of every node in W (not measured; marked declared): watts:W")
    sub.add_argument("--power-interval", type=float, default=None, metavar="S",
                     help="seconds between power samples (default: rapl 0.1, cmd and ipmi 1)")


def _tag_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--tag", dest="tags", action="append", default=[], metavar="TAG",
                     help="name the run (repeatable) to select it later in compare, report and results list")
    sub.add_argument("--note", type=_note, help=f"free text stored with the run (what you changed; at most "
                     f"{NOTE_LIMIT} characters)")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="clusterbench", description="Characterise, tune and compare HPC clusters.")
    ap.add_argument("--version", action="version", version=f"clusterbench {__version__}")
    ap.add_argument("--db", help="results store (default: $CLUSTERBENCH_DB or ~/.local/share/clusterbench/results.db)")
    cmds = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)

    pr = cmds.add_parser("probe", help="what this machine is and its theoretical limits")
    pr.add_argument("--json", action="store_true", help="print the probe as JSON")
    pr.add_argument("--sysfs-root", metavar="DIR", help="read a snapshot of another machine's /sys and /proc")
    hw = pr.add_mutually_exclusive_group()
    hw.add_argument("--hwloc", action="store_true", help="require hwloc (lstopo-no-graphics); fail if it is missing")
    hw.add_argument("--no-hwloc", action="store_true", help="read /sys and /proc directly even if hwloc is installed")

    run = cmds.add_parser("run", help="run a benchmark and store its results")
    benches = run.add_subparsers(dest="benchmark", required=True, parser_class=_Parser, metavar="BENCHMARK")
    for name, cls in all_benchmarks().items():
        sub = benches.add_parser(name, aliases=list(cls.aliases), help=cls.describe(), description=cls.describe())
        _common_run_options(sub)
        for p in cls.params:
            _add_param(sub, p)

    # not a benchmark: the whole cluster characterised, the same command as `cluster run`
    _run_cluster_options(benches.add_parser("cluster", help=RUN_CLUSTER_HELP, description=RUN_CLUSTER_HELP))

    cmds.add_parser("list", help="the benchmarks, their metrics, units and limits").add_argument("--json", action="store_true")
    _tune_parser(cmds)

    clu = cmds.add_parser("cluster", help="compare the nodes of a cluster")
    csub = clu.add_subparsers(dest="action", required=True, parser_class=_Parser)
    chk = csub.add_parser("check", help="list every difference between nodes that changes results")
    chk.add_argument("--hosts", required=True, help="hosts, e.g. node1,node2 or cbsim-n1,cbsim-n2 (the virtual cluster)")
    chk.add_argument("--keep-going", action="store_true", help="compare the hosts that answer; list the others (exit 3 if fewer than two answer)")
    chk.add_argument("--timeout", type=float, default=60.0, help="seconds per host (default 60)")
    chk.add_argument("--remote-python", help="python with clusterbench installed on the hosts (default python3)")
    chk.add_argument("--json", action="store_true")
    ins = csub.add_parser("install", help="this clusterbench on every node over ssh (a virtual environment in the "
                          "home directory, no internet or root needed on the nodes), its MPI kernels built there")
    pre = csub.add_parser("preflight", help="can this cluster run MPI? ssh, names, versions, memory, clocks, an MPI "
                          "launch and hello: every problem named, per node, in seconds")
    for sp in (ins, pre):
        sp.add_argument("--hosts", help="nodes, e.g. node1,node2 or node1:4,node2:4")
        sp.add_argument("--hostfile", help="Open MPI hostfile naming the nodes (name slots=N)")
        sp.add_argument("--json", action="store_true", help="print one JSON document")
    ins.add_argument("--no-kernels", action="store_true", help="do not build the MPI kernels on the nodes now "
                     "(they are built at the first run)")
    pre.add_argument("--no-mpi", action="store_true", help="skip the MPI launch and hello")
    pre.add_argument("--mpi", default=None, help="which MPI launches the hello (openmpi or mpich; default: found)")
    pre.add_argument("--allow-root", action="store_true", help="let Open MPI run as root")

    _run_cluster_options(csub.add_parser("run", help=RUN_CLUSTER_HELP, description=RUN_CLUSTER_HELP))

    sim = cmds.add_parser("sim-cluster", help="a virtual cluster of network namespaces on this machine (root)")
    ssub = sim.add_subparsers(dest="action", required=True, parser_class=_Parser)
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
                     "hostname=NAME, hosts-missing=NODE, no-compiler, no-mpi, disk=SIZE); repeatable")
    sup.add_argument("--offload", choices=("on", "off"), default="on",
                     help="veth segmentation/receive offloads (default on, Linux's default; 'off' sends "
                     "MTU-sized frames as on a wire, so MTU shows in bandwidth; needs ethtool)")
    for name, text in (("status", "check the cluster against what was recorded (exit 0: up, or no cluster at all; "
                                  "3: a recorded cluster is broken or an earlier one left namespaces)"),
                       ("hosts", "the nodes, for --hosts or a hostfile"), ("down", "remove everything it made")):
        ssub.add_parser(name, help=text)
    for sp in ssub.choices.values():
        sp.add_argument("--json", action="store_true")
    ssub.choices["down"].add_argument("--force", action="store_true",
                                      help="also when a job runs inside (its processes are killed and listed); "
                                      "without it, down refuses and lists them")

    cmp_ = cmds.add_parser("compare", help="did a change help? two sides of runs, figure by figure, with statistics",
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
                      help="compare performance for cost (seed 003): each figure per unit of the price of its side's "
                      "cluster (rate/price, 1/(time*price) for times); currency from [cost] currency in the config")
    cmp_.add_argument("--json", action="store_true", help="print one JSON document")

    doc = cmds.add_parser("doctor", help="what holds this node or cluster back: findings, fixes, undo (read-only)")
    doc.add_argument("--hosts", help="nodes to examine, e.g. node1,node2 or cbsim-n1,cbsim-n2 (default: this machine)")
    doc.add_argument("--hostfile", help="Open MPI hostfile naming the nodes")
    doc.add_argument("--timeout", type=float, default=60.0, help="seconds per host (default 60)")
    doc.add_argument("--remote-python", help="python with clusterbench installed on the hosts (default python3)")
    doc.add_argument("--json", action="store_true", help="print one JSON document (doctor_schema 1)")
    doc.add_argument("--during", choices=("mpi", "hpl", "none"), default="none",
                     help="also read NET_RX/NET_TX softirqs per CPU on every node over a network load "
                     "(mpi: run bw over TCP between the first two hosts; hpl: run hpl --n 6000)")
    doc.add_argument("--allow-root", action="store_true", help="let Open MPI run as root (--during, --verify)")
    act = doc.add_mutually_exclusive_group()
    act.add_argument("--fix", metavar="RULE", help="apply RULE's fix on every node where it fires (needs --yes); "
                     "the previous values are recorded for --undo")
    act.add_argument("--undo", metavar="FIX_ID", help="restore what a recorded fix changed")
    act.add_argument("--verify", metavar="RULE", help="A/B: --benchmark before, RULE's fix, after; compare; "
                     "keep or undo the fix (--keep)")
    act.add_argument("--fixes", action="store_true", help="list the recorded fixes")
    doc.add_argument("--yes", action="store_true", help="really change the nodes (--fix, --verify)")
    doc.add_argument("--benchmark", metavar="\"run ...\"", help='for --verify: the run command, e.g. "run hpl --n 20000"')
    doc.add_argument("--repeat", type=_positive_int, default=3, help="for --verify: runs a side (default 3)")
    doc.add_argument("--keep", choices=("if-better", "always", "never"), default="if-better",
                     help="for --verify: keep the fix if-better (a figure significantly better, none worse; default), "
                     "always, or never")

    swp = cmds.add_parser("sweep", help="every node or every link at once: outlier nodes, slow links")
    swsub = swp.add_subparsers(dest="action", required=True, parser_class=_Parser)
    # -- sweep node (owner: clusterbench.sweep.node) --
    swn = swsub.add_parser("node", help="the quick node profile (or one benchmark) on every node at once, "
                           "one launcher job; outlier nodes per metric (median and MAD)")
    swn.add_argument("--hosts", help="nodes, e.g. node1,node2 or cbsim-n1,cbsim-n2 (default: the Slurm allocation)")
    swn.add_argument("--hostfile", help="Open MPI hostfile naming the nodes")
    swn.add_argument("--benchmark", default=None, metavar='"NAME [OPTIONS]"',
                     help="one node benchmark instead of the quick node profile, with its run options, "
                     'e.g. "peak --seconds 0.3" (quick profile unless --full is among them)')
    swn.add_argument("--mpi", default=None, help="which MPI launches the job (openmpi or mpich; default: found)")
    swn.add_argument("--allow-root", action="store_true", help="let Open MPI run as root")
    swn.add_argument("--remote-python", help="python with clusterbench installed on the nodes (default: this one, "
                     "which needs a shared filesystem; or $CLUSTERBENCH_REMOTE_PYTHON)")
    swn.add_argument("--node-cpus", action="append", default=[], metavar="NODE=CPUS",
                     help="virtual cluster: the cpus of a node, e.g. cbsim-n1=0 (repeatable; default one cpu each, "
                     "round robin)")
    swn.add_argument("--oversubscribe", action="store_true",
                     help="virtual cluster: allow more nodes than cpus (the nodes share cpus, busy loops even the "
                     "shares out, figures are per share; refused without it)")
    swn.add_argument("--timeout", type=float, default=None, help="seconds for the whole sweep (default 900)")
    swn.add_argument("--no-store", action="store_true", help="do not store the figures")
    swn.add_argument("--json", action="store_true", help="print one JSON document (sweep_schema 1)")
    _tag_options(swn)
    # -- end sweep node --
    # -- sweep network (owner: clusterbench.sweep.network) --
    swk = swsub.add_parser("network", help="latency and bandwidth of every pair of nodes (n-1 rounds, each node "
                           "in one pair at a time); slow links and slow nodes")
    swk.add_argument("--hosts", help="nodes, e.g. node1,node2 or cbsim-n1,cbsim-n2 (default: the Slurm allocation)")
    swk.add_argument("--hostfile", help="Open MPI hostfile naming the nodes")
    swk.add_argument("--mpi", default=None, help="which MPI launches the job (openmpi or mpich; default: found)")
    swk.add_argument("--allow-root", action="store_true", help="let Open MPI run as root")
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
    swk.add_argument("--json", action="store_true", help="print one JSON document (sweep_schema 2)")
    _tag_options(swk)
    # -- end sweep network --

    rpt = cmds.add_parser("report", help="an HTML page with plots of runs (self-contained, opens offline)",
                          description="An HTML page with plots of the runs the selectors name (a selector's complete "
                          "runs of one configuration are one column, their figures pooled). -o is a new or empty "
                          "folder, or an earlier report with --force, which replaces only the files that report "
                          "wrote (listed in its .clusterbench-report.json) and keeps anything else; a folder of "
                          "other files and no report is refused.")
    rpt.add_argument("runs", nargs="+", metavar="RUN|TAG", help="run ids, prefixes, tags, 'last', 'last~N'")
    rpt.add_argument("-o", "--output", default="report",
                     help="output folder (default ./report): new, empty, or an earlier report")
    rpt.add_argument("--compare", action="store_true",
                     help="with exactly two selectors: also compare them (the comparison chart)")
    rpt.add_argument("--force", action="store_true",
                     help="replace an earlier report in that folder: only the files it wrote (its manifest, "
                     ".clusterbench-report.json), anything else there is kept")
    rpt.add_argument("--include-incomplete", action="store_true",
                     help="also pool runs that are still running or incomplete (left out and named by default)")
    rpt.add_argument("--json", action="store_true")

    res = cmds.add_parser("results", help="stored runs")
    rsub = res.add_subparsers(dest="action", required=True, parser_class=_Parser)
    ls = rsub.add_parser("list", help="list runs")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--limit", type=_positive_int, default=None, help="the newest N runs (N >= 1)")
    ls.add_argument("--tag", help="only runs carrying this tag")
    ls.add_argument("--benchmark", help="only runs with figures of this benchmark")
    ls.add_argument("--host", help="only runs recorded on this host")
    ls.add_argument("--since", help="only runs started at or after this date (YYYY-MM-DD[THH:MM], UTC)")
    tag = rsub.add_parser("tag", help="add tags to a stored run, --remove some, or set its --note")
    tag.add_argument("run", help="run id, unique prefix, 'last' or 'last~N'")
    tag.add_argument("tags", nargs="*", metavar="TAG")
    tag.add_argument("--remove", action="append", default=[], metavar="TAG", help="remove this tag (repeatable)")
    tag.add_argument("--note", type=_note, help=f"replace the run's note ('' clears it; at most {NOTE_LIMIT} "
                     "characters)")
    tag.add_argument("--json", action="store_true")
    tab = rsub.add_parser("table", help="one metric of one benchmark as a table: rows and columns by parameter")
    tab.add_argument("benchmark")
    tab.add_argument("--metric", help="the metric (default: the benchmark's first)")
    tab.add_argument("--rows", type=_strlist, required=True, help="parameters (or tag, host, run) for the rows")
    tab.add_argument("--cols", type=_strlist, default=[], help="parameters (or tag, host, run) for the columns")
    tab.add_argument("--runs", help="only these runs (a selector: ids, tags, 'last~1,last'; not empty)")
    tab.add_argument("--agg", choices=("best", "median", "mean", "last"), default="best",
                     help="several figures in a cell: best (default), median, mean or the newest")
    tab.add_argument("--json", action="store_true")
    show = rsub.add_parser("show", help="show one run (id, unique prefix, or 'last')")
    show.add_argument("run")
    show.add_argument("--json", action="store_true")
    plc = rsub.add_parser("place", help="where a run's HPL/HPCG figures would rank on the Green500, TOP500 and "
                          "HPCG lists (the lists' published figures, as far as clusterbench's data holds them)")
    plc.add_argument("run", nargs="?", default="last", help="run id, unique prefix, 'last' (default) or 'last~N'")
    plc.add_argument("--list", dest="lists", action="append", choices=("green500", "top500", "hpcg"), default=None,
                     help="the list (repeatable; default: every list the run has a figure for)")
    plc.add_argument("--edition", default=None, metavar="YYYY-MM",
                     help="the list's edition, e.g. 2022-06, or 'all' (default: the newest in the data)")
    plc.add_argument("--json", action="store_true")
    exp = rsub.add_parser("export", help="export one run")
    exp.add_argument("run")
    exp.add_argument("--format", choices=("json", "csv", "hpccoutf"), required=True,
                     help="json (the --json document), csv (one row per figure), hpccoutf (hpcc's summary keys)")
    exp.add_argument("-o", "--output", help="file; '-' or none: stdout. An existing file needs --force; devices "
                                            "and FIFOs are written directly")
    exp.add_argument("--force", action="store_true", help="overwrite an existing -o file")
    return ap


RUN_CLUSTER_HELP = ("the whole cluster characterised in one command, within --budget: preflight, the quick node "
                    "profile on every node, the network matrix, HPL across all nodes, doctor; one tagged set of runs "
                    "(also: clusterbench cluster run)")


def _run_cluster_options(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--hosts", help="nodes, e.g. node1,node2 or node1:4,node2:4")
    sp.add_argument("--hostfile", help="Open MPI hostfile naming the nodes (name slots=N)")
    sp.add_argument("--budget", default="15m", help="wall time for everything, e.g. 15m, 4m, 1h (default 15m); "
                    "each stage gets a share, HPL's N follows the time left for it")
    sp.add_argument("--tag", help="tag of every run stored (default cluster-YYYYmmdd-HHMM)")
    sp.add_argument("--tune-share", type=float, default=0.0, metavar="FRACTION",
                    help="part of HPL's time for a short tune of NB and grid first (default 0: no tune)")
    sp.add_argument("--oversubscribe", action="store_true", help="virtual cluster: allow more nodes than cpus")
    sp.add_argument("--allow-root", action="store_true", help="let Open MPI run as root")
    sp.add_argument("--remote-python", help="python with clusterbench installed on the nodes (default: "
                    "cluster install's, on separate machines; this one on a shared filesystem)")
    sp.add_argument("--json", action="store_true", help="print one JSON document (run_cluster_schema 1)")


def _tune_parser(cmds: Any) -> None:
    tune = cmds.add_parser("tune", help="search a benchmark's parameters within a time budget (every trial stored)")
    tsub = tune.add_subparsers(dest="target", required=True, parser_class=_Parser)
    th = tsub.add_parser("hpl", help="NB x grid x topology (x BLAS): dgemm against NB, short runs, confirmation at N")
    th.add_argument("--budget", default="20m", help="wall time for the whole tune, e.g. 20m, 90s, 1h (default 20m)")
    size = th.add_mutually_exclusive_group()
    size.add_argument("--mem", type=float, default=0.8, help="N from this fraction of MemAvailable (default 0.8)")
    size.add_argument("--n", type=int, help="matrix order N")
    th.add_argument("--nb-list", type=_intlist, help="NB candidates (default 32,64,96,...,512)")
    th.add_argument("--topologies", type=_strlist, default=["pure", "hybrid"], help="pure,hybrid (default both)")
    th.add_argument("--blas-list", type=_strlist, help="BLAS libraries (default: openblas, blis, mkl where installed)")
    th.add_argument("--top", type=int, default=3, help="configurations confirmed at full N (default 3)")
    th.add_argument("--no-resume", action="store_true", help="measure again what this tune already stored")
    for opt in ("hosts", "hostfile", "openblas_coretype", "transport", "engine", "seed", "allow_root"):
        p = next(x for x in all_benchmarks()["hpl"].params if x.name == opt)
        _add_param(th, p)
    th.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds before one trial is killed")
    th.add_argument("--oversubscribe", action="store_true", help="allow more ranks than cores")
    th.add_argument("--json", action="store_true", help="print the tune as one JSON document")
    _tag_options(th)


#: `compare --fail-if-worse` found a significant regression (apart from the error codes 2-5)
EXIT_WORSE = 6


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not allowed; use 1 or more")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from clusterbench import config
    config.set_argv(sys.argv[1:] if argv is None else argv)  # an error can show the command to retype
    from clusterbench.session import interrupt_status, terminate_as_interrupt

    try:
        with terminate_as_interrupt():
            return _dispatch(args)
    except ClusterbenchError as exc:
        sys.stderr.write(f"clusterbench: error: {terminal_text(exc)}\n")
        return exc.exit_code
    except KeyboardInterrupt as exc:
        if argv is None:  # the command itself is exiting: a further Ctrl-C changes nothing
            import signal
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        what = getattr(exc, "outcome", None) or _INTERRUPTED.get(args.command)  # a command may say what it left
        sys.stderr.write(f"clusterbench: interrupted ({terminal_text(exc) or 'Ctrl-C'}){'; ' + what if what else ''}\n")
        return interrupt_status(exc)
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug: still one line, with a way to get the traceback
        if os.environ.get("CLUSTERBENCH_DEBUG"):
            raise
        sys.stderr.write(f"clusterbench: internal error: {type(exc).__name__}: {terminal_text(exc)}; "
                         "rerun with CLUSTERBENCH_DEBUG=1 for a traceback and report it\n")
        return 1
    finally:
        config.set_argv([])


#: what an interruption (Ctrl-C, SIGTERM, SIGHUP) leaves behind, by command: only the commands that
#: record runs have a run to mark incomplete
_INTERRUPTED: dict[str, str] = {
    "run": "finished results were kept, the run is marked incomplete",
    "tune": "finished trials were kept, the run is marked incomplete",
    "sweep": "finished results were kept, the run is marked incomplete",
    "doctor": "finished results were kept, the run is marked incomplete",
    "report": "the report was not written (nothing in the -o folder was changed; its temporary folder was removed)",
    "compare": "nothing was stored or written",
    "list": "nothing was stored or written",
    "probe": "nothing was stored or written",
}


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "probe":
        return _cmd_probe(args)
    if args.command == "run":
        return _cmd_run(args)
    if args.command == "list":
        return _cmd_list(args)
    if args.command == "sim-cluster":
        return _cmd_sim(args)
    if args.command == "cluster":
        return _cmd_cluster(args)
    if args.command == "tune":
        return _cmd_tune(args)
    if args.command == "compare":
        return _cmd_compare(args)
    if args.command == "report":
        return _cmd_report(args)
    if args.command == "doctor":
        return _cmd_doctor(args)
    if args.command == "sweep":
        return _cmd_sweep(args)
    return _cmd_results(args)


def _cmd_probe(args: argparse.Namespace) -> int:
    from clusterbench.probe import probe
    from clusterbench.ui import format_probe, write_text

    if args.sysfs_root:
        if not os.path.isdir(args.sysfs_root):
            raise UsageError(f"--sysfs-root {args.sysfs_root} is not a directory", "give the directory holding sys/ and proc/")
    if args.hwloc:
        from clusterbench.errors import EnvironmentProblem
        from clusterbench.probe import hwloc

        if not hwloc.available():
            raise EnvironmentProblem("--hwloc was given but hwloc's lstopo-no-graphics is not installed",
                                     "apt-get install hwloc (or load an hwloc module), or drop --hwloc to read /sys")
    data = probe(sysfs_root=args.sysfs_root, use_hwloc=True if args.hwloc else (False if args.no_hwloc else None))
    if args.json:
        from clusterbench.ui import dump_json
        dump_json(data)
    else:
        write_text(format_probe(data))
        if hasattr(os, "geteuid") and os.geteuid() == 0:  # say once, up front, how root consent is given
            from clusterbench import config
            sys.stdout.write(f"running as root: MPI benchmarks need --allow-root; {config.permanent_root_hint()}\n")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from clusterbench import session
    from clusterbench.ui import RichProgress, dump_json, print_results, print_summary, write_lines

    from clusterbench.benchmarks import ALIASES
    from clusterbench.benchmarks.base import Composite

    if args.benchmark == "cluster":
        return _cmd_run_cluster(args)
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
            if last and last.results and not args.json:
                print_results([r.as_json() for r in last.results])
            if last and store is not None:
                sys.stderr.write(f"clusterbench: run {last.run['id']} kept {_kept(store, last.run['id'])}, "
                                 "marked incomplete\n")
        raise
    if args.json:
        doc = report.document()
        if is_suite:
            from clusterbench.benchmarks import summarize_results
            doc["summary"] = summarize_results(doc["results"])
        dump_json(doc)
    else:
        print_results([r.as_json() for r in report.results])
        if is_suite:
            print_summary([r.as_json() for r in report.results])
        write_lines(f"note: {note}" for note in report.run.get("notes") or [])
        write_lines(f"warning [{w['code']}]: {w['message']}; {w['remedy']}" for w in report.run.get("warnings") or [])
        if report.run.get("energy"):
            from clusterbench.analysis.energy import energy_lines
            write_lines(energy_lines(report.run["energy"], [r.as_json() for r in report.results]))
            write_lines(_cost_lines(report))
        if store is not None:
            write_lines([f"run {report.run['id']} stored in {store.path}"])
    return 0


def _cost_lines(report: Any) -> list[str]:
    """Per-price figures and the energy cost of a metered run, when [cost] is configured (a bad [cost]
    table is one warning line here: the run is already stored)."""
    from clusterbench import config
    from clusterbench.report.energy import cost_lines, energy_cost

    try:
        model = config.cost_model()
    except UsageError as exc:
        return [f"warning [cost]: {exc}"]
    return cost_lines(energy_cost([report.run], [r.as_json() for r in report.results], model))


def _kept(store: Store, run_id: str) -> str:
    """How many results the store really holds for the run (a full disk may have refused some)."""
    try:
        return f"{store.count_results(run_id)} result(s)"
    except ClusterbenchError:
        return "an unknown number of results (the store cannot be read)"


def _cmd_tune(args: argparse.Namespace) -> int:
    from clusterbench.tuning import hpl as tuner
    from clusterbench.ui import dump_json, write_text

    space = tuner.Space(nbs=args.nb_list or tuner.DEFAULT_NBS, topologies=args.topologies, blas=args.blas_list)
    base = {k: getattr(args, k) for k in ("hosts", "hostfile", "openblas_coretype", "transport", "engine", "seed",
                                          "allow_root")}

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


def _cluster_hosts(args: argparse.Namespace) -> list[Any]:
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


def _cmd_cluster(args: argparse.Namespace) -> int:
    from clusterbench.probe.cluster import check
    from clusterbench.ui import dump_json, write_lines

    if args.action == "run":
        return _cmd_run_cluster(args)
    if args.action == "install":
        from clusterbench.cluster.install import format_install, install

        doc = install([h.name for h in _cluster_hosts(args)], kernels=not args.no_kernels,
                      say=(lambda s: None) if args.json
                      else (lambda s: write_lines([f"cluster install: {s}"], sys.stderr)))
        if args.json:
            dump_json(doc)
        else:
            write_lines(format_install(doc))
        return 3 if doc["failed"] or doc.get("kernels_error") else 0
    if args.action == "preflight":
        from clusterbench.benchmarks.mpi.common import allow_root_default
        from clusterbench.cluster.preflight import format_preflight, preflight

        repeats = {}
        if args.hostfile:
            from clusterbench.launch.mpi.hosts import hostfile_repeats

            repeats = hostfile_repeats(args.hostfile)
        doc = preflight(_cluster_hosts(args), mpi=not args.no_mpi, allow_root=args.allow_root or allow_root_default(),
                        mpi_kind=args.mpi, repeats=repeats)
        if args.json:
            dump_json(doc)
        else:
            arg = f"--hostfile {shlex.quote(args.hostfile)}" if args.hostfile else \
                f"--hosts {args.hosts}" if args.hosts else None
            write_lines(format_preflight(doc, arg))
        return 0 if doc["ok"] else 3

    from clusterbench.launch.mpi.hosts import host_names

    hosts = list(dict.fromkeys(host_names(args.hosts)))
    if len(hosts) < 2:
        raise UsageError("--hosts needs at least two hosts to compare", "e.g. --hosts node1,node2")
    res = check(hosts, timeout=args.timeout, keep_going=args.keep_going, python=args.remote_python)
    compared = len(res.get("answered") or []) >= 2  # with --keep-going fewer may answer: nothing compared
    if args.json:
        dump_json({"schema": SCHEMA_VERSION, **res})
        return 0 if compared else 3
    from clusterbench.probe.cluster import format_check
    write_lines(format_check(res))
    return 0 if compared else 3


def _cmd_run_cluster(args: argparse.Namespace) -> int:
    """run cluster / cluster run: clusterbench.cluster.characterise, printed."""
    from clusterbench.benchmarks.mpi.common import allow_root_default
    from clusterbench.cluster import characterise as ch
    from clusterbench.ui import dump_json, write_lines

    budget = ch.budget_seconds(args.budget)
    ch.split_budget(budget, args.tune_share)  # bad input refused before anything runs
    hosts = _cluster_hosts(args)
    arg = f"--hostfile {shlex.quote(args.hostfile)}" if args.hostfile else f"--hosts {args.hosts}" if args.hosts else None
    try:
        doc = ch.characterise(hosts, budget_s=budget, tag=args.tag, oversubscribe=args.oversubscribe,
                              allow_root=args.allow_root or allow_root_default(), tune_share=args.tune_share,
                              remote_python=args.remote_python, store=Store(args.db),
                              argv=["clusterbench", *sys.argv[1:]],
                              say=lambda s: write_lines([f"run cluster: {s}"], sys.stderr))
    except ch.NotReady as exc:
        write_lines([f"run cluster: preflight: {ln}" for ln in ch.not_ready_lines(exc.doc, arg)], sys.stderr)
        raise
    if args.json:
        dump_json(doc)
    else:
        write_lines(ch.format_summary(doc))
    return 0


def _cmd_doctor(args: argparse.Namespace) -> int:
    from clusterbench import doctor
    from clusterbench.ui import dump_json, write_lines

    def out(doc: dict, lines: list[str]) -> int:
        if args.json:
            dump_json({"doctor_schema": doctor.DOCTOR_SCHEMA, **doc})
        else:
            write_lines(lines)
        return 0

    hosts = doctor.hosts_from(args.hosts, args.hostfile)
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


def _cmd_sweep(args: argparse.Namespace) -> int:
    if args.action == "node":
        return _cmd_sweep_node(args)
    return _cmd_sweep_network(args)


# -- _cmd_sweep_node (owner: clusterbench.sweep.node) --
def _cmd_sweep_node(args: argparse.Namespace) -> int:
    import shlex

    from clusterbench import doctor
    from clusterbench.benchmarks import ALIASES
    from clusterbench.sweep import node as sweep_node
    from clusterbench.ui import RichProgress, dump_json, write_lines

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
        ns = build_parser().parse_args(["run", name, *words[1:]])  # its own options, checked as `run` checks them
        given = {p.name: getattr(ns, p.name) for p in all_benchmarks()[name].params
                 if getattr(ns, p.name, None) is not None}
        profile = ns.profile or "quick"
    node_cpus = sweep_node.parse_node_cpus(args.node_cpus)
    store = None if args.no_store else Store(args.db)
    progress = RichProgress() if sys.stderr.isatty() and not args.json else None
    kwargs = dict(given=given, profile=profile, mpi=args.mpi, allow_root=args.allow_root, timeout=args.timeout,
                  store=store, use_store=not args.no_store, python=args.remote_python,
                  node_cpus=node_cpus, tags=args.tags, note=args.note, oversubscribe=args.oversubscribe,
                  argv=["clusterbench", *sys.argv[1:]], progress=progress)
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
# -- end _cmd_sweep_node --


# -- _cmd_sweep_network (owner: clusterbench.sweep.network) --
def _cmd_sweep_network(args: argparse.Namespace) -> int:
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
# -- end _cmd_sweep_network --


def _cmd_sim(args: argparse.Namespace) -> int:
    from clusterbench.launch import simcluster as sc
    from clusterbench.ui import dump_json, print_table, write_lines

    if args.action == "up":
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
    if args.action == "down":
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
    if args.action == "hosts":
        hs = sc.hosts()
        if args.json:
            dump_json({"hosts": hs, "host_arg": sc.host_arg(), "mpirun_args": sc.mpirun_args()})
        else:
            sys.stdout.write(sc.hostfile_text())
        return 0
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


def _cmd_list(args: argparse.Namespace) -> int:
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


def _cmd_results(args: argparse.Namespace) -> int:
    from clusterbench.ui import dump_json, print_results, print_table

    if args.action == "tag":
        return _cmd_results_tag(args)
    store = Store(args.db, readonly=True)
    if args.action == "list":
        from clusterbench.report.compare import check_benchmark

        check_benchmark(store, args.benchmark)
        runs = store.list_runs(args.limit, tag=args.tag, benchmark=args.benchmark, host=args.host, since=args.since)
        if args.json:
            dump_json({"schema": SCHEMA_VERSION, "runs": runs})
        else:
            print_table([[r["id"][:8], r["started"][:19], r["status"], str(r["results"]), r["host"],
                          ",".join(r["tags"]), r["command"] + (f"  # {r['note']}" if r.get("note") else "")]
                         for r in runs], ["run", "started", "status", "results", "host", "tags", "command"])
        return 0
    if args.action == "table":
        return _cmd_results_table(args, store)
    if args.action == "place":
        return _cmd_results_place(args, store)
    run = store.get_run(args.run)
    results = store.results(run["id"])
    doc = {"schema": SCHEMA_VERSION, "run": run, "results": results}
    if args.action == "show":
        if args.json:
            dump_json(doc)
        else:
            from clusterbench.text import run_command
            from clusterbench.ui import write_lines

            # the command shell-quoted from its argv (a paste runs it, not a $(...) in its note); every
            # stored text made safe for a terminal (write_lines, print_results)
            write_lines([f"run {run['id']}  {run['status']}  {run['started']} .. {run['ended'] or '-'}",
                         f"host {run['host']}  command: {run_command(run)}"])
            if run.get("tags") or run.get("note"):
                write_lines([f"tags {', '.join(run['tags']) or '(none)'}"
                             + (f"; note: {run['note']}" if run.get("note") else "")])
            if run.get("error"):
                write_lines([f"error: {run['error']}"])
            print_results(results)
            write_lines(f"note: {note}" for note in run.get("notes") or [])
            write_lines(f"warning [{w['code']}]: {w['message']}; {w['remedy']}" for w in run.get("warnings") or [])
        return 0
    from clusterbench.report.export import export
    export(run, results, args.format, args.output, force=args.force)
    return 0


def _cmd_results_tag(args: argparse.Namespace) -> int:
    from clusterbench.ui import dump_json, write_lines

    if not args.tags and not args.remove and args.note is None:
        raise UsageError("results tag needs a TAG, --remove TAG or --note", "e.g. clusterbench results tag last baseline")
    store = Store(args.db)
    run_id = store.tag_run(args.run, add=args.tags, remove=args.remove, note=args.note)
    run = store.get_run(run_id)
    if args.json:
        dump_json({"schema": SCHEMA_VERSION, "run": run["id"], "tags": run["tags"], "note": run["note"]})
    else:
        write_lines([f"run {run_id[:8]}: tags {', '.join(run['tags']) or '(none)'}"
                     + (f"; note: {run['note']}" if run.get("note") else "")])
    return 0


def _cmd_results_table(args: argparse.Namespace, store: Store) -> int:
    from clusterbench.analysis.table import format_table, pivot
    from clusterbench.ui import dump_json, print_table

    cls = all_benchmarks().get(args.benchmark)
    if cls is None:
        raise UsageError(f"unknown benchmark '{args.benchmark}'", "see 'clusterbench list'")
    metric = args.metric or cls.metrics[0].name
    if metric not in {m.name for m in cls.metrics}:
        raise UsageError(f"{args.benchmark} has no metric '{metric}'",
                         f"use one of {', '.join(m.name for m in cls.metrics)}")
    run_ids = store.select_runs(args.runs) if args.runs is not None else None  # '' is refused, not "all"
    table = pivot(store.figures(args.benchmark, metric, run_ids), args.rows, args.cols, args.agg)
    if args.json:
        dump_json({"schema": SCHEMA_VERSION, "table": table.as_dict()})
    else:
        lines = format_table(table)
        sys.stdout.write(f"{table.benchmark} {table.metric} ({table.unit}, {table.agg} of each cell, "
                         f"{'higher' if table.higher_is_better else 'lower'} is better)\n")
        print_table(lines[1:], lines[0])
    return 0


def _cmd_results_place(args: argparse.Namespace, store: Store) -> int:
    from clusterbench.report.placement import format_lines, place_run
    from clusterbench.ui import dump_json, write_lines

    run = store.get_run(args.run)
    entries = place_run(store.results(run["id"]), lists=args.lists, edition=args.edition)
    if args.json:
        dump_json({"schema": SCHEMA_VERSION, "run": run["id"], "placements": entries})
    else:
        write_lines([f"run {run['id'][:8]} ({run['host']}, {run['started'][:19]})", *format_lines(entries)])
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
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


def _cmd_report(args: argparse.Namespace) -> int:
    from clusterbench import config
    from clusterbench.report.compare import compare_sides, require_runs, select
    from clusterbench.report.html import write_report
    from clusterbench.ui import dump_json

    if args.compare and len(args.runs) != 2:
        raise UsageError("--compare needs exactly two selectors", "e.g. clusterbench report baseline jumbo --compare")
    store = Store(args.db, readonly=True)
    selections = [select(store, spec, include_incomplete=args.include_incomplete) for spec in args.runs]
    for sel in selections:
        require_runs(sel, "selector")
    comparison = None
    if args.compare:
        comparison = compare_sides(store, args.runs[0], args.runs[1], include_incomplete=args.include_incomplete)
    done = write_report(store, selections, Path(args.output), comparison=comparison, cost=config.cost_model(),
                        force=args.force)
    ids = list(dict.fromkeys(str(r["id"]) for sel in selections for r in sel.runs))
    if args.json:
        dump_json({"schema": SCHEMA_VERSION, "report": str(done), "runs": ids,
                   "left_out": [x for sel in selections for x in sel.left_out]})
    else:
        sys.stdout.write(f"report of {len(ids)} run(s): {done}\n")
        from clusterbench.analysis.compare import left_out_text

        for sel in selections:
            if sel.left_out:
                sys.stdout.write(f"{sel.selector}: left out {left_out_text(sel.left_out)} "
                                 "(--include-incomplete includes them)\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
