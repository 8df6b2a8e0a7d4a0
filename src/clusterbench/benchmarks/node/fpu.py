"""fpu: latency and reciprocal throughput of scalar double add, mul, fma, div and sqrt
(Eicker and Lippert (2007), Table 1; lmbench lat_ops / par_ops).

Latency = one dependent chain; throughput = 16 independent *scalar* chains (no SIMD), so the
figure is the reciprocal throughput of the scalar instruction. Four metrics, each emitted once
per operation with ``params["op"]`` (lower is better, as memlat's ``latency``):

  * ``latency`` (ns per op) and ``latency_cycles``;
  * ``throughput`` (ns per op, i.e. reciprocal throughput) and ``throughput_cycles``.

Cycles come from a clock measured in the kernel by a dependent integer add chain (1 add/cycle,
``cb_measure_ghz`` in cb_common.h). Operands are non-trivial (full mantissas: ``x = e / x`` for
div, ``x = sqrt(x) * sqrt(1.7)`` for sqrt, which settles near 1.7 rather than at 1.0), so no
core can fast-path an easy input; the sqrt latency is net of the multiply's latency measured in
the same process (``params["mul_latency_subtracted_ns"]``). Every chain's final value is checked
against its closed form before any figure is printed.
"""
from __future__ import annotations

from typing import Any

from clusterbench.errors import UsageError
from clusterbench.benchmarks import register
from clusterbench.benchmarks.base import KernelBenchmark, CPU, Metric, Param, RunContext, check_cpu

OPS = ("add", "mul", "fma", "div", "sqrt")


@register
class Fpu(KernelBenchmark):
    name = "fpu"
    suites = {"node": 20}
    key_params = ('op', 'threads')
    help = "latency and throughput of scalar double add, mul, fma, div, sqrt (Eicker and Lippert 2007, Table 1)"
    kernel = "fpu"
    metrics = (
        Metric("latency", "ns", False, "dependent chain of one operation (params op), ns per op"),
        Metric("latency_cycles", "cycles", False, "dependent chain, cycles per op (ns x measured clock)"),
        Metric("throughput", "ns", False,
               "16 independent scalar chains, ns per op (reciprocal throughput of one core)"),
        Metric("throughput_cycles", "cycles", False,
               "16 independent scalar chains, cycles per op (reciprocal throughput)"),
    )
    params = (
        CPU,
        Param("ops", str, ",".join(OPS), "comma-separated operations: " + ", ".join(OPS)),
        Param("samples", int, 10, "timed runs per operation and mode (best is reported)", min=1, max=64),
        Param("min_time", float, 0.005, "seconds per timed run", min=0, max=10, min_open=True),
    )
    profiles = {"quick": {"samples": 5, "min_time": 0.002}, "full": {"samples": 30, "min_time": 0.02}}

    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = dict(params)
        p["cpu"] = check_cpu(ctx, p["cpu"])
        ops = [o.strip() for o in str(p["ops"]).split(",") if o.strip()]
        bad = [o for o in ops if o not in OPS]
        if bad or not ops:
            raise UsageError(f"--ops: unknown operation '{bad[0] if bad else ''}'", f"choose from {', '.join(OPS)}")
        p["ops"] = ",".join(dict.fromkeys(ops))
        p["threads"] = 1
        p["cpus"] = [p["cpu"]]
        return p

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        n = len(params["ops"].split(","))
        return n * 2 * (params["samples"] + 2) * params["min_time"] * 1.5 + 0.1

    def run(self, ctx: RunContext, params: dict[str, Any]) -> list:
        b = ctx.build("fpu")
        ops = params["ops"].split(",")
        out = []
        base = {"threads": 1, "cpus": [params["cpu"]], "cpu": params["cpu"], "precision": "double",
                "vector": "scalar"}
        ctx.progress.start("fpu", total=len(ops) * len(self.metrics))  # every metric for every operation

        def on_result(rec: dict) -> None:
            prm = {**base, **rec.get("params", {})}
            prm["clock_source"] = "measured (dependent integer add chain, 1 add/cycle)"
            out.append(ctx.emit(self, rec["metric"], rec["samples"], prm, times_s=rec.get("times_s")))

        self.measure(ctx, [f"--cpu={params['cpu']}", f"--ops={params['ops']}", f"--samples={params['samples']}",
                           f"--min_time={params['min_time']}"], [params["cpu"]], on_result, build=b)
        return out
