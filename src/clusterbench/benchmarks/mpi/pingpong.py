"""pingpong: MPI half round-trip latency and bandwidth between two ranks against message size
(OSU osu_latency, IMB PingPong, NetPIPE; shared/notes/anchors-mpi.md).

Rank 0 sends ``size`` bytes to rank 1, which sends them back; the half round trip is the
latency (us) and ``size`` / half round trip the bandwidth (MB/s = 1e6 B/s). Sizes: 0 B and the
powers of two up to ``--max-size`` (16 MiB), each also at +-3 B (NetPIPE's perturbation, which
shows the eager/rendezvous switch and MTU edges), or an explicit ``--sizes`` list. Per size a
warm-up (excluded) estimates the round trip and sets the iteration count from ``--time-budget``;
every iteration is timed, so the kernel reports min, median, mean, p99 and max over all of them
(``params.all``); ``samples`` holds at most 1000 of them, evenly spread. Then half as many round
trips again in 5 loops, each timed as a whole with no timer call inside: the ``value`` is the best
loop's average (hpcc and NetPIPE report the best of repeated loops), ``params.batch_mean`` the
average over all loops (what OSU and IMB report).

Buffers (``--buffers``): by default each rank sends from a send buffer and receives into a
separate receive buffer, the convention of OSU (osu_latency, osu_bw), IMB PingPong and hpcc, so
figures compare with theirs. ``--buffers shared`` sends from and receives into one buffer: each
message is the data just received (data freshly written by the application, as when it passes
on what it was given); on shared memory the written lines then travel back to the other core on
every round trip, which can halve the mid-size bandwidth. NetPIPE 3.7 by default (without ``-I``)
uses one buffer, so it compares with ``--buffers shared``. Every figure records
``params.buffers`` and what it means (``params.buffers_definition``).

Placement is explicit and verified: locally the two ranks are pinned to two different cores
(``--cpus``, default the first two of the placement order); with ``--hosts a,b`` (or a hostfile)
rank 0 runs on the first host and rank 1 on the second (inter-node: refused if both land on one
node). Every rank reports host, virtual-cluster node and bound cpus before any timing.

``--transport`` maps to Open MPI's MCA settings (shm: ob1 + vader, tcp: ob1 + tcp, rdma: ucx);
the transport actually used is proven from Open MPI's verbose output and stored with every
figure (``params.transport_used``, ``params.transport_proof``); a contradiction is refused.
As root, Open MPI runs only with ``--allow-root`` (or ``CLUSTERBENCH_ALLOW_RUN_AS_ROOT=1``).
"""
from __future__ import annotations

from typing import Any

from clusterbench.errors import UsageError
from clusterbench.launch import mpi as mpimod
from clusterbench.benchmarks import register
from clusterbench.benchmarks.mpi.common import (BUFFERS, PAIR_CPUS, PAIR_HOSTFILE, PAIR_HOSTS, PINGPONG_DEFINITIONS,
                                                MpiBenchmark, buffers_record, detect, launch_spec,
                                                max_size, pingpong_figure, place_pair, sizes, time_budget)
from clusterbench.benchmarks.base import HpccKey, Metric, Param, RunContext

MiB = 1 << 20


def sweep_sizes(max_size: int, perturb: bool) -> list[int]:
    """0 and the powers of two up to max_size, with NetPIPE's +-3 B (mirrors pingpong.c)."""
    out = [0]
    p = 1
    while p <= max_size:
        if perturb and p >= 8:  # p - 3 > p/2 + 3 (the previous +3) for p >= 16; 5 > 4 for p = 8
            out.append(p - 3)
        out.append(p)
        if perturb and p >= 8 and p + 3 <= max_size:
            out.append(p + 3)
        p *= 2
    return out


