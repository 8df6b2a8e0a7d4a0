"""What a launch asks for: the ranks, where each should run, the transport and the options."""
from __future__ import annotations

import ipaddress
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
    extra_args: list[str] = field(default_factory=list)  # e.g. the sim-cluster's plm_rsh_agent
    env: dict[str, str] = field(default_factory=dict)    # exported to every rank (-x)
    prefix: list[str] = field(default_factory=list)      # run the launcher under this, e.g. ip netns exec
    sim: Any = None  # a simcluster.SimCluster: its launch agent and network, in the MPI's own options
    launcher: str = "auto"  # auto (srun inside a Slurm allocation, else the MPI's own), mpirun, srun


def _check_cidr(value: str) -> None:
    for part in value.split(","):
        if "/" in part:
            try:
                ipaddress.ip_network(part, strict=False)
            except ValueError as exc:
                raise UsageError(f"'{part}' is not a network (CIDR) or interface name",
                                 "write e.g. 198.18.0.0/15 or eth1") from exc
