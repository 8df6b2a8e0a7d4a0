"""Where HPL's ranks run: the topology (pure: a rank per core; hybrid: a rank per node or socket
with a threaded BLAS) turned into ranks, their hosts and cpus (:func:`place_hpl_ranks`), and the
cpu lists the ranks report (:func:`cpuset`)."""
from __future__ import annotations

from typing import Any

from clusterbench.errors import UsageError
from clusterbench.launch import mpi as mpimod
from clusterbench.benchmarks.base import RunContext, allowed_cpus, placement
from clusterbench.benchmarks.mpi.common import host_tuples, sim_cluster_of
from clusterbench.benchmarks.mpi.ring import assign_ranks


def cpuset(text: str) -> set[int]:
    """'0-3,8' -> {0, 1, 2, 3, 8} (the ranks' placement report)."""
    out: set[int] = set()
    for part in filter(None, (text or "").split(",")):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def hybrid_groups(ctx: RunContext, cpus: list[int], per: str) -> list[list[int]]:
    """The cpus of each hybrid rank on a node: all of ``cpus`` (per node), or those of each socket
    (per socket; sockets from the probe, in order). Sockets with different numbers of usable cores
    are refused: every rank runs the same number of BLAS threads."""
    if per != "socket":
        return [list(cpus)]
    package = {c["pu"]: c.get("package", 0) for c in (ctx.probe.get("topology") or {}).get("cpus") or []}
    groups: dict[int, list[int]] = {}
    for c in cpus:
        groups.setdefault(package.get(c, 0), []).append(c)
    out = [groups[k] for k in sorted(groups)]
    if len({len(g) for g in out}) > 1:
        raise UsageError("the sockets have different numbers of usable cores ("
                         + ", ".join(f"socket {k}: {len(groups[k])}" for k in sorted(groups)) + ")",
                         "use --hybrid-per node, or --topology pure")
    return out


def place_hpl_ranks(ctx: RunContext, p: dict[str, Any], hosts: list[mpimod.Host] | None) -> None:
    """ranks, their hosts and cpus, and the BLAS threads per rank, from the topology."""
    allowed = allowed_cpus(ctx)
    cores = min(ctx.n_cores, len(allowed))
    hybrid = p["topology"] == "hybrid"
    nodes: list[str | None] = [h.name for h in hosts] if hosts else [None]
    rank_hosts: list[str | None]
    if hybrid:
        groups = hybrid_groups(ctx, placement(ctx, cores), p["hybrid_per"])
        per_node = len(groups)
        ranks = p["ranks"] or len(nodes) * per_node
        if ranks != len(nodes) * per_node:
            raise UsageError(f"hybrid runs one rank per {p['hybrid_per']} ({per_node} per node): {ranks} ranks "
                             f"on {len(nodes)} node(s)", f"use --ranks {len(nodes) * per_node} (or --topology pure)")
        p["threads_per_rank"] = len(groups[0])
        p["rank_cpus"] = groups[0]
        p["rank_cpu_groups"] = groups  # the cpus of the node's 1st, 2nd, ... rank
        rank_hosts = [nodes[i // per_node] for i in range(ranks)]  # mpirun's ppr:N:node fills a node first
        p["places"] = [(h, None) for h in rank_hosts]
        p["shared_cpus"] = False
    else:
        slots = sum(h.slots for h in hosts) if hosts else cores
        ranks = p["ranks"] or slots
        p["threads_per_rank"] = 1
        p["rank_cpus"] = []
        p["rank_cpu_groups"] = []
        if hosts:
            mpimod.check_slots(hosts, ranks, ctx.oversubscribe)
            named = assign_ranks(hosts, ranks)
            rank_hosts = list(named)
            if sim_cluster_of(hosts) is not None or len(hosts) == 1:
                cpus = placement(ctx, ranks)
            else:  # each host numbers its ranks' cores from its first
                seen: dict[str, int] = {}
                order = placement(ctx, max(named.count(h.name) for h in hosts))
                cpus = []
                for name in named:
                    cpus.append(order[seen.get(name, 0)])
                    seen[name] = seen.get(name, 0) + 1
            shared_machine = sim_cluster_of(hosts) is not None or len(hosts) == 1
        else:
            if ranks > len(allowed) and not ctx.oversubscribe:
                raise UsageError(f"{ranks} ranks exceed the {len(allowed)} cpus this process may use",
                                 f"use --ranks {len(allowed)} or fewer, or add --oversubscribe")
            cpus = placement(ctx, ranks)
            rank_hosts = [None] * ranks
            shared_machine = True
        keys = [(None if shared_machine else h, c) for h, c in zip(rank_hosts, cpus)]
        p["shared_cpus"] = len(set(keys)) < len(keys)
        if p["shared_cpus"] and not ctx.oversubscribe:
            raise UsageError(f"{ranks} ranks need {ranks} cores and {len(set(keys))} are free",
                             "run fewer ranks, or add --oversubscribe")
        p["places"] = list(zip(rank_hosts, cpus))
    p["ranks"] = ranks
    p["nodes"] = len(nodes)
    p["host_list"] = host_tuples(hosts)

