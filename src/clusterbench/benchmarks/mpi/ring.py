"""ring: HPCC b_eff naturally and randomly ordered ring latency and bandwidth
(icl-utk-edu/hpcc src/bench_lat_bw_1.5.2.c; shared/notes/anchors-mpi.md §4).

Every rank exchanges a message with its left and right neighbours at once, in both directions
(the better of two MPI_Sendrecv and Irecv/Isend + Waitall, like HPCC), in the naturally ordered
ring (rank order) and in ``--random-rings`` randomly ordered ones (seeded permutations, the same
in every measurement). Latency with 8 B messages, bandwidth with 2,000,000 B. Time per message =
loop time / (2 x loop length); the maximum over ranks, then the minimum over ``--measurements``;
the random-ring figure is the geometric mean over the rings (HPCC); bandwidth per process =
message size / time per message (MB/s = 1e6 B/s). The ping-pong : natural : random ratios
describe the network's topology (HPCC: a full crossbar gives 1 : 1 : 1, a bus 1 : 1/n : 1/n).

Metrics: ``natural_ring_latency``, ``random_ring_latency`` (us), ``natural_ring_bandwidth``,
``random_ring_bandwidth`` (MB/s per process). ``samples`` are the measurements (max over ranks;
for random rings the geometric mean over the rings of that measurement); ``value`` is the HPCC
figure. ``params`` hold the ring permutations, each random ring's figure, the loop length, which
implementation won, the placement of every rank and the transport proof.

Buffers (``--buffers``): separate send and receive buffers by default (HPCC's convention, and
OSU's and IMB's). ``--buffers shared``: each message is the data just received, passed on around
the ring (what arrived from the left goes to the right next time), as an application forwarding
fresh data.

Ranks: default one per core of this node, or the slots of ``--hosts``/``--hostfile``; each rank is
pinned (rankfile) and its placement verified. On the virtual cluster (whose nodes share this
machine's cores) the ranks take distinct cores where there are enough.
"""
from __future__ import annotations

from typing import Any

from clusterbench.errors import UsageError
from clusterbench.launch import mpi as mpimod
from clusterbench.benchmarks import register
from clusterbench.benchmarks.mpi.common import (BUFFERS, HOSTFILE, KernelSession, MpiBenchmark, buffers_record, detect,
                                                launch_spec, parse_host_params, sim_cluster_of, spread_ranks)
from clusterbench.benchmarks.base import HpccKey, Metric, Param, RunContext, allowed_cpus, available_memory

HPCC_LAT_SIZE = 8
HPCC_BW_SIZE = 2_000_000
MAX_RANKS = 4096


def assign_ranks(hosts: list[mpimod.Host], nranks: int) -> list[str]:
    """Host of each rank: block by slots (rank order fills the first host first), then, when
    oversubscribed, round-robin over the hosts."""
    out: list[str] = []
    for h in hosts:
        out += [h.name] * h.slots
    i = 0
    while len(out) < nranks:
        out.append(hosts[i % len(hosts)].name)
        i += 1
    return out[:nranks]


