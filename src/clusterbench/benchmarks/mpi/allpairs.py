"""allpairs: latency and bandwidth of every pair of nodes, one rank per node, scheduled as a
round-robin tournament so that each node takes part in one pair at a time (``sweep network``).

Schedule (the circle method, :func:`round_robin`; the kernel computes the same pairing and reports
it, and every figure is checked against this one): with n nodes, n-1 rounds for even n, n rounds for
odd n (one node idle per round); every pair meets exactly once and no node twice in a round; all
pairs of a round measure at once (on a real network they use disjoint links to a switch).

Per pair, within ``--pair-budget`` seconds: the median half round trip of a blocking ping-pong at
``--lat-size`` bytes (8; every round trip timed, ``--lat-share`` of the budget), and the bandwidth
at ``--bw-size`` bytes (4 MiB): size / half round trip in MB/s = 1e6 B/s, the best of up to
``--bw-loops`` (16) loops each timed as a whole (hpcc's and NetPIPE's best-of convention; the mean over
the loops is ``params.bandwidth_mean_MBps``). Separate send and receive buffers on each rank (the
OSU/IMB convention); every byte of the last message of each phase is checked on both ranks.

Figures: one ``latency`` (us, lower is better) and one ``bandwidth`` (MB/s, higher is better) per
pair, key parameter ``pair`` = "nodeA-nodeB" (the lower rank's node first; names as the ranks report
them: the virtual cluster's node, else the host name), so the store, ``results table`` and
``compare`` tell the pairs apart. Latency samples are single round trips (their spread is the
figure's distribution); bandwidth samples are the loops. ``--passes N`` runs the whole tournament N
times and keeps each pair's best pass (lowest median latency, highest bandwidth; every pass's figure
is in ``params.pass_values``): on a shared machine a load that passes disturbs one pass, not all.
``--remeasure F`` (1.15; 0 = off): after the passes, the pairs more than a factor F from the best pair
(bandwidth below best / F, latency above best x F) are measured once more in the same job: every
round that holds one runs again, all its pairs measuring (the same load as the first time: suspects
alone would have the cores or the switch to themselves); the figure is then the best of the pair's
measurements, ``params.measurements`` lists them (passes, then the re-measurement), ``params.remeasured``
says whether there was one and ``params.suspect`` whether the pair was a suspect: ``sweep network``
weighs them before calling a link slow.

Hosts: ``--hosts A,B,...`` or ``--hostfile`` with two or more distinct hosts (slots are ignored: one
rank per host, rank i on the i-th host). On the virtual cluster the ranks share this machine's cores:
more nodes than cores needs ``--oversubscribe`` (Open MPI's ranks are then told to yield while they
wait, and ranks waiting for a round to end sleep between tests). There, each round moves both ranks of
a pair onto one core and the pairs of the round onto different cores (a ping-pong keeps one rank busy at
a time; two pairs sharing two cores measured each other), and the cluster's members get permanent
neighbour entries (:func:`pin_neighbours`: Linux's neighbour table is shared by all namespaces and
overflowed at 32 nodes, failing Open MPI's connects). Before timing, every pair connects once in the
schedule's order; a round that does not end within ``60 + 20 x budget`` seconds fails the run, named,
instead of hanging.
"""
from __future__ import annotations

import contextlib
import json
import os
from typing import Any

from clusterbench.benchmarks import register
from clusterbench.benchmarks.base import Metric, Param, RunContext, placement
from clusterbench.benchmarks.mpi.common import (MiB, KernelSession, MpiBenchmark, buffers_record, detect,
                                                host_tuples, launch_spec, parse_host_params, shared_cpu_warning,
                                                shares_cores, sim_cluster_of)
from clusterbench.errors import KernelFailed, UsageError
from clusterbench.launch import mpi as mpimod
from clusterbench.launch import simcluster
from clusterbench import process

#: the kernel's bounds (allpairs.c)
MAX_SAMPLES = 256
MAX_LOOPS = 16
MAX_NODES = 4096


def partner_of(i: int, r: int, n: int) -> int | None:
    """Node i's partner in round r of a round-robin tournament of n nodes (the circle method; None:
    idle). With m = n (even) or n + 1 (odd, node n a "bye"): node m-1 meets node r, every other node
    i meets (2r - i) mod (m-1). The same rule as allpairs.c's partner_of."""
    m = n + 1 if n % 2 else n
    if i == m - 1:
        p = r
    elif i == r:
        p = m - 1
    else:
        p = (2 * r - i) % (m - 1)
    return None if p >= n else p


