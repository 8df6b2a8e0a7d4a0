"""One tagged process per node: the launch mode that starts a per-node agent (``sweep node``'s) through
the launcher registry, as the MPI benchmarks start their ranks.

:func:`build_per_node` asks the launcher serving the choice (``mpirun``: the MPI's own, found first;
``srun``: Slurm's, inside an allocation) for the command that starts ``program`` once on every host,
unbound, each line it prints tagged with its rank (:attr:`Launcher.tag`), a process that ends leaving
the others running (:attr:`LaunchSpec.tagged`). Rank ``i`` is started for ``hosts[i]``; the process
tells its node's name from its environment (the virtual cluster's ``$CB_SIM_NODE``, Slurm's
``$SLURMD_NODENAME``, the host name), else from its rank. :class:`Demux` rebuilds each rank's own
stream from the launcher's combined output.
"""
from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from clusterbench.launch.mpi.detect import MpiInstall, detect_mpi
from clusterbench.launch.mpi.hosts import Host
from clusterbench.launch.mpi.launchers import OutputTag, build_command, launcher_for, needs_mpi
from clusterbench.launch.mpi.run import SIM_LAUNCH_TIMEOUT
from clusterbench.launch.mpi.spec import LaunchSpec


class Demux:
    """Each rank's own byte stream rebuilt from a launcher's combined stdout.

    Open MPI (``--tag-output``: ``[JOB,RANK]<stdout>:``) and MPICH (``-prepend-pattern``) put the tag
    at the start of every chunk they forward and after every newline inside it, so a line cut where
    the launcher read a pipe continues after the next tag of the same rank, whatever came between
    (``anywhere``). srun (``--label``: ``RANK: ``) labels whole lines (``anywhere`` False). Text before
    the first tag of a line is the launcher's own (``rank`` None)."""

    def __init__(self, pattern: bytes, anywhere: bool) -> None:
        self.re = re.compile(pattern)
        self.anywhere = anywhere
        self.bufs: dict[int, bytes] = {}

    @classmethod
    def of(cls, tag: OutputTag) -> Demux:
        return cls(tag.pattern, tag.anywhere)

    def feed(self, line: bytes) -> list[tuple[int | None, bytes]]:
        """The complete lines ``line`` finishes, as ``(rank, line)``."""
        if not self.anywhere:
            m = self.re.match(line)
            return [(int(m.group(1)), line[m.end():])] if m else [(None, line)]
        parts = self.re.split(line)
        out: list[tuple[int | None, bytes]] = []
        if parts[0]:
            out.append((None, parts[0]))
        segs = list(zip(parts[1::2], parts[2::2]))
        for j, (rank_b, seg) in enumerate(segs):
            rank = int(rank_b)
            buf = self.bufs.get(rank, b"") + seg
            if j == len(segs) - 1:  # the newline that ended this physical line is this rank's
                out.append((rank, buf))
                buf = b""
            self.bufs[rank] = buf
        return out


def sim_launch_timeout(n: int) -> float:
    """The launch timeout of ``n`` per-node agents on the virtual cluster: 15 s (as MPI runs there) and
    1 s more per node (every agent is a Python that starts on this machine's cpus)."""
    return SIM_LAUNCH_TIMEOUT + 1.0 * n


def per_node_spec(hosts: Sequence[str], *, launcher: str, env: dict[str, str] | None = None,
                  allow_root: bool = False, job_name: str = "clusterbench") -> LaunchSpec:
    """The spec of one tagged process per host, unbound, not an MPI program (no transport to prove)."""
    return LaunchSpec(nranks=len(hosts), hosts=[Host(h, 1) for h in hosts], per_node=1, tagged=True,
                      allow_root=allow_root, prove_transport=False, env=dict(env or {}), launcher=launcher,
                      job_name=job_name)


@dataclass
class PerNode:
    """The built launch: the argv (under the virtual cluster's prefix where it has one), the
    environment changes, what to take out of the launcher's own environment, how to read its output."""

    command: list[str]
    env: dict[str, str]
    launcher: str             # the launcher's program name, for messages (srun, mpirun.openmpi, ...)
    demux: Demux
    mpi: MpiInstall | None    # the MPI whose launcher it is (None: a launcher of any program)
    unset: tuple[str, ...] = ()


def build_per_node(hosts: Sequence[str], program: Sequence[str], workdir: str, *, launcher: str,
                   env: dict[str, str] | None = None, mpi: str | None = None, allow_root: bool = False,
                   sim: Any = None, job_name: str = "clusterbench", head_only: Sequence[str] = ()) -> PerNode:
    """Start ``program`` once on every host through the launcher serving ``launcher`` (a choice,
    not ``auto``). ``mpi``: which MPI (``--mpi``), found only when that launcher is the MPI's own;
    ``sim``: the virtual cluster whose launch agent the MPI's own launcher goes through (a
    scheduler's launcher reaches its nodes itself); ``head_only``: variables of this machine that a
    launcher handing its whole environment to the processes (srun) must not have."""
    spec = per_node_spec(hosts, launcher=launcher, env=env, allow_root=allow_root, job_name=job_name)
    inst = detect_mpi(kind=mpi) if needs_mpi(launcher) else None
    if sim is not None and inst is not None:
        from clusterbench.launch import simcluster

        spec.prefix = simcluster.exec_prefix("head", sim)
        spec.sim = sim
    chosen = launcher_for(inst, spec)
    assert chosen.tag is not None, f"{chosen.name} registered without its output tag"
    cmd, env_add = build_command(inst, spec, program, workdir)
    return PerNode([*spec.prefix, *cmd], {**spec.env, **env_add}, os.path.basename(cmd[0]), Demux.of(chosen.tag),
                   inst, tuple(head_only) if chosen.exports_env else ())
