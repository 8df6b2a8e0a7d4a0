"""multipair: k = 1, 2, 4, ... concurrent rank pairs between two nodes (or the two sockets, or the
two halves, of one node): per-pair and aggregate bandwidth and per-pair latency against message
size (Eicker and Lippert (2007) Fig. 2: bandwidth per pair falls as pairs share a link; Carver (2014): IMB
MultiPingPong, latency under congestion; OSU osu_mbw_mr and osu_multi_lat).

With k pairs, 2k ranks are launched (one launch per k): ranks 0..k-1 on side A, ranks k..2k-1 on
side B, rank i paired with rank i + k (block placement, as osu_mbw_mr), every rank pinned to a cpu
of its own (with ``--oversubscribe``, ranks of one side may share cpus). Sides: with ``--hosts
A,B`` the two hosts (a rank pair is verified to span both nodes); on one node the first and the
other packages when there are several sockets, else the first and the second half of the cores;
``--cpus`` lists side A's cpus then side B's (an even count). On the virtual cluster the nodes
share this machine's cores, so the two sides get different cores as on one node.

Per message size, all pairs stream at once, each iteration started together after a
synchronisation of all ranks (untimed): a window of ``--window`` non-blocking sends and a 1-byte
ack per pair (osu_bw; ``--direction bi``: both ways, osu_bibw), then a blocking ping-pong per pair
for the latency (``--latency``). Per pair: MB/s = bytes per iteration x iterations / 1e6 / t, t the
sum of its timed iterations; latency = t / iterations / 2.

Metrics (params ``pairs``, ``size_bytes``, ``placement``):
  pair_bandwidth       mean over the pairs of each pair's MB/s (the slowest pair in
                       ``min_pair_bandwidth``, all of them in ``pair_bandwidths``)
  aggregate_bandwidth  the sum of the pairs' MB/s (osu_mbw_mr's figure)
  pair_latency         mean over the pairs of each pair's mean half round trip (us; the worst pair
                       in ``max_pair_latency``)
Samples are single iterations (mean over the pairs of that iteration); their spread is reported,
not flagged.

Buffers (``--buffers``): separate send and receive buffers by default (OSU's and IMB's
convention). ``--buffers shared``: each message is the data just received (an application passing
on fresh data): the latency ping-pong echoes the received buffer, ``bi`` sends on the window
received in the previous iteration; one-way streaming is the same in both.
"""
from __future__ import annotations

from typing import Any

from clusterbench.errors import KernelFailed, UsageError
from clusterbench.launch import mpi as mpimod
from clusterbench.benchmarks import register
from clusterbench.benchmarks.mpi.common import (BUFFERS, VALIDATE, WINDOW, KernelSession, MiB, MpiBenchmark,
    buffers_record, check_sizes, detect, host_tuples, launch_spec, max_size, parse_host_params, shared_cpu_warning, shares_cores, sizes, subsampled_times,
    time_budget)
from clusterbench.benchmarks.base import Metric, Param, RunContext, allowed_cpus


def _cores(ctx: RunContext) -> list[int]:
    """One cpu per physical core this process may use, package by package."""
    from clusterbench.probe.topology import cpu_order

    allowed = allowed_cpus(ctx)
    try:
        order = cpu_order(ctx.probe, "compact", smt=False)
    except Exception:  # a probe without a topology: the allowed cpus as they come
        order = []
    return [c for c in order if c in allowed] or allowed


def _package_of(ctx: RunContext) -> dict[int, Any]:
    return {c["pu"]: c.get("package") for c in (ctx.probe.get("topology") or {}).get("cpus", [])}


def _split(ctx: RunContext, cores: list[int]) -> tuple[list[int], list[int], str]:
    """Side A and side B of one node: the first package and the others, else two halves."""
    pkg = _package_of(ctx)
    first = pkg.get(cores[0]) if cores else None
    a = [c for c in cores if pkg.get(c) == first]
    b = [c for c in cores if pkg.get(c) != first]
    if a and b:
        return a, b, "inter-socket"
    if len(cores) == 1:
        return cores, cores, "intra-node"
    half = len(cores) // 2
    return cores[:half], cores[half:2 * half], "intra-node"