def round_robin(n: int) -> list[list[tuple[int, int]]]:
    """The rounds of a round-robin tournament of n nodes: each round a list of pairs (i, j), i < j.
    n-1 rounds for even n, n for odd n; every pair exactly once, no node twice in a round."""
    if n < 2:
        return []
    m = n + 1 if n % 2 else n
    rounds = []
    for r in range(m - 1):
        pairs = sorted({(min(i, p), max(i, p)) for i in range(n) if (p := partner_of(i, r, n)) is not None})
        rounds.append(pairs)
    return rounds


def pair_name(a: str, b: str) -> str:
    return f"{a}-{b}"


def pin_neighbours(sim: Any) -> int:
    """Permanent neighbour (ARP) entries for every member of the virtual cluster in every other
    member's namespace (``ip neigh replace ... nud permanent``, inside its own namespaces only).

    Linux keeps one neighbour table for all network namespaces, and garbage collection starts at
    ``gc_thresh2`` (512) and refuses new entries beyond ``gc_thresh3`` (1024): an all-pairs sweep of 32
    virtual nodes needs 32 x 31 learned entries, and at about round 29 new ARP entries failed
    ("neighbour: arp_cache: neighbor table overflow!"), Open MPI's TCP connect failed and the job hung.
    Permanent entries are not counted against those thresholds (Linux 4.20 and later) and hold the
    addresses and MACs the cluster was built with; entries already there are left alone. Returns the
    number of entries added."""
    from clusterbench.errors import EnvironmentProblem

    members = [sim.head, *sim.nodes]
    # pinned by an earlier sweep of these very namespaces (their inodes: a cluster brought up again has
    # new ones): 2 x 33 `ip` processes at 32 nodes saved (~1 s of every sweep's orchestration)
    try:
        key = json.dumps([[m.namespace, os.stat(f"/run/netns/{m.namespace}").st_ino] for m in members])
        marker = simcluster.scratch_dir(sim) / "neighbours-pinned.json" if sim.state_file else None
    except OSError:
        key, marker = None, None
    if marker is not None:
        with contextlib.suppress(OSError):
            if marker.read_text() == key:
                return 0
    addr: dict[str, tuple[str, str, str]] = {}
    for m in members:
        p = process.run(["ip", "-n", m.namespace, "-j", "link", "show", "dev", m.iface], timeout=10)
        try:
            mac = json.loads(p.stdout)[0]["address"]
        except (ValueError, LookupError, TypeError):
            raise EnvironmentProblem(f"cannot read the MAC of {m.iface} in {m.namespace}: "
                                     f"{p.stderr.strip() or 'no answer'}", "run `clusterbench sim-cluster status`")
        addr[m.namespace] = (m.address, mac, m.iface)
    added = 0
    for m in members:
        p = process.run(["ip", "-n", m.namespace, "-j", "neigh", "show", "dev", m.iface], timeout=10)
        try:
            have = {(e.get("dst"), e.get("lladdr")) for e in json.loads(p.stdout or "[]")
                    if "PERMANENT" in (e.get("state") or [])}
        except ValueError:
            have = set()
        cmds = "".join(f"neigh replace {ip} lladdr {mac} dev {m.iface} nud permanent\n"
                       for ns, (ip, mac, _) in addr.items() if ns != m.namespace and (ip, mac) not in have)
        if not cmds:  # already there (an earlier sweep): changing nothing leaves running sockets alone
            continue
        p = process.run(["ip", "-n", m.namespace, "-batch", "-"], input=cmds,
                        timeout=30)
        if p.returncode != 0:
            raise EnvironmentProblem(f"cannot set neighbour entries in {m.namespace}: {p.stderr.strip()}",
                                     "run `clusterbench sim-cluster status`")
        added += cmds.count("\n")
    if marker is not None and key is not None:
        with contextlib.suppress(OSError):
            marker.parent.mkdir(parents=True, exist_ok=True)
            tmp = marker.with_name(f".{marker.name}.{os.getpid()}")
            tmp.write_text(key)
            os.replace(tmp, marker)
    return added


DEFINITIONS = {
    "latency_definition": "median half round trip of a blocking MPI_Send/MPI_Recv ping-pong between the two nodes "
                          "(every round trip timed; separate send and receive buffers), us; the pair measured while "
                          "the other pairs of its round-robin round measured too",
    "bandwidth_definition": "size / half round trip of the best of the timed loops of round trips (each loop timed "
                            "as a whole), 1e6 B/s",
}


