"""Measured FMA peak: Gflop/s of one core and of all cores, and the clock that rate implies.

The kernel (kernels/peak.c) runs independent FMA chains x <- x*m + c in the widest SIMD unit
the -march=native build has (AVX-512, SVE, AVX2+FMA, NEON; scalar fallback), enough of them to
cover FMA latency x pipes, and checks every lane against the recurrence's closed form.
FLOPs are counted like likwid's peakflops_*_fma and HPL: one FMA lane = 2 flops.

Beside the probe's Rpeak (cores x nominal clock x flops/cycle) this gives what the cores
really sustain, the clock that implies (Gflop/s / (flops/cycle x cores)) and, where the probe
cannot tell 1 from 2 AVX-512 FMA units (Skylake-SP Silver/Gold 5xxx), which it is.
"""
from __future__ import annotations

import platform
from typing import Any

from clusterbench.analysis.warnings import Warning_
from clusterbench.errors import UsageError
from clusterbench.analysis.summary import limit_text, max_threads, pick
from clusterbench.benchmarks import register
from clusterbench.benchmarks.base import (KernelBenchmark, CPUS, ORDER, SMT, THREADS, Metric, Param, Result, RunContext, check_placement,
                   cpulist, resolve_threads)

ISAS = ("auto", "avx512", "avx2", "sve", "neon", "vsx", "scalar")
#: DP lanes per vector (SVE: reported by the kernel)
DP_LANES = {"avx512": 8, "avx2": 4, "neon": 2, "vsx": 2, "scalar": 1}


def _probe_fpc(probe: dict, cpus: list[int]) -> float | None:
    """DP flops/cycle/core of the cores used, from the probe's Rpeak table."""
    rp = probe.get("rpeak") or {}
    table = {k: v for k, v in (rp.get("dp_flops_per_cycle_per_core") or {}).items() if v}
    if not table:
        return None
    kinds = {c["pu"]: c.get("kind") for c in (probe.get("topology") or {}).get("cpus", [])}
    names = {pk.get("kind"): pk.get("name") for pk in rp.get("per_kind") or []}
    vals = [table.get(names.get(kinds.get(c))) for c in cpus]
    if vals and all(vals):
        return float(min(vals))  # type: ignore[type-var]
    return float(max(table.values()))


def fpc_for_isa(fpc_probe: float | None, isa: str, isa_best: str, vector_bits: int | None) -> float | None:
    """Flops/cycle the kernel's ISA can reach: the probe's figure for the best ISA; for a forced
    narrower one at most 2 FMA pipes x lanes x 2 (true of every current x86 and Arm core)."""
    if fpc_probe is None:
        return None
    if isa == isa_best:
        return fpc_probe
    lanes = (vector_bits or 64) // 64
    return min(fpc_probe, 2 * 2 * lanes)


def infer_fma_units(fpc_measured: float, candidates: list[float]) -> tuple[int, float, bool]:
    """Pick the FMA-unit count whose flops/cycle explains the measurement.

    A core cannot exceed its candidate's rate (5% slack for clock-measurement error), so the
    smallest candidate at or above the measurement is chosen. Returns (units, candidate,
    ambiguous): ambiguous when the measurement is far below it (an AVX-512 clock drop or a
    shared core could make a 2-unit core look like a 1-unit one)."""
    cands = sorted(set(candidates))
    unit = cands[0]
    chosen = next((c for c in cands if fpc_measured <= 1.05 * c), cands[-1])
    units = max(1, round(chosen / unit))
    ambiguous = fpc_measured < 0.75 * chosen
    return units, chosen, ambiguous


def _headlines(rs: list[Result]) -> list[str]:
    n = max_threads(rs, "peak", "gflops")
    one, every = pick(rs, "peak", "gflops", threads=1), (pick(rs, "peak", "gflops", threads=n) if n else None)
    out = []
    if one:
        out.append(f"compute  FMA peak, 1 core: {one.value:.1f} Gflop/s{limit_text(one, 'rpeak')}")
    if every and n and n > 1:
        out.append(f"compute  FMA peak, {n} cores: {every.value:.1f} Gflop/s{limit_text(every, 'rpeak')}")
    clock = pick(rs, "peak", "effective_clock", threads=n) if n else None
    if clock:
        out.append(f"compute  clock implied by the peak: {clock.value:.0f} MHz")
    return out


