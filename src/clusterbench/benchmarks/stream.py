"""``stream``: STREAM Copy, Scale, Add, Triad (McCalpin, stream.c 5.10 method), pinned and sized
from the topology.

Method and conventions
  * Kernels ``c=a``, ``b=s*c``, ``c=a+b``, ``a=b+s*c`` over three heap arrays (2 MiB aligned,
    transparent huge pages requested), ``ntimes`` iterations, the first one excluded (as STREAM;
    so ``ntimes`` >= 2). Each result's samples are the remaining iterations; its value is the best.
  * Bytes: STREAM's convention, Copy and Scale 16 B/element, Add and Triad 24 B/element;
    write-allocate traffic is not counted. MB/s = 1e6 B/s.
  * Size (``array_elements``, per array): default ``max(4 x total last-level cache, 1M)``
    elements, the run rule; lowered (with a warning) to the largest size whose three arrays fit
    in 80 % of MemAvailable minus 256 MiB. An explicit size that does not fit is refused before
    anything runs, naming the largest that would.
  * Threads: pinned one per cpu (``base.placement``: physical cores first, ``compact`` or
    ``spread``; ``--smt`` adds siblings; ``--cpus`` overrides). Each thread initialises (first
    touch) and processes one contiguous chunk of whole pages, the same chunk in every kernel.
    The kernel reports where each thread really ran (sched_getcpu); a mismatch fails the run.
  * Sweep (``sweep``): thread counts 1..N (``full``); powers of two plus N when N > 16
    (default profile); 1 and N in ``quick``. N runs first; each count is a fresh process
    (fresh first touch with that count's partition).
  * Store variants (``variant``): ``regular`` (ordinary vector stores, what STREAM and hpcc
    measure) and ``nt`` (non-temporal stores: AVX-512/AVX/SSE2 streaming stores, aarch64 stnp;
    a build without any reports ``nt_native`` false). **Decision:** every result carries
    ``params["variant"]``, so both figures are kept and comparable; which variant won at each
    thread count is said in a progress note ("triad: nt beat regular ..."). The ``quick``
    profile measures all four kernels and both variants at N threads, and at 1 thread only
    Triad with the winning variant (a Triad-only run validates against its own replay).
  * memcpy: the loops are written with intrinsics, so the compiler cannot replace Copy with a
    memcpy call (glibc's memcpy switches to non-temporal stores for large copies, which would
    blur the regular/nt distinction).
  * Validation: STREAM's checker — a scalar replay of the recurrence gives the expected values
    after ``ntimes`` iterations; every element is compared (average and worst relative error
    <= 1e-13). ``corrupt`` (a test hook) damages one element after timing: the run must fail.
  * NUMA (``numa``): with more than one NUMA node and libnuma, the Triad bandwidth from every
    CPU node (its physical cores) to every memory node (arrays bound with numa_tonode_memory,
    the equivalent of ``numactl --cpunodebind=C --membind=M``, seed 002) as metric
    ``triad_numa`` with params ``cpu_node``, ``mem_node``. The kernel is linked with -lnuma
    only when libnuma is installed; with one node the matrix is skipped (a progress note).
"""
from __future__ import annotations

import math
from typing import Any

from ..analysis.warnings import Warning_
from ..errors import EnvironmentProblem, KernelFailed, UsageError
from ..kernels.build import Build
from . import register
from .base import (CPUS, ORDER, SMT, THREADS, Benchmark, Metric, Param, Result, RunContext,
                   check_threads, cpulist, placement)

BW_LIMITS = ("best_bandwidth", "dram_theoretical")
KERNELS = ("copy", "scale", "add", "triad")
BYTES_PER_ELEMENT = {"copy": 16, "scale": 16, "add": 24, "triad": 24}
MIN_ELEMENTS = 1_000_000
PAGE_ELEMS = 512
MEM_FRACTION = 0.8
MEM_RESERVE = 256 << 20


def available_memory(probe: dict) -> int | None:
    """MemAvailable in bytes, from the probe or /proc/meminfo."""
    val = (probe.get("memory") or {}).get("available_bytes")
    if val:
        return int(val)
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def llc_total(probe: dict) -> int | None:
    try:
        from ..probe.topology import llc_total_bytes
    except ImportError:  # pragma: no cover - the probe ships with the package
        return None
    return llc_total_bytes(probe)


