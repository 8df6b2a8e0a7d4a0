"""What a launch asks for: the ranks, where each should run, the transport and the options."""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any

from clusterbench.errors import UsageError
from clusterbench.launch.mpi.hosts import Host

@dataclass(frozen=True)
class RankPlace:
    """Where one rank should run: a host (None: this node) and a cpu (None: MPI's choice)."""

    host: str | None = None
    cpu: int | None = None


@dataclass
class LaunchSpec:
    nranks: int
    hosts: list[Host] | None = None          # None: this node only
    places: list[RankPlace] | None = None    # per rank, in rank order
    transport: str = "auto"
    tcp_include: str | None = None           # CIDR or interface for btl_tcp_if_include
    ucx_tls: str = "rc,ud,self"              # UCX transports for --transport rdma
    allow_root: bool = False
    oversubscribe: bool = False
    report_bindings: bool = False
    prove_transport: bool = True
    #: ranks that share a cpu and must give it up while they wait in MPI (a wait otherwise lasts the
    #: scheduler's time slice); each launcher says it its own way (Open MPI: mpi_yield_when_idle)
    yield_when_idle: bool = False
    #: N ranks per node, left unbound by the launcher: each binds itself (HPL's hybrid ranks, whose
    #: BLAS threads take the rank's cores); ``places`` then name hosts, not cpus
    per_node: int | None = None
    #: the one-tagged-process-per-node mode (a per-node agent such as ``sweep node``'s; with
    #: ``per_node=1``, see :func:`clusterbench.launch.mpi.pernode.per_node_spec`): the program is not
    #: an MPI program, every line a process prints carries its rank in the launcher's own tag
    #: (``Launcher.tag``), and a process that ends does not end the others (the launcher's recovery mode)
    tagged: bool = False
    #: the job's name where the launcher has one (srun's --job-name)
    job_name: str = "clusterbench"
    #: the launcher's own options, for what no field above says; a benchmark states what it needs in
    #: the fields instead
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)    # exported to every rank (-x)
    prefix: list[str] = field(default_factory=list)      # run the launcher under this, e.g. ip netns exec
    sim: Any = None  # a simcluster.SimCluster: its launch agent and network, in the MPI's own options
    launcher: str = "auto"  # auto (srun inside a Slurm allocation, else the MPI's own), mpirun, srun


#: an interface name as Linux allows it in practice (IFNAMSIZ 16: at most 15 characters), and nothing
#: a shell would read: the value reaches every node's MPI daemon through its launch agent (ssh, or the
#: virtual cluster's ``sh -c``), so it is checked here, once, before any host is touched, for every kind
#: of host alike (once: ``eth0;id`` was refused locally and passed on to virtual-cluster nodes)
_IFACE_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$")


def check_cidr(value: str) -> None:
    """``--tcp-include``: comma-separated networks (CIDR) or interface names; a UsageError otherwise."""
    for part in str(value).split(","):
        if "/" in part:
            try:
                ipaddress.ip_network(part, strict=False)
            except ValueError as exc:
                raise UsageError(f"--tcp-include '{part}' is not a network (CIDR) or interface name",
                                 "write e.g. 198.18.0.0/15 or eth1") from exc
        elif not _IFACE_RE.match(part):
            shown = "".join(ch if ch.isprintable() else "?" for ch in part)[:40]
            raise UsageError(f"--tcp-include '{shown}' is not a network (CIDR) or interface name",
                             "write e.g. 198.18.0.0/15 or eth1 (letters, digits, '_', '.', '-'; up to 15 characters)")
