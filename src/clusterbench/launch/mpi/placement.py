"""Placement verification: refuse a run whose ranks did not land where they were asked to."""
from __future__ import annotations

from collections.abc import Sequence

from clusterbench.errors import KernelFailed
from clusterbench.launch.mpi.spec import RankPlace

def _cpuset(text: str) -> set[int]:
    out: set[int] = set()
    for part in (text or "").split(","):
        if not part:
            continue
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def node_key(rank_info: dict) -> str:
    """The node a rank ran on: the virtual-cluster node if set (namespaces share a host name)."""
    return rank_info.get("node") or rank_info.get("host") or "?"


def verify_placement(ranks: Sequence[dict], wanted: Sequence[RankPlace] | None = None,
                     different_nodes: Sequence[tuple[int, int]] = (), allow_shared_cpu: bool = False) -> None:
    """Refuse (KernelFailed) a run whose placement differs from the one asked for.

    ``ranks`` is the kernel's info record ``ranks`` list ({rank, host, node, cpus, cpu}).
    Checks: each rank bound to its wanted cpu; no two ranks bound to the same single cpu on
    one node; each pair in ``different_nodes`` on different nodes."""
    by_rank = {int(r["rank"]): r for r in ranks}
    if wanted:
        for i, w in enumerate(wanted):
            r = by_rank.get(i)
            if r is None:
                raise KernelFailed(f"rank {i} did not report its placement", "report this as a bug")
            if w.cpu is not None:
                cpus = _cpuset(r.get("cpus", ""))
                if cpus != {w.cpu}:
                    raise KernelFailed(f"rank {i} is bound to cpus {r.get('cpus') or '?'}, not to cpu {w.cpu} "
                                       f"as asked", "check cgroup/cpuset limits on the node and the rankfile")
    if not allow_shared_cpu:
        seen: dict[tuple[str, int], int] = {}
        for i in sorted(by_rank):
            cpus = _cpuset(by_rank[i].get("cpus", ""))
            if len(cpus) == 1:
                key = (node_key(by_rank[i]), next(iter(cpus)))
                if key in seen:
                    raise KernelFailed(f"ranks {seen[key]} and {i} are both bound to cpu {key[1]} on {key[0]}",
                                       "place the ranks on different cpus (a shared core halves both)")
                seen[key] = i
    for a, b in different_nodes:
        ra, rb = by_rank.get(a), by_rank.get(b)
        if ra is None or rb is None:
            raise KernelFailed(f"ranks {a} and {b} did not both report their placement", "report this as a bug")
        if node_key(ra) == node_key(rb):
            raise KernelFailed(f"inter-node ranks {a} and {b} both ran on {node_key(ra)}",
                               "check the host list: a host name that resolves to this machine runs locally")