@register
class PingPong(MpiBenchmark):
    name = "pingpong"
    suites = {"mpi": 10, "hpcc": 70}
    key_params = ('transport_used', 'pair', 'size_bytes')
    #: HPCC's ping-pong: 8 B latency, 2,000,000 B bandwidth (GB/s = 1e9 B/s); one pair here, so
    #: its best figure is hpcc's Min latency and Max bandwidth over pairs
    hpcc_keys = (HpccKey("MinPingPongLatency_usec", "latency", lambda p: p.get("size_bytes") == 8),
                 HpccKey("MaxPingPongBandwidth_GBytes", "bandwidth", lambda p: p.get("size_bytes") == 2_000_000,
                         scale=1e-3))
    help = "MPI ping-pong latency and bandwidth between two ranks, 0 B to 16 MiB (OSU/IMB/NetPIPE)"
    kernel = "pingpong"
    metrics = (
        Metric("latency", "us", False, "half round-trip time of a blocking MPI_Send/MPI_Recv ping-pong "
               "(params size_bytes, transport)"),
        Metric("bandwidth", "MB/s", True, "message size / half round-trip time, 1e6 B/s (params size_bytes)"),
    )
    params = (
        max_size(16 * MiB, smallest=0),
        sizes(smallest=0, note="overrides --max-size/--perturb"),
        Param("perturb", bool, True, "also measure each power of two +-3 bytes (NetPIPE)"),
        Param("transports", "strlist", None, "several transports, the same pair measured over each in turn, "
              "e.g. tcp,shm (side by side in one run)", mpimod.TRANSPORTS, excludes=("transport",)),
        PAIR_HOSTS, PAIR_HOSTFILE, PAIR_CPUS,
        Param("validate", bool, False, "check the data after each size's timed loop (outside it)"),
        Param("hugepages", bool, False, "message buffers on transparent huge pages (large-message "
              "bandwidth rises where the copy is page-bound; default: 4 KiB pages, like most applications)"),
        BUFFERS,
        time_budget(0.1, "size (0.1: the full 0..16 MiB sweep in about 11 s)"),
    )
    profiles = {"quick": {"time_budget": 0.05}, "full": {"time_budget": 1.0}}

    # -- parameters ------------------------------------------------------------------------------
    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = super().check(ctx, params)
        p["transports"] = list(dict.fromkeys(p["transports"] or [p["transport"]]))
        if p["sizes"]:
            sizes = sorted(dict.fromkeys(int(s) for s in p["sizes"]))
        else:
            sizes = sweep_sizes(p["max_size"], bool(p["perturb"]))
        if len(sizes) > 500:
            raise UsageError(f"{len(sizes)} message sizes is too many", "give at most 500")
        p["size_list"] = sizes
        place_pair(ctx, p, "pingpong")
        return p

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        return len(params["transports"]) * (1.0 + len(params["size_list"]) * (params["time_budget"] * 1.1 + 0.01))

    # -- running -----------------------------------------------------------------------------------
    def launch_spec(self, ctx: RunContext, params: dict[str, Any]) -> mpimod.LaunchSpec:
        return launch_spec(ctx, params, params["places"], params["host_list"])

    def run(self, ctx: RunContext, params: dict[str, Any]) -> list:
        out: list = []
        for transport in params["transports"]:  # the same pair and sizes, one transport after another
            out += self._run_one(ctx, {**params, "transport": transport})
        return out

    def _run_one(self, ctx: RunContext, params: dict[str, Any]) -> list:
        mpi = detect(params)
        sizes = params["size_list"]
        args = [f"--sizes={','.join(map(str, sizes))}", f"--time_budget={params['time_budget']}",
                f"--validate={int(bool(params['validate']))}", f"--hugepages={int(bool(params['hugepages']))}",
                f"--buffers={params['buffers']}"]
        out = []
        base = {"transport": params["transport"], "pair": params["pair"], "cpus": list(params["cpus"]),
                "ranks": 2, "time_budget_s": params["time_budget"],
                "validated": bool(params["validate"]), "hugepages": bool(params["hugepages"]),
                "mpi": {"name": mpi.name, "version": mpi.version},
                **PINGPONG_DEFINITIONS, **buffers_record(params["buffers"])}
        ctx.progress.start("pingpong", total=len(sizes))

        def on_result(rec: dict) -> None:
            metric = rec["metric"]
            size, value, figure, times = pingpong_figure(rec)
            # samples are single iterations: their spread is reported (min/median/p99), not a defect
            out.append(ctx.emit(self, metric, rec["samples"], {**base, **figure}, times_s=times or None, value=value,
                                check_cv=False))

        def on_arrival(rec: dict) -> None:  # one step a size: its latency, or its bandwidth when it has one
            if rec["metric"] == "bandwidth" or int((rec.get("params") or {}).get("size", 0)) == 0:
                ctx.progress.advance(1)

        self.launch(ctx, params, args, base, on_result, mpi=mpi, name=self.kernel, on_arrival=on_arrival,
                    different_nodes=[(0, 1)] if params["pair"] == "inter-node" else ())
        return out
