"""ptrans: HPC Challenge PTRANS, the parallel matrix transpose (kernels/hpcc/ptrans.c, written afresh).

Definition (HPCC's): A := A^T + B for n x n double matrices A and B, distributed 2-D block-cyclic
with NB x NB blocks over a P x Q process grid (row-major rank order: rank = p Q + q; global element
(i, j) on process (i / NB mod P, j / NB mod Q); n need not be a multiple of NB). The transpose moves
whole blocks between processes: each process packs its blocks, transposed, per destination and
exchanges them point to point (see the kernel). Entries come from the global indices,
a(i, j) = ((7i + 13j) mod 101) / 50 - 1 and b(i, j) = ((3i + 11j) mod 97) / 48 - 1.

Figure: ``gbs`` = 8 n^2 bytes / t / 1e9 (GB/s, 1e9 B/s), t the slowest rank's time of one
transpose-and-add (A regenerated before each sample, outside the timing). This is HPCC's
PTRANS_GBs: its pdtransdriver.c computes 1e-9 / wtime * m * n * sizeof(double) with wtime the
maximum over processes, and keeps the best run; the figure's value is the best sample. The
figure's params carry each sample's time (``times_s``), n, nb, grid [P, Q], ranks and residual.

Validation (after the timed samples, before any figure): max |A - (A0^T + B)| over all elements,
computed by every rank from the formulas and reduced, scaled as HPCC does (/ (eps n), eps = 2^-53),
must be at most 16 (HPCC's threshold); a correct run gives 0. A failed check is a failed run (exit
4, nothing stored). ``residual`` in the figure's params is the scaled value.

Defaults (HPCC's, from HPL's input): HPCC runs PTRANS on HPL's grid and NB with N = HPL's N / 2, so
NB is ``run hpl``'s default (per microarchitecture), the grid the squarest P x Q with P <= Q for the
rank count (1 rank: 1x1), and n half of HPL's default N (0.8 of the MemAvailable of the nodes taking
part, rounded down to a multiple of NB). An n whose three local matrices per rank (A, B and the
receive/work buffer) do not fit 80% of this node's MemAvailable is refused, naming one that fits.
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
from clusterbench.benchmarks.hpl.hpl import Hpl
from clusterbench.benchmarks.hpl.sizing import (
    NB_MAX,
    choose_grid,
    default_n,
    default_nb,
)
from clusterbench.benchmarks.mpi.common import (
    RANK_PARAMS,
    MpiBenchmark,
    parse_host_params,
    place_ranks,
)
from clusterbench.errors import KernelFailed, UsageError

THRESHOLD = 16.0
#: bytes per rank besides its three local matrices (MPI library, plan, the process itself)
RANK_OVERHEAD = 64 << 20
#: bytes per second per rank the estimate assumes for its ~6 passes over a local matrix per sample
#: (this 2-core VM does ~5e9 at n = 24288)
SLOW_RATE = 1e9


def numroc(n: int, nb: int, ip: int, np_: int) -> int:
    """Rows (or columns) of an n-long dimension in NB blocks that process ip of np_ holds."""
    blocks, extra = divmod(n, nb)
    mine = blocks // np_ * nb
    rest = blocks % np_
    return mine + (nb if ip < rest else extra if ip == rest else 0)


def local_bytes(n: int, nb: int, p: int, q: int) -> int:
    """One local matrix of the process holding the most (process 0), in bytes."""
    return 8 * numroc(n, nb, 0, p) * numroc(n, nb, 0, q)


def node_bytes(n: int, nb: int, p: int, q: int, per_node: int) -> int:
    """What a node's ranks need: three local matrices each, plus a fixed overhead."""
    return per_node * (3 * local_bytes(n, nb, p, q) + RANK_OVERHEAD)


def largest_fitting(avail: float, nb: int, p: int, q: int, per_node: int) -> int:
    """The largest n whose ranks fit ``avail`` bytes on a node (0 when none does)."""
    lo, hi = 0, int(math.sqrt(max(avail, 0) / 8 * p * q)) + nb
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if node_bytes(mid, nb, p, q, per_node) <= avail:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _headline(results: list[Result]) -> list[str]:
    out = []
    for r in results:
        if r.benchmark != "ptrans" or r.metric != "gbs":
            continue
        p = r.params
        grid = "x".join(str(g) for g in p.get("grid") or [])
        out.append(f"ptrans   PTRANS {r.value:.4g} GB/s (n={p.get('n')}, NB={p.get('nb')}, grid {grid}, "
                   f"{p.get('ranks')} ranks)")
    return out


