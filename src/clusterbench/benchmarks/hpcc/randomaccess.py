"""randomaccess: HPC Challenge RandomAccess, giga-updates per second (GUPS) of a table of 64-bit words
(kernels/hpcc/randomaccess.c, written afresh).

Definition (HPCC's): a table of 2^k words, T[i] = i; four updates per word, ``T[idx(v)] ^= v`` for
the successive values v of HPCC's random stream: ``standard`` multiplies by x modulo the
polynomial x^64 + x^2 + x + 1 over GF(2) (v << 1, xor 7 when the top bit was set) and indexes by
the low k bits; ``lcg`` is the 64-bit LCG v * 6364136223846793005 + 1 indexed by the high k bits.
Both start from v_0 = 1, HPCC's starting point, so the tables and errors are HPCC's own.

Modes (HPCC's three):
  ``single``  one process, its own table of 2^k words (``--log2-size k``);
  ``star``    every process its own table of 2^k words, all at once (HPCC's StarRandomAccess: the
              mean per process; ``gups`` is their sum);
  ``mpi``     one table of 2^k words in total spread over the ranks; each rank makes a quarter-table
              share of the updates and routes each to the owner of its word, under HPCC's rules: at
              most 1024 updates generated ahead of sending per rank, bucketed by destination.

GUPS = updates / seconds / 1e9; each sample is one full pass of 4 x 2^k updates on a freshly
initialised table (initialisation not timed). ``gups`` is all processes together (mpi: all updates
over the slowest rank's time), ``gups_per_process`` its share per process.

Verification (before any figure): after the timed passes the table is set again, the timed
algorithm applied once, and the whole stream replayed one update at a time in order (every rank
the whole stream, applying the words it holds: an independent path, no routing), which undoes a
correct run; words that differ from their index are errors, and more than 1% of the table (HPCC's
rule) fails the run (exit 4, nothing stored).

Default size: the largest power of two whose table takes at most a quarter of the memory per
process (mpi: of the node's memory over its ranks, times the ranks), capped at 2^27 words (1 GiB)
per process so a default run takes seconds, not minutes; hpcc sizes it from HPL's matrix.
"""
from __future__ import annotations

import math
from typing import Any

from clusterbench.benchmarks import register
from clusterbench.benchmarks.base import (
    HpccKey,
    Metric,
    Param,
    RunContext,
    available_memory,
)
from clusterbench.benchmarks.hpcc import hpcc_modes
from clusterbench.benchmarks.mpi.common import RANK_PARAMS, MpiBenchmark, place_ranks
from clusterbench.errors import KernelFailed, UsageError

MODES = ("single", "star", "mpi", "all")
VARIANTS = ("standard", "lcg", "both")
LOOKAHEAD = 1024
MIN_LOG2, MAX_LOG2 = 10, 40
DEFAULT_CAP_LOG2 = 27
#: a slow core's rate, for the run-time estimate (updates per second per process)
SLOW_RATE = 0.01e9


def _is(mode: str, variant: str):
    return lambda p: p.get("mode") == mode and p.get("variant") == variant


def _hpcc_keys() -> tuple[HpccKey, ...]:
    out = []
    for variant, tag in (("standard", ""), ("lcg", "_LCG")):
        out += [HpccKey(f"SingleRandomAccess{tag}_GUPs", "gups", _is("single", variant),
                        sizes=lambda p, t=tag: {f"RandomAccess{t}_N": p.get("table_words")}),
                HpccKey(f"StarRandomAccess{tag}_GUPs", "gups_per_process", _is("star", variant),
                        sizes=lambda p, t=tag: {f"RandomAccess{t}_N": p.get("table_words")}),
                HpccKey(f"MPIRandomAccess{tag}_GUPs", "gups", _is("mpi", variant),
                        sizes=lambda p, t=tag: {f"MPIRandomAccess{t}_N": p.get("table_words"),
                                                f"MPIRandomAccess{t}_Errors": p.get("errors"),
                                                f"MPIRandomAccess{t}_ExeUpdates": p.get("updates")})]
    return tuple(out)


def default_log2(memory_per_process: float | None, cap: int = DEFAULT_CAP_LOG2) -> int:
    """The largest k with 8 * 2^k bytes <= a quarter of a process's memory, at most ``cap``."""
    if not memory_per_process:
        return min(cap, 24)
    return max(MIN_LOG2, min(cap, int(math.floor(math.log2(memory_per_process / 4 / 8)))))


def _headline(results: list[dict]) -> list[str]:
    """single and star: per process (HPCC's Star figure); mpi: the whole table's rate."""
    out = []
    for r in results:
        p = r["params"]
        if r["benchmark"] != "randomaccess" or r["metric"] != ("gups" if p.get("mode") == "mpi" else "gups_per_process"):
            continue
        procs = p.get("processes")
        what = ("in total" if p.get("mode") == "mpi" else "per process") + f" ({procs} process{'es' if procs != 1 else ''})"
        out.append(f"random   RandomAccess {p.get('mode')} {p.get('variant')}: {r['value']:.4g} GUPS {what}, "
                   f"table 2^{p.get('log2_size')} words")
    return out


