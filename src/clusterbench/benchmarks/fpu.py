"""fpu: latency and reciprocal throughput of scalar double add, mul, fma, div and sqrt
(seed 001, Table 1; lmbench lat_ops / par_ops).

Latency = one dependent chain; throughput = 16 independent *scalar* chains (no SIMD), so the
figure is the reciprocal throughput of the scalar instruction. Both in ns and in cycles, the
cycles from a clock measured in the kernel by a dependent integer add chain (1 add/cycle).
Every chain's final value is checked against its closed form.
"""
from __future__ import annotations

from typing import Any

from ..errors import UsageError
from . import register
from .base import Benchmark, Metric, Param, RunContext, placement

OPS = ("add", "mul", "fma", "div", "sqrt")


def _metrics() -> tuple[Metric, ...]:
    out = []
    for op in OPS:
        out += [
            Metric(f"{op}_latency_ns", "ns", False, f"double {op}: dependent chain, ns per op"),
            Metric(f"{op}_latency_cycles", "cycles", False, f"double {op}: dependent chain, cycles per op"),
            Metric(f"{op}_throughput_ns", "ns", False,
                   f"double {op}: 16 independent scalar chains, ns per op (reciprocal throughput, one core)"),
            Metric(f"{op}_throughput_cycles", "cycles", False,
                   f"double {op}: 16 independent scalar chains, cycles per op (reciprocal throughput)"),
        ]
    return tuple(out)


@register
class Fpu(Benchmark):
    name = "fpu"
    help = "latency and throughput of scalar double add, mul, fma, div, sqrt (seed 001, Table 1)"
    kernel = "fpu"
    metrics = _metrics()
    params = (
        Param("cpu", int, None, "cpu to pin the single thread to (default: first cpu of the placement)"),
        Param("ops", str, ",".join(OPS), "comma-separated operations: " + ", ".join(OPS)),
        Param("samples", int, 10, "timed runs per operation and mode (best is reported)"),
        Param("min_time", float, 0.005, "seconds per timed run"),
    )
    profiles = {"quick": {"samples": 5, "min_time": 0.002}, "full": {"samples": 30, "min_time": 0.02}}

    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = dict(params)
        online = [c["pu"] for c in (ctx.probe.get("topology") or {}).get("cpus", [])]
        if p["cpu"] is None:
            p["cpu"] = placement(ctx, 1)[0]
        elif p["cpu"] < 0 or (online and p["cpu"] not in online) or (not online and p["cpu"] >= ctx.n_pus):
            raise UsageError(f"--cpu {p['cpu']} is not an online cpu of this machine",
                             "see 'clusterbench probe' for the cpu list")
        ops = [o.strip() for o in str(p["ops"]).split(",") if o.strip()]
        bad = [o for o in ops if o not in OPS]
        if bad or not ops:
            raise UsageError(f"--ops: unknown operation '{bad[0] if bad else ''}'", f"choose from {', '.join(OPS)}")
        p["ops"] = ",".join(dict.fromkeys(ops))
        if not 1 <= p["samples"] <= 64:
            raise UsageError(f"--samples {p['samples']} is not allowed", "use 1 to 64")
        if not 0 < p["min_time"] < 10:
            raise UsageError(f"--min-time {p['min_time']} is not allowed", "use a value in (0, 10) seconds")
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
        ctx.progress.start("fpu", total=len(ops))

        def on(rec: dict) -> None:
            if rec["type"] == "validation":
                ctx.progress.advance(1)
            if rec["type"] != "result":
                return
            prm = {**base, **rec.get("params", {})}
            prm["clock_source"] = "measured (dependent integer add chain, 1 add/cycle)"
            out.append(ctx.emit(self, rec["metric"], rec["samples"], prm, times_s=rec.get("times_s")))

        ctx.run_kernel(b, [f"--cpu={params['cpu']}", f"--ops={params['ops']}", f"--samples={params['samples']}",
                           f"--min_time={params['min_time']}"], on_record=on)
        return out
