"""hpcg: the HPCG 3.1 benchmark (hpcg-benchmark.org), its problem and rules written afresh
(kernels/hpcg/hpcg.c; never the reference code).

Problem: a 27-point stencil (diagonal 26, off-diagonals -1) on a local ``--local`` box per rank
(default 104x104x104, HPCG's usual size), the ranks in a 3-D grid (the most cubic factorisation
of their count), b = A * ones; CG preconditioned by a 4-level multigrid V-cycle (one symmetric
Gauss-Seidel pre- and post-smoothing sweep per level, injection restriction and prolongation;
local dimensions divisible by 8). The matrix is a general sparse one (values and int32 column
indices, each row's entries below and above the diagonal stored apart), natural row order: the
kernels are HPCG's reference algorithms summed in another order. The reference reduction comes
from 50 iterations of the reference kernels (whole rows in every sweep); the optimised ones run
until they reach it, which takes 50 iterations or, when rounding lands the 50th just above it,
51: the extra iterations are the penalty, measured and reported as ``penalty``, as HPCG does.
Optimisations (kernels/hpcg/hpcg.c): the forward sweep from zero reads only the lower part, every
backward sweep only the upper one (its forward sweep's lower sums are kept), the post-smoothing
forward sweep reuses the pre-smoothing upper sums and reads only the entries whose columns
changed since (coarse points, ghosts); four partial sums per row with the term of the neighbour
updated just before added last; the multigrid residual computed only where restriction keeps it.
The flop count stays HPCG's.

Flop counts per set of k iterations, n rows and nnz nonzeros (HPCG's): DDOT (3k+1) 2n, WAXPBY
(3k+1) 2n, SpMV (k+1) 2 nnz, MG k (10 nnz_l on each level but the coarsest: a symmetric sweep of
4 nnz_l before and after, a residual SpMV of 2 nnz_l; 4 nnz on the coarsest). Bytes per set (8 B
values, 4 B indices): DDOT 16n per dot, WAXPBY 24n, SpMV 12 nnz + 16n, a symmetric sweep
2 (12 nnz + 24n), restriction and prolongation 24 n_coarse each.

Metrics: ``rating`` (GFLOP/s, HPCG's final figure: the flops of 50 iterations per set over the
time of the timed sets plus, per set, a tenth of the setup and optimisation time, as HPCG 3.1); ``ddot_gflops``,
``waxpby_gflops``, ``spmv_gflops``, ``mg_gflops`` (each kernel's flops over its own time, the
maximum over ranks, allreduce waits included in DDOT as in HPCG); ``bandwidth_gbs`` (total bytes
over the timed sets' time). GFLOP/s and GB/s are 1e9 per second. Samples are per timed set.

Validation (before any figure; a failed test is a failed run, exit 4, nothing stored): symmetry of
SpMV and of the preconditioner (scaled departures below 100), the spectral test (diagonal x 1e6:
CG converges to 1e-12 in <= 12 iterations, <= 2 with the preconditioner), the reference
reduction of 50 iterations reached by every timed set, and reproducibility (every set's final
residual identical within 1e-10). ``valid`` says all passed.

Official runs (``--official``): HPCG's list rules, at least 1800 s of timed sets and a problem
using at least a quarter of every node's memory; a run that does not meet them is refused up
front. Every other run is recorded with ``official: false`` and the reason.

Limits: ``stream_bound`` (the best memory bandwidth measured here with as many processes, times
HPCG's flops per byte: what a purely bandwidth-bound HPCG could reach) and ``rpeak``.
"""
from __future__ import annotations

import math
import re
from typing import Any

from clusterbench.benchmarks import register
from clusterbench.benchmarks.base import Metric, Param, RunContext, available_memory
from clusterbench.energy.phase import Phase
from clusterbench.benchmarks.mpi.common import (
    RANK_PARAMS,
    KernelSession,
    MpiBenchmark,
    detect,
    launch_spec,
    place_ranks,
)
from clusterbench.errors import KernelFailed, UsageError

REF_ITERS = 50
OFFICIAL_SECONDS = 1800.0
#: bytes per fine-level row (matrix 27 x (8 + 4) B, ~13 vectors) with the coarse levels (x 8/7)
BYTES_PER_ROW = 560
RANK_OVERHEAD = 64 << 20
MAX_LOCAL = 1024


def parse_local(text: str) -> tuple[int, int, int]:
    """'104x104x104' or '104' -> (nx, ny, nz); each a multiple of 8 from 16 to 1024."""
    parts = str(text).lower().replace("*", "x").split("x")
    if len(parts) not in (1, 3) or not all(re.fullmatch(r"\d+", p.strip()) for p in parts):
        raise UsageError(f"--local {text!r} is not NXxNYxNZ", "give e.g. --local 104x104x104 or --local 104")
    dims = tuple(int(p) for p in parts) * (3 if len(parts) == 1 else 1)
    for d in dims:
        if d % 8 or not 16 <= d <= MAX_LOCAL:
            raise UsageError(f"--local {text}: {d} is not a multiple of 8 from 16 to {MAX_LOCAL} "
                             "(4 multigrid levels halve each dimension three times)",
                             f"use e.g. --local {max(16, min(MAX_LOCAL, (d + 7) // 8 * 8))}")
    return dims  # type: ignore[return-value]


