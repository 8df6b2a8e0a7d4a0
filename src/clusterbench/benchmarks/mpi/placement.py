"""placement: MPI latency (8 B) and bandwidth (1 MiB) between rank pairs classified by distance
(Khadka (Multicore-Multinode): intra-socket, inter-socket and inter-node ping-pong; shared/notes/anchors-mpi.md).

The classes come from the probe's topology (:mod:`clusterbench.probe.pairs`): ``smt`` (SMT
siblings), ``l2`` (cores sharing an L2), ``l3`` (sharing an L3), ``numa`` (same NUMA node and
package, no shared cache), ``socket`` (same NUMA node, other package), ``remote-numa`` (other
NUMA node) and, with ``--hosts A,B``, ``node`` (rank 0 on A, rank 1 on B). One representative pair
per class present: cpu 0 with the nearest cpu of each class.

Each pair is one ``mpirun`` of the ``pingpong`` kernel (2 ranks pinned through a rankfile, the
placement verified before any figure, the transport proven) at 8 B and 1 MiB; latency is the
minimum half round trip over every iteration (us), bandwidth the maximum of size / half round
trip (MB/s = 1e6 B/s), as ``pingpong``, with separate send and receive buffers by default (the
OSU/IMB convention; ``--buffers shared``: each message is the data just received). Every result
carries ``class``, ``cpu_a``, ``cpu_b``, ``node_a`` and ``node_b`` (plus the cores, packages, NUMA
nodes and shared caches behind the class), so ``results export`` gives the matrix.

With ``--hosts A,B`` the intra-node pairs run on A, classified with this node's topology (the
probe of the machine clusterbench runs on): run it on a node like A, as inside an allocation.
"""
from __future__ import annotations

import socket
from typing import Any

from clusterbench.probe import pairs as pairs_mod
from clusterbench.errors import UsageError
from clusterbench.launch import mpi as mpimod
from clusterbench.benchmarks import register
from clusterbench.benchmarks.mpi.common import (BUFFERS, PINGPONG_DEFINITIONS,
    KernelSession, MpiBenchmark, buffers_record, detect, launch_spec, parse_host_params,
    pingpong_figure, sim_cluster_of, time_budget)
from clusterbench.benchmarks.base import Metric, Param, RunContext, allowed_cpus, placement

LAT_SIZE = 8
BW_SIZE = 1 << 20


