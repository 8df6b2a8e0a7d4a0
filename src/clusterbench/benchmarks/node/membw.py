"""``bandwidth``: read-only and write-only memory bandwidth for 1, 2, ... N threads (lmbench
``bw_mem rd`` / ``wr``, Eicker and Lippert (2007) Table 2).

Method and conventions
  * One array, ``array_elements`` doubles in total (default ``max(4 x total last-level cache,
    1M)``, so every thread's share plus the others' exceed the caches; lowered with a warning to
    what fits in 80 % of MemAvailable minus 256 MiB; an explicit size that does not fit is
    refused before anything runs). Heap, 2 MiB aligned, transparent huge pages requested.
  * Threads, not processes (one pinned OpenMP thread per cpu, each on its own contiguous chunk
    that it first-touched): the same memory traffic as lmbench's parallel processes without
    fork/mmap noise. Placement from ``base.resolve_threads`` (physical cores first, ``compact`` /
    ``spread``, ``--smt``; ``--cpus`` fixes the cpus and must agree with ``--threads``); thread counts from ``counts`` (default 1..N; ``quick``
    1 and N; powers of two plus N when N > 16 in the default profile). The first ``k`` cpus of
    the placement are used for ``k`` threads; each count is a fresh process (fresh first touch).
  * read: vectorised sum with 8 independent accumulators (not latency-bound), validated
    against the closed-form sum of the data on every pass. write: fill with regular vector
    stores (as lmbench's wr; ``params["variant"] == "regular"``) and/or non-temporal stores
    (``"nt"``, no write-allocate read; like likwid's store_mem), per ``variant`` (the same name
    and values as stream's); every element is checked afterwards, before any figure is printed.
  * Bytes: each element read or written once (8 B/element); the write-allocate read that a
    regular store causes is not counted (real DRAM traffic for ``write`` is about twice the
    figure). MB/s = 1e6 B/s. ``ntimes`` counts every timed pass *including* the first, which
    is a warm-up and is dropped: each result has ``ntimes - 1`` samples (as stream).
  * The kernel reports where each thread ran (sched_getcpu); a thread elsewhere than asked
    fails the run. ``corrupt`` is a test hook: the data is damaged after timing, so
    validation must fail.
"""
from __future__ import annotations

from typing import Any

from clusterbench.errors import UsageError
from clusterbench.analysis.summary import max_threads, pick
from clusterbench.benchmarks import register
from clusterbench.benchmarks.node._memory import size_arrays, small_array_warning
from clusterbench.benchmarks.base import (KernelBenchmark, CPUS, ORDER, SMT, THREADS, Metric, Param, Result, RunContext,
                   check_threads, cpulist, resolve_threads)

BW_LIMITS = ("best_bandwidth",)
MODES = {"both": "read,write,write_nt", "regular": "read,write", "nt": "read,write_nt"}


def _headlines(rs: list[Result]) -> list[str]:
    read = pick(rs, "membw", "read", threads=max_threads(rs, "membw", "read"))
    return [f"memory   read bandwidth, {read.params.get('threads')} threads: {read.value:,.0f} MB/s"] if read else []


@register
class MemBandwidth(KernelBenchmark):
    name = "membw"
    suites = {"node": 40}
    key_params = ('mode', 'variant', 'threads', 'order')
    headlines = (_headlines,)
    aliases = ("bandwidth",)  # its name before 0.3
    help = "read-only and write-only memory bandwidth for 1..N threads (lmbench bw_mem rd/wr, MB/s = 1e6)"
    kernel = "membw"
    metrics = (
        Metric("read", "MB/s", True, "sum over an array, each element read once (8 B/element)", BW_LIMITS, ("best_bandwidth",)),
        Metric("write", "MB/s", True, "fill an array, each element written once (8 B/element; "
                                      "write-allocate not counted)", BW_LIMITS, ("best_bandwidth",)),
    )
    params = (
        Param("counts", "intlist", None, "thread counts to run (default 1..N; quick: 1 and N)", min=1),
        THREADS, ORDER, SMT, CPUS,
        Param("array_elements", int, None,
              "elements in the array, shared by the threads (default: max(4 x last-level cache, 1M))", min=1),
        Param("ntimes", int, 10, "timed passes per mode, including the first, a warm-up that is dropped "
              "(samples = ntimes - 1)", min=2, max=1000, why="the first pass is dropped"),
        Param("variant", str, "both", "stores for write: regular (as lmbench wr), nt (non-temporal) or both",
              ("both", "regular", "nt")),
        Param("corrupt", bool, False, "test hook: damage the data after timing (validation must fail)"),
    )
    profiles = {"quick": {"ntimes": 4}, "full": {"ntimes": 20}}

    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = dict(params)
        counts = list(p["counts"]) if p.get("counts") else None
        for c in counts or ():
            check_threads(ctx, c, "counts")
        if p.get("threads") is None and p.get("cpus") is None and counts:
            p["threads"] = max(counts)
        p = resolve_threads(ctx, p)
        n = p["threads"]
        if counts:
            for c in counts:
                if c > n:
                    raise UsageError(f"--counts {c} exceeds --threads {n}", f"use counts up to {n}")
            counts = sorted(set(counts))
        else:
            counts = default_counts(n, ctx.profile)
        p["counts"] = counts
        p["array_elements"], _ = size_arrays(ctx, p.get("array_elements"), 1, per="array")
        return p

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        n = params["array_elements"]
        nw = 2 if params["variant"] == "both" else 1
        return sum(0.3 + 8 * n * ((1 + nw) * params["ntimes"] + 3) / (8e9 * min(c, 8)) for c in params["counts"])

    def run(self, ctx: RunContext, params: dict[str, Any]) -> list[Result]:
        b = ctx.build("membw")
        warn = small_array_warning(ctx, params["array_elements"], "array")
        if warn:
            ctx.note(f"membw: {warn.message}")
        nw = 2 if params["variant"] == "both" else 1
        ctx.progress.start("membw", total=(1 + nw) * len(params["counts"]))
        out: list[Result] = []
        for t in params["counts"]:
            cpus = params["cpus"][:t]
            base = {"threads": t, "cpus": cpus, "order": params["order"], "smt": bool(params["smt"]),
                    "array_elements": params["array_elements"], "ntimes": params["ntimes"],
                    "in_cache": warn is not None}  # never feeds a memory limit

            def on_result(rec: dict, base: dict = base) -> None:
                out.append(ctx.emit(self, rec["metric"], rec["samples"][1:], {**base, **rec.get("params", {})},
                                    times_s=rec["times_s"][1:], extra_warnings=(warn,)))

            args = [f"--cpus={cpulist(cpus)}", f"--elements={params['array_elements']}",
                    f"--ntimes={params['ntimes']}", "--modes=" + MODES[params["variant"]]]
            if params.get("corrupt"):
                args.append("--corrupt=1")
            self.measure(ctx, args, cpus, on_result, build=b)
        return out


def default_counts(n: int, profile: str) -> list[int]:
    if profile == "quick":
        return sorted({1, n})
    if profile == "full" or n <= 16:
        return list(range(1, n + 1))
    return sorted({2 ** i for i in range(n.bit_length()) if 2 ** i <= n} | {n})