@register
class AllPairs(MpiBenchmark):
    name = "allpairs"
    key_params = ("transport_used", "pair", "size_bytes")
    help = ("latency and bandwidth of every pair of nodes, round-robin (each node in one pair at a time); "
            "what `sweep network` runs")
    kernel = "allpairs"
    metrics = (
        Metric("latency", "us", False, "median half round trip of a ping-pong between two nodes (params pair, "
               "size_bytes)"),
        Metric("bandwidth", "MB/s", True, "message size / half round trip between two nodes, best loop, 1e6 B/s "
               "(params pair, size_bytes)"),
    )
    params = (
        Param("hosts", str, None, "two or more hosts, one rank on each, e.g. node1,node2,node3"),
        Param("hostfile", str, None, "Open MPI hostfile (name slots=N); one rank per host"),
        Param("lat_size", int, 8, "message size for latency, bytes", min=1, max=1 << 30, why="1 GiB at most"),
        Param("bw_size", int, 4 * MiB, "message size for bandwidth, bytes", min=1, max=1 << 30, why="1 GiB at most"),
        Param("pair_budget", float, 1.0, "seconds each pair measures (latency, then bandwidth; a bandwidth round trip "
              "longer than the budget still runs once)", min=0, max=600, min_open=True),
        Param("lat_share", float, 0.2, "share of the pair budget spent on latency", min=0, max=0.9, min_open=True),
        Param("bw_loops", int, 16, "timed bandwidth loops per pair, the best counts (many short loops: on a shared "
              "machine the best of them finds the link between interruptions)", min=1, max=MAX_LOOPS),
        Param("max_samples", int, 64, "latency samples kept per pair (evenly spread over the round trips)",
              min=1, max=MAX_SAMPLES),
        Param("passes", int, 1, "run the whole tournament this many times; each pair's figures are its best pass "
              "(a load that disturbed one pass is not taken for the link)", min=1, max=100),
        Param("remeasure", float, 1.15, "after the passes, measure again (once, their whole rounds) the pairs more "
              "than this factor from the best pair (bandwidth below best / F, latency above best x F): `sweep "
              "network` weighs the measurements before calling a link slow; 0: off",
              min=0, max=1000),
        Param("validate", bool, True, "check every byte of the last message of each phase on both ranks "
              "(outside the timing)"),
    )
    profiles = {"quick": {"pair_budget": 0.3}, "full": {"pair_budget": 3.0}}

    # -- parameters ------------------------------------------------------------------------------
    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = super().check(ctx, params)
        if p["remeasure"] and p["remeasure"] < 1:
            raise UsageError(f"--remeasure {p['remeasure']:g} is not allowed",
                             "give a factor of 1 or more (1.15: pairs 15 % from the best), or 0 for none")
        hosts = parse_host_params(p) or []
        if len(hosts) < 2:
            given = ", ".join(h.name for h in hosts) or "none"
            raise UsageError(f"allpairs needs two or more distinct hosts (given: {given})",
                             "e.g. --hosts node1,node2,node3 or --hostfile FILE")
        if len(hosts) > MAX_NODES:
            raise UsageError(f"{len(hosts)} hosts is too many", f"give at most {MAX_NODES}")
        n = len(hosts)
        shared = shares_cores(hosts)  # the virtual cluster: the nodes share this machine's cores
        cpus = placement(ctx, n) if shared else [placement(ctx, 1)[0]] * n
        places = [(h.name, c) for h, c in zip(hosts, cpus)]
        p["shared_cpus"] = shared and len(set(cpus)) < n
        if p["shared_cpus"] and not ctx.oversubscribe:
            raise UsageError(f"{n} nodes of a virtual cluster need {n} cpus of this machine and {len(set(cpus))} are "
                             "free: ranks would share cores", "add --oversubscribe, or sweep fewer nodes")
        # on one machine's cores, each pair of a round moves onto a core of its own (as far as they go)
        p["pair_cpus"] = sorted(set(cpus), key=cpus.index) if shared else None
        p.update(ranks=n, cpus=list(cpus), places=places, host_list=host_tuples(hosts),
                 schedule=round_robin(n))
        return p

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        passes = params["passes"] + (1 if params.get("remeasure") else 0)  # the re-measurement: one pass at most
        return 2.0 + passes * len(params["schedule"]) * (params["pair_budget"] * 1.1 + 0.05)

    def prepare(self, ctx: RunContext, params: dict[str, Any]) -> None:
        super().prepare(ctx, params)
        sim = sim_cluster_of([mpimod.Host(h[0]) for h in params["host_list"]])
        if sim is not None:
            n = pin_neighbours(sim)
            if n:
                ctx.note(f"allpairs: {n} permanent neighbour (ARP) entries added between the virtual cluster's "
                         "members: the kernel's neighbour table is shared by all namespaces (gc_thresh3, 1024 by "
                         "default), and an all-pairs sweep of 32 nodes needs about a thousand entries")
        ctx.fit_timeout("the all-pairs sweep", self.estimate_seconds(ctx, params) + 30,
                        how=f" ({params['passes']}{' + 1' if params.get('remeasure') else ''} x "
                            f"{len(params['schedule'])} rounds of {params['pair_budget']:g} s)",
                        smaller="give a smaller --pair-budget")

    def kernel_args(self, params: dict[str, Any]) -> list[str]:
        return [f"--lat_size={params['lat_size']}", f"--bw_size={params['bw_size']}",
                f"--pair_budget={params['pair_budget']}", f"--lat_share={params['lat_share']}",
                f"--bw_loops={params['bw_loops']}", f"--max_samples={params['max_samples']}",
                f"--validate={int(bool(params['validate']))}", f"--passes={params['passes']}",
                f"--remeasure={float(params.get('remeasure') or 0):g}",
                *([f"--pair_cpus={','.join(map(str, params['pair_cpus']))}"] if params.get("pair_cpus") else [])]

    # -- running -----------------------------------------------------------------------------------
    def run(self, ctx: RunContext, params: dict[str, Any]) -> list:
        mpi = detect(params)
        n = params["ranks"]
        schedule = params["schedule"]
        expected = {pair: r for r, pairs in enumerate(schedule) for pair in pairs}
        shared_warn = shared_cpu_warning(params["places"], True) if params["shared_cpus"] else None
        base: dict[str, Any] = {
            "transport": params["transport"], "ranks": n, "nodes_swept": n,
            "hosts": [h[0] for h in params["host_list"]], "cpus": list(params["cpus"]),
            "pair_budget_s": params["pair_budget"], "lat_share": params["lat_share"],
            "bw_loops": params["bw_loops"], "validated": bool(params["validate"]),
            "shared_cpus": bool(params["shared_cpus"]), "schedule": "round-robin (circle method)",
            "cpus_per_round": ("each pair of a round on a core of its own, both its ranks on it (cores: "
                               f"{params['pair_cpus']})") if params.get("pair_cpus") else "as placed",
            "rounds": len(schedule), "passes": int(params["passes"]),
            "remeasure_factor": float(params.get("remeasure") or 0) or None,
            "mpi": {"name": mpi.name, "version": mpi.version},
            **buffers_record("separate"), **DEFINITIONS,
        }
        out: list = []
        ctx.progress.start("allpairs", total=len(expected))

        passes = int(params["passes"])
        got: dict[tuple[int, int], list[dict]] = {}
        again: dict[tuple[int, int], dict] = {}  # the re-measurement of the suspects

        def on_result(rec: dict) -> None:
            if rec.get("metric") != "pair":
                raise KernelFailed(f"allpairs printed an unknown result {rec.get('metric')!r}", "report this as a bug")
            a, b = (int(x) for x in rec["ranks"])
            r = int(rec["round"])
            if expected.get((a, b)) != r:
                want = next((i for i, ps in enumerate(schedule) if (a, b) in ps), None)
                raise KernelFailed(f"allpairs measured ranks {a} and {b} in round {r}; the round-robin schedule "
                                   f"pairs them in round {want}", "report this as a bug")
            recs = got.setdefault((a, b), [])
            if rec.get("remeasure"):
                if len(recs) != passes or (a, b) in again or int(rec.get("pass", -1)) != passes:
                    raise KernelFailed(f"allpairs re-measured ranks {a} and {b} before their passes ended, or twice",
                                       "report this as a bug")
                again[(a, b)] = rec
                return
            if int(rec.get("pass", 0)) != len(recs):
                raise KernelFailed(f"allpairs measured ranks {a} and {b} twice in pass {rec.get('pass')}",
                                   "report this as a bug")
            recs.append(rec)
            if len(recs) == passes:
                ctx.progress.advance(1)

        def emit_pair(a: int, b: int, r: int, recs: list[dict], re: dict | None) -> None:
            # the figures are the pair's best measurement (a pass, or the re-measurement of a suspect)
            every = [*recs, *([re] if re else [])]
            best_lat = min(every, key=lambda x: x["latency_us"])
            best_bw = max(every, key=lambda x: x["bandwidth_MBps"])
            nodes = [str(x) for x in best_lat.get("nodes") or []]
            prm_pair = {"pair": pair_name(*nodes), "nodes": nodes, "ranks": [a, b], "round": r,
                        "pair_seconds": sum(float(x.get("seconds") or 0) for x in every),
                        "pass_seconds": [x.get("seconds") for x in every], "pair_cpus": [x.get("cpus") for x in every],
                        "remeasured": re is not None, "suspect": bool(re.get("suspect")) if re else False}
            kp = best_lat.get("params") or {}
            lat = {**base, **prm_pair, "size_bytes": kp.get("lat_size"), "best_pass": every.index(best_lat),
                   "pass_values": [x["latency_us"] for x in recs],
                   "remeasured_value": re["latency_us"] if re else None,
                   "measurements": [x["latency_us"] for x in every],
                   "iterations": kp.get("latency_iterations"), "min_us": kp.get("latency_min_us"),
                   "mean_us": kp.get("latency_mean_us"), "max_us": kp.get("latency_max_us")}
            samples = best_lat["samples"]
            out.append(ctx.emit(self, "latency", samples, lat, times_s=[2e-6 * s for s in samples],
                                value=best_lat["latency_us"], check_cv=False, extra_warnings=(shared_warn,)))
            kb = best_bw.get("params") or {}
            bw = {**base, **prm_pair, "size_bytes": kb.get("bw_size"), "best_pass": every.index(best_bw),
                  "pass_values": [x["bandwidth_MBps"] for x in recs],
                  "remeasured_value": re["bandwidth_MBps"] if re else None,
                  "measurements": [x["bandwidth_MBps"] for x in every], "loops": kb.get("bandwidth_loops"),
                  "iterations": kb.get("bandwidth_iterations"), "batch_mean": kb.get("bandwidth_mean_MBps")}
            loops = [v for x in every for v in x["bandwidth_samples"]]
            out.append(ctx.emit(self, "bandwidth", loops, bw, value=best_bw["bandwidth_MBps"],
                                extra_warnings=(shared_warn,)))

        different = [(i, j) for i in range(n) for j in range(i + 1, n)]
        spec = launch_spec(ctx, params, params["places"], params["host_list"])
        if params["shared_cpus"]:
            # ranks pinned to a shared core must yield while they wait (as ring does)
            spec.yield_when_idle = True
        b_ = ctx.build(self.kernel, openmp=False, cc=mpi.mpicc)
        run = KernelSession(ctx, self.kernel, spec, mpi, base, on_result, different,  # on_result collects only
                            allow_shared_cpu=bool(params["shared_cpus"]), hold=False).run(
            [str(b_.path), *self.kernel_args(params)], params["launch_timeout"])
        missing = [pair for pair in expected if len(got.get(pair, ())) != passes]
        if missing:
            raise KernelFailed(f"allpairs ended without measuring {len(missing)} of {len(expected)} pairs "
                               f"(first: ranks {missing[0][0]} and {missing[0][1]})", "rerun; report it if it persists")
        summary = next((r for r in run.records if r.get("type") == "summary"), None)
        suspects = sum(1 for rec in again.values() if rec.get("suspect"))
        if summary and summary.get("suspects") is not None and int(summary["suspects"]) != suspects:
            raise KernelFailed(f"allpairs named {summary['suspects']} suspect pairs and re-measured {suspects}",
                               "report this as a bug")
        for r, pairs in enumerate(schedule):
            for pair in pairs:
                emit_pair(*pair, r, got[pair], again.get(pair))
        if summary:
            re_txt = (f"; {suspects} suspect pair(s) (more than x{params['remeasure']:g} from the best pair): their "
                      f"{summary.get('remeasure_rounds', 0)} round(s) measured again ({len(again)} pairs, "
                      f"{float(summary.get('remeasure_s') or 0):.2f} s)" if params.get("remeasure") else "")
            ctx.note(f"allpairs: {n} nodes, {summary['rounds']} rounds"
                     + (f" x {passes} passes" if passes > 1 else "") + f", {len(expected)} pairs" + re_txt + "; "
                     f"{summary['measure_s']:.2f} s measuring (the longest pair of each round, summed) of "
                     f"{summary['kernel_s']:.2f} s in the kernel ({summary.get('connect_s', 0):.2f} s connecting the "
                     f"pairs first), {run.elapsed_s:.2f} s with MPI's start and end")
        return out