@register
class Ring(MpiBenchmark):
    name = "ring"
    suites = {"mpi": 40, "hpcc": 80}
    key_params = ('class', 'transport_used', 'message_bytes', 'processes')
    hpcc_keys = (HpccKey("NaturallyOrderedRingLatency_usec", "natural_ring_latency"),
                 HpccKey("RandomlyOrderedRingLatency_usec", "random_ring_latency"),
                 HpccKey("NaturallyOrderedRingBandwidth_GBytes", "natural_ring_bandwidth", scale=1e-3),
                 HpccKey("RandomlyOrderedRingBandwidth_GBytes", "random_ring_bandwidth", scale=1e-3))
    help = "HPCC b_eff ring: naturally and randomly ordered ring latency (8 B) and bandwidth (2 MB)"
    kernel = "ring"
    metrics = (
        Metric("natural_ring_latency", "us", False, "time per message in the naturally ordered ring, 8 B, "
               "both neighbours at once (HPCC NaturallyOrderedRingLatency)"),
        Metric("random_ring_latency", "us", False, "geometric mean over randomly ordered rings of the time "
               "per message, 8 B (HPCC RandomlyOrderedRingLatency)"),
        Metric("natural_ring_bandwidth", "MB/s", True, "bandwidth per process in the naturally ordered ring, "
               "2,000,000 B messages, 1e6 B/s (HPCC NaturallyOrderedRingBandwidth)"),
        Metric("random_ring_bandwidth", "MB/s", True, "bandwidth per process in randomly ordered rings "
               "(size / geometric-mean time per message; HPCC RandomlyOrderedRingBandwidth)"),
    )
    params = (
        Param("ranks", int, None, "MPI ranks (default: one per core of this node, or the slots of --hosts)",
              min=2, max=MAX_RANKS, why="a ring needs two ranks"),
        Param("random_rings", int, 10, "randomly ordered rings (HPCC: 30 for latency, 10 for bandwidth)",
              min=1, max=1000),
        Param("measurements", int, 5, "repetitions of every ring; the minimum counts (HPCC: 8 and 3)", min=1, max=1000),
        Param("seed", int, 1, "seed of the random ring permutations", min=0),
        Param("lat_size", int, HPCC_LAT_SIZE, "message size for latency, bytes (HPCC: 8)", min=1, max=1 << 30),
        Param("bw_size", int, HPCC_BW_SIZE, "message size for bandwidth, bytes (HPCC: 2,000,000)", min=1, max=1 << 30),
        Param("loop_time", float, 0.002, "minimum seconds of one timed loop (the loop length grows to it)",
              min=0, max=10, min_open=True),
        Param("hosts", str, None, "hosts and slots, e.g. node1:4,node2:4 (default: this node)"),
        HOSTFILE,
        Param("cpus", "intlist", None, "cpu of each rank on this node (default: one per core in placement order)"),
        Param("validate", bool, True, "check every byte of one extra exchange per ring (outside the timing)"),
        BUFFERS,
    )
    profiles = {"quick": {"random_rings": 5, "measurements": 3, "loop_time": 0.001},
                "full": {"random_rings": 30, "measurements": 8, "loop_time": 0.01}}

    # -- parameters ------------------------------------------------------------------------------
    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = super().check(ctx, params)
        hosts = parse_host_params(p)
        cpus = list(p["cpus"]) if p["cpus"] is not None else None
        allowed = allowed_cpus(ctx)
        if p["ranks"] is None:
            p["ranks"] = (len(cpus) if cpus else sum(h.slots for h in hosts) if hosts
                          else min(ctx.n_cores, len(allowed)))
        n = int(p["ranks"])
        if n < 2:
            raise UsageError(f"the ring needs 2 or more ranks, {n} asked"
                             + ("" if p["hosts"] or p["hostfile"] or cpus else " (this process may use one core)"),
                             "give --ranks 2 or more (add --oversubscribe on a single core)")
        if cpus is not None and len(cpus) != n:
            raise UsageError(f"--cpus lists {len(cpus)} cpus for {n} ranks", "give one cpu per rank")
        cpus, rank_hosts = spread_ranks(ctx, hosts, n, cpus)
        # one machine's cores (no hosts, one host, the virtual cluster): distinct where possible
        shared_machine = not hosts or len(hosts) == 1 or sim_cluster_of(hosts) is not None
        # two ranks on one core of one machine: only when asked to oversubscribe
        keys = [(None if shared_machine else h, c) for h, c in zip(rank_hosts, cpus)]
        p["shared_cpus"] = len(set(keys)) < len(keys)
        if p["shared_cpus"] and not ctx.oversubscribe:
            raise UsageError(f"{n} ranks need {n} cpus and only {len(set(keys))} are free: ranks would share cores",
                             "run fewer ranks, or add --oversubscribe")
        mem = available_memory(ctx.probe)
        per_node = max((sum(1 for k in keys if k[0] == h) for h in {k[0] for k in keys}), default=n)
        need = 4 * max(p["lat_size"], p["bw_size"]) * per_node
        if mem and need > 0.5 * mem:
            raise UsageError(f"{per_node} ranks x 4 buffers of {p['bw_size']} B need {need / 2**30:.1f} GiB, "
                             f"above half the {mem / 2**30:.1f} GiB available", "choose a smaller --bw-size")
        p["cpus"] = list(cpus)
        p["places"] = [(h, c) for h, c in zip(rank_hosts, cpus)]
        p["host_list"] = [(h.name, h.slots, h.max_slots) for h in hosts] if hosts else None
        return p

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        per_ring = 4 * params["loop_time"] + 0.002
        return 1.5 + 2 * (params["random_rings"] + 1) * params["measurements"] * per_ring

    # -- running -----------------------------------------------------------------------------------
    def launch_spec(self, ctx: RunContext, params: dict[str, Any]) -> mpimod.LaunchSpec:
        spec = launch_spec(ctx, params, params["places"], params["host_list"])
        if params.get("shared_cpus"):
            # ranks pinned to a shared core must yield while they wait, or each message waits for
            # the scheduler's time slice (Open MPI only sets this itself when it sees oversubscription)
            spec.yield_when_idle = True
        return spec

    def kernel_args(self, params: dict[str, Any]) -> list[str]:
        return [f"--lat_size={params['lat_size']}", f"--bw_size={params['bw_size']}",
                f"--random_rings={params['random_rings']}", f"--measurements={params['measurements']}",
                f"--seed={params['seed']}", f"--loop_time={params['loop_time']}",
                f"--validate={int(bool(params['validate']))}", f"--buffers={params['buffers']}"]

    def run(self, ctx: RunContext, params: dict[str, Any]) -> list:
        mpi = detect(params)
        b = ctx.build(self.kernel, openmp=False, cc=mpi.mpicc)
        spec = self.launch_spec(ctx, params)
        args = [str(b.path), *self.kernel_args(params)]
        out: list = []
        n = params["ranks"]
        base: dict[str, Any] = {
            "ranks": n, "cpus": list(params["cpus"]), "transport": params["transport"],
            "hosts": [h[0] for h in params["host_list"]] if params["host_list"] else None,
            "random_rings": params["random_rings"], "measurements": params["measurements"],
            "seed": params["seed"], "loop_time_s": params["loop_time"], "validated": bool(params["validate"]),
            "shared_cpus": bool(params["shared_cpus"]),
            "mpi": {"name": mpi.name, "version": mpi.version}, **buffers_record(params["buffers"]),
            "latency_definition": "ring time per message = loop time / (2 x loop length); max over ranks, "
                                  "min over measurements; random rings: geometric mean (HPCC b_eff), us",
            "bandwidth_definition": "size / time per message per process, 1e6 B/s (HPCC b_eff)",
        }
        host_of = [h for h, _ in params["places"]]
        different = []
        if params["host_list"]:
            firsts = {}
            for r, h in enumerate(host_of):
                firsts.setdefault(h, r)
            ranks_first = sorted(firsts.values())
            different = [(a, b2) for i, a in enumerate(ranks_first) for b2 in ranks_first[i + 1:]]
        ctx.progress.start("ring", total=4)

        def on_result(rec: dict) -> None:
            kp = dict(rec.get("params") or {})
            value = kp.pop("value", None)
            size = kp.pop("size", None)
            prm = {**base, "size_bytes": size, **{k: v for k, v in kp.items() if k not in ("measurements", "random_rings", "seed")}}
            out.append(ctx.emit(self, rec["metric"], rec["samples"], prm, times_s=rec.get("times_s"),
                                value=float(value) if value is not None else None))

        KernelSession(ctx, self.kernel, spec, mpi, base, on_result, different,
                      allow_shared_cpu=bool(params["shared_cpus"]),
                      on_arrival=lambda _rec: ctx.progress.advance(1)).run(args, params["launch_timeout"])
        got = {r.metric for r in out}
        if {"natural_ring_latency", "random_ring_latency"} <= got:
            nat = next(r for r in out if r.metric == "natural_ring_latency").value
            rnd = next(r for r in out if r.metric == "random_ring_latency").value
            ctx.note(f"ring: natural {nat:.3g} us, random {rnd:.3g} us (ratio {rnd / nat:.2f}; 1 = every rank "
                     "equally close)")
        return out
