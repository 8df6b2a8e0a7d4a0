"""hpl-scaling: Rmax against node count (Duffy (2020) Fig. 5.4, Tables 5.4/5.5).

For each node count k of ``--nodes`` (``1..8``, ``1,2,4``; default 1 to the number of hosts) it
takes the first k hosts of ``--hosts``/``--hostfile`` (or of the virtual cluster that is up, one
slot per node, when neither is given), sizes N from ``--mem`` of those k nodes' memory (hpl's
rule), and runs ``hpl`` on every P x Q grid of the k nodes' ranks with P <= Q (``--grids all``,
as Duffy (2020) did) or on the squarest only (``--grids squarest``). Every run is a full ``hpl``
result in this run (Rmax, time, residual, breakdown); ``rmax`` of this benchmark is the best grid
of each k, with ``nodes`` = k, the grid that won, every grid's Rmax, and its % of Rpeak of the
cores used and of k nodes like this one.
"""
from __future__ import annotations

import re
from typing import Any

from clusterbench.errors import KernelFailed, UsageError
from clusterbench.benchmarks import get_benchmark, register
from clusterbench.benchmarks.mpi.common import (ALLOW_ROOT, HOSTFILE, LAUNCH_TIMEOUT, TCP_INCLUDE, TRANSPORT,
                                                parse_host_params)
from clusterbench.benchmarks.base import Benchmark, Metric, Param, Result, RunContext
from clusterbench.benchmarks.hpl.registry import ENGINES
from clusterbench.benchmarks.hpl.sizing import TOPOLOGIES, grids

GRID_MODES = ("all", "squarest")


def parse_nodes(text: str | None, most: int) -> list[int]:
    """'1..8' / '1-8' / '1,2,4' / '4' -> sorted node counts, each in 1..most."""
    if not text:
        return list(range(1, most + 1))
    out: list[int] = []
    for part in str(text).replace(" ", "").split(","):
        m = re.fullmatch(r"(\d+)(?:(?:\.\.|-)(\d+))?", part)
        if not m:
            raise UsageError(f"--nodes {text!r} is not a list of node counts", "write it like 1..8 or 1,2,4")
        a, b = int(m.group(1)), int(m.group(2) or m.group(1))
        out.extend(range(a, b + 1))
    counts = sorted(set(out))
    if not counts or counts[0] < 1:
        raise UsageError(f"--nodes {text!r} has no positive node count", "write it like 1..8 or 1,2,4")
    if counts[-1] > most:
        raise UsageError(f"--nodes asks for {counts[-1]} nodes and {most} host(s) are given",
                         f"use --nodes 1..{most}, or give more hosts with --hosts/--hostfile")
    return counts


def _virtual_hosts() -> str | None:
    """The virtual cluster's nodes, one slot each, when one is up."""
    from clusterbench.launch import simcluster

    try:
        c = simcluster.load()
    except Exception:  # no state, not root: simply no virtual cluster
        return None
    return simcluster.host_arg(c) if c is not None and c.nodes else None