@register
class MultiPair(MpiBenchmark):
    name = "multipair"
    suites = {"mpi": 30}
    key_params = ('pairs', 'transport_used', 'size_bytes')
    help = "k = 1, 2, 4, ... concurrent MPI pairs between two nodes or sockets: per-pair and aggregate " \
           "bandwidth, per-pair latency (osu_mbw_mr, IMB MultiPingPong)"
    kernel = "mpibw"
    metrics = (
        Metric("pair_bandwidth", "MB/s", True, "mean over the concurrent pairs of each pair's streaming bandwidth "
               "(window of sends + ack, 1e6 B/s; params pairs, size_bytes, min_pair_bandwidth)"),
        Metric("aggregate_bandwidth", "MB/s", True, "sum of the concurrent pairs' bandwidths "
               "(osu_mbw_mr; params pairs, size_bytes)"),
        Metric("pair_latency", "us", False, "mean over the concurrent pairs of each pair's half round trip "
               "(ping-pong; params pairs, size_bytes, max_pair_latency)"),
    )
    params = (
        Param("pairs", "intlist", None, "pair counts to run, e.g. 1,2,4 (default: 1, 2, 4, ... up to the cores "
              "of one side, or the slots of one host)", min=1),
        max_size(4 * MiB),
        sizes(),
        Param("direction", str, "uni", "uni: side A streams to side B (osu_mbw_mr); bi: both ways at once",
              ("uni", "bi")),
        Param("latency", bool, True, "also measure each pair's ping-pong latency, all pairs at once"),
        WINDOW,
        Param("hosts", str, None, "two hosts A,B with slots, e.g. node1:4,node2:4: ranks 0..k-1 on A, "
              "k..2k-1 on B (default: the two sockets or halves of this node)"),
        Param("hostfile", str, None, "Open MPI hostfile (name slots=N); the first two hosts are used"),
        Param("cpus", "intlist", None, "side A's cpus then side B's, an even count (default: from the topology)"),
        VALIDATE,
        BUFFERS,
        time_budget(0.1, "size, mode and pair count"),
    )
    profiles = {"quick": {"time_budget": 0.03, "max_size": 1 * MiB}, "full": {"time_budget": 0.5}}

    # -- parameters ------------------------------------------------------------------------------
    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = super().check(ctx, params)
        p["size_list"] = check_sizes(p)
        p["modes"] = ["bibw" if p["direction"] == "bi" else "bw"] + (["lat"] if p["latency"] else [])
        hosts = parse_host_params(p) or []
        inter = len(hosts) >= 2
        if inter:
            hosts = hosts[:2]
        if p["cpus"] is not None:
            cpus = list(p["cpus"])
            if not cpus or len(cpus) % 2:
                raise UsageError(f"--cpus lists {len(cpus)} cpus; give side A's then side B's, an even count",
                                 "e.g. --cpus 0,1,2,3 (A: 0,1; B: 2,3)")
            if not inter or shares_cores(hosts):
                bad = [c for c in cpus if c not in allowed_cpus(ctx)]
                if bad:
                    raise UsageError(f"cpu {bad[0]} is not an online cpu this process may use",
                                     "see 'clusterbench probe' for the cpu list")
            side_a, side_b = cpus[: len(cpus) // 2], cpus[len(cpus) // 2:]
            kind = "inter-node" if inter else "intra-node"
        elif inter and not shares_cores(hosts):
            side_a = side_b = _cores(ctx)  # real nodes: the same cores on each (homogeneous nodes assumed)
            kind = "inter-node"
        else:
            side_a, side_b, kind = _split(ctx, _cores(ctx))
            if inter:
                kind = "inter-node"
        limit = min(len(side_a), len(side_b))
        if not inter and not (ctx.oversubscribe or limit >= 1 and set(side_a).isdisjoint(side_b)):
            raise UsageError("multipair needs two cpus on this node and this process may use one",
                             "widen the cpu set (taskset, Slurm) or add --oversubscribe")
        if hosts:
            limit = min(limit, *(h.slots for h in hosts)) if inter else min(limit, hosts[0].slots // 2)
        limit = max(limit, 1)
        if p["pairs"]:
            pairs = sorted(dict.fromkeys(int(k) for k in p["pairs"]))
            if pairs[-1] > limit and not ctx.oversubscribe:
                where = ("slots and cores per host" if inter else "cores of one side of this node")
                raise UsageError(f"--pairs {pairs[-1]} exceeds the {limit} {where}",
                                 f"use --pairs up to {limit}, add slots/hosts, or add --oversubscribe")
            if pairs[-1] > 256:
                raise UsageError(f"--pairs {pairs[-1]} is too many", "use at most 256 pairs")
        else:
            pairs, k = [], 1
            while k <= limit:
                pairs.append(k)
                k *= 2
        if hosts and not inter:
            mpimod.check_slots(hosts, 2 * pairs[-1], ctx.oversubscribe)
        p["pair_counts"] = pairs
        p["placement"] = kind
        p["side_a"], p["side_b"] = side_a, side_b
        host_a = hosts[0].name if hosts else None
        host_b = hosts[1].name if inter else host_a
        p["sides"] = [host_a, host_b]
        p["host_list"] = host_tuples(hosts or None)
        p["cpus"] = side_a + side_b
        return p

    def places(self, params: dict[str, Any], k: int) -> list[tuple[str | None, int]]:
        """Rank i < k on side A's i-th cpu, rank k + i on side B's (around again when oversubscribed)."""
        a, b = params["side_a"], params["side_b"]
        ha, hb = params["sides"]
        return [(ha, a[i % len(a)]) for i in range(k)] + [(hb, b[i % len(b)]) for i in range(k)]

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        per = len(params["size_list"]) * len(params["modes"]) * (params["time_budget"] * 1.2 + 0.02)
        return len(params["pair_counts"]) * (1.0 + per)

    def launch_spec(self, ctx: RunContext, params: dict[str, Any], k: int) -> mpimod.LaunchSpec:
        return launch_spec(ctx, params, self.places(params, k), params["host_list"])

    # -- running -----------------------------------------------------------------------------------
    def run(self, ctx: RunContext, params: dict[str, Any]) -> list:
        mpi = detect(params)
        b = ctx.build(self.kernel, openmp=False, cc=mpi.mpicc)
        sizes = params["size_list"]
        out: list = []
        ctx.progress.start("multipair", total=len(params["pair_counts"]) * len(sizes) * len(params["modes"]))
        for k in params["pair_counts"]:
            out += self._run_pairs(ctx, params, mpi, b, k)
        return out

    def _run_pairs(self, ctx: RunContext, params: dict[str, Any], mpi: mpimod.MpiInstall, b, k: int) -> list:
        spec = self.launch_spec(ctx, params, k)
        args = [str(b.path), f"--sizes={','.join(map(str, params['size_list']))}",
                f"--modes={','.join(params['modes'])}", f"--window={params['window']}",
                f"--time_budget={params['time_budget']}", f"--validate={int(bool(params['validate']))}",
                f"--buffers={params['buffers']}"]
        places = self.places(params, k)
        base: dict[str, Any] = {
            "pairs": k, "placement": params["placement"], "direction": params["direction"],
            "transport": params["transport"], "ranks": 2 * k, "window": params["window"],
            "cpus": [c for _, c in places], "hosts": list(params["sides"]) if params["host_list"] else None,
            "pairing": "rank i <-> rank i + pairs", "time_budget_s": params["time_budget"],
            "validated": bool(params["validate"]), "oversubscribed": bool(ctx.oversubscribe),
            "mpi": {"name": mpi.name, "version": mpi.version}, **buffers_record(params["buffers"])}
        out: list = []
        hosts = [mpimod.Host(*h) for h in params["host_list"]] if params["host_list"] else None
        crowded = shared_cpu_warning(places, shares_cores(hosts))
        extra = [crowded] if crowded else []

        def on_result(rec: dict) -> None:
            kp = rec.get("params", {})
            metric = rec["metric"]
            pairs = kp.get("pair") or []
            if int(kp.get("pairs", -1)) != k or len(pairs) != k:
                raise KernelFailed(f"multipair: the kernel ran {kp.get('pairs')} pairs, {k} launched",
                                   "report this as a bug")
            size = int(kp.get("size", 0))
            common = {**base, "size_bytes": size, "iterations": kp.get("iterations"),
                      "bytes_per_iteration": kp.get("bytes_per_iteration"), "loop_s": kp.get("loop_s"),
                      "samples_kept": kp.get("samples_kept"),
                      "buffers": kp.get("buffers", base["buffers"])}  # the kernel's own word
            samples = [float(s) for s in rec["samples"]]
            if metric in ("bw", "bibw"):
                bws = [float(q["mbs"]) for q in pairs]
                detail = [{key: q.get(key) for key in ("pair", "ranks", "iterations", "time_s", "mbs",
                                                        "min", "median", "p99", "max")} for q in pairs]
                times = subsampled_times(samples, float(kp.get("bytes_per_iteration") or 0), latency=False)
                prm = {**common, "pair_bandwidths": bws, "min_pair_bandwidth": min(bws),
                       "max_pair_bandwidth": max(bws), "per_pair": detail}
                out.append(ctx.emit(self, "pair_bandwidth", samples, prm, times_s=times or None,
                                    value=sum(bws) / k, check_cv=False, extra_warnings=extra))
                out.append(ctx.emit(self, "aggregate_bandwidth", [s * k for s in samples],
                                    {**prm, "aggregate_definition": "sum of the pairs' MB/s"},
                                    times_s=times or None, value=float(kp.get("aggregate_mbs", sum(bws))),
                                    check_cv=False, extra_warnings=extra))
            elif metric == "latency":
                lats = [float(q["latency_us"]) for q in pairs]
                detail = [{key: q.get(key) for key in ("pair", "ranks", "iterations", "time_s", "latency_us",
                                                        "min", "median", "p99", "max")} for q in pairs]
                prm = {**common, "pair_latencies": lats, "max_pair_latency": max(lats),
                       "min_pair_latency": min(lats), "per_pair": detail,
                       "latency_definition": "half round trip, us, mean over each pair's iterations"}
                out.append(ctx.emit(self, "pair_latency", samples, prm,
                                    times_s=subsampled_times(samples, 0, latency=True) or None,
                                    value=sum(lats) / k, check_cv=False, extra_warnings=extra))
            else:
                raise KernelFailed(f"multipair: unexpected metric {metric!r} from the kernel", "report this as a bug")

        inter = params["placement"] == "inter-node"
        session = KernelSession(ctx, self.name, spec, mpi, base, on_result,
                                [(i, i + k) for i in range(k)] if inter else (), placement_key="rank_placement",
                                on_arrival=lambda _rec: ctx.progress.advance(1))
        session.run(args, params["launch_timeout"], proof_ranks=(0, k))
        return out