@register
class Placement(MpiBenchmark):
    name = "placement"
    suites = {"mpi": 50}
    key_params = ('class', 'cpu_a', 'cpu_b', 'transport_used')
    help = "MPI latency (8 B) and bandwidth (1 MiB) per rank-pair distance: SMT, L2, L3, NUMA, socket, node"
    kernel = "pingpong"
    metrics = (
        Metric("latency", "us", False, "8 B half round trip between the pair (params class, cpu_a, cpu_b, "
               "node_a, node_b)"),
        Metric("bandwidth", "MB/s", True, "1 MiB / half round trip between the pair, 1e6 B/s (params class, ...)"),
    )
    params = (
        Param("classes", "strlist", None, "distance classes to measure (default: every class present): "
              + ", ".join(pairs_mod.CLASSES)),
        Param("cpus", "intlist", None, "cpus to choose pairs from (default: every cpu this process may use)"),
        Param("hosts", str, None, "two hosts A,B: intra-node pairs on A, the node pair between A and B"),
        Param("hostfile", str, None, "Open MPI hostfile; its first two hosts are used"),
        Param("validate", bool, True, "check the data after each size's timed loop (outside it)"),
        BUFFERS,
        time_budget(0.2, "size and pair"),
    )
    profiles = {"quick": {"time_budget": 0.05}, "full": {"time_budget": 1.0}}

    # -- parameters ------------------------------------------------------------------------------
    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = super().check(ctx, params)
        wanted = list(dict.fromkeys(p["classes"])) if p["classes"] else None
        for c in wanted or ():
            if c not in pairs_mod.CLASSES:
                raise UsageError(f"--classes: '{c}' is not a distance class", "use " + ", ".join(pairs_mod.CLASSES))
        hosts = parse_host_params(p)
        hosts = hosts[:2] if hosts else None
        allowed = allowed_cpus(ctx)
        if p["cpus"] is not None:
            pool = list(dict.fromkeys(int(c) for c in p["cpus"]))
            placement(ctx, len(pool), cpus=pool)  # refuses cpus this process may not use
        else:
            pool = allowed
        chosen = pairs_mod.choose_pairs(ctx.probe, pool, [c for c in (wanted or pairs_mod.TOPOLOGY_CLASSES)])
        here = socket.gethostname()
        node_a = hosts[0].name if hosts else None
        pair_list = [{"class": cls, "cpu_a": a, "cpu_b": b, "node_a": node_a, "node_b": node_a}
                     for cls, (a, b) in chosen.items()]
        if hosts and len(hosts) == 2 and (wanted is None or "node" in wanted):
            sim = sim_cluster_of(hosts)
            cpu_a = pool[0]
            if sim is not None:  # the virtual nodes share this machine's cores: take another core
                others = [c for c in placement(ctx, len(allowed)) if c != cpu_a and c in pool]
                if not others and not ctx.oversubscribe:
                    raise UsageError("the node pair on the virtual cluster needs two cpus (its nodes share "
                                     "this machine's cores)", "widen --cpus, or add --oversubscribe")
                cpu_b = others[0] if others else cpu_a
            else:
                cpu_b = cpu_a
            pair_list.append({"class": "node", "cpu_a": cpu_a, "cpu_b": cpu_b,
                              "node_a": hosts[0].name, "node_b": hosts[1].name})
        elif wanted and "node" in wanted:
            raise UsageError("class 'node' needs two hosts", "give --hosts A,B (or a hostfile with two hosts)")
        if wanted:
            missing = [c for c in wanted if c not in {q["class"] for q in pair_list}]
            if missing:
                present = [q["class"] for q in pair_list] or ["none"]
                raise UsageError(f"class {missing[0]} has no pair among cpus {_short(pool)} of this node "
                                 f"(present: {', '.join(present)})", "leave it out of --classes")
        if not pair_list:
            raise UsageError(f"no pair of cpus to measure among {_short(pool)}",
                             "give two or more cpus, or --hosts A,B for the node pair")
        for q in pair_list:
            if q["class"] != "node":
                q["topology"] = pairs_mod.describe(ctx.probe, q["cpu_a"], q["cpu_b"])
        p["pair_list"] = pair_list
        p["host_list"] = [(h.name, h.slots, h.max_slots) for h in hosts] if hosts else None
        p["local_host"] = here
        return p

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        return len(params["pair_list"]) * (0.8 + 2 * 1.5 * params["time_budget"])

    # -- running -----------------------------------------------------------------------------------
    def launch_spec(self, ctx: RunContext, params: dict[str, Any], pair: dict) -> mpimod.LaunchSpec:
        """The pingpong launch for one pair (the virtual cluster's agent and head namespace too)."""
        if pair["class"] == "node":
            host_list = [(pair["node_a"], 1, None), (pair["node_b"], 1, None)]
        elif pair["node_a"]:
            host_list = [(pair["node_a"], 2, None)]  # both ranks on host A, placed by the rankfile
        else:
            host_list = None
        places = [(pair["node_a"], pair["cpu_a"]), (pair["node_b"], pair["cpu_b"])]
        return launch_spec(ctx, params, places, host_list)

    def run(self, ctx: RunContext, params: dict[str, Any]) -> list:
        mpi = detect(params)
        b = ctx.build(self.kernel, openmp=False, cc=mpi.mpicc)
        args = [str(b.path), f"--sizes={LAT_SIZE},{BW_SIZE}", f"--time_budget={params['time_budget']}",
                f"--validate={int(bool(params['validate']))}", "--hugepages=0", f"--buffers={params['buffers']}"]
        out: list = []
        summary: list[str] = []
        ctx.progress.start("placement", total=len(params["pair_list"]))
        for pair in params["pair_list"]:
            out += self._run_pair(ctx, params, mpi, args, pair, summary)
            ctx.progress.advance(1)
        ctx.note("placement: " + "; ".join(summary))
        return out

    def _run_pair(self, ctx: RunContext, params: dict[str, Any], mpi: mpimod.MpiInstall, args: list[str],
                  pair: dict, summary: list[str]) -> list:
        spec = self.launch_spec(ctx, params, pair)
        inter = pair["class"] == "node"
        local = params["local_host"]
        base: dict[str, Any] = {
            "class": pair["class"], "cpu_a": pair["cpu_a"], "cpu_b": pair["cpu_b"],
            "node_a": pair["node_a"] or local, "node_b": pair["node_b"] or local,
            "cpus": [pair["cpu_a"], pair["cpu_b"]], "ranks": 2, "transport": params["transport"],
            "time_budget_s": params["time_budget"], "validated": bool(params["validate"]),
            "mpi": {"name": mpi.name, "version": mpi.version},
            **PINGPONG_DEFINITIONS, **buffers_record(params["buffers"]),
        }
        if "topology" in pair:
            base["topology"] = pair["topology"]
        res: list = []
        figures: dict[str, float] = {}

        def on_result(rec: dict) -> None:
            metric = rec["metric"]
            size, value, figure, times = pingpong_figure(rec)
            if (metric, size) not in (("latency", LAT_SIZE), ("bandwidth", BW_SIZE)):
                return
            r = ctx.emit(self, metric, rec["samples"], {**base, **figure}, times_s=times or None, value=value,
                         check_cv=False)
            figures[metric] = r.value
            res.append(r)

        KernelSession(ctx, f"pingpong ({pair['class']} pair)", spec, mpi, base, on_result,
                      [(0, 1)] if inter else (), note=False).run(args, params["launch_timeout"])
        where = (f"{base['node_a']}:{pair['cpu_a']}-{base['node_b']}:{pair['cpu_b']}" if inter
                 else f"cpus {pair['cpu_a']},{pair['cpu_b']}")
        summary.append(f"{pair['class']} ({where}) {figures.get('latency', float('nan')):.3g} us, "
                       f"{figures.get('bandwidth', float('nan')):.4g} MB/s over {base.get('transport_used', '?')}")
        return res


def _short(cpus: list[int]) -> str:
    return ",".join(map(str, cpus[:8])) + ("..." if len(cpus) > 8 else "")