@register
class HplScaling(Benchmark):
    name = "hpl-scaling"
    key_params = ('nodes', 'n', 'grid')
    help = "HPL Rmax against node count: N from the nodes' memory, the best P x Q grid per count (Duffy 2020, Fig. 5.4)"
    kernel = "hpl"
    metrics = (
        Metric("rmax", "Gflop/s", True, "HPL Rmax of the best grid with k nodes ((2/3 N^3 + 3/2 N^2) / t)",
               ("rpeak", "measured_peak", "rpeak_max")),
    )
    params = (
        Param("nodes", str, None, "node counts: 1..8, 1,2,4 (default: 1 to the number of hosts)"),
        Param("mem", float, 0.8, "fraction of the k nodes' MemAvailable for the matrix (HPL: 0.8)",
              min=0, max=0.95, min_open=True),
        Param("n_per_node", int, None, "instead of --mem: N = this x sqrt(k) (weak scaling of the matrix memory)",
              min=1),
        Param("nb", int, None, "block size NB (default: hpl's per microarchitecture; see `tune hpl`)", min=1,
              max=4096),
        Param("grids", str, "all", "all: every P x Q with P <= Q per count, the best kept; squarest: one run",
              GRID_MODES),
        Param("topology", str, "pure", "pure: a rank per core; hybrid: a rank per node, threaded BLAS", TOPOLOGIES),
        Param("blas", str, "openblas", "BLAS library: openblas, blis, mkl... or a path to a .so"),
        Param("openblas_coretype", str, None, "auto (default), none or an OpenBLAS core name, passed to every hpl run"),
        Param("engine", str, "builtin", "HPL implementation (as hpl's --engine)"),
        Param("seed", int, 42, "seed of the random matrix", min=0),
        TRANSPORT,
        TCP_INCLUDE,
        Param("hosts", str, None, "hosts and slots, e.g. node1:2,node2:2 (default: the virtual cluster, if up)"),
        HOSTFILE,
        ALLOW_ROOT,
        LAUNCH_TIMEOUT,
    )
    profiles = {"quick": {"mem": 0.1, "grids": "squarest"}}

    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = dict(params)
        if not (p.get("hosts") or p.get("hostfile")):
            p["hosts"] = _virtual_hosts()
        hosts = parse_host_params(p) or []
        counts = parse_nodes(p["nodes"], max(1, len(hosts)))
        hpl = get_benchmark("hpl")
        plan = []
        for k in counts:
            given: dict[str, Any] = {key: p[key] for key in ("nb", "topology", "blas", "openblas_coretype", "engine",
                                                             "seed", "transport", "tcp_include", "allow_root",
                                                             "launch_timeout") if p.get(key) is not None}
            if hosts:
                given["hosts"] = ",".join(f"{h.name}:{h.slots}" for h in hosts[:k])
            if p["n_per_node"]:
                given["n"] = int(p["n_per_node"] * k ** 0.5)
            else:
                given["mem"] = p["mem"]
            first = hpl.resolve(ctx, given)  # N from these k nodes' memory, ranks from their slots
            options = grids(first["ranks"]) if p["grids"] == "all" else grids(first["ranks"])[:1]
            # one N for every grid of this count (N depends on the grid only through a little work space)
            runs = [hpl.resolve(ctx, {**given, "n": first["n"], "grid": f"{a}x{b}"}) for a, b in options]
            plan.append({"nodes": k, "hosts": [h.name for h in hosts[:k]], "runs": runs})
        p["plan"] = plan
        p["node_rpeak"] = ((ctx.probe.get("rpeak") or {}).get("node") or {}).get("dp_gflops_nominal")
        return p

    def prepare(self, ctx: RunContext, params: dict[str, Any]) -> None:
        ENGINES[params["engine"]].prepare(ctx, params["plan"][0]["runs"][0])

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        hpl = get_benchmark("hpl")
        return sum(hpl.estimate_seconds(ctx, r) for step in params["plan"] for r in step["runs"])

    def run(self, ctx: RunContext, params: dict[str, Any]) -> list[Result]:
        hpl = get_benchmark("hpl")
        out: list[Result] = []
        ctx.progress.start("hpl-scaling", total=sum(len(s["runs"]) for s in params["plan"]))
        for step in params["plan"]:
            k = step["nodes"]
            by_grid: dict[str, float] = {}
            best: Result | None = None
            failures: list[str] = []
            for rp in step["runs"]:
                try:
                    res = hpl.run(ctx, rp)  # a full hpl result (rmax, time_s, residual) for each grid
                except KernelFailed as exc:
                    if len(step["runs"]) == 1:
                        raise
                    failures.append(f"{rp['grid']}: {exc}")
                    continue
                finally:
                    ctx.progress.advance(1)
                r = next(x for x in res if x.metric == "rmax")
                by_grid[r.params["grid"]] = r.value
                if best is None or r.value > best.value:
                    best = r
            if best is None:
                raise KernelFailed(f"hpl-scaling: every grid failed with {k} node(s): {failures[0]}",
                                   "see the hpl error; rerun with --grids squarest to isolate it")
            prm = {**best.params, "nodes": k, "node_hosts": step["hosts"], "rmax_by_grid": by_grid,
                   "grids_tried": list(by_grid), "grid_failures": failures}
            if params["node_rpeak"]:
                prm["rpeak_nodes_gflops"] = params["node_rpeak"] * k
                prm["percent_of_rpeak_nodes"] = round(100 * best.value / (params["node_rpeak"] * k), 2)
            out.append(ctx.emit(self, "rmax", [best.value], prm, times_s=[best.params["time_s"]]))
            ctx.note(f"hpl-scaling: {k} node(s), N={best.params['n']}: {best.value:.2f} Gflop/s with grid "
                     f"{best.params['grid']}" + (f" (of {', '.join(f'{g} {v:.2f}' for g, v in by_grid.items())})"
                                                 if len(by_grid) > 1 else ""))
        return out

    def hosts(self, params: dict[str, Any]) -> list[str]:
        return list(dict.fromkeys(h for s in params.get("plan") or [] for h in s["hosts"])) or super().hosts(params)


__all__ = ["HplScaling", "parse_nodes"]
