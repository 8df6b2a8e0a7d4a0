"""MPICH's Hydra ``mpiexec``: a hostfile in rank order, each rank pinned to its cpu by a wrapper keyed
on ``PMI_RANK``, the virtual cluster's agent as ``-launcher-exec``; on ch4:ucx the transport maps to
``MPIR_CVAR_NOLOCAL``/``UCX_TLS`` and is proven from UCX's endpoint lines (``UCX_LOG_LEVEL=info``);
other devices run ``auto`` only, recorded "unproven"."""
from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from clusterbench.errors import EnvironmentProblem, UsageError
from clusterbench.launch import simcluster
from clusterbench.launch.mpi.detect import MpiInstall
from clusterbench.launch.mpi.launchers import OutputTag, register_launcher
from clusterbench.launch.mpi.spec import LaunchSpec
from clusterbench.launch.mpi.transport import UCX_PROOF_ENV, rdma_env

#: MPICH ch4:ucx environment per transport. MPICH moves data between ranks of one node through its
#: own POSIX shared memory and everything else through UCX; MPIR_CVAR_NOLOCAL=1 sends all of it
#: through UCX, so UCX_TLS alone decides (as Open MPI's pml ucx). ``shm`` keeps UCX to shared
#: memory as well, so whichever path a message takes, it is shared memory.
MPICH_UCX_TRANSPORT_ENV: dict[str, dict[str, str]] = {
    "auto": {},
    "shm": {"UCX_TLS": "self,sm"},
    "tcp": {"MPIR_CVAR_NOLOCAL": "1", "UCX_TLS": "self,tcp"},
    "rdma": {"MPIR_CVAR_NOLOCAL": "1"},  # UCX_TLS from LaunchSpec.ucx_tls
}
#: the proof's environment: UCX's endpoint lines on stderr (transport.UCX_PROOF_ENV)
MPICH_PROOF_ENV = UCX_PROOF_ENV

_BIND_SCRIPT = """#!/bin/sh
# clusterbench: bind each MPICH rank (PMI_RANK, set by Hydra) to its cpu, then run the kernel.
case "$PMI_RANK" in
@CASES@
*) echo "clusterbench: no cpu for MPI rank '$PMI_RANK'" >&2; exit 97 ;;
esac
exec @TASKSET@ -c "$cpu" "$@"
"""


def _mpich_hostfile(spec: LaunchSpec) -> str:
    """Hydra's ``host:N`` lines. With a host per rank, runs of ranks in rank order (Hydra fills
    the list in order, so rank i lands on its host); else the hosts and their slots."""
    if spec.places and all(p.host for p in spec.places):
        runs: list[list] = []
        for p in spec.places:
            if runs and runs[-1][0] == p.host:
                runs[-1][1] += 1
            else:
                runs.append([p.host, 1])
        return "".join(f"{h}:{n}\n" for h, n in runs)
    assert spec.hosts
    return "".join(f"{h.name}:{h.slots}\n" for h in spec.hosts)


def _mpich_bind_wrapper(spec: LaunchSpec, wd: Path, rank_var: str = "PMI_RANK") -> list[str]:
    """A per-rank wrapper that pins rank i to ``places[i].cpu`` with taskset. Hydra's own
    ``-bind-to user:a,b`` counts the ranks of each node from 0, so on two nodes sharing one
    machine's cores (the virtual cluster) both ranks would get the first cpu of the list. The
    script travels in the command line (``sh -c``), not in a file: on separate machines a file in
    this machine's work folder does not exist where the rank starts."""
    if not shutil.which("taskset"):
        raise EnvironmentProblem("taskset is missing (needed to place MPICH ranks on cpus)",
                                 "install util-linux")
    assert spec.places
    cases = "\n".join(f"{i}) cpu={p.cpu} ;;" for i, p in enumerate(spec.places))
    script = (_BIND_SCRIPT.replace("@CASES@", cases).replace("@TASKSET@", "taskset")
              .replace("PMI_RANK", rank_var))
    return ["/bin/sh", "-c", script, "cb-bind-rank"]


def mpich_transport_env(mpi: MpiInstall, spec: LaunchSpec) -> dict[str, str]:
    """The MPICH environment for ``spec.transport`` and the proof (ch4:ucx only: the mapping and
    the proof are UCX's; another device runs ``auto`` only and its transport stays unproven)."""
    if mpi.device != "ch4:ucx":
        if spec.transport != "auto":
            raise UsageError(f"--transport {spec.transport} is mapped for MPICH's ch4:ucx device only, "
                             f"this MPICH is {mpi.device or 'of unknown device'}", "use --transport auto")
        return {}
    env = dict(MPICH_UCX_TRANSPORT_ENV[spec.transport])
    if spec.transport == "rdma":
        env["UCX_TLS"] = spec.ucx_tls
        env.update(rdma_env())  # soft-RoCE: UD's wireup needs UCX's GRH check off
    if spec.transport == "tcp" and spec.tcp_include and "/" not in spec.tcp_include:
        env["UCX_NET_DEVICES"] = spec.tcp_include  # UCX takes interface names, not networks
    if spec.prove_transport:
        env.update(MPICH_PROOF_ENV)
    return env


#: ``-prepend-pattern``: Hydra puts this (``%r``: the rank) before every chunk it forwards
TAG_PATTERN = "[cbsweep-rank-%r]"
TAG = OutputTag(rb"\[cbsweep-rank-(\d+)\]", anywhere=True)


@register_launcher("mpiexec", serves="mpirun", mpi=("mpich",), tag=TAG)
def _mpich_command(mpi: MpiInstall, spec: LaunchSpec, program: Sequence[str], wd: Path,
                   env: dict[str, str]) -> list[str]:
    """Hydra: ``mpiexec -f hostfile -n N [-launcher-exec agent -iface IF] -genv ... bind-rank.sh prog``.

    Every variable the launch sets (transport, proof, ``spec.env``) goes to every rank with
    ``-genv`` and is also returned in ``env``; nothing is needed for root (Hydra has no check). One
    tagged process per node: ``-prepend-pattern ... -disable-auto-cleanup -ppn 1 -bind-to none``."""
    tenv = mpich_transport_env(mpi, spec)
    env.update({k: v for k, v in tenv.items() if k not in spec.env})
    cmd = [mpi.mpirun]
    if spec.hosts or (spec.places and all(p.host for p in spec.places)):
        hf = wd / "hostfile"
        hf.write_text(_mpich_hostfile(spec))
        cmd += ["-f", str(hf)]
    if spec.sim is not None:
        cmd += simcluster.mpiexec_args(spec.sim)
    cmd += ["-n", str(spec.nranks)]
    for key in sorted(env):
        cmd += ["-genv", key, env[key]]
    if spec.tagged:  # every chunk tagged with its rank; a process that ends leaves the others running
        cmd += ["-prepend-pattern", TAG_PATTERN, "-disable-auto-cleanup"]
    cmd += list(spec.extra_args)
    wrapper: list[str] = []
    if spec.places and all(p.cpu is not None for p in spec.places):
        wrapper = _mpich_bind_wrapper(spec, wd)
    elif spec.places and any(p.cpu is not None for p in spec.places):
        raise UsageError("give a cpu for every rank or for none", "list one cpu per rank")
    elif spec.per_node:
        cmd += ["-ppn", str(spec.per_node), "-bind-to", "none"]
    else:
        cmd += ["-bind-to", "core"]
    return cmd + wrapper + list(program)