def fitting_elements(avail: int | None, arrays: int) -> int | None:
    """Largest per-array element count whose ``arrays`` arrays fit in memory with the margin."""
    if not avail:
        return None
    usable = avail * MEM_FRACTION - MEM_RESERVE
    return max(0, int(usable // (arrays * 8)) // PAGE_ELEMS * PAGE_ELEMS)


def size_arrays(ctx: RunContext, given: int | None, arrays: int, name: str = "array-elements",
                per: str = "array") -> tuple[int, list[str]]:
    """Elements per array: explicit (checked against memory) or the 4 x LLC run rule."""
    avail = available_memory(ctx.probe)
    fit = fitting_elements(avail, arrays)
    notes: list[str] = []
    if given is not None:
        if given < 1:
            raise UsageError(f"--{name} {given} is not allowed", f"use --{name} 1 or more")
        if fit is not None and given > fit:
            raise UsageError(
                f"--{name} {given} needs {arrays} x {given * 8 / 1e9:.2f} GB but only "
                f"{avail / 1e9:.2f} GB of memory is available",
                f"use --{name} {fit} or fewer (the largest size that fits)")
        return given, notes
    llc = llc_total(ctx.probe)
    want = MIN_ELEMENTS
    if llc:
        want = max(want, math.ceil(4 * llc / 8))
    else:
        notes.append("last-level cache size unknown: arrays sized at 1M elements, which may fit in cache")
    want = -(-want // PAGE_ELEMS) * PAGE_ELEMS
    if fit is not None and want > fit:
        if fit < PAGE_ELEMS:
            raise UsageError(f"not enough free memory for {arrays} arrays "
                             f"({(avail or 0) / 1e6:.0f} MB available)", "free some memory and rerun")
        notes.append(f"arrays lowered from {want} to {fit} elements per {per} to fit in memory; "
                     f"below 4 x the last-level cache, cache effects may inflate the figures")
        want = fit
    return want, notes


def small_array_warning(ctx: RunContext, elements: int, per: str) -> Warning_ | None:
    """Arrays under 4 x the last-level cache (or 1M elements) partly run from cache."""
    llc = llc_total(ctx.probe)
    need = max(MIN_ELEMENTS, math.ceil(4 * llc / 8)) if llc else MIN_ELEMENTS
    if elements >= need - PAGE_ELEMS:
        return None
    return Warning_("small-arrays",
                    f"{elements} elements per {per} ({elements * 8 / 1e6:.0f} MB) is under the run rule "
                    f"of {need} (max(4 x last-level cache, 1M)): caches may inflate the figure",
                    "use the default size or free memory so that it fits")


def sweep_counts(n: int, profile: str, sweep: bool) -> list[int]:
    """Thread counts to run, N first."""
    if not sweep or n == 1:
        return [n]
    if profile == "quick":
        rest = [1]
    elif profile == "full" or n <= 16:
        rest = list(range(1, n))
    else:
        rest = [c for c in (2 ** i for i in range(n.bit_length())) if c < n]
    return [n] + [c for c in rest if c != n]


def check_placement(info: dict, wanted: list[int], bench: str) -> None:
    got = info.get("cpus_actual")
    if got is None:
        raise KernelFailed(f"kernel '{bench}' did not report where its threads ran", "report this as a bug")
    for t, (w, g) in enumerate(zip(wanted, got)):
        if w != g:
            raise KernelFailed(f"{bench}: thread {t} ran on cpu {g}, not on the requested cpu {w}",
                               "check cgroup/cpuset restrictions (taskset, Slurm --cpu-bind) or choose --cpus")
    if len(got) != len(wanted):
        raise KernelFailed(f"{bench}: kernel ran {len(got)} threads, {len(wanted)} requested", "report this as a bug")


def numa_nodes_of(probe: dict) -> dict[int, list[int]]:
    """NUMA node -> its cpus (from the topology), physical cores first."""
    from ..probe.topology import cpu_order

    topo = probe.get("topology") or {}
    node_of = {c["pu"]: c.get("numa") for c in topo.get("cpus", [])}
    out: dict[int, list[int]] = {}
    for cpu in cpu_order(probe, "compact", smt=False):
        node = node_of.get(cpu)
        if node is not None:
            out.setdefault(int(node), []).append(cpu)
    return out


@register
class Stream(Benchmark):
    name = "stream"
    help = "STREAM copy/scale/add/triad memory bandwidth, pinned, sized from the topology (MB/s = 1e6)"
    kernel = "stream"
    metrics = (
        Metric("copy", "MB/s", True, "STREAM Copy c=a, 16 B/element counted", BW_LIMITS),
        Metric("scale", "MB/s", True, "STREAM Scale b=s*c, 16 B/element counted", BW_LIMITS),
        Metric("add", "MB/s", True, "STREAM Add c=a+b, 24 B/element counted", BW_LIMITS),
        Metric("triad", "MB/s", True, "STREAM Triad a=b+s*c, 24 B/element counted", BW_LIMITS),
        Metric("triad_numa", "MB/s", True,
               "Triad with the threads on CPU node cpu_node and the arrays on memory node mem_node",
               ("best_bandwidth",)),
    )
    params = (
        THREADS, ORDER, SMT, CPUS,
        Param("array_elements", int, None, "elements per array (default: max(4 x last-level cache, 1M))"),
        Param("ntimes", int, 10, "iterations per kernel; the first is excluded (STREAM's NTIMES)"),
        Param("variant", str, "both", "store variant: regular, nt (non-temporal) or both",
              ("both", "regular", "nt")),
        Param("sweep", bool, True, "also run fewer threads (1..N; quick: 1 and N)"),
        Param("numa", bool, True, "CPU-node x memory-node Triad matrix when there are several NUMA nodes"),
        Param("corrupt", bool, False, "test hook: damage the data after timing (validation must fail)"),
    )
    profiles = {"quick": {"ntimes": 3}, "full": {"ntimes": 20}}

    # -- parameters ------------------------------------------------------------------------------
    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = dict(params)
        cpus = list(p["cpus"]) if p.get("cpus") else None
        threads = p.get("threads")
        if threads is None and cpus:
            threads = len(cpus)
        p["threads"] = check_threads(ctx, threads)
        if cpus is not None and not cpus:
            raise UsageError("--cpus is empty", "give at least one cpu, e.g. --cpus 0")
        p["cpus"] = placement(ctx, p["threads"], p["order"], bool(p["smt"]), cpus)
        if not 2 <= int(p["ntimes"]) <= 200:
            raise UsageError(f"--ntimes {p['ntimes']} is not allowed",
                             "use 2..200 (the first iteration is excluded; values overflow beyond 200)")
        p["array_elements"], _ = size_arrays(ctx, p.get("array_elements"), 3)
        return p

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        """Rough: page-fault first touch, then the traffic at a guessed per-thread bandwidth."""
        n = params["array_elements"]
        nvar = 2 if params["variant"] == "both" else 1
        total = 0.0
        for i, t in enumerate(sweep_counts(params["threads"], ctx.profile, params["sweep"])):
            bw = 12e9 * min(t, 4)  # B/s, only for the ETA
            triad_only = ctx.profile == "quick" and i > 0
            per_iter = 32 * n if triad_only else 112 * n  # with write-allocate traffic
            v = 1 if triad_only else nvar
            total += 0.3 + 24 * n / 3e9 + v * (params["ntimes"] * per_iter + 48 * n) / bw
        return total

    def prepare(self, ctx: RunContext, params: dict[str, Any]) -> None:
        self._build(ctx)

    def _build(self, ctx: RunContext) -> Build:
        try:
            return ctx.build("stream", libs=("numa",), extra_flags=("-DCB_HAVE_NUMA",))
        except EnvironmentProblem:
            return ctx.build("stream")  # no libnuma: the NUMA matrix is unavailable

    # -- run -----------------------------------------------------------------------------------------
    def run(self, ctx: RunContext, params: dict[str, Any]) -> list[Result]:
        b = self._build(ctx)
        self._warn = small_array_warning(ctx, params["array_elements"], "array")
        if self._warn:
            ctx.progress.note(f"stream: {self._warn.message}")
        n_all = params["threads"]
        counts = sweep_counts(n_all, ctx.profile, params["sweep"])
        nvar = 2 if params["variant"] == "both" else 1
        quick = ctx.profile == "quick"
        ctx.progress.start("stream", total=4 * nvar + (len(counts) - 1) * (1 if quick else 4 * nvar))
        out: list[Result] = []
        info_main: dict = {}
        winner = None
        for i, t in enumerate(counts):
            variant, extra = params["variant"], ()
            if quick and t != n_all:  # quick: the other counts run Triad alone, winner stores only
                extra = ("--kernels=triad",)
                if variant == "both" and winner:
                    variant = winner
            res, info = self._one(ctx, b, params, params["cpus"][:t], variant, extra)
            out.extend(res)
            if i == 0:
                info_main = info
            winner = self._note_winner(ctx, res, t) or winner
        if params["numa"]:
            out.extend(self._numa(ctx, b, params, info_main))
        return out

    def _one(self, ctx: RunContext, b: Build, params: dict[str, Any], cpus: list[int], variant: str,
             extra_args: tuple[str, ...] = (), extra_params: dict | None = None) -> tuple[list[Result], dict]:
        base = {"threads": len(cpus), "cpus": list(cpus), "order": params["order"], "smt": bool(params["smt"]),
                "array_elements": params["array_elements"], "ntimes": params["ntimes"], **(extra_params or {})}
        out: list[Result] = []
        info: dict = {}
        nt_native = True

        def on(rec: dict) -> None:
            nonlocal nt_native
            if rec["type"] == "info":
                info.update(rec)
                check_placement(rec, cpus, "stream")
                nt_native = bool(rec.get("nt_native", True))
            elif rec["type"] == "result":
                rp = {**base, **rec.get("params", {})}
                if rp.get("variant") == "nt" and not nt_native:
                    rp["variant"] = "nt-emulated"
                out.append(ctx.emit(self, rec["metric"], rec["samples"][1:], rp, times_s=rec["times_s"][1:],
                                    extra_warnings=(getattr(self, "_warn", None),)))
                ctx.progress.advance(1)

        args = [f"--cpus={cpulist(cpus)}", f"--elements={params['array_elements']}",
                f"--ntimes={params['ntimes']}", f"--variant={variant}", *extra_args]
        if params.get("corrupt"):
            args.append("--corrupt=1")
        ctx.run_kernel(b, args, on_record=on)
        return out, info

    @staticmethod
    def _note_winner(ctx: RunContext, res: list[Result], threads: int) -> str | None:
        triad = {r.params["variant"]: r.value for r in res if r.metric == "triad"}
        if len(triad) < 2:
            return None
        win = max(triad, key=lambda k: triad[k])
        lose = min(triad, key=lambda k: triad[k])
        ctx.progress.note(f"stream, {threads} thread{'s' if threads > 1 else ''}: triad with {win} stores "
                          f"{triad[win]:.0f} MB/s beats {lose} stores {triad[lose]:.0f} MB/s "
                          f"({triad[win] / triad[lose] - 1:+.1%})")
        return win

    def _numa(self, ctx: RunContext, b: Build, params: dict[str, Any], info: dict) -> list[Result]:
        nodes = int(info.get("numa_nodes") or 1)
        if nodes <= 1:
            ctx.progress.note("stream: one NUMA node, no CPU-node x memory-node matrix")
            return []
        if not info.get("libnuma"):
            ctx.progress.note(f"stream: {nodes} NUMA nodes but no libnuma; install libnuma-dev for the "
                              "CPU-node x memory-node matrix")
            return []
        per_node = numa_nodes_of(ctx.probe)
        mem_nodes = sorted(per_node) or list(range(nodes))
        # each memory node must hold all three arrays
        avail = [n.get("memory_available_bytes") for n in (ctx.probe.get("topology") or {}).get("numa", [])]
        elements = params["array_elements"]
        fits = [fitting_elements(a, 3) for a in avail if a]
        if fits and min(fits) < elements:
            elements = max(PAGE_ELEMS, min(fits))
            ctx.progress.note(f"stream: NUMA matrix arrays lowered to {elements} elements to fit one node")
        variant = params["variant"]
        out: list[Result] = []
        for cpu_node, cpus in sorted(per_node.items()):
            res, _ = self._one(ctx, b, {**params, "array_elements": elements}, cpus, variant,
                               (f"--mem_nodes={cpulist(mem_nodes)}", f"--cpu_node={cpu_node}"))
            out.extend(res)
        return out
