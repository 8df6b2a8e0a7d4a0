"""daxpy: y = a*x + y on one pinned core (MB/s, STREAM's byte counting: 24 B per element)."""
from __future__ import annotations

from typing import Any

from clusterbench.benchmarks import register
from clusterbench.benchmarks.base import CPU, KernelBenchmark, Metric, Param, Result, RunContext, check_cpu


def _headline(results: list[Result]) -> list[str]:
    """The line this benchmark adds to a suite's summary."""
    return [f"daxpy    {r.value:,.0f} MB/s on one core" for r in results
            if r.benchmark == "daxpy" and r.metric == "rate"]


def _finding(results: list[Result]) -> list[str]:
    """What holds it back: one core far from what the memory gives all cores."""
    ours = [r.value for r in results if r.benchmark == "daxpy"]
    triad = [r.value for r in results if r.benchmark == "stream" and r.metric == "triad"]
    if ours and triad and max(ours) < 0.25 * max(triad):
        return [f"one core streams {max(ours) / max(triad):.0%} of the node's triad: "
                "bandwidth-bound codes need several cores per socket"]
    return []


@register
class Daxpy(KernelBenchmark):
    name = "daxpy"
    help = "y = a*x + y on one pinned core, MB/s as STREAM counts bytes"
    kernel = "daxpy"                     # kernels/<family>/daxpy.c
    suites = {"node": 45}                # part of `run node`, after membw (40)
    key_params = ("elements", "cpu")     # what tells two figures apart in a table
    metrics = (Metric("rate", "MB/s", True, "24 B per element (read x, read y, write y)",
                      ("best_bandwidth",)),)   # judged against the best bandwidth measured here
    params = (
        CPU,
        Param("elements", int, 4_000_000, "vector length", min=1000, max=1 << 28,
              why="2 GiB per vector at most"),
        Param("samples", int, 10, "timed passes (the first is a warm-up)", min=2, max=1000),
    )
    profiles = {"quick": {"samples": 5}}
    headlines = (_headline,)
    findings = (_finding,)

    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = dict(params)
        p["cpu"] = check_cpu(ctx, p["cpu"])
        p["threads"], p["cpus"] = 1, [p["cpu"]]
        return p

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        return params["samples"] * params["elements"] * 24 / 2e9 + 0.2

    def run(self, ctx: RunContext, params: dict[str, Any]) -> list:
        out = []
        ctx.progress.start("daxpy", total=1)

        def on_result(rec: dict) -> None:
            prm = {**params, **rec.get("params", {})}
            out.append(ctx.emit(self, rec["metric"], rec["samples"], prm, times_s=rec.get("times_s")))

        self.measure(ctx, [f"--cpu={params['cpu']}", f"--n={params['elements']}",
                           f"--samples={params['samples']}"], [params["cpu"]], on_result)
        return out
