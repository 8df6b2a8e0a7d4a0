"""bw: MPI streaming bandwidth between two ranks, one way (osu_bw) and both ways (osu_bibw).

Rank 0 posts a window of ``--window`` (64) non-blocking sends of ``size`` bytes to rank 1, waits
for them, then for a 1-byte acknowledgement (osu_bw); ``bibw`` has both ranks send and receive a
window at once (osu_bibw, both directions added). MB/s = bytes per iteration x iterations / 1e6 /
t (1e6 B/s), t the sum of the timed iterations; every iteration starts after a synchronisation of
both ranks that is not timed. Sizes: powers of two from 1 B to ``--max-size`` (4 MiB). Per size a
warm-up (excluded) sets the iteration count from ``--time-budget``; the received data is checked
against a pattern after the timed loop (outside it). The ``value`` is the loop figure (OSU's);
``params.all`` has min/median/p99/max over the single iterations, which are the ``samples``.

Buffers (``--buffers``): separate send and receive buffers by default (OSU's and IMB's
convention). ``--buffers shared``: each message is the data just received (an application passing
on fresh data): in ``bibw`` each rank sends on the window it received in the previous iteration;
one-way ``bw`` is the same in both, since its sender receives nothing it could pass on.

Placement and transport as pingpong: two cpus on this node (default the first two cores), or
rank 0 on the first and rank 1 on the second of ``--hosts``; both verified from the ranks' own
report, and the transport proven from Open MPI's verbose output.
"""
from __future__ import annotations

from typing import Any

from clusterbench.errors import KernelFailed
from clusterbench.launch import mpi as mpimod
from clusterbench.benchmarks import register
from clusterbench.benchmarks.mpi.common import (BUFFERS, PAIR_CPUS, buffers_record,
    PAIR_HOSTFILE, PAIR_HOSTS, VALIDATE, WINDOW, MiB, MpiBenchmark,
    check_sizes, detect, launch_spec, max_size, place_pair, shared_cpu_warning, shares_cores, sizes,
    subsampled_times, time_budget)
from clusterbench.benchmarks.base import Metric, Param, RunContext

MODES = {"uni": ["bw"], "bi": ["bibw"], "both": ["bw", "bibw"]}


@register
class Bw(MpiBenchmark):
    name = "bw"
    suites = {"mpi": 20}
    key_params = ('direction', 'transport_used', 'pair', 'size_bytes')
    help = "MPI streaming bandwidth between two ranks, one way and both ways (osu_bw, osu_bibw)"
    kernel = "mpibw"
    metrics = (
        Metric("bw", "MB/s", True, "one-way streaming bandwidth, a window of non-blocking sends then a 1-byte "
               "ack (osu_bw): size x window x iterations / 1e6 / t (params size_bytes, window)"),
        Metric("bibw", "MB/s", True, "both ways at once (osu_bibw), both directions added: 2 x size x window x "
               "iterations / 1e6 / t (params size_bytes, window)"),
    )
    params = (
        Param("direction", str, "both", "uni (bw), bi (bibw) or both", tuple(MODES)),
        max_size(4 * MiB),
        sizes(),
        WINDOW,
        PAIR_HOSTS, PAIR_HOSTFILE, PAIR_CPUS,
        VALIDATE,
        BUFFERS,
        time_budget(0.25, "size and direction"),
    )
    profiles = {"quick": {"time_budget": 0.05}, "full": {"time_budget": 1.0}}

    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = super().check(ctx, params)
        p["size_list"] = check_sizes(p)
        p["modes"] = MODES[p["direction"]]
        place_pair(ctx, p, "bw")
        return p

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        return 1.0 + len(params["size_list"]) * len(params["modes"]) * (params["time_budget"] * 1.2 + 0.02)

    def launch_spec(self, ctx: RunContext, params: dict[str, Any]) -> mpimod.LaunchSpec:
        return launch_spec(ctx, params, params["places"], params["host_list"])

    def run(self, ctx: RunContext, params: dict[str, Any]) -> list:
        mpi = detect(params)
        sizes = params["size_list"]
        args = [f"--sizes={','.join(map(str, sizes))}", f"--modes={','.join(params['modes'])}",
                f"--window={params['window']}", f"--time_budget={params['time_budget']}",
                f"--validate={int(bool(params['validate']))}", f"--buffers={params['buffers']}"]
        base: dict[str, Any] = {
            "transport": params["transport"], "pair": params["pair"], "cpus": list(params["cpus"]), "ranks": 2,
            "window": params["window"], "time_budget_s": params["time_budget"],
            "validated": bool(params["validate"]), "mpi": {"name": mpi.name, "version": mpi.version},
            "bandwidth_definition": "bytes per iteration x iterations / 1e6 / t, t = sum of the timed iterations "
                                    "(1e6 B/s); bibw adds both directions",
            **buffers_record(params["buffers"])}
        out: list = []
        hosts = [mpimod.Host(*h) for h in params["host_list"]] if params["host_list"] else None
        crowded = shared_cpu_warning(params["places"], shares_cores(hosts))
        ctx.progress.start("bw", total=len(sizes) * len(params["modes"]))

        def on_result(rec: dict) -> None:
            kp = rec.get("params", {})
            metric = rec["metric"]
            if metric not in ("bw", "bibw"):
                raise KernelFailed(f"bw: the kernel reported an unexpected metric {metric!r}", "report this as a bug")
            pair = (kp.get("pair") or [{}])[0]
            size = int(kp.get("size", 0))
            prm = {**base, "size_bytes": size, "direction": "uni" if metric == "bw" else "bi",
                   "iterations": kp.get("iterations"), "time_s": pair.get("time_s"),
                   "bytes_per_iteration": kp.get("bytes_per_iteration"), "rbuf_slots": kp.get("rbuf_slots"),
                   "loop_s": kp.get("loop_s"), "samples_kept": kp.get("samples_kept"),
                   "buffers": kp.get("buffers", base["buffers"]),  # the kernel's own word
                   "all": {"n": pair.get("iterations"), **{k: pair.get(k) for k in
                                                            ("min", "median", "mean", "p99", "max")}}}
            samples = rec["samples"]
            times = subsampled_times(samples, float(kp.get("bytes_per_iteration") or 0), latency=False)
            # samples are single iterations: their spread is reported (median, p99), not a defect
            out.append(ctx.emit(self, metric, samples, prm, times_s=times or None, value=pair.get("mbs"),
                                check_cv=False, extra_warnings=[crowded]))

        self.launch(ctx, params, args, base, on_result, mpi=mpi, on_arrival=lambda _rec: ctx.progress.advance(1),
                    different_nodes=[(0, 1)] if params["pair"] == "inter-node" else ())
        return out
