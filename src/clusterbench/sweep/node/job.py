"""The sweep's one launcher job: its command (one tagged agent per node), its output demultiplexed into
each node's report, and running it to the end or to a lost node."""
from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterbench.benchmarks.base import Progress, Result
from clusterbench.errors import (
    EnvironmentProblem,
    KernelFailed,
)
from clusterbench.launch.mpi.launchers import openmpi, srun
from clusterbench.launch.mpi.pernode import Demux
from clusterbench.text import seconds
from clusterbench.sweep.node.hosts import start_fillers

#: seconds the launcher may take to exit once every node has reported
FINALIZE_GRACE = 15.0
#: seconds without a line (record or beat, every agent.BEAT_S) after which a node's agent is taken for
#: lost (killed with its supervisor, node or network down) and the others go on without it
LOST_S = 10.0
#: how many lines of the launcher's stderr an error message may quote from
_TAIL = 16384


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
    evidence: dict | None = None  # doctor's evidence of the node, when the sweep asked for it
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
        elif kind == "evidence":
            rep.evidence = rec.get("evidence") if isinstance(rec.get("evidence"), dict) else None
        elif kind == "ready":
            rep.ready_s = now
        elif kind == "result":
            try:
                rep.results.append(Result.from_json(rec["result"]))
            except (TypeError, AttributeError):
                self._broken(rep.name, "a figure that is not a result")
                return
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
    # one agent that dies must not end the others (once: a killed agent lost the whole sweep): the
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
            sync_dir: str | None, progress: Progress, fillers: dict[int, int] | None = None,
            lost_s: float = LOST_S) -> tuple[Gather, float, str]:
    """Run the job until every node has reported (or failed) and the launcher has exited; returns
    (what was gathered, wall seconds from launch to exit, the launcher's stderr tail). The whole job
    (launcher, daemons, agents) is ended on timeout, failure or Ctrl-C. ``fillers``: busy loops per cpu
    (:func:`filler_loops`) run from the start barrier to the release.

    A node whose agent is killed, or that goes silent for ``lost_s`` seconds, is marked failed and
    the others go on; when the launcher itself ends early, the nodes that reported are kept and the
    others failed with the reason (a rank killed and by what, the virtual cluster taken down, a node
    lost)."""
    from clusterbench import process
    from clusterbench.launch.mpi.run import GENERIC_FIX, GONE_FIX, LaunchHung, explain_failure, cluster_gone

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
        for h in g.lost(now, lost_s):  # its agent and supervisor killed, or its node gone: the others go on
            pid = (g.nodes[h].hello or {}).get("pid")
            g.fail(h, f"its agent{f' (pid {pid})' if pid else ''} stopped answering (nothing from it for "
                      f"{lost_s:g} s): it was killed with its supervisor, or the node or its network went down")
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
            msg, fix = explain_failure(err.tail_text, None, job.launcher)
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
                msg, fix = explain_failure(text, proc.returncode, job.launcher, local=job.sim, before=memory)
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