@register
class Ptrans(MpiBenchmark):
    name = "ptrans"
    help = "HPCC PTRANS: A = A^T + B on a P x Q block-cyclic grid, GB/s of 8 n^2 bytes (HPCC's PTRANS_GBs)"
    kernel = "ptrans"
    suites: ClassVar[dict[str, int]] = {"hpcc": 40}
    key_params = ("n", "nb", "grid", "ranks")
    hpcc_keys = (HpccKey("PTRANS_GBs", "gbs", sizes=lambda p: {
        "PTRANS_nprow": (p.get("grid") or [None, None])[0], "PTRANS_npcol": (p.get("grid") or [None, None])[1],
        "PTRANS_residual": p.get("residual_max_abs"), "PTRANS_time": p.get("time_s_best")}),)
    metrics = (
        Metric("gbs", "GB/s", True, "8 n^2 bytes / t / 1e9, t the slowest rank's time of one A = A^T + B "
               "(HPCC's PTRANS_GBs); only runs whose residual / (eps n) is at most 16"),
    )
    params = (
        Param("n", int, None, "matrix order n (default: HPCC's, half of HPL's default N)", min=1, max=10_000_000),
        Param("nb", int, None, "block size NB (default: HPL's, per microarchitecture)", min=1, max=NB_MAX,
              why="HPL's NB bounds"),
        Param("grid", str, None, "process grid PxQ, P*Q = ranks (default: HPL's, the squarest with P <= Q)"),
        Param("samples", int, 5, "timed transposes, A regenerated before each (HPCC runs 5)", min=1, max=1000),
        *RANK_PARAMS,
        Param("corrupt", bool, False, "test hook: one element damaged after the last sample (validation must fail)"),
    )
    profiles: ClassVar[dict[str, dict[str, Any]]] = {"quick": {"n": 4000, "samples": 3}}
    headlines = (_headline,)

    # -- parameters ------------------------------------------------------------------------------
    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = super().check(ctx, params)
        place_ranks(ctx, p)
        ranks, per_node = p["ranks"], p["ranks_per_node"]
        gp, gq, _ = choose_grid(p["grid"], ranks)
        nb = p["nb"] if p["nb"] is not None else default_nb(ctx.probe)
        mem = available_memory(ctx.probe)
        n = p["n"]
        if n is None:
            total, how = Hpl._memory(ctx, parse_host_params(p))
            if not total:
                raise UsageError("MemAvailable is unknown here, so HPL's N (and PTRANS's N/2) cannot be derived",
                                 "give --n")
            n = default_n(total, nb, ranks, gp) // 2
            if mem and node_bytes(n, nb, gp, gq, per_node) > 0.8 * mem:  # HPL's N counts every node's memory
                n = largest_fitting(0.8 * mem, nb, gp, gq, per_node)
            if n < 1:
                raise UsageError(f"HPL's default N with NB={nb} leaves no PTRANS matrix", "give --n")
            p["n_from"] = f"HPL's default N / 2 (0.8 x {total / 2**30:.1f} GiB, {how})"
        else:
            p["n_from"] = "--n"
        if nb > n:
            raise UsageError(f"--nb {nb} is larger than n={n}", f"use --nb {n} or less")
        need = node_bytes(n, nb, gp, gq, per_node)
        if mem and need > 0.8 * mem:
            fit = largest_fitting(0.8 * mem, nb, gp, gq, per_node)
            raise UsageError(f"n={n} needs {need / 2**30:.1f} GiB per node (3 local matrices per rank), above 80% of "
                             f"the {mem / 2**30:.1f} GiB available", f"use --n {fit} or less")
        p.update(n=n, nb=nb, p=gp, q=gq, grid=[gp, gq], memory_bytes_per_node=need)
        est = self.estimate_seconds(ctx, p)
        ctx.fit_timeout(f"ptrans n={n}", est)
        return p

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        p, q, n, nb = params["p"], params["q"], params["n"], params["nb"]
        per_rank = local_bytes(n, nb, p, q)
        # per sample: generation, pack, exchange, unpack; then validation; at a slow node's rate
        return 2.0 + (params["samples"] + 2) * 6 * per_rank / SLOW_RATE

    # -- running -----------------------------------------------------------------------------------
    def run(self, ctx: RunContext, params: dict[str, Any]) -> list:
        n, nb, gp, gq = params["n"], params["nb"], params["p"], params["q"]
        args = [f"--n={n}", f"--nb={nb}", f"--p={gp}", f"--q={gq}", f"--samples={params['samples']}",
                *(["--corrupt=1"] if params.get("corrupt") else [])]
        base: dict[str, Any] = {
            "n": n, "nb": nb, "grid": [gp, gq], "ranks": params["ranks"], "processes": params["ranks"],
            "cpus": params["cpus"], "n_from": params.get("n_from"),
            "memory_bytes_per_node": params["memory_bytes_per_node"],
            "hosts": [h[0] for h in params["host_list"]] if params["host_list"] else None,
        }
        out: list = []
        ctx.progress.start("ptrans", total=1)

        def on_result(rec: dict) -> None:
            kp = dict(rec.get("params") or {})
            if [kp.get("n"), kp.get("nb"), kp.get("grid")] != [n, nb, [gp, gq]]:
                raise KernelFailed(f"ptrans ran n={kp.get('n')} nb={kp.get('nb')} grid {kp.get('grid')}, "
                                   f"asked n={n} nb={nb} grid {gp}x{gq}", "report this as a bug")
            times = [float(t) for t in rec.get("times_s") or []]
            prm = {**base, "residual": kp.get("residual"), "residual_max_abs": kp.get("residual_max_abs"),
                   "threshold": kp.get("threshold", THRESHOLD), "eps": kp.get("eps"), "peers": kp.get("peers"),
                   "times_s": times, "time_s_best": min(times) if times else None}
            out.append(ctx.emit(self, "gbs", rec["samples"], prm, times_s=times or None))

        self.launch(ctx, params, args, base, on_result, proof_ranks=(0, 1) if params["ranks"] > 1 else (0,),
                    on_arrival=lambda _rec: ctx.progress.advance(1))
        if not out:
            raise KernelFailed("ptrans printed no results", "rerun; report it if it persists")
        return out
