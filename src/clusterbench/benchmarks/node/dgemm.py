"""DGEMM through the system BLAS: one core, every core its own copy (HPCC StarDGEMM), all cores.

The kernel (kernels/dgemm.c) dlopen()s the chosen BLAS and calls cblas_dgemm (or dgemm_), so
one binary serves OpenBLAS, BLIS, MKL and the reference BLAS; ``--blas`` picks one by name or
path. Gflop/s = 2 n^3 / t; the product is checked like HPCC does (scaled residual of a few
columns recomputed naively). The library actually mapped (from /proc/self/maps) and its
configuration string (openblas_get_config, bli_info_get_version_str) go into every result.
"""
from __future__ import annotations

import os
import re
import time
from typing import Any

from clusterbench.analysis.warnings import Warning_
from clusterbench.errors import UsageError
from clusterbench.launch.local import KernelJob
from clusterbench.analysis.summary import limit_fraction, limit_text, pick
from clusterbench.benchmarks import register
from clusterbench.probe import blas as blasprobe
from clusterbench.probe.blas import OPENBLAS_OLD_CORES, blas_name_of
from clusterbench.probe.blas import corename_of as blas_corename_of
from clusterbench.benchmarks.base import (KernelBenchmark, HpccKey, CPUS, ORDER, SMT, THREADS, Metric, Param, Result, RunContext, available_memory,
                   check_placement, cpulist, resolve_threads)

MODES = ("single", "star", "threaded", "all")
#: star mode: a process that reached the common start later than this fraction of a sample
#: overlapped the others only partly, so the aggregate is not fully concurrent
LATE_FRACTION = 0.05