def _findings(rs: list[Result]) -> list[str]:
    n = max_threads(rs, "peak", "gflops")
    one, every = pick(rs, "peak", "gflops", threads=1), (pick(rs, "peak", "gflops", threads=n) if n else None)
    if one and every and n and n > 1 and every.value < 0.8 * n * one.value:
        return [f"the FMA peak scales {every.value / one.value:.2f}x on {n} cores, not {n}x: cores share a "
                "clock budget (turbo), are SMT siblings, or are shared with other load"]
    return []


@register
class Peak(KernelBenchmark):
    name = "peak"
    suites = {"node": 10}
    key_params = ('isa', 'threads')
    headlines = (_headlines,)
    findings = (_findings,)
    help = "FMA peak Gflop/s per core and for all cores, the clock it implies (likwid peakflops; Khadka, Multicore-Multinode)"
    kernel = "peak"
    metrics = (
        Metric("gflops", "Gflop/s", True, "DP FMA throughput of the threads together (1 FMA lane = 2 flops)",
               ("rpeak", "rpeak_max"), provides=("measured_peak",)),
        Metric("gflops_per_core", "Gflop/s", True, "aggregate DP FMA throughput / threads", ()),
        Metric("effective_clock", "MHz", True,
               "clock the measured peak implies: Gflop/s / (flops/cycle/core from the probe x cores)", ()),
        Metric("fma_units", "count", True,
               "AVX-512 FMA units per core: 1 ms FMA bursts / integer-chain clock (1 thread); a count, "
               "so 'higher is better' is not meaningful for it", ()),
        Metric("sp_gflops", "Gflop/s", True, "single-precision FMA throughput of the threads together",
               ("rpeak_sp",)),
    )
    params = (
        Param("isa", str, "auto", "SIMD instruction set: best of this build, or force a narrower one", ISAS),
        Param("samples", int, 5, "timed samples per thread count", min=1, max=1000),
        Param("seconds", float, 0.5, "length of one sample (s)", min=0, max=60, min_open=True),
        Param("sp", bool, True, "also measure single precision"),
        THREADS, ORDER, SMT, CPUS,
        Param("corrupt", bool, False, "test hook: damage a chain after timing (validation must fail)"),
    )
    profiles = {"quick": {"samples": 3, "seconds": 0.2, "sp": False},
                "full": {"samples": 10, "seconds": 1.0, "sp": True}}

    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        if not params["seconds"] > 0 or params["seconds"] > 600:
            raise UsageError(f"--seconds {params['seconds']} is out of range", "use a value in (0, 600]")
        isa = params["isa"]
        machine = platform.machine().lower()
        arm_isa, x86_isa, power_isa = isa in ("sve", "neon"), isa in ("avx512", "avx2"), isa == "vsx"
        if ((arm_isa and not machine.startswith(("aarch64", "arm"))) or (power_isa and not machine.startswith("ppc"))
                or (x86_isa and machine not in ("x86_64", "amd64", "i686"))):
            raise UsageError(f"--isa {isa} does not exist on {machine}", "use --isa auto")
        flags = set((ctx.probe.get("cpu") or {}).get("isa") or [])
        need = {"avx512": "avx512f", "avx2": "fma", "sve": "sve"}.get(isa)
        if need and flags and need not in flags:
            raise UsageError(f"--isa {isa} is not supported by this CPU (no {need})", "use --isa auto")
        return resolve_threads(ctx, params)

    def _points(self, ctx: RunContext, params: dict[str, Any]) -> list[list[int]]:
        all_cpus = list(params["cpus"])
        return [all_cpus[:1]] + ([all_cpus] if len(all_cpus) > 1 else [])

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        per = (params["samples"] + 1) * params["seconds"] + 0.2  # + the untimed warm-up sample
        return len(self._points(ctx, params)) * per * (2 if params["sp"] else 1) + 1.0

    def run(self, ctx: RunContext, params: dict[str, Any]) -> list[Result]:
        b = ctx.build("peak")
        out: list[Result] = []
        points = self._points(ctx, params)
        ctx.progress.start("peak", total=len(points) * (2 if params["sp"] else 1))
        rp = ctx.probe.get("rpeak") or {}
        one_thread: dict[str, Any] = {}
        for cpus in points:
            n = len(cpus)
            info: dict[str, Any] = {}
            base = {"threads": n, "cpus": cpus}

            def on(rec: dict, n: int = n, cpus: list[int] = cpus, info: dict = info,
                   base: dict = base) -> None:
                if rec["type"] == "info":
                    check_placement(rec, cpus, self.name)
                    info.clear()
                    info.update(rec)
                    return
                if rec["type"] != "result":
                    return
                kp = {**base, **rec.get("params", {}),
                      "isa_best": info.get("isa_best"), "accumulators": info.get("accumulators"),
                      "per_thread_best": rec.get("per_thread_best"), "cpus_actual": info.get("cpus_actual"),
                      "iterations": rec.get("iterations"), "flops_per_iteration": rec.get("flops_per_iteration")}
                samples = rec["samples"]
                times = rec.get("times_s")
                if rec["metric"] == "sp_gflops":
                    out.append(ctx.emit(self, "sp_gflops", samples, kp, times_s=times))
                    ctx.progress.advance(1)
                    return
                fpc = fpc_for_isa(_probe_fpc(ctx.probe, cpus), kp["isa"], info.get("isa_best", ""),
                                  kp.get("vector_bits"))
                eff = [s / (fpc * n) * 1000.0 for s in samples] if fpc else None
                ws: list[Warning_ | None] = []
                nominal = rp.get("clock_max_mhz") or rp.get("clock_nominal_mhz")
                if eff and nominal and max(eff) > 1.03 * nominal:
                    ws.append(Warning_(
                        "above-rpeak",
                        f"the measured peak implies {max(eff):.0f} MHz, above the {nominal:.0f} MHz the probe's "
                        "Rpeak assumes (turbo the probe cannot see, e.g. in a VM)",
                        "judge efficiency against the measured peak (limit 'measured_peak') rather than Rpeak"))
                out.append(ctx.emit(self, "gflops", samples, kp, times_s=times, extra_warnings=ws))
                out.append(ctx.emit(self, "gflops_per_core", [s / n for s in samples], kp, times_s=times))
                if eff:
                    out.append(ctx.emit(self, "effective_clock", eff,
                                        {**kp, "flops_per_cycle": fpc, "int_clock_mhz": info.get("int_clock_mhz")}))
                if n == 1:
                    one_thread.update(best=max(samples), info=dict(info), params=kp)
                ctx.progress.advance(1)

            args = [f"--cpus={cpulist(cpus)}", f"--isa={params['isa']}", f"--samples={params['samples']}",
                    f"--seconds={params['seconds']}"] + (["--corrupt=1"] if params.get("corrupt") else [])
            ctx.run_kernel(b, args + ["--precision=dp"], on_record=on)
            if n == 1:
                r = self._fma_units(ctx, one_thread)
                if r:
                    out.append(r)
            if params["sp"]:
                ctx.run_kernel(b, args + ["--precision=sp"], on_record=on)
        return out

    def _fma_units(self, ctx: RunContext, one: dict[str, Any]) -> Result | None:
        """AVX-512 FMA units from the 1-thread peak and the integer-chain clock."""
        info = one.get("info") or {}
        clk = info.get("int_clock_mhz")
        fpc = info.get("burst_flops_per_cycle")
        if info.get("isa") != "avx512" or not clk or not fpc:
            return None
        rp = ctx.probe.get("rpeak") or {}
        cand_map = rp.get("dp_flops_per_cycle_candidates") or {}
        cands = sorted({c for v in cand_map.values() for c in v}) or [16, 32]
        units, chosen, ambiguous = infer_fma_units(fpc, cands)
        ws: list[Warning_ | None] = []
        if ambiguous:
            ws.append(Warning_(
                "fma-units-ambiguous",
                f"1 core reached {fpc:.1f} flops/cycle at the {clk:.0f} MHz integer clock, well below the "
                f"{chosen:g} of {units} FMA unit(s): the AVX-512 clock may be lower, or the core shared",
                "rerun on an idle node with --full; compare against a known part"))
        table = [v for v in (rp.get("dp_flops_per_cycle_per_core") or {}).values() if v]
        if table and not rp.get("fma_units_ambiguous") and chosen != max(table) and not ambiguous:
            ws.append(Warning_(
                "fma-units-mismatch",
                f"measured {fpc:.1f} flops/cycle fits {chosen:g}, the probe's table says {max(table)}",
                "check the microarchitecture the probe detected"))
        p = {k: v for k, v in one["params"].items() if k not in ("per_thread_best",)}
        p.update({"flops_per_cycle_measured": fpc, "int_clock_mhz": clk,
                  "burst_gflops": info.get("burst_gflops"), "candidates": cands,
                  "probe_ambiguous": bool(rp.get("fma_units_ambiguous"))})
        return ctx.emit(self, "fma_units", [float(units)], p, extra_warnings=ws)
