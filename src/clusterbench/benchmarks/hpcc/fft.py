"""fft: the HPC Challenge FFT (SingleFFT, StarFFT, MPIFFT) on FFTW 3 (kernels/hpcc/fft.c).

One complex double 1-D DFT of size ``--n``, out of place, per mode (one launch each):

- ``single``: one process, one FFT of size n;
- ``star``: every rank its own FFT of size n at the same time (a barrier before each sample);
- ``mpi``: one FFT of global size n distributed over all ranks (``fftw_mpi_plan_dft_1d``). FFTW
  plans any n but spreads it evenly (n/ranks elements per rank, in and out) only when ranks^2
  divides n; other sizes are refused here with a size that works;
- ``all`` (default): single, then star and mpi when there is more than one rank.

Plans are made once before timing. The timed (forward) plan of single and star: ``--plan``
(FFTW_MEASURE by default; patient and exhaustive search longer), bounded by ``--plan-seconds`` (60 s;
fftw_set_timelimit). FFTW's wisdom (its memory of plans) is kept beside the kernel in the kernel cache
(per compiler, flags and cpu model) and reused, so a size is planned once per machine and later runs
start at once (``--no-wisdom`` plans afresh). In star mode rank 0 plans and hands its wisdom to the
others: every rank runs the same plan. mpi plans with FFTW_ESTIMATE (FFTW-MPI does not synchronise the
time limit across ranks: under load they chose different plans and deadlocked here, and unbounded
MEASURE took ~25 s at n = 2^20 on 2 ranks). The backward plan, for validation only, is estimated.
``plan_flags``, ``plan_time_limit_s``, ``plan_s`` and ``wisdom_loaded`` are recorded. One untimed
warm-up transform, then ``--samples`` timed ones.

Flops per transform: 5 n log2 n (HPCC's convention, not what FFTW executes); Gflop/s = that /
seconds / 1e9. Metrics, in Gflop/s, bigger is better:

- ``gflops``: all processes together. single: the one process; star: ranks x 5 n log2 n over the
  slowest rank's time of the sample (``times_s``); mpi: 5 n log2 n over the slowest rank's time.
- ``gflops_per_process``: single: the same; star: the mean over ranks of each rank's own rate
  (HPCC's StarFFT); mpi: gflops / ranks. Its ``times_s`` are the fastest rank's times.

Each figure records its per-sample seconds in ``params.times_s``.

Validation (after timing, before any figure): the backward transform of the result, scaled by
1/n, against the input; err = max_j |x_j - x'_j| over every rank, scaled HPCC-style by
eps log2 n (eps = 2^-53) must be below 16, else the run fails (exit 4, nothing stored). The error
is recorded (``max_error``, ``scaled_error``). ``--corrupt`` (a test hook) damages one output
element after timing so validation must fail.

Default n: the largest power of two (times the odd part of ranks^2 when mpi runs) whose vectors
(32 n bytes per process: input and output, 16 B per complex) fit in 1/8 of the available memory
with every rank of the busiest mode on a node, at most 2^26; an n whose vectors need more than
80% of the available memory is refused.
"""
from __future__ import annotations

import math
from typing import Any, ClassVar

from clusterbench.benchmarks import register
from clusterbench.benchmarks.base import Result
from clusterbench.benchmarks.base import (
    HpccKey,
    Metric,
    Param,
    RunContext,
    available_memory,
)
from clusterbench.benchmarks.hpcc import hpcc_modes
from clusterbench.benchmarks.mpi.common import (
    RANK_PARAMS,
    MpiBenchmark,
    detect,
    place_ranks,
)
from clusterbench.errors import KernelFailed, UsageError

MODES = ("single", "star", "mpi", "all")
MIN_N, MAX_N = 16, 1 << 30
DEFAULT_CAP = 1 << 26
BYTES_PER_POINT = 32  # input and output vectors, 16 B per complex double each
LIBS = ("fftw3_mpi", "fftw3")
SLOW_GFLOPS = 0.5  # per process, for the time estimate


def flops(n: int) -> float:
    """HPCC's flop count of one complex 1-D FFT of size n."""
    return 5.0 * n * math.log2(n)


def _odd_part(k: int) -> int:
    while k % 2 == 0:
        k //= 2
    return k


