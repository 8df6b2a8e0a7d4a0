"""``sweep node``: the quick node profile (or one node benchmark) on every node at once, as ONE launcher
job; the figures gathered to the caller; outlier nodes flagged per figure; their likely cause from
``doctor``'s rules.

What runs
    The kernels are built here first (the build cache, :mod:`clusterbench.kernels.build`), and the
    store is checked writable, so bad input or a missing compiler fails before anything starts. Then
    one job starts one process per node, :mod:`clusterbench.sweep.agent`, which runs the benchmarks
    in-process (``session.run``, no store) on its node's cpus and prints its probe and figures as short
    JSON lines tagged with its node name. The job is the launcher registry's one tagged process per
    node (:mod:`clusterbench.launch.mpi.pernode`): Open MPI's ``mpirun`` (``--map-by ppr:1:node
    --bind-to none --tag-output``; from the head namespace through the launch agent on the virtual
    cluster) or MPICH's ``mpiexec`` (``-prepend-pattern -ppn 1``), or, inside a Slurm allocation,
    ``srun --ntasks-per-node=1 --cpu-bind=none --label --mpi=none``. The agent is not an MPI program; these
    launchers start plain programs. The launcher's output interleaves the nodes' lines, and a line may
    be cut where the launcher read a pipe; each rank's own stream is rebuilt from the launcher's tags
    before it is parsed (:class:`Demux`), and every line carries a per-node sequence number, so a lost
    or garbled line is an error for that node, never a wrong figure. Nothing is gathered by one ssh per
    node; the job is bounded in time and ended as a whole (process group, watchdog) on timeout,
    failure or Ctrl-C.

A node that fails
    loses that node only: the launcher runs in recovery mode (``--enable-recovery``,
    ``-disable-auto-cleanup``, srun ``--kill-on-bad-exit=0``), each agent's supervisor reports its
    worker's death (the signal and its likely cause) and beats every second, a node silent for
    :data:`LOST_S` seconds is failed as lost, and when the launcher ends early the nodes that reported
    are kept (:func:`run_job`). The figures of the others are judged and stored; the run is incomplete.

What real clusters need
    The agent runs ``python -m clusterbench.sweep.agent`` with this Python (``sys.executable``; on
    separate machines reached by ssh, the node's own ``cluster install`` virtual environment, else its
    ``python3``) unless ``python`` says otherwise: a shared filesystem holding this installation (e.g. a virtual environment
    in a shared ``$HOME``), or clusterbench installed on every node at the path given. Kernels are
    compiled on each node into its cache (``$CLUSTERBENCH_CACHE``, exported to the job) when the cache
    is not shared or the node's CPU differs from this one's, so the nodes need the C compiler too. The
    virtual cluster's nodes share this machine's filesystem and cache.

CPUs
    On a real cluster each node's agent uses every cpu of its node (``--bind-to none``; under Slurm,
    what the step gives it). The virtual cluster's nodes all share this machine's cpus, so each node is
    pinned to cpus of its own: ``node_cpus`` (``{node: [cpu, ...]}``), by default one cpu each, round
    robin; more nodes than cpus only with ``oversubscribe``, and then busy loops even out the cpus that
    carry a node fewer (:func:`filler_loops`), so every node has the same share and the output says so.
    There the nodes also start measuring together (a start barrier once every node has built
    and probed) and a node that finishes keeps its cpus busy until all have finished (see
    :mod:`clusterbench.sweep.agent`), so every node measures under the same sharing throughout.

Outliers
    Per figure (benchmark, metric and the benchmark's key params), the nodes' values are judged with
    :func:`clusterbench.analysis.outliers.flag` (modified z-score beyond 3.5 on the bad side and at
    least 10 % from the median, 3 or more nodes: :data:`outliers.METHOD`). When a node is flagged,
    ``doctor`` reads every node once (:func:`clusterbench.doctor.diagnose`) and the findings that fire
    on that node, bear on that benchmark and do not fire on every node are its likely causes.

Stored
    One run (unless ``use_store`` is False): each node's figures with ``params.node``, the nodes' probes
    and NIC settings as the run's cluster record (from the agents' own output), so ``results table
    BENCH --rows node`` and ``compare`` read it like any run.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterbench.analysis import outliers
from clusterbench.benchmarks.base import Progress
from clusterbench.errors import (
    ClusterbenchError,
    EnvironmentProblem,
    KernelFailed,
    UsageError,
)
from clusterbench.launch.mpi.launchers import openmpi, srun
from clusterbench.launch.mpi.pernode import Demux, sim_launch_timeout
from clusterbench.sweep import agent as agent_mod
from clusterbench.text import seconds

SWEEP_SCHEMA = 1
#: seconds the whole sweep may take unless the caller says otherwise
DEFAULT_TIMEOUT = 900.0
#: seconds the launcher may take to exit once every node has reported
FINALIZE_GRACE = 15.0
#: seconds without a line (record or beat, every agent.BEAT_S) after which a node's agent is taken for
#: lost (killed with its supervisor, node or network down) and the others go on without it
LOST_S = 10.0
#: how many lines of the launcher's stderr an error message may quote from
_TAIL = 16384

def relevant_rules(benchmark: str) -> set[str]:
    """doctor's rules that bear on ``benchmark``'s figures, from each rule's declared ``figures``; a
    benchmark no rule names: every rule that bears on some node benchmark (network rules are not)."""
    from clusterbench.doctor.engine import bearing_on

    return set(bearing_on(benchmark, otherwise=node_benchmarks()))


# --------------------------------------------------------------------------- hosts

def node_benchmarks() -> list[str]:
    """``node`` (the profile) and every benchmark of the node family (``benchmarks/node/``)."""
    from clusterbench.benchmarks import all_benchmarks

    return ["node", *[n for n, c in all_benchmarks().items()
                      if n != "node" and c.__module__.split(".")[-2] == "node"]]


def resolve_hosts(hosts: Sequence[str] | None) -> tuple[list[str], bool]:
    """(hosts, from_allocation): the hosts given, else the batch job's (:mod:`clusterbench.launch.
    allocation`: Slurm, PBS), else a UsageError."""
    if hosts:
        from clusterbench.launch.mpi.hosts import host_names

        # the one --hosts parser; host:slots as elsewhere: one agent per node regardless
        names = host_names(",".join(hosts))
        dup = sorted({h for h in names if names.count(h) > 1})
        if dup:
            raise UsageError(f"host {dup[0]} is listed twice", "list each node once")
        return names, False
    from clusterbench.launch import allocation

    found = allocation.hosts()
    if not found:
        raise UsageError("sweep node needs --hosts or --hostfile, or to run inside a batch job (Slurm, PBS)",
                         "e.g. --hosts node1,node2,node3 or salloc -N 4 clusterbench sweep node")
    return found, True


def default_node_cpus(hosts: Sequence[str], cpus: Sequence[int], *, taken: Sequence[int] = ()) -> dict[str, list[int]]:
    """The virtual cluster's default placement (its nodes share this machine's cpus): one cpu per
    node, round robin, the cpus no node was given with ``--node-cpus`` (``taken``) first. With more
    nodes than cpus (``--oversubscribe``) some cpus carry one node more than others: see
    :func:`filler_loops`, which evens them out."""
    order = [c for c in cpus if c not in set(taken)] + [c for c in cpus if c in set(taken)]
    return {h: [order[i % len(order)]] for i, h in enumerate(hosts)}


def filler_loops(node_cpus: dict[str, list[int]]) -> dict[int, int]:
    """Busy loops to add per cpu so that every cpu carrying nodes carries as many tasks as the
    fullest one: then every node has the same share of a cpu (3 nodes on 2 cpus: n1 and n3 on cpu 0,
    n2 and one loop on cpu 1, each node half a cpu). Without them n2 would have a cpu to itself and
    twice the others' figure, and a slow node would hide (issue 23)."""
    count: dict[int, int] = {}
    for cs in node_cpus.values():
        for c in set(cs):
            count[c] = count.get(c, 0) + 1
    top = max(count.values(), default=0)
    return {c: top - k for c, k in sorted(count.items()) if top - k > 0}


def cpu_shares(node_cpus: dict[str, list[int]], fillers: dict[int, int] | None = None) -> dict[str, float]:
    """Each node's share of this machine's cpus, in cpus: a cpu with k nodes and f filler loops
    gives each node 1/(k+f)."""
    count: dict[int, int] = dict(fillers or {})
    for cs in node_cpus.values():
        for c in set(cs):
            count[c] = count.get(c, 0) + 1
    return {h: sum(1.0 / count[c] for c in set(cs)) for h, cs in node_cpus.items()}


def sharing_note(node_cpus: dict[str, list[int]], fillers: dict[int, int] | None = None) -> str | None:
    """What the output says when virtual nodes share cpus (None when each has its own)."""
    shares = cpu_shares(node_cpus, fillers)
    if not shares or all(abs(v - len(set(node_cpus[h]))) < 1e-9 for h, v in shares.items()):
        return None
    vals = sorted(set(round(v, 3) for v in shares.values()))
    loops = sum((fillers or {}).values())
    how = f", {loops} busy loop{'s' if loops > 1 else ''} evening them out" if loops else ""
    if len(vals) == 1:
        return (f"the virtual nodes share this machine's cpus ({vals[0]:.3g} cpu each{how}): every figure is for "
                "that share, not a whole cpu; the nodes compare with each other, not with a real node")
    shown = ", ".join(f"{h} {v:.3g}" for h, v in shares.items())
    return (f"the virtual nodes' cpu shares differ (--node-cpus: {shown} cpu): a node with a larger share "
            "measures more whatever its health, and the outlier judgement assumes equal shares")


def start_fillers(fillers: dict[int, int], seconds: float) -> list[subprocess.Popen]:
    """The busy loops of :func:`filler_loops`, each pinned, in a session of its own (as a node's
    kernel: the same weight with autogroups), ended with this process however it ends."""
    from clusterbench.process import die_with_parent

    code = f"import time\nend = time.monotonic() + {seconds:.1f}\nwhile time.monotonic() < end:\n    pass\n"
    procs: list[subprocess.Popen] = []
    for cpu, k in fillers.items():
        for _ in range(k):
            death = die_with_parent(9)

            def pre(cpu: int = cpu, death: Any = death) -> None:
                if death:
                    death()
                os.sched_setaffinity(0, {cpu})

            procs.append(subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True, preexec_fn=pre))
    return procs


# --------------------------------------------------------------------------- output of the job

#: the launchers' output tags, by the names this module's readers (and its tests) know them
OPENMPI_TAG, SRUN_LABEL = openmpi.TAG.pattern, srun.TAG.pattern


@dataclass
class NodeReport:
    """What one node's agent said."""

    name: str
    rank: int | None = None
    hello: dict | None = None
    probe: dict | None = None
    network: dict | None = None
    cpus: list[int] | None = None
    ready_s: float | None = None
    results: list[dict] = field(default_factory=list)
    done: dict | None = None
    done_s: float | None = None
    error: str | None = None
    exit_code: int | None = None
    seq: int = 0
    parts: dict[int, list[str]] = field(default_factory=dict)
    #: when its last line (a record or its supervisor's beat) arrived, monotonic seconds
    last_s: float = 0.0

    @property
    def finished(self) -> bool:
        return self.done is not None or self.error is not None


class Gather:
    """The agents' lines, checked and assembled per node (see the agent's protocol)."""

    def __init__(self, hosts: Sequence[str], started: float) -> None:
        self.hosts = list(hosts)
        self.started = started
        self.nodes: dict[str, NodeReport] = {}
        self.rank_node: dict[int, str] = {}
        self.chatter: list[str] = []
        self.events: list[tuple[str, str]] = []  # (node, kind) as they arrive
        self.heard = started  # when any node's line last arrived

    def fail(self, node: str, why: str, code: int = -2) -> None:
        """Mark ``node`` failed from here (lost, or the launcher ended it): its figures are not kept."""
        rep = self.nodes.setdefault(node, NodeReport(node))
        if rep.finished:
            return
        rep.error, rep.exit_code = why, code
        self.events.append((node, "error"))

    def lost(self, now: float, silent_s: float) -> list[str]:
        """Nodes that said hello and went silent (no record, no beat) for ``silent_s`` seconds while
        other nodes were heard meanwhile (so a stalled launcher or caller is not taken for a lost node)."""
        if now - self.heard > silent_s / 2:
            return []
        return [h for h in self.hosts if h in self.nodes and self.nodes[h].hello is not None
                and not self.nodes[h].finished and now - self.nodes[h].last_s > silent_s]

    def line(self, rank: int | None, line: bytes) -> None:
        text = line.decode(errors="replace").rstrip("\r")
        if not text.lstrip().startswith('{"cbsweep"'):
            if text.strip():
                self.chatter = (self.chatter + [text])[-50:]
            return
        try:
            import json

            rec = json.loads(text)
            node = str(rec["node"])
            seq = int(rec["seq"]) if rec.get("kind") != "beat" else -1
        except (ValueError, KeyError, TypeError):
            who = self.rank_node.get(rank) if rank is not None else None
            if who:
                self._broken(who, "a garbled line")
            else:
                self.chatter = (self.chatter + [text[:200]])[-50:]
            return
        rep = self.nodes.get(node)
        if rep is None:
            rep = self.nodes[node] = NodeReport(node, rank=rec.get("rank"))
        if rank is not None:
            self.rank_node[rank] = node
        rep.last_s = self.heard = time.monotonic()
        if rec.get("kind") == "beat":
            return  # its supervisor's sign of life, outside the numbered lines
        if rep.error is not None and rep.exit_code in (-1, -2):
            return  # already known to be broken or lost
        if seq != rep.seq:
            self._broken(node, f"line {rep.seq} missing (got {seq})")
            return
        rep.seq += 1
        self._record(rep, rec)

    def _broken(self, node: str, what: str) -> None:
        rep = self.nodes.setdefault(node, NodeReport(node))
        if rep.error is None:
            rep.error = f"its output was damaged in transit ({what})"
            rep.exit_code = -1
            self.events.append((node, "error"))

    def _record(self, rep: NodeReport, rec: dict) -> None:
        import json

        kind = rec.get("kind")
        if kind == "part":
            pieces = rep.parts.setdefault(int(rec["msg"]), [])
            if int(rec["i"]) != len(pieces):
                self._broken(rep.name, "a record's parts out of order")
                return
            pieces.append(str(rec["data"]))
            if len(pieces) < int(rec["n"]):
                return
            try:
                rec = json.loads("".join(rep.parts.pop(int(rec["msg"]))))
            except ValueError:
                self._broken(rep.name, "a record's parts do not join")
                return
            kind = rec.get("kind")
        now = time.monotonic() - self.started
        if kind == "hello":
            rep.hello = rec
        elif kind == "probe":
            rep.probe, rep.network, rep.cpus = rec.get("probe"), rec.get("network"), rec.get("cpus")
        elif kind == "ready":
            rep.ready_s = now
        elif kind == "result":
            rep.results.append(rec["result"])
        elif kind == "done":
            rep.done, rep.done_s = rec, now
            if int(rec.get("results", -1)) != len(rep.results):
                rep.done = None
                self._broken(rep.name, f"{len(rep.results)} of {rec.get('results')} figures arrived")
                return
        elif kind == "error":
            rep.error = rec.get("message") or "failed"
            if rec.get("fix"):
                rep.error += f"; {rec['fix']}"
            rep.exit_code = int(rec.get("exit_code") or 1)
        self.events.append((rep.name, str(kind)))

    # states over all the expected nodes
    def said_hello(self) -> list[str]:
        return [h for h in self.hosts if h in self.nodes and self.nodes[h].hello is not None]

    def all(self, pred: Callable[[NodeReport], bool]) -> bool:
        return all(h in self.nodes and pred(self.nodes[h]) for h in self.hosts)


@dataclass
class Job:
    """One launch: the command, the environment changes, how to read its output."""

    command: list[str]
    env: dict[str, str]
    launcher: str
    demux: Demux
    workdir: str
    sim: bool = False
    mpi: dict | None = None
    cluster: Any = None  # the virtual cluster (simcluster.SimCluster) it runs on, if any
    #: variables taken out of the launcher's own environment: srun exports its whole environment to
    #: the tasks, so this machine's own settings must not be in it when the nodes are separate machines
    unset: tuple[str, ...] = ()


#: settings of this machine's own, never sent to separate machines: its virtual cluster's state and
#: prefix, and its kernel cache (a node reached by ssh keeps kernels built for itself in its own)
_HEAD_ONLY = ("CLUSTERBENCH_DB", "CLUSTERBENCH_SIM_STATE", "CLUSTERBENCH_SIM_PREFIX", "CLUSTERBENCH_CACHE")


def _exported_env(separate: bool = False) -> dict[str, str]:
    """What the agents need from here: clusterbench's own settings (the kernel cache above all, on
    nodes that share this filesystem; on ``separate`` machines not the settings of this machine's)."""
    drop = _HEAD_ONLY if separate else ("CLUSTERBENCH_DB",)
    keep = {k: v for k, v in os.environ.items() if k.startswith("CLUSTERBENCH_") and k not in drop}
    for k in ("CC", "OPENBLAS_CORETYPE"):
        if k in os.environ:
            keep[k] = os.environ[k]
    return keep


def build_job(hosts: Sequence[str], program: Sequence[str], workdir: str, *, slurm: bool, sim: Any,
              mpi: str | None, allow_root: bool) -> Job:
    """The command that starts ``program`` once on every host (see the module docstring): the
    launcher registry's one tagged process per node (:func:`clusterbench.launch.mpi.pernode.
    build_per_node`), through ``srun`` inside the allocation (``slurm``), else the MPI's own."""
    from clusterbench.launch import nodes as nodes_mod
    from clusterbench.launch.mpi import pernode

    separate = bool(nodes_mod.separate(hosts))
    env = _exported_env(separate=separate)
    if sim is not None and not separate:  # this machine's filesystem: this source tree, whatever Python runs it
        from clusterbench.launch.remote import SRC_DIR

        env["PYTHONPATH"] = os.pathsep.join(x for x in (SRC_DIR, os.environ.get("PYTHONPATH")) if x)
    launcher = "srun" if slurm else "mpirun"
    if pernode.needs_mpi(launcher):  # the MPI's own launcher: Open MPI's refuses root without consent
        from clusterbench.benchmarks.mpi import common

        p = {"allow_root": allow_root or None, "launcher": launcher, "mpi": mpi}
        common.check_allow_root(p)
        allow_root = bool(p["allow_root"])
    # one agent that dies must not end the others (issue 23: a killed agent lost the whole sweep): the
    # launcher keeps the job running (recovery mode), the agents' supervisors and beats say who is gone
    built = pernode.build_per_node(hosts, program, workdir, launcher=launcher, env=env, mpi=mpi,
                                   allow_root=allow_root, sim=sim, job_name="clusterbench-sweep",
                                   head_only=_HEAD_ONLY if separate else ())
    inst = built.mpi
    return Job(built.command, built.env, built.launcher, built.demux, workdir, sim=sim is not None,
               mpi={"name": inst.name, "version": inst.version, "launcher": inst.mpirun} if inst else None,
               cluster=sim, unset=built.unset)


# --------------------------------------------------------------------------- running the job

def run_job(job: Job, hosts: Sequence[str], *, timeout: float, launch_timeout: float,
            sync_dir: str | None, progress: Progress, fillers: dict[int, int] | None = None
            ) -> tuple[Gather, float, str]:
    """Run the job until every node has reported (or failed) and the launcher has exited; returns
    (what was gathered, wall seconds from launch to exit, the launcher's stderr tail). The whole job
    (launcher, daemons, agents) is ended on timeout, failure or Ctrl-C. ``fillers``: busy loops per cpu
    (:func:`filler_loops`) run from the start barrier to the release.

    A node whose agent is killed, or that goes silent for :data:`LOST_S` seconds, is marked failed and
    the others go on; when the launcher itself ends early, the nodes that reported are kept and the
    others failed with the reason (a rank killed and by what, the virtual cluster taken down, a node
    lost)."""
    from clusterbench import process
    from clusterbench.launch.mpi.run import GENERIC_FIX, GONE_FIX, LaunchHung, _explain, cluster_gone

    started = time.monotonic()
    memory = process.memory_state()
    g = Gather(hosts, started)
    try:
        env = {k: v for k, v in {**os.environ, **job.env}.items() if k not in job.unset}
        run = process.spawn(job.command, env=env, launcher=True, cleanup=[job.workdir])
    except OSError as exc:
        raise EnvironmentProblem(f"cannot start {job.command[0]} ({exc.strerror})",
                                 "install Open MPI (openmpi-bin) or run inside a Slurm allocation") from exc
    err = process.Records("sweep", tail_bytes=_TAIL)
    deadline = started + timeout
    launch_deadline = started + launch_timeout
    finished_at: float | None = None
    go = release = False
    seen = 0
    loops: list[subprocess.Popen] = []

    def tick() -> float | None:
        nonlocal go, release, finished_at, seen
        now = time.monotonic()
        for node, kind in g.events[seen:]:
            if kind in ("ready", "done", "error"):
                progress.advance(1)
        seen = len(g.events)
        for h in g.lost(now, LOST_S):  # its agent and supervisor killed, or its node gone: the others go on
            pid = (g.nodes[h].hello or {}).get("pid")
            g.fail(h, f"its agent{f' (pid {pid})' if pid else ''} stopped answering (nothing from it for "
                      f"{LOST_S:g} s): it was killed with its supervisor, or the node or its network went down")
        alive = [h for h in hosts if not (h in g.nodes and g.nodes[h].error is not None)]
        if sync_dir and not go and alive and all(h in g.nodes and g.nodes[h].ready_s is not None for h in alive):
            loops.extend(start_fillers(fillers or {}, max(1.0, deadline - now)))
            Path(sync_dir, "go").touch()  # every node that is still in has built and probed: measure together
            go = True
        if finished_at is None and g.all(lambda r: r.finished):
            finished_at = now
            if sync_dir:
                Path(sync_dir, "release").touch()
                release = True
            _stop(loops)
        if finished_at is not None:
            return None if now >= finished_at + FINALIZE_GRACE else finished_at + FINALIZE_GRACE - now
        if len(g.said_hello()) < len(hosts) and now >= launch_deadline:
            missing = [h for h in hosts if h not in g.said_hello()]
            msg, fix = _explain(err.tail_text, None, job.launcher)
            raise LaunchHung(f"{job.launcher} started no sweep agent on {', '.join(missing[:4])}"
                             f"{' and more' if len(missing) > 4 else ''} within {seconds(launch_timeout)} s",
                             fix if "exited" not in msg else "check that every host is reachable (ssh, "
                             "or the virtual cluster is up) and runs this Python")
        if now >= deadline:
            late = [h for h in hosts if not (h in g.nodes and g.nodes[h].finished)]
            raise KernelFailed(f"sweep node timed out after {timeout:g} s waiting for {', '.join(late[:4])} "
                               "(the whole job was ended)", "raise --timeout or sweep a smaller benchmark")
        return min(deadline, launch_deadline if len(g.said_hello()) < len(hosts) else deadline) - now

    try:
        for _, kind, line in process.read_lines([run.proc], tick):
            if kind == "err":
                err.feed_err(line)
                continue
            for rank, ln in job.demux.feed(line):
                g.line(rank, ln)
        tick()
        proc = run.proc
        try:
            proc.wait(timeout=max(1.0, (finished_at or time.monotonic()) + FINALIZE_GRACE - time.monotonic()))
        except subprocess.TimeoutExpired:
            if finished_at is None:
                raise KernelFailed("the sweep's launcher did not exit", "raise --timeout") from None
        wall = time.monotonic() - started
        if not g.all(lambda r: r.finished):
            missing = [h for h in hosts if not (h in g.nodes and g.nodes[h].finished)]
            text = err.tail_text + "\n" + "\n".join(g.chatter)
            gone = cluster_gone(job.cluster)
            if gone:  # sim-cluster down during the sweep: say so, not what the launcher made of it
                msg, fix = f"{job.launcher} stopped: {gone}", GONE_FIX
            else:
                msg, fix = _explain(text, proc.returncode, job.launcher, local=job.sim, before=memory)
            if any(r.done is not None for r in g.nodes.values()):  # keep the nodes that reported
                for h in missing:
                    g.fail(h, f"no report: {msg}", code=4)
                return g, wall, err.tail_text
            cls = EnvironmentProblem if not g.said_hello() else KernelFailed
            if not g.said_hello() and fix == GENERIC_FIX:
                fix = ("check that every host is reachable and runs this Python with clusterbench "
                       "(a shared filesystem, or --remote-python)")
            raise cls(f"{msg} (no report from {', '.join(missing[:4])}{' and more' if len(missing) > 4 else ''})",
                      fix)
        return g, wall, err.tail_text
    finally:
        if sync_dir and not release:
            Path(sync_dir, "release").touch()  # agents holding their cpus let go before the job is ended
        _stop(loops)
        run.end()


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()
    procs.clear()


# --------------------------------------------------------------------------- judging

def _key_params(bench: str) -> tuple[str, ...]:
    from clusterbench.benchmarks import all_benchmarks

    cls = all_benchmarks().get(bench)
    return tuple(k for k in (cls.key_params if cls else ()) if k != "node")


def figure_label(bench: str, metric: str, params: dict) -> str:
    from clusterbench.ui import _fmt_param

    return " ".join([bench, metric, *(_fmt_param(k, v) for k, v in params.items() if v is not None)])


def figures(results: dict[str, list[dict]]) -> list[dict]:
    """The nodes' results grouped into figures (benchmark, metric, key params), each with its value
    per node, in the order they were measured."""
    out: dict[tuple, dict] = {}
    for node, rs in results.items():
        for r in rs:
            keys = _key_params(r["benchmark"])
            params = {k: (r.get("params") or {}).get(k) for k in keys}
            ident = (r["benchmark"], r["metric"], tuple((k, repr(v)) for k, v in params.items()))
            fig = out.setdefault(ident, {"benchmark": r["benchmark"], "metric": r["metric"], "unit": r.get("unit"),
                                         "higher_is_better": bool(r.get("higher_is_better", True)),
                                         "params": params, "label": figure_label(r["benchmark"], r["metric"], params),
                                         "values": {}, "spreads": {}})
            fig["values"][node] = float(r["value"])
            fig["spreads"][node] = outliers.spread(r.get("samples"))
    return list(out.values())


def judge(fig: dict) -> dict:
    """Median, MAD, each node's modified z-score and the flagged nodes of one figure."""
    vals = fig["values"]
    xs = list(vals.values())
    med = statistics.median(xs) if xs else None
    mad = statistics.median(abs(x - med) for x in xs) if xs else None
    zs = outliers.modified_z(vals)
    flags = outliers.flag(vals, fig["higher_is_better"], spreads=fig.get("spreads"))
    return {**fig, "median": med, "mad": mad, "z": zs, "flags": flags}


def likely_causes(flagged: dict[str, set[str]], findings: Sequence[dict], hosts: Sequence[str]) -> dict[str, list[dict]]:
    """For each flagged node (``{node: {benchmark, ...}}``), doctor's findings that fire on it, bear on
    one of its flagged benchmarks and do not fire on every node (those cannot tell it apart)."""
    fires: dict[str, set[str]] = {}
    for f in findings:
        for n in str(f.get("node") or "").split(","):
            fires.setdefault(f["rule"], set()).add(n.strip())
    everywhere = {r for r, ns in fires.items() if set(hosts) <= ns}
    out: dict[str, list[dict]] = {}
    for node, benches in flagged.items():
        rules: set[str] = set()
        for b in benches:
            rules.update(relevant_rules(b))
        seen = set()
        for f in findings:
            nodes = {n.strip() for n in str(f.get("node") or "").split(",")}
            if node in nodes and f["rule"] in rules and f["rule"] not in everywhere and f["rule"] not in seen:
                seen.add(f["rule"])
                out.setdefault(node, []).append({"rule": f["rule"], "title": f["title"], "summary": f.get("summary"),
                                                 "severity": f.get("severity"), "fix": f.get("fix") or []})
    return out


# --------------------------------------------------------------------------- the sweep

def parse_node_cpus(items: Sequence[str] | None) -> dict[str, list[int]] | None:
    """``["n1=0", "n2=0-1,3"]`` -> ``{"n1": [0], "n2": [0, 1, 3]}``."""
    if not items:
        return None
    from clusterbench.probe.sysfs import parse_cpulist

    out: dict[str, list[int]] = {}
    for item in items:
        node, sep, cpus = item.partition("=")
        parsed = parse_cpulist(cpus) if sep else None
        if not node.strip() or not parsed:
            raise UsageError(f"--node-cpus {item!r} is not NODE=CPUS", "e.g. --node-cpus cbsim-n1=0 --node-cpus cbsim-n2=1")
        out[node.strip()] = sorted(parsed)
    return out


def _resolve_benchmark(benchmark: str | None, given: dict | None) -> tuple[str, dict]:
    from clusterbench.benchmarks import ALIASES

    name = ALIASES.get(benchmark, benchmark) if benchmark else "node"
    allowed = node_benchmarks()
    if name not in allowed:
        raise UsageError(f"'{benchmark}' is not a node benchmark", f"choose from {', '.join(allowed)}")
    return name, dict(given or {})


def sweep_node(hosts: Sequence[str] | None = None, benchmark: str | None = None, *, given: dict | None = None,
               profile: str = "quick", mpi: str | None = None, allow_root: bool = False,
               timeout: float | None = None, launch_timeout: float | None = None, store: Any = None,
               use_store: bool = True, python: str | None = None, node_cpus: dict[str, list[int]] | None = None,
               diagnose: bool = True, doctor_timeout: float = 60.0, tags: Sequence[str] = (), note: str | None = None,
               argv: Sequence[str] | None = None, progress: Progress | None = None,
               probe_data: dict | None = None, oversubscribe: bool = False) -> dict:
    """Run ``benchmark`` (default: the quick node profile) on every host at once as one launcher job,
    gather the figures, flag outlier nodes per figure and store the run; returns the ``--json``
    document (``sweep_schema`` 1; see :func:`format_sweep_node`). ``hosts`` None: the Slurm allocation
    this process runs in. Raises a one-line :class:`ClusterbenchError` on bad input, an unreachable
    host or a launcher that fails, with nothing stored."""
    from clusterbench import session
    from clusterbench.benchmarks.base import RunContext, allowed_cpus
    from clusterbench.benchmarks.mpi.common import sim_cluster_of
    from clusterbench.launch import mpi as mpimod
    from clusterbench.launch.mpi.hosts import _check_name
    from clusterbench.store.names import check_note, check_tag

    progress = progress or Progress()
    t_start = time.monotonic()
    names, _ = resolve_hosts(hosts)
    name, given = _resolve_benchmark(benchmark, given)
    tags = list(dict.fromkeys(check_tag(t) for t in tags))
    check_note(note)
    timeout = DEFAULT_TIMEOUT if timeout is None else float(timeout)
    if not timeout > 0:
        raise UsageError(f"--timeout {timeout:g} is not allowed", "give a number of seconds above 0")
    for h in names:
        _check_name(h, f"host '{h}'")
    sim = sim_cluster_of([mpimod.Host(h, 1) for h in names])
    if sim is None:
        from clusterbench.launch import simcluster

        c = simcluster.load()
        if c is not None and any(h in {n.name for n in c.nodes} for h in names):
            odd = [h for h in names if h not in {n.name for n in c.nodes}]
            raise UsageError(f"{odd[0]} is not a node of the virtual cluster ({', '.join(n.name for n in c.nodes)})",
                             "sweep the virtual cluster's nodes or real hosts, not both")

    # validate and build here first: bad input or a missing compiler fails before anything starts
    probe_data = probe_data if probe_data is not None else __import__("clusterbench.probe", fromlist=["probe"]).probe()
    ctx = RunContext(probe=probe_data, profile=profile, timeout=timeout, oversubscribe=True)
    t_prep = time.monotonic()
    steps = session.plan([name], {name: given}, ctx)
    fillers: dict[int, int] = {}
    if sim is not None:
        cpus_here = allowed_cpus(ctx)
        node_cpus = dict(node_cpus or {})
        unknown = [n for n in node_cpus if n not in names]
        if unknown:
            raise UsageError(f"--node-cpus names {unknown[0]}, which is not one of the hosts", "name the hosts swept")
        bad = [(n, c) for n, cs in node_cpus.items() for c in cs if c not in cpus_here]
        if bad:
            raise UsageError(f"--node-cpus {bad[0][0]}={bad[0][1]}: cpu {bad[0][1]} is not one this process may use "
                             f"({','.join(map(str, cpus_here))})", "give cpus of this machine")
        placed = [h for h in names if h not in node_cpus]
        share = len(placed) > len(cpus_here)
        if share and not oversubscribe:
            raise UsageError(f"{len(placed)} virtual nodes need a cpu each and this process may use "
                             f"{len(cpus_here)} ({','.join(map(str, cpus_here))})",
                             f"sweep {len(cpus_here)} nodes or fewer, add --oversubscribe (the nodes then share every "
                             "cpu equally and each figure is per share), or place them with --node-cpus")
        taken = sorted({c for cs in node_cpus.values() for c in cs})
        node_cpus = {**default_node_cpus(placed, cpus_here, taken=taken), **node_cpus}
        node_cpus = {h: node_cpus[h] for h in names}
        if share:  # --oversubscribe: every node the same share of a cpu
            fillers = filler_loops(node_cpus)
    for bench, params in steps:
        bench.prepare(ctx, params)
    prepare_s = time.monotonic() - t_prep
    if use_store and store is None:
        from clusterbench.store import Store

        store = Store()
    if not use_store:
        store = None
    if store is not None:
        store.check_writable()

    spec = {"v": agent_mod.PROTOCOL, "benchmark": name, "given": given, "profile": profile, "timeout": timeout,
            "kernel_timeout": timeout, "hosts": names, "node_cpus": node_cpus or {}, "sync_dir": None}
    py = python or os.environ.get("CLUSTERBENCH_REMOTE_PYTHON")
    from clusterbench.launch import nodes as nodes_mod
    from clusterbench.launch import remote

    if py is None and not nodes_mod.separate(names):
        py = sys.executable  # nodes sharing this filesystem run this very Python
    # separate machines: the python of the node's own installation (`cluster install`), else python3
    python_argv = [py] if py else ["sh", "-c", remote.AUTO_PYTHON, "cb-python"]
    # the scheduler's own launcher (srun) for nodes of the job this runs in (a slurmd runs on each,
    # the virtual cluster's included); nodes outside the job are reached with mpirun
    from clusterbench.launch import allocation

    alloc = allocation.current()
    use_srun = alloc is not None and alloc.launcher == "srun" and set(names) <= set(alloc.hosts)
    n = len(names)
    lt = launch_timeout or (sim_launch_timeout(n) if sim is not None else mpimod.LAUNCH_TIMEOUT)
    attempts = mpimod.SIM_LAUNCH_ATTEMPTS if sim is not None else 1
    progress.start(f"sweep {n} nodes", 2 * n)
    for attempt in range(attempts):
        with tempfile.TemporaryDirectory(prefix="cb-sweep-") as wd:
            sync_dir = None
            # the virtual cluster shares this filesystem and these cpus; its machines (--machines) have
            # filesystems of their own, where the agents could never see the barrier's files: no barrier
            if sim is not None and not sim.machines:
                sync_dir = os.path.join(wd, "sync")
                os.mkdir(sync_dir)
            spec["sync_dir"] = sync_dir
            program = [*python_argv, "-m", "clusterbench.sweep.agent", agent_mod.encode_spec(spec)]
            job = build_job(names, program, wd, slurm=use_srun, sim=sim, mpi=mpi, allow_root=allow_root)
            try:
                gathered, wall, _ = run_job(job, names, timeout=timeout, launch_timeout=lt, sync_dir=sync_dir,
                                            progress=progress, fillers=fillers)
                break
            except mpimod.LaunchHung:
                if attempt + 1 >= attempts:
                    raise
    failed = [h for h in names if gathered.nodes[h].error is not None]
    if len(failed) == len(names):  # nothing to keep: nothing is stored
        h = failed[0]
        raise KernelFailed(f"sweep node: every node failed; {h}: {gathered.nodes[h].error}"
                           + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""))
    doc = _document(name, given, profile, names, job, gathered, wall, prepare_s, sim, fillers)
    if doc["outliers"] and diagnose:
        _diagnose(doc, names, doctor_timeout, python)
    if store is not None:
        doc["run_id"] = _store_run(store, doc, gathered, name, profile, probe_data, ctx, sim, tags, note, argv)
        doc["store"] = str(store.path)
    doc["timing"]["total_s"] = time.monotonic() - t_start
    return doc


def _document(name: str, given: dict, profile: str, hosts: list[str], job: Job, g: Gather, wall: float,
              prepare_s: float, sim: Any, fillers: dict[int, int] | None = None) -> dict:
    reports = {h: g.nodes[h] for h in hosts}
    ok = {h: r.results for h, r in reports.items() if r.error is None}
    figs = [judge(f) for f in figures(ok)]
    out_list = []
    for f in figs:
        for node, fl in f["flags"].items():
            out_list.append({"node": node, "benchmark": f["benchmark"], "metric": f["metric"], "label": f["label"],
                             "unit": f["unit"], "higher_is_better": f["higher_is_better"], **fl, "causes": []})
    bench = {h: float(r.done.get("bench_s") or 0.0) for h, r in reports.items() if r.done}
    slowest = max(bench.values()) if bench else 0.0
    orch = max(0.0, wall - slowest)
    per_node = {h: {"rank": r.rank, "cpus": r.cpus, "ready_s": r.ready_s, "done_s": r.done_s,
                    "bench_s": bench.get(h), "results": len(r.results), "error": r.error} for h, r in reports.items()}
    notes: dict[str, list[str]] = {}
    shared = sharing_note({h: r.cpus for h, r in reports.items() if r.cpus}, fillers) if sim is not None else None
    if shared:
        notes[shared] = list(hosts)
    for h, r in reports.items():
        for text in (r.done or {}).get("notes") or []:
            notes.setdefault(text, []).append(h)
    return {
        "sweep_schema": SWEEP_SCHEMA, "kind": "node", "benchmark": name, "given": given, "profile": profile,
        "hosts": hosts, "launcher": job.launcher, "mpi": job.mpi, "command": job.command,
        "virtual_cluster": sim is not None,
        "node_cpus": {h: r.cpus for h, r in reports.items()},
        "filler_loops": {str(c): k for c, k in (fillers or {}).items()},
        "failed": {h: r.error for h, r in reports.items() if r.error is not None},
        "metrics": figs, "outliers": out_list,
        "method": outliers.METHOD,
        "threshold": {"z": outliers.Z_THRESHOLD, "min_rel": outliers.MIN_REL, "min_peers": outliers.MIN_PEERS},
        "causes": {}, "doctor": None,
        "timing": {"wall_s": wall, "bench_max_s": slowest, "orchestration_s": orch,
                   "orchestration_per_node_s": orch / len(hosts) if hosts else None, "prepare_s": prepare_s,
                   "per_node": per_node},
        "notes": [f"{t} ({', '.join(ns)})" if len(ns) < len(hosts) else t for t, ns in notes.items()],
        "run_id": None, "store": None,
    }


def _diagnose(doc: dict, hosts: list[str], timeout: float, python: str | None) -> None:
    from clusterbench import doctor

    flagged: dict[str, set[str]] = {}
    for o in doc["outliers"]:
        flagged.setdefault(o["node"], set()).add(o["benchmark"])
    try:
        res = doctor.diagnose(hosts, timeout=timeout, python=python)
    except ClusterbenchError as exc:
        doc["doctor"] = {"ran": False, "error": str(exc)}
        return
    causes = likely_causes(flagged, res.get("findings") or [], hosts)
    doc["doctor"] = {"ran": True, "error": None, "findings": len(res.get("findings") or []),
                     "cannot_tell": len(res.get("cannot_tell") or [])}
    doc["causes"] = causes
    for o in doc["outliers"]:
        rules = relevant_rules(o["benchmark"])
        o["causes"] = [c["rule"] for c in causes.get(o["node"], []) if c["rule"] in rules]


def _store_run(store: Any, doc: dict, g: Gather, name: str, profile: str, probe_data: dict, ctx: Any, sim: Any,
               tags: list[str], note: str | None, argv: Sequence[str] | None) -> str:
    from clusterbench.benchmarks.base import Result
    from clusterbench.analysis import consistency
    from clusterbench.session import new_run_record
    from clusterbench.store.db import now_iso

    hosts = doc["hosts"]
    record = new_run_record(list(argv) if argv else ["clusterbench", "sweep", "node", "--hosts", ",".join(hosts)],
                            probe_data, profile)
    nodes = {h: {"probe": g.nodes[h].probe, "network": g.nodes[h].network}
             for h in hosts if g.nodes[h].probe is not None}
    record["cluster"] = {"hosts": hosts, "sim_cluster": sim.to_json() if sim is not None else None, "nodes": nodes,
                         "differences": consistency.diff(nodes), "sweep": {"launcher": doc["launcher"],
                                                                           "node_cpus": doc["node_cpus"]}}
    record["builds"] = dict(ctx.builds)
    record["tags"], record["note"] = tags, note
    notes = list(doc["notes"])
    for o in doc["outliers"]:
        notes.append(f"sweep node: {o['node']} flagged on {o['label']}: {o['value']:.4g} {o['unit']}, "
                     f"{abs(o['rel']):.0%} {'below' if o['rel'] < 0 else 'above'} the median {o['median']:.4g}")
    for h, e in doc["failed"].items():
        notes.append(f"sweep node: {h} failed: {e}")
    store.begin_run(record)
    status, error = ("complete", None) if not doc["failed"] else ("incomplete", f"{len(doc['failed'])} node(s) failed")
    try:
        for h in hosts:
            for r in g.nodes[h].results if g.nodes[h].error is None else []:
                fields: dict[str, Any] = {k: r.get(k) for k in Result.__dataclass_fields__}
                fields["params"] = {**(r.get("params") or {}), "node": h}
                fields["limits"] = fields["limits"] or []
                fields["warnings"] = fields["warnings"] or []
                store.add_result(record["id"], Result(**fields))
    except BaseException as exc:
        status, error = "incomplete", f"storing failed: {exc}"
        raise
    finally:
        store.finish_run(record["id"], status, error, [], notes, ended=now_iso())
    return str(record["id"])


# --------------------------------------------------------------------------- printing

def _num(*values: float | None) -> list[str]:
    """Figures of one unit as text with one precision for all (:func:`clusterbench.units.format_values`)."""
    from clusterbench.units import format_values

    return format_values(None, values)


#: above this many nodes the figures are listed one per line instead of as a node table
WIDE_MAX = 8


def format_sweep_node(doc: dict) -> list[str]:
    """The sweep as text: what ran, a table of figures by node (flagged values marked ``!``), the
    flagged nodes with their likely causes, the method, timing and where it was stored."""
    from io import StringIO

    from clusterbench.ui import print_table

    hosts = doc["hosts"]
    t = doc["timing"]
    what = "the quick node profile" if doc["benchmark"] == "node" else doc["benchmark"]
    shown = ", ".join(hosts) if len(hosts) <= 8 else f"{hosts[0]} .. {hosts[-1]}"
    head = f"sweep node: {what} on {len(hosts)} nodes ({shown}), one {doc['launcher']} job"
    if doc.get("virtual_cluster"):
        head += "; virtual cluster: cpus " + ", ".join(f"{h}={','.join(map(str, c or []))}"
                                                        for h, c in doc["node_cpus"].items())
    lines = [head, f"benchmark {t['bench_max_s']:.1f} s (slowest node), job {t['wall_s']:.1f} s, orchestration "
                   f"{t['orchestration_s']:.1f} s ({t['orchestration_per_node_s']:.2f} s per node)", ""]
    ok = [h for h in hosts if h not in doc["failed"]]
    rows = []
    if len(ok) <= WIDE_MAX:
        header = ["figure", "unit", "median", "MAD", *ok]
        for f in doc["metrics"]:
            med, mad, *vals = _num(f["median"], f["mad"], *(f["values"].get(h) for h in ok))
            rows.append([f["label"], f["unit"] or "", med, mad,
                         *[(v + (" !" if h in f["flags"] else "")) if h in f["values"] else "-"
                           for h, v in zip(ok, vals)]])
    else:
        header = ["figure", "unit", "median", "MAD", "worst node", "flagged"]
        for f in doc["metrics"]:
            vals = f["values"]
            worst = (min if f["higher_is_better"] else max)(vals, key=vals.get) if vals else None
            med, mad, worst_v, *flagged = _num(f["median"], f["mad"], vals[worst] if worst else None,
                                               *(fl["value"] for fl in f["flags"].values()))
            rows.append([f["label"], f["unit"] or "", med, mad, f"{worst} {worst_v}" if worst else "-",
                         ", ".join(f"{h} {v}" for h, v in zip(f["flags"], flagged)) or "-"])
    buf = StringIO()
    print_table(rows, header, buf)
    lines += buf.getvalue().rstrip("\n").splitlines()
    lines.append("")
    if doc["outliers"]:
        lines.append(f"outliers ({len(doc['outliers'])}):")
        for o in doc["outliers"]:
            z = "" if o["z"] is None else f", z {o['z']:+.1f}"
            value, median = _num(o["value"], o["median"])
            lines.append(f"  {o['node']}: {o['label']} {value} {o['unit']}, {abs(o['rel']):.0%} "
                         f"{'below' if o['rel'] < 0 else 'above'} the median {median}{z}")
        lines.append("likely causes (doctor's findings on the node alone that bear on those figures):")
        d = doc.get("doctor")
        for node in dict.fromkeys(o["node"] for o in doc["outliers"]):
            cs = doc["causes"].get(node) or []
            if cs:
                for c in cs:
                    lines.append(f"  {node}: {c['title']} ({c['rule']}): {c['summary']}")
            elif d and not d.get("ran"):
                lines.append(f"  {node}: doctor could not read the nodes: {d.get('error')}")
            elif d:
                lines.append(f"  {node}: none of doctor's rules fires on it alone (load from other programs, a "
                             "throttled or shared CPU, hardware?)")
            else:
                lines.append(f"  {node}: doctor was not asked")
    elif len(ok) < outliers.MIN_PEERS:
        lines.append(f"outliers: not judged: {len(ok)} node{'s' if len(ok) != 1 else ''} with figures, the method "
                     f"needs {outliers.MIN_PEERS} or more")
    else:
        lines.append(f"outliers: none among {len(doc['metrics'])} figures")
    lines.append(f"method: {doc['method']}")
    for h, e in doc["failed"].items():
        lines.append(f"failed: {h}: {e}")
    for text in doc.get("notes") or []:
        lines.append(f"note: {text}")
    if doc.get("run_id"):
        lines.append(f"run {doc['run_id']} stored in {doc['store']} (per node: clusterbench results table BENCHMARK "
                     f"--rows node --runs {doc['run_id'][:8]})")
    return lines