@register
class RandomAccess(MpiBenchmark):
    name = "randomaccess"
    help = "HPCC RandomAccess: giga-updates per second of a random xor table update (single, star, MPI)"
    kernel = "randomaccess"
    suites = {"hpcc": 50}
    key_params = ("mode", "variant", "log2_size", "processes")
    hpcc_keys = _hpcc_keys()
    metrics = (
        Metric("gups", "GUPS", True, "table updates per second / 1e9, all processes together (mpi: all "
               "updates over the slowest rank's time)", ()),
        Metric("gups_per_process", "GUPS", True, "gups / processes (HPCC's Star figure: the mean per process)", ()),
    )
    params = (
        Param("mode", str, "all", "single (one process), star (every process its own table), mpi (one table "
              "over all ranks), or all three", MODES),
        Param("variant", str, "standard", "HPCC's random stream: standard (GF(2) polynomial), lcg, or both",
              VARIANTS),
        Param("log2_size", int, None, "table of 2^K 64-bit words (single/star: per process; mpi: in total; "
              "default: a quarter of the memory per process, at most 2^27)", min=MIN_LOG2, max=MAX_LOG2),
        Param("samples", int, 3, "timed passes of 4 x 2^K updates, each on a fresh table", min=1, max=100),
        *RANK_PARAMS,
        Param("corrupt", bool, False, "test hook: 2% of the table words flipped before verification "
              "(the run must fail)"),
    )
    profiles = {"quick": {"log2_size": 22, "samples": 2}}
    headlines = (_headline,)

    # -- parameters ------------------------------------------------------------------------------
    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = super().check(ctx, params)
        place_ranks(ctx, p)
        n, per_node = p["ranks"], p["ranks_per_node"]
        modes = hpcc_modes(p["mode"], n)
        if p["mode"] in ("star", "mpi") and n < 2:
            ctx.note(f"randomaccess: --mode {p['mode']} with one rank is the single figure")
        mem = available_memory(ctx.probe)
        k = p["log2_size"]
        if k is None:
            k = default_log2(mem / per_node if mem else None)
        # bytes per node: single one table, star a table per rank, mpi the node's share of one table
        need = {"single": 8 << k, "star": per_node * (8 << k), "mpi": per_node * (8 << k) // n}
        worst = max(need[m] for m in modes)
        if mem and worst > 0.8 * mem:
            fit = int(math.log2(0.8 * mem / (8 * (per_node if "star" in modes else 1))))
            raise UsageError(f"--log2-size {k}: the table needs {worst / 2**30:.1f} GiB per node, above 80% of the "
                             f"{mem / 2**30:.1f} GiB available", f"use --log2-size {fit} or less")
        if "mpi" in modes and (1 << k) < 16 * n:
            raise UsageError(f"--log2-size {k}: a table of {1 << k} words is too small for {n} ranks",
                             f"use --log2-size {max(MIN_LOG2, math.ceil(math.log2(16 * n)))} or more")
        p.update(log2_size=k, modes=modes,
                 variants=["standard", "lcg"] if p["variant"] == "both" else [p["variant"]])
        est = self.estimate_seconds(ctx, p)
        ctx.fit_timeout("randomaccess", est, factor=3)
        return p

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        k = params["log2_size"]
        passes = params["samples"] + 2  # + the verification pass and its replay
        per_mode = {"single": 4 * (1 << k) / SLOW_RATE, "star": 4 * (1 << k) / SLOW_RATE,
                    "mpi": 4 * (1 << k) / (SLOW_RATE * params["ranks"]) + (1 << k) * 4 / 0.2e9}
        return 2 + len(params["variants"]) * sum(passes * per_mode[m] + 1 for m in params["modes"])

    # -- running -----------------------------------------------------------------------------------
    def run(self, ctx: RunContext, params: dict[str, Any]) -> list:
        out: list = []
        runs = [(m, v) for v in params["variants"] for m in params["modes"]]
        ctx.progress.start("randomaccess", total=len(runs))
        for mode, variant in runs:
            places = params["places"][:1] if mode == "single" else params["places"]
            procs = len(places)
            k = params["log2_size"]
            args = [f"--mode={'mpi' if mode == 'mpi' else 'local'}", f"--variant={variant}", f"--log2={k}",
                    f"--samples={params['samples']}", *(["--corrupt=1"] if params["corrupt"] else [])]
            base: dict[str, Any] = {
                "mode": mode, "variant": variant, "log2_size": k, "table_words": 1 << k,
                "table_scope": "total" if mode == "mpi" else "per process",
                "updates": 4 << k if mode == "mpi" else procs * (4 << k), "processes": procs, "ranks": procs,
                "cpus": [c for _, c in places], "lookahead": LOOKAHEAD if mode == "mpi" else None,
                "hosts": sorted({h for h, _ in places if h}) or None,
            }
            got: list = []

            def on_result(rec: dict, base: dict = base, got: list = got, procs: int = procs, mode: str = mode) -> None:
                prm = {**base, "errors": rec.get("errors"), "allowed_errors": rec.get("allowed_errors"),
                       "verify_s": rec.get("verify_s")}
                if mode == "mpi":
                    total, times = [float(x) for x in rec["samples"]], rec.get("times_s")
                else:
                    per = rec.get("per_rank") or []
                    if len(per) != procs:
                        raise KernelFailed(f"randomaccess: {len(per)} ranks reported, {procs} ran", "report this as a bug")
                    total = [sum(col) for col in zip(*per)]
                    times = [max(col) for col in zip(*rec.get("times_per_rank") or [])] or None
                    prm["per_process_gups"] = per
                got.append(ctx.emit(self, "gups", total, prm, times_s=times))
                got.append(ctx.emit(self, "gups_per_process", [t / procs for t in total], prm, times_s=times))

            self.launch(ctx, params, args, base, on_result, places=places,
                        host_list=params["host_list"], proof_ranks=(0, 1) if procs > 1 else (0,),
                        name=f"randomaccess {mode}")
            if not got:
                raise KernelFailed(f"randomaccess {mode} printed no results", "rerun; report it if it persists")
            out.extend(got)
            ctx.progress.advance(1)
        return out