def rank_bytes(dims: tuple[int, int, int]) -> int:
    """Memory one rank needs for its local box."""
    return dims[0] * dims[1] * dims[2] * BYTES_PER_ROW + RANK_OVERHEAD


def process_grid(n: int) -> tuple[int, int, int]:
    """The kernel's process grid: the most cubic factorisation (ties: more ranks along z, then y)."""
    best: tuple[int, int, int, int] | None = None
    for a in range(1, n + 1):
        if n % a:
            continue
        for b in range(1, n // a + 1):
            if (n // a) % b:
                continue
            c = n // a // b
            key = (max(a, b, c) - min(a, b, c), -c, -b, a)
            if best is None or key < best:
                best = key
    assert best is not None
    return best[3], -best[2], -best[1]


def official_reasons(seconds: float, per_node_bytes: int, total_bytes: int | None) -> list[str]:
    """Why a run would not qualify for the HPCG list (empty: it does)."""
    out = []
    if seconds < OFFICIAL_SECONDS:
        out.append(f"--time {seconds:g} s is below the {OFFICIAL_SECONDS:g} s an official run needs")
    if not total_bytes:
        out.append("the node's memory size is unknown")
    elif per_node_bytes < total_bytes / 4:
        out.append(f"the problem uses {per_node_bytes / 2**30:.2f} GiB per node, below a quarter of its "
                   f"{total_bytes / 2**30:.1f} GiB")
    return out


def _headline(results: list[dict]) -> list[str]:
    return [f"hpcg     {r['value']:.3g} GFLOP/s ({r['params'].get('ranks')} ranks, local "
            f"{'x'.join(str(d) for d in r['params'].get('local', []))}"
            f"{', valid' if r['params'].get('valid') else ''})"
            for r in results if r["benchmark"] == "hpcg" and r["metric"] == "rating"]


class _Session(KernelSession):
    """The standard MPI record handling, keeping the validation record for the figures' params."""

    def __init__(self, *args: Any, validation: dict) -> None:
        super().__init__(*args)
        self.validation = validation

    def __call__(self, rec: dict) -> None:
        if rec.get("type") == "validation":
            self.validation.update(rec)
        super().__call__(rec)


@register
class Hpcg(MpiBenchmark):
    name = "hpcg"
    help = "HPCG 3.1: multigrid-preconditioned CG on a 27-point stencil (GFLOP/s rating, per-kernel rates)"
    kernel = "hpcg"
    suites = {"hpcc": 90}  # not an HPC Challenge test, but Duffy (2020) runs it beside them
    key_params = ("ranks", "local", "grid")
    metrics = (
        Metric("rating", "GFLOP/s", True, "HPCG's final rating: flops of 50 CG iterations per set over the "
               "timed sets' time plus a tenth of setup and optimisation per set (HPCG 3.1)", ("stream_bound", "rpeak")),
        Metric("ddot_gflops", "GFLOP/s", True, "DDOT flops (3k+1)2n per set over DDOT's time, allreduce included"),
        Metric("waxpby_gflops", "GFLOP/s", True, "WAXPBY flops (3k+1)2n per set over WAXPBY's time"),
        Metric("spmv_gflops", "GFLOP/s", True, "SpMV flops (k+1)2nnz per set over SpMV's time, halo included"),
        Metric("mg_gflops", "GFLOP/s", True, "multigrid preconditioner flops over its time"),
        Metric("bandwidth_gbs", "GB/s", True, "HPCG's counted bytes over the timed sets' time (1e9 B/s)"),
        Metric("gflops_per_watt", "Gflop/s/W", True, "the rating over the average power of the run's nodes during "
               "exactly the timed sets (--power/--watts; EEHPC Level 1-like)"),
    )
    per_watt = {"rating": "gflops_per_watt"}
    params = (
        Param("local", str, "104x104x104", "local box per rank, NXxNYxNZ (multiples of 8; HPCG's usual 104^3)"),
        Param("time", float, 60.0, "seconds of timed CG sets (HPCG's official runs: 1800 or more)",
              min=0, max=7 * 86400, min_open=True, why="a week at most"),
        Param("official", bool, False, "enforce HPCG's list rules (>= 1800 s, >= 1/4 of memory) and refuse "
              "a run that does not meet them"),
        Param("sets", int, None, "stop after this many timed sets (default: as many as --time allows)",
              min=1, max=1_000_000),
        *RANK_PARAMS,
        Param("corrupt", bool, False, "test hook: one matrix value made asymmetric (validation must fail)"),
    )
    profiles = {"quick": {"local": "32x32x32", "time": 5.0}}
    headlines = (_headline,)

    # -- parameters ------------------------------------------------------------------------------
    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = super().check(ctx, params)
        dims = parse_local(p["local"])
        place_ranks(ctx, p)
        n, per_node = p["ranks"], p["ranks_per_node"]
        need = per_node * rank_bytes(dims)
        mem = available_memory(ctx.probe)
        if mem and need > 0.8 * mem:
            raise UsageError(f"--local {'x'.join(map(str, dims))} with {per_node} ranks per node needs "
                             f"{need / 2**30:.1f} GiB, above 80% of the {mem / 2**30:.1f} GiB available",
                             "choose a smaller --local (memory grows with nx*ny*nz)")
        total = (ctx.probe.get("memory") or {}).get("total_bytes")
        reasons = official_reasons(float(p["time"]), need, int(total) if total else None)
        if p["sets"]:
            reasons.append(f"--sets {p['sets']} stops before the time is up")
        if p["official"] and reasons:
            raise UsageError(f"not an official HPCG run: {reasons[0]}",
                             "give --time 1800 or more and a --local using a quarter of memory, or drop --official")
        p["dims"] = list(dims)
        est = self.estimate_seconds(ctx, {**p, "dims": dims})
        ctx.fit_timeout("hpcg", est, smaller="a shorter --time")
        p.update(dims=list(dims), grid=list(process_grid(n)), official_ok=not reasons, not_official_because=reasons, memory_bytes_per_node=need)
        return p

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        # ~2.4 kB moved per row and iteration (HPCG's count) at ~5 GB/s per rank (a slow core);
        # validation runs ~3 sets (the reference kernels' set is the slowest: whole rows every sweep,
        # the residual everywhere) and the last timed set may overrun --time by one set
        per_set = math.prod(params["dims"]) * 2400 / 5e9 * REF_ITERS
        return 2 + params["time"] + 4 * per_set

    # -- running -----------------------------------------------------------------------------------
    def run(self, ctx: RunContext, params: dict[str, Any]) -> list:
        nx, ny, nz = params["dims"]
        args = [f"--nx={nx}", f"--ny={ny}", f"--nz={nz}", f"--time={params['time']}",
                f"--max_sets={params['sets'] or 0}", *(["--corrupt=1"] if params.get("corrupt") else [])]
        out: list = []
        validation: dict = {}
        base: dict[str, Any] = {
            "local": [nx, ny, nz], "grid": params["grid"], "ranks": params["ranks"], "processes": params["ranks"],
            "cpus": params["cpus"], "time_s_asked": params["time"],
            "official": bool(params["official_ok"] and params["official"]),
            "not_official_because": params["not_official_because"] + (
                [] if params["official"] else ["run without --official"]),
            "memory_bytes_per_node": params["memory_bytes_per_node"],
            "hosts": [h[0] for h in params["host_list"]] if params["host_list"] else None,
        }
        ctx.progress.start("hpcg", total=6)
        phase: list[Phase] = []  # the timed sets, from the rating's record (the kernel prints it first)

        def on_record(rec: dict) -> None:
            kp = dict(rec.get("params") or {})
            value = kp.pop("value", None)
            ph = kp.pop("phase_unix", None)
            if isinstance(ph, list) and len(ph) == 2:
                phase[:] = [Phase(float(ph[0]), float(ph[1]))]
            prm = {**base, **kp, **self._validation_params(validation)}
            if rec["metric"] == "rating":
                ctx.note(self._note(prm, float(value)))
            out.append(ctx.emit(self, rec["metric"], rec["samples"], prm, times_s=rec.get("times_s"),
                                value=float(value) if value is not None else None,
                                check_cv=rec["metric"] == "rating",
                                phase=phase[0] if phase else Phase.unknown("the hpcg kernel reported no timed phase")))
            ctx.progress.advance(1)

        mpi = detect(params)
        b = ctx.build(self.kernel, openmp=False, cc=mpi.mpicc)
        spec = launch_spec(ctx, params, params["places"], params["host_list"])
        _Session(ctx, self.name, spec, mpi, base, on_record, validation=validation).run(
            [str(b.path), *args], params["launch_timeout"])
        if not out:
            raise KernelFailed("hpcg printed no results", "rerun; report it if it persists")
        return out

    @staticmethod
    def _validation_params(v: dict) -> dict[str, Any]:
        if not v:
            raise KernelFailed("hpcg printed results before its validation", "report this as a bug")
        return {"valid": bool(v.get("ok")), "iterations": v.get("optimised_iterations"),
                "reference_iterations": v.get("reference_iterations"), "penalty": v.get("penalty_iterations"),
                "validation": {k: v[k] for k in v if k not in ("type",)}}

    @staticmethod
    def _note(prm: dict, rating: float) -> str:
        why = "; ".join(prm["not_official_because"]) or "meets HPCG's list rules"
        return (f"hpcg: {rating:.3g} GFLOP/s, {'VALID' if prm['valid'] else 'INVALID'} "
                f"({prm['iterations']} iterations per set, penalty {prm['penalty']}); "
                f"{'official' if prm['official'] else 'not official'}: {why}")