def node_bytes(n: int, modes: list[str], ranks: int, per_node: int) -> int:
    """Bytes of the vectors on the busiest node in the most demanding mode."""
    need = {"single": BYTES_PER_POINT * n, "star": per_node * BYTES_PER_POINT * n,
            "mpi": per_node * BYTES_PER_POINT * -(-n // ranks)}
    return max(need[m] for m in modes)


def largest_n(budget: float, modes: list[str], ranks: int, per_node: int, cap: int = MAX_N) -> int:
    """The largest n = odd part of ranks^2 (mpi only) x a power of two within ``budget`` bytes per
    node and ``cap``; MIN_N's class at least."""
    unit = _odd_part(ranks * ranks) if "mpi" in modes else 1
    n = unit
    while n * 2 <= cap and node_bytes(n * 2, modes, ranks, per_node) <= budget:
        n *= 2
    while n < MIN_N or ("mpi" in modes and n % (ranks * ranks)):
        n *= 2
    return n


def _headline(results: list[Result]) -> list[str]:
    out = []
    for r in results:
        p = r.params
        if r.benchmark != "fft" or r.metric != ("gflops_per_process" if p.get("mode") == "star" else "gflops"):
            continue
        procs = p.get("processes")
        what = "per process" if p.get("mode") == "star" else "in total" if p.get("mode") == "mpi" else "one process"
        out.append(f"fft      FFT {p.get('mode')}: {r.value:.4g} Gflop/s {what} ({procs} process"
                   f"{'es' if procs != 1 else ''}, n = {p.get('n')})")
    return out


@register
class Fft(MpiBenchmark):
    name = "fft"
    help = "HPCC FFT: 1-D complex double FFT through FFTW, Gflop/s as 5 n log2 n (single, star, MPI)"
    kernel = "fft"
    kernel_libs = LIBS
    suites: ClassVar[dict[str, int]] = {"hpcc": 60}
    key_params = ("mode", "n", "processes")
    hpcc_keys = (HpccKey("SingleFFT_Gflops", "gflops", lambda p: p.get("mode") == "single",
                         sizes=lambda p: {"FFT_N": p.get("n")}),
                 HpccKey("StarFFT_Gflops", "gflops_per_process", lambda p: p.get("mode") == "star",
                         sizes=lambda p: {"FFT_N": p.get("n")}),
                 HpccKey("MPIFFT_Gflops", "gflops", lambda p: p.get("mode") == "mpi",
                         sizes=lambda p: {"MPIFFT_N": p.get("n")}))
    metrics = (
        Metric("gflops", "Gflop/s", True, "5 n log2 n per transform / s / 1e9, all processes together "
               "(star: ranks x that over the slowest rank's time; mpi: over the slowest rank's time)"),
        Metric("gflops_per_process", "Gflop/s", True, "the mean per process (star: of each rank's own "
               "rate, HPCC's StarFFT; mpi: gflops / ranks)"),
    )
    params = (
        Param("mode", str, "all", "single (one process), star (every rank its own FFT), mpi (one FFT over "
              "all ranks), or all (single, then star and mpi with more than one rank)", MODES),
        Param("n", int, None, "FFT size (single/star: per process; mpi: global, a multiple of ranks^2; "
              "default: the largest power of two whose 32 n B vectors per process fit in 1/8 of the "
              "available memory, at most 2^26)", min=MIN_N, max=MAX_N),
        Param("samples", int, 5, "timed transforms after one warm-up", min=1, max=1000),
        Param("plan", str, "measure", "FFTW planning rigour for single and star: estimate, measure, patient, "
              "exhaustive (mpi always estimates)", ("estimate", "measure", "patient", "exhaustive")),
        Param("plan_seconds", float, 60.0, "planning time limit of the timed plan (fftw_set_timelimit); a size "
              "planned once is remembered (FFTW wisdom in the kernel cache) and planned again in no time",
              min=0, max=3600, min_open=True),
        Param("wisdom", bool, True, "keep FFTW's wisdom (its plans) in the kernel cache and reuse it"),
        *RANK_PARAMS,
        Param("corrupt", bool, False, "test hook: one output element damaged after timing (validation must fail)"),
    )
    profiles: ClassVar[dict[str, dict[str, Any]]] = {"quick": {"n": 1 << 20, "samples": 3, "plan_seconds": 2.0}}
    headlines = (_headline,)

    # -- parameters ------------------------------------------------------------------------------
    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = super().check(ctx, params)
        place_ranks(ctx, p)
        ranks, per_node = p["ranks"], p["ranks_per_node"]
        modes = hpcc_modes(p["mode"], ranks)
        mem = available_memory(ctx.probe)
        n = p["n"]
        if n is None:
            n = largest_n(mem / 8, modes, ranks, per_node, DEFAULT_CAP) if mem else 1 << 20
        if "mpi" in modes and ranks > 1 and n % (ranks * ranks):
            sq = ranks * ranks
            fit = max(sq * -(-MIN_N // sq), n // sq * sq)
            raise UsageError(f"--n {n} is not a multiple of ranks^2 = {sq}: FFTW-MPI's 1-D transform splits n "
                             f"evenly over {ranks} ranks only then", f"use e.g. --n {fit}")
        need = node_bytes(n, modes, ranks, per_node)
        if mem and need > 0.8 * mem:
            fit = largest_n(0.8 * mem, modes, ranks, per_node)
            raise UsageError(f"--n {n}: the FFT vectors need {need / 2**30:.1f} GiB per node, above 80% of the "
                             f"{mem / 2**30:.1f} GiB available", f"use --n {fit} or less")
        p.update(n=n, modes=modes, memory_bytes_per_node=need)
        est = self.estimate_seconds(ctx, p)
        ctx.fit_timeout("fft", est, factor=3)
        return p

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        n, ranks = params["n"], params["ranks"]
        total = 0.0
        for m in params["modes"]:
            per_transform = flops(n) / (SLOW_GFLOPS * 1e9) / (ranks if m == "mpi" else 1)
            plan = params["plan_seconds"] * 1.2 + 1 if m != "mpi" and params["plan"] != "estimate" else 1.0
            total += 2 + plan + (params["samples"] + 3) * per_transform
        return total

    # -- running -----------------------------------------------------------------------------------
    def run(self, ctx: RunContext, params: dict[str, Any]) -> list:
        out: list = []
        n = params["n"]
        # FFTW's wisdom beside the kernel: the cache folder is per compiler, flags and cpu model
        build = ctx.build(self.kernel, libs=self.kernel_libs, openmp=False, cc=detect(params).mpicc)
        wisdom = str(build.path.parent / "fftw.wisdom") if params["wisdom"] else None
        ctx.progress.start("fft", total=len(params["modes"]))
        for mode in params["modes"]:
            places = params["places"][:1] if mode == "single" else params["places"]
            procs = len(places)
            args = [f"--mode={mode}", f"--n={n}", f"--samples={params['samples']}",
                    f"--plan={params['plan']}", f"--plan_seconds={params['plan_seconds']}",
                    *([f"--wisdom={wisdom}"] if wisdom else []), *(["--corrupt=1"] if params["corrupt"] else [])]
            base: dict[str, Any] = {
                "mode": mode, "n": n, "processes": procs, "ranks": procs, "cpus": [c for _, c in places],
                "hosts": sorted({h for h, _ in places if h}) or None,
                "n_scope": "global" if mode == "mpi" else "per process",
                "memory_bytes_per_node": node_bytes(n, [mode], procs, params["ranks_per_node"]),
            }
            got: list = []

            def on_result(rec: dict, base: dict = base, got: list = got, procs: int = procs) -> None:
                kp = dict(rec.get("params") or {})
                if kp.get("processes") != procs or kp.get("n") != n:
                    raise KernelFailed(f"fft: the kernel ran n={kp.get('n')} on {kp.get('processes')} ranks, "
                                       f"asked n={n} on {procs}", "report this as a bug")
                prm = {**kp, **base, "validation_error": kp.get("scaled_error"), "times_s": rec.get("times_s")}
                got.append(ctx.emit(self, rec["metric"], rec["samples"], prm, times_s=rec.get("times_s")))

            self.launch(ctx, params, args, base, on_result, places=places, host_list=params["host_list"],
                        proof_ranks=(0, 1) if procs > 1 else (0,), name=f"fft {mode}")
            if len(got) != 2:
                raise KernelFailed(f"fft {mode} printed {len(got)} of its 2 results", "rerun; report it if it persists")
            g = got[0] if got[0].metric == "gflops" else got[1]
            ctx.note(f"fft {mode}: {g.value:.4g} Gflop/s, n = {n}, {procs} process{'es' if procs != 1 else ''}, "
                     f"validation error {g.params.get('scaled_error'):.3g} (below 16)")
            out.extend(got)
            ctx.progress.advance(1)
        return out