def thread_env(n: int, cpus: list[int]) -> dict[str, str]:
    env = {k: str(n) for k in ("OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                               "GOTO_NUM_THREADS")}
    if n > 1:  # OpenMP BLAS (BLIS, MKL): one thread per listed cpu, in order
        env.update(OMP_PROC_BIND="close", OMP_PLACES=",".join("{%d}" % c for c in cpus))
    env["MKL_DYNAMIC"] = "FALSE"
    return env


def generic_kernels_warning(ctx: RunContext, config: str | None, slowed: str) -> Warning_ | None:
    """OpenBLAS on a core it took for an old one (no AVX2/AVX-512 kernels) on a CPU that has them;
    ``slowed`` names what runs slow (dgemm's and HPL's warnings share this)."""
    m = re.search(r"OpenBLAS.*\b(" + "|".join(OPENBLAS_OLD_CORES) + r")\b", config or "")
    flags = set((ctx.probe.get("cpu") or {}).get("isa") or [])
    if not (m and flags & {"avx2", "avx512f"}):
        return None
    better = "SkylakeX" if "avx512f" in flags else "Haswell"
    return Warning_(
        "blas-generic-kernels",
        f"OpenBLAS did not recognise this CPU and uses its {m.group(1)} kernels (no AVX2/AVX-512): "
        f"{slowed} several times below what the cores can do",
        f"rerun with --openblas-coretype {better} (sets OPENBLAS_CORETYPE), or use a newer OpenBLAS or --blas blis")


def coretype_warning(record: dict[str, Any], config: str) -> Warning_ | None:
    """The core the kernel's own OpenBLAS reports differs from the one checked before the run."""
    want = record.get("openblas_corename_after")
    got = blas_corename_of(config)
    if not want or not got or want.lower() == got.lower():
        return None
    return Warning_("openblas-coretype-differs",
                    f"OpenBLAS reported core {got} in the run, {want} when checked before it: the figure is for "
                    f"{got} kernels", "check OPENBLAS_CORETYPE in the environment and LD_PRELOAD")


def late_warning(infos: dict[int, dict], results: dict[int, dict]) -> Warning_ | None:
    """Star mode: warn when a process reached the common start more than LATE_FRACTION of a
    sample late (its samples then overlapped the others' only partly)."""
    shortest = min((t for r in results.values() for t in (r.get("times_s") or []) if t > 0), default=None)
    lates = {i: float(inf.get("late_s") or 0.0) for i, inf in infos.items()}
    if not shortest or not lates:
        return None
    worst = max(lates, key=lambda i: lates[i])
    if lates[worst] <= LATE_FRACTION * shortest:
        return None
    return Warning_(
        "star-not-concurrent",
        f"process {worst} reached the common start {lates[worst] * 1e3:.1f} ms late, more than "
        f"{LATE_FRACTION:.0%} of a {shortest * 1e3:.1f} ms sample: the star figure was not fully concurrent "
        "(the processes overlapped only partly, so the sum overstates what the cores do together)",
        "rerun on a less loaded node, or use a larger --n so that a sample lasts longer than the start-up skew")


def _headlines(rs: list[Result]) -> list[str]:
    out = []
    for mode in ("single", "star", "threaded"):
        d = pick(rs, "dgemm", "gflops", mode=mode)
        if d:
            out.append(f"compute  DGEMM {mode} ({d.params.get('blas')}, n={d.params.get('n')}): "
                       f"{d.value:.1f} Gflop/s{limit_text(d, 'measured_peak') or limit_text(d)}")
    return out


def _findings(rs: list[Result]) -> list[str]:
    slow = []
    for mode in ("single", "star", "threaded"):
        d = pick(rs, "dgemm", "gflops", mode=mode)
        frac = limit_fraction(d, "measured_peak") if d else None
        if frac is not None and frac < 0.6:
            slow.append(f"{mode} {frac:.0%}")
    if not slow:
        return []
    return [f"DGEMM reaches only {', '.join(slow)} of the measured FMA peak (a good BLAS gets 80-95%): the BLAS "
            "library is the bottleneck (see its warnings; try --blas blis or a newer OpenBLAS)"]


@register
class Dgemm(KernelBenchmark):
    name = "dgemm"
    suites = {"node": 60, "hpcc": 20}
    key_params = ('mode', 'blas', 'n', 'threads')
    hpcc_keys = (HpccKey("SingleDGEMM_Gflops", "gflops", lambda p: p.get("mode") == "single"),
                 HpccKey("StarDGEMM_Gflops", "gflops_per_core", lambda p: p.get("mode") == "star"))
    headlines = (_headlines,)
    findings = (_findings,)
    help = "BLAS DGEMM Gflop/s: one core, every core its own copy (HPCC StarDGEMM), all cores threaded"
    kernel = "dgemm"
    kernel_libs = ("dl",)
    metrics = (
        Metric("gflops", "Gflop/s", True, "2 n^2 k / t of C = A B, k = n unless --k (star: sum over the "
               "per-core processes)",
               ("rpeak", "measured_peak", "rpeak_max")),
        Metric("gflops_per_core", "Gflop/s", True, "gflops / cores (star: mean per process)", ()),
        Metric("gflops_min_process", "Gflop/s", True, "star mode: the slowest process, per sample", ()),
    )
    params = (
        Param("mode", str, "all", "single core, star (one process per core), threaded, or all three", MODES),
        Param("n", int, None, "matrix order (default: a sample of about 0.5 s on one core)", min=1, max=200000),
        Param("k", int, None, "inner dimension: C (n x n) = A (n x k) B (k x n) (default: k = n); k = NB is the "
              "shape of HPL's trailing update"),
        Param("samples", int, 5, "timed products per run, after one warm-up that is excluded", min=1, max=1000),
        Param("blas", str, "openblas", "BLAS library: openblas, blis, mkl, netlib, system... or a path to a .so"),
        Param("openblas_coretype", str, "auto", "OpenBLAS kernels: auto (a better core type when OpenBLAS fell "
              "back below the CPU's ISA, e.g. Prescott on Emerald Rapids), none (the library's own choice), or a "
              "core name (Haswell, SkylakeX, Zen...), checked"),
        THREADS, ORDER, SMT, CPUS,
        Param("corrupt", bool, False, "test hook: damage C after timing (validation must fail)"),
    )
    profiles = {"quick": {"n": 1200, "samples": 3}, "full": {"samples": 10}}

    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        params = resolve_threads(ctx, params)
        name, path = blasprobe.resolve_blas(params["blas"])
        params["blas_name"], params["blas_path"] = name, path
        if params["n"] is None:
            rp = ((ctx.probe.get("rpeak") or {}).get("per_core") or {}).get("dp_gflops_nominal") or 20.0
            params["n"] = max(500, min(10000, int(round((0.5 * 0.8 * rp * 1e9 / 2) ** (1 / 3) / 100) * 100)))
        n = params["n"]
        k = params.get("k")
        if k is not None and not 1 <= k <= 200000:
            raise UsageError(f"--k {k} is not allowed", "use --k 1 or more (e.g. 192), or leave it out for k = n")
        k = n if k is None else k
        copies = params["threads"] if params["mode"] in ("star", "all") else 1
        need = 8 * (n * n + 2 * n * k) * copies
        avail = available_memory(ctx.probe)
        if avail and need > 0.8 * avail:
            fit = int((0.8 * avail / (24 * copies)) ** 0.5)
            raise UsageError(f"--n {n} needs {need / 2**30:.1f} GiB for {copies} cop{'ies' if copies > 1 else 'y'} "
                             f"of A, B, C, more than 80% of the {avail / 2**30:.1f} GiB available",
                             f"use --n {fit} or less")
        return params

    def prepare(self, ctx: RunContext, params: dict[str, Any]) -> None:
        super().prepare(ctx, params)
        blasprobe.settle_for(ctx, params)  # before the run opens: a core type that does not take is refused

    def _modes(self, params: dict[str, Any]) -> list[str]:
        if params["mode"] == "all":
            return ["single", "star", "threaded"] if params["threads"] > 1 else ["single"]
        return [params["mode"]]

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        rp = ((ctx.probe.get("rpeak") or {}).get("per_core") or {}).get("dp_gflops_nominal") or 20.0
        t = 2 * params["n"] ** 2 * (params.get("k") or params["n"]) / (0.5 * rp * 1e9)
        return len(self._modes(params)) * (params["samples"] + 2) * t + 1.0

    def run(self, ctx: RunContext, params: dict[str, Any]) -> list[Result]:
        b = ctx.build(self.kernel, libs=self.kernel_libs)
        modes = self._modes(params)
        out: list[Result] = []
        ctx.progress.start("dgemm", total=len(modes))
        n_threads = params["threads"]
        all_cpus = list(params["cpus"])
        base_args = [f"--lib={params['blas_path']}", f"--n={params['n']}", f"--samples={params['samples']}"]
        if params.get("k") is not None:
            base_args.append(f"--k={params['k']}")
        if params.get("corrupt"):
            base_args.append("--corrupt=1")
        blasprobe.settle_for(ctx, params)
        extra_env = params["openblas_env"]
        for mode in modes:
            if mode == "single":
                jobs = [KernelJob(b, base_args + [f"--cpus={all_cpus[0]}"], {**thread_env(1, all_cpus[:1]), **extra_env})]
                cpus = all_cpus[:1]
                wanted = [cpus]
            elif mode == "star":
                # every process fills its matrices (~1 GB/s) before the common start
                start = time.time() + 0.5 + 0.02 * n_threads + 24e-9 * params["n"] ** 2
                jobs = [KernelJob(b, base_args + [f"--cpus={c}", f"--start-at={start:.6f}"],
                                  {**thread_env(1, [c]), **extra_env}) for c in all_cpus]
                cpus = all_cpus
                wanted = [[c] for c in all_cpus]
            else:
                jobs = [KernelJob(b, base_args + [f"--cpus={cpulist(all_cpus)}"],
                                  {**thread_env(n_threads, all_cpus), **extra_env})]
                cpus = all_cpus
                wanted = [all_cpus]
            infos: dict[int, dict] = {}
            results: dict[int, dict] = {}

            def on(i: int, rec: dict, infos: dict = infos, results: dict = results,
                   wanted: list[list[int]] = wanted) -> None:
                if rec["type"] == "info":
                    check_placement(rec, wanted[i], self.name)
                    infos[i] = rec
                elif rec["type"] == "result":
                    results[i] = rec

            ctx.run_parallel(jobs, on)
            out.extend(self._emit(ctx, params, mode, cpus, infos, results))
            ctx.progress.advance(1)
        return out

    def _emit(self, ctx: RunContext, params: dict[str, Any], mode: str, cpus: list[int],
              infos: dict[int, dict], results: dict[int, dict]) -> list[Result]:
        info = infos.get(0) or {}
        cores = len(cpus)
        procs = len(results)
        config = info.get("blas_config") or ""
        p = {"mode": mode, "n": params["n"], "k": params.get("k") or params["n"], "threads": cores, "processes": procs,
             "cpus": cpus,
             "blas_threads": 1 if mode != "threaded" else cores,
             "blas": blas_name_of(info.get("blas_path") or params["blas_path"]),
             "blas_path": info.get("blas_path") or os.path.realpath(params["blas_path"]),
             "blas_config": config, "blas_loaded": info.get("blas_loaded"),
             "blas_symbol": info.get("blas_symbol"), "blas_threads_reported": info.get("blas_threads")}
        p.update(params.get("openblas_record") or {})
        if mode == "star":
            p["late_s"] = [infos[i].get("late_s") for i in sorted(infos)]
        ws: list[Warning_ | None] = []
        ws.append(generic_kernels_warning(ctx, config, "DGEMM runs"))
        ws.append(coretype_warning(params.get("openblas_record") or {}, config))
        loaded = info.get("blas_loaded") or []
        if loaded and not any(os.path.realpath(x) == os.path.realpath(p["blas_path"]) for x in loaded):
            ws.append(Warning_("blas-not-loaded", f"asked for {p['blas_path']} but the process mapped {loaded}",
                               "check LD_PRELOAD and the library path"))
        reported = info.get("blas_threads")
        if isinstance(reported, int) and reported > 0 and reported != p["blas_threads"]:
            ws.append(Warning_(
                "blas-threads-mismatch",
                f"the BLAS reports {reported} thread(s) but {p['blas_threads']} core(s) were given to it: "
                "the figure is not for the cores it is labelled with",
                "check OPENBLAS_NUM_THREADS / OMP_NUM_THREADS / BLIS_NUM_THREADS in the environment and the "
                "library's thread limit (OpenBLAS NUM_THREADS at build time)"))
        per = [results[i]["samples"] for i in sorted(results)]
        times = [max(t) for t in zip(*[results[i].get("times_s") or [] for i in sorted(results)])] or None
        if mode == "star":
            ws.append(late_warning(infos, results))
        k = min(len(s) for s in per)
        agg = [sum(s[j] for s in per) for j in range(k)]
        out = [ctx.emit(self, "gflops", agg, p, times_s=times, extra_warnings=ws)]
        out.append(ctx.emit(self, "gflops_per_core", [a / cores for a in agg], p, times_s=times))
        if mode == "star":
            out.append(ctx.emit(self, "gflops_min_process", [min(s[j] for s in per) for j in range(k)], p,
                                times_s=times))
        return out
