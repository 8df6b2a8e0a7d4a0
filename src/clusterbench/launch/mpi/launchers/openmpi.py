"""Open MPI's ``mpirun``: a hostfile written from the parsed hosts, an explicit rankfile (physical cpu
numbers) from the per-rank placement, the transport's MCA settings, the verbose switches that prove
the transport, ``--allow-run-as-root`` only when the caller asks, and the virtual cluster's agent."""
from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from pathlib import Path

from clusterbench.errors import EnvironmentProblem, UsageError
from clusterbench.launch import remote, simcluster
from clusterbench.launch.mpi.detect import MpiInstall
from clusterbench.launch.mpi.launchers import OutputTag, register_launcher
from clusterbench.launch.mpi.spec import LaunchSpec
from clusterbench.launch.mpi.transport import OMPI_TRANSPORT_MCA, PROOF_ARGS, UCX_PROOF_ENV, rdma_env


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


#: ``--tag-output``: ``[JOB,RANK]<stdout>:`` before every chunk mpirun forwards and after every
#: newline inside it
TAG = OutputTag(rb"\[[^\],\[]+,(\d+)\]<stdout>:", anywhere=True)


@register_launcher("mpirun", serves="mpirun", mpi=("openmpi",), tag=TAG)
def mpirun_command(mpi: MpiInstall, spec: LaunchSpec, program: Sequence[str], wd: Path,
                   env: dict[str, str]) -> list[str]:
    """``mpirun -np N --hostfile ... --rankfile ... --mca ... -x VAR ... program``; one tagged
    process per node: ``--map-by ppr:1:node --bind-to none --tag-output --enable-recovery``."""
    cmd = [mpi.mpirun]
    if _is_root():
        if not spec.allow_root:
            raise UsageError("as root, Open MPI needs --allow-run-as-root",
                             "add --allow-root (or set CLUSTERBENCH_ALLOW_RUN_AS_ROOT=1), "
                             "or run clusterbench as an ordinary user")
        cmd.append("--allow-run-as-root")
    cmd += ["-np", str(spec.nranks)]
    # Session directories of this run only: every daemon on a host (and on every node of the
    # virtual cluster, which share one file system and host name) starts from a clean slate. Not
    # on separate machines: the folder is this machine's, and each node's daemon would leave it
    # behind in its own /tmp (there Open MPI's default session directory is the node's own).
    if not spec.hosts or (spec.sim is not None and not getattr(spec.sim, "machines", False)):
        cmd += ["--mca", "orte_tmpdir_base", str(wd)]
    if spec.hosts:
        hf = wd / "hostfile"
        hf.write_text("".join(f"{h.name} slots={h.slots}" + (f" max_slots={h.max_slots}" if h.max_slots else "")
                              + "\n" for h in spec.hosts))
        cmd += ["--hostfile", str(hf)]
    if spec.places and all(p.cpu is not None for p in spec.places):
        local = socket.gethostname()
        rf = wd / "rankfile"
        rf.write_text("".join(f"rank {i}={p.host or local} slot={p.cpu}\n" for i, p in enumerate(spec.places)))
        cmd += ["--rankfile", str(rf), "--mca", "rmaps_rank_file_physical", "1"]
    elif spec.places and any(p.cpu is not None for p in spec.places):
        raise UsageError("give a cpu for every rank or for none", "list one cpu per rank")
    elif spec.per_node:
        cmd += ["--map-by", f"ppr:{spec.per_node}:node", "--bind-to", "none"]
    else:
        cmd += ["--map-by", "core", "--bind-to", "core"]
    if spec.oversubscribe:
        cmd.append("--oversubscribe")
    if (spec.yield_when_idle or _shares_a_cpu(spec)) and "mpi_yield_when_idle" not in spec.extra_args:
        # ranks that take turns on one core: a rank waiting in MPI gives the core up instead of
        # spinning out its time slice (a 2-rank exchange on one core: 2 s -> 10 ms)
        cmd += ["--mca", "mpi_yield_when_idle", "1"]
    if spec.report_bindings:
        cmd.append("--report-bindings")
    if spec.transport == "rdma":
        if not mpi.has_ucx:
            raise EnvironmentProblem("--transport rdma needs Open MPI's UCX pml, which this Open MPI lacks",
                                     "install an Open MPI built with UCX, or use --transport tcp")
        env["UCX_TLS"] = spec.ucx_tls
        env.update(rdma_env())  # soft-RoCE: UD's wireup needs UCX's GRH check off
        if spec.prove_transport:  # UCX's endpoint lines name the lanes (rc_verbs/rxe0:1): the device proven
            env.update(UCX_PROOF_ENV)
    cmd += OMPI_TRANSPORT_MCA[spec.transport]
    if spec.transport == "tcp" and spec.tcp_include:
        cmd += ["--mca", "btl_tcp_if_include", spec.tcp_include]
    if spec.prove_transport:
        cmd += PROOF_ARGS
    for key in sorted(env):
        cmd += ["-x", key]
    if spec.sim is not None:
        cmd += _without_mca(simcluster.mpirun_args(spec.sim), cmd)
    if spec.hosts and (spec.sim is None or getattr(spec.sim, "machines", False)) \
            and "plm_rsh_agent" not in spec.extra_args and "plm_rsh_args" not in spec.extra_args:
        share = remote.launcher_ssh_options([h.name for h in spec.hosts])
        if share:  # its daemons start over the ssh connections clusterbench already has
            cmd += ["--mca", "plm_rsh_args", share]
    if spec.tagged:  # every chunk tagged with its rank; a process that ends leaves the others running
        cmd += ["--tag-output", "--enable-recovery"]
    cmd += list(spec.extra_args)
    return cmd + list(program)


def _shares_a_cpu(spec: LaunchSpec) -> bool:
    """Whether two ranks are placed on one cpu of one machine (the virtual cluster's nodes share
    this machine's cpus)."""
    if not spec.places or any(p.cpu is None for p in spec.places):
        return False
    keys = [(None if spec.sim is not None else p.host, p.cpu) for p in spec.places]
    return len(set(keys)) < len(keys)


def _without_mca(args: list[str], cmd: list[str]) -> list[str]:
    """``args`` less the ``--mca NAME VALUE`` triples whose NAME ``cmd`` already sets (mpirun
    refuses a parameter given twice, e.g. btl_tcp_if_include from --tcp-include and the cluster)."""
    have = {cmd[i + 1] for i, a in enumerate(cmd[:-1]) if a == "--mca"}
    out, i = [], 0
    while i < len(args):
        if args[i] == "--mca" and i + 2 < len(args) and args[i + 1] in have:
            i += 3
            continue
        out.append(args[i])
        i += 1
    return out
