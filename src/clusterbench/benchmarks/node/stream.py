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
  * Threads: pinned one per cpu (``base.resolve_threads``: physical cores first, ``compact`` or
    ``spread``; ``--smt`` adds siblings; ``--cpus`` fixes cpus and count, and must agree with
    ``--threads``; a cpu listed twice needs ``--oversubscribe``). Each thread initialises (first
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
    <= 1e-13), and only then are the figures printed. A Triad-only run (quick's other thread
    counts, the NUMA matrix) starts from a = 2, b = 2, c = 1, so Triad must change a (to 5):
    a Triad that stored nothing would fail. ``corrupt`` (a test hook) damages one element after
    timing, and the kernel's ``--skip_stores=1`` hook runs no kernel at all: either must fail.
  * NUMA (``numa``): with more than one NUMA node and libnuma, the Triad bandwidth from every
    CPU node (its physical cores) to every memory node (arrays bound with numa_tonode_memory,
    the equivalent of ``numactl --cpunodebind=C --membind=M``, Khadka (Multicore-Multinode)) as metric
    ``triad_numa`` with params ``cpu_node``, ``mem_node`` (planned by :func:`plan_numa` from
    the probe's topology). The kernel is linked with -lnuma only when the compiler finds
    <numa.h> (checked once per compiler); with one node the matrix is skipped (a note).
"""
from __future__ import annotations

import functools
import os
import shlex
import subprocess
from typing import Any

from clusterbench.analysis.warnings import Warning_
from clusterbench.errors import EnvironmentProblem, KernelFailed
from clusterbench.kernels.build import Build, compiler
from clusterbench import process
from clusterbench.analysis.summary import max_threads, pick
from clusterbench.benchmarks import register
from clusterbench.benchmarks.node._memory import PAGE_ELEMS, fitting_elements, size_arrays, small_array_warning
from clusterbench.benchmarks.base import (KernelBenchmark, HpccKey, CPUS, ORDER, SMT, THREADS, Metric, Param, Result, RunContext,
                   allowed_cpus, check_placement, cpulist, resolve_threads)

BW_LIMITS = ("best_bandwidth", "dram_theoretical")
KERNELS = ("copy", "scale", "add", "triad")
BYTES_PER_ELEMENT = {"copy": 16, "scale": 16, "add": 24, "triad": 24}


@functools.lru_cache(maxsize=None)
def numa_header(cc: str) -> bool:
    """Whether ``cc`` finds <numa.h> (libnuma-dev): checked once per compiler, so a machine
    without it does not attempt (and fail) a -lnuma build on every run."""
    if any(os.path.exists(os.path.join(d, "numa.h")) for d in ("/usr/include", "/usr/local/include")):
        return True
    try:
        r = process.run([*shlex.split(cc), "-E", "-x", "c", "-o", os.devnull, "-"], input="#include <numa.h>\n", timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


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


def numa_nodes_of(probe: dict) -> dict[int, list[int]]:
    """NUMA node -> its cpus (from the topology), physical cores first."""
    from clusterbench.probe.topology import cpu_order

    topo = probe.get("topology") or {}
    node_of = {c["pu"]: c.get("numa") for c in topo.get("cpus", [])}
    out: dict[int, list[int]] = {}
    for cpu in cpu_order(probe, "compact", smt=False):
        node = node_of.get(cpu)
        if node is not None:
            out.setdefault(int(node), []).append(cpu)
    return out


def check_pages(rec: dict) -> None:
    """Refuse a NUMA-matrix figure whose arrays were not where they were bound: the kernel reads the
    node of every page after the first touch (numa_move_pages's query) into its validation record."""
    checked, on, node = int(rec["pages_checked"]), int(rec.get("pages_on_mem_node", 0)), rec.get("mem_node")
    if checked and on < checked:
        raise KernelFailed(f"stream: {checked - on} of {checked} pages of the arrays bound to NUMA node {node} "
                           "were on another node", "check the cpuset's mems (cgroup cpuset.mems, numactl) and "
                           "that the node has free memory")


def plan_numa(probe: dict, elements: int, allowed: set[int] | None = None,
              kernel_nodes: int | None = None) -> tuple[list[dict], list[str]]:
    """The CPU-node x memory-node Triad matrix, planned from the probe alone (pure: testable
    with a made-up topology). One kernel run per CPU node, its threads on that node's physical
    cores (narrowed to ``allowed``); each run binds the three arrays to every memory node in
    turn (``--mem_nodes``), so the results cover every (cpu_node, mem_node) pair. Memory
    nodes are the nodes with memory (CPU-less ones included); the arrays are lowered to fit
    the smallest node's free memory. Returns the runs ``{"cpu_node", "cpus", "mem_nodes",
    "array_elements", "pairs"}`` and notes; no runs with fewer than two nodes."""
    topo = probe.get("topology") or {}
    numa = topo.get("numa") or []
    nodes = len(numa) or int(kernel_nodes or 1)
    if nodes <= 1:
        return [], ["stream: one NUMA node, no CPU-node x memory-node matrix"]
    per_node = {n: [c for c in cpus if allowed is None or c in allowed]
                for n, cpus in numa_nodes_of(probe).items()}
    per_node = {n: cpus for n, cpus in per_node.items() if cpus}
    if numa:
        mem_nodes = sorted(int(n["os_index"]) for n in numa if n.get("memory_total_bytes") != 0)
        free = [n.get("memory_available_bytes") for n in numa if n.get("memory_total_bytes") != 0]
    else:
        mem_nodes, free = sorted(per_node), []
    notes: list[str] = []
    fits = [fitting_elements(a, 3) for a in free if a]
    if fits and min(fits) < elements:
        elements = max(PAGE_ELEMS, min(fits))
        notes.append(f"stream: NUMA matrix arrays lowered to {elements} elements to fit one node")
    runs = [{"cpu_node": node, "cpus": cpus, "mem_nodes": mem_nodes, "array_elements": elements,
             "pairs": [(node, m) for m in mem_nodes]}
            for node, cpus in sorted(per_node.items())]
    return runs, notes


def _triads(rs: list[Result]) -> tuple[int | None, Result | None, Result | None]:
    n = max_threads(rs, "stream", "triad")
    return n, (pick(rs, "stream", "triad", threads=n) if n else None), pick(rs, "stream", "triad", threads=1)


def _headlines(rs: list[Result]) -> list[str]:
    n, every, one = _triads(rs)
    out = []
    if every:
        out.append(f"memory   STREAM triad, {n} threads: {every.value:,.0f} MB/s "
                   f"({every.params.get('variant')} stores)")
    if one and every and n and n > 1:
        out.append(f"memory   STREAM triad, 1 thread: {one.value:,.0f} MB/s "
                   f"({every.value / one.value:.2f}x from 1 to {n})")
    return out


def _findings(rs: list[Result]) -> list[str]:
    n, every, one = _triads(rs)
    if one and every and n and n > 1 and every.value / one.value < 1.3:
        return [f"memory bandwidth barely grows from 1 to {n} threads ({every.value / one.value:.2f}x): one "
                "core nearly saturates the memory system, so memory-bound codes will not scale on this node"]
    return []


@register
class Stream(KernelBenchmark):
    name = "stream"
    suites = {"node": 30, "hpcc": 30}
    key_params = ('variant', 'threads', 'order', 'cpu_node', 'mem_node')
    #: HPCC's Single (1 process) and Star (every core, per process) STREAM in GB/s
    hpcc_keys = (
        HpccKey("SingleSTREAM_Copy", "copy", lambda p: p.get("threads") == 1, scale=1e-3),
        HpccKey("StarSTREAM_Copy", "copy", lambda p: (p.get("threads") or 1) > 1, scale=1e-3, per="threads"),
        HpccKey("SingleSTREAM_Scale", "scale", lambda p: p.get("threads") == 1, scale=1e-3),
        HpccKey("StarSTREAM_Scale", "scale", lambda p: (p.get("threads") or 1) > 1, scale=1e-3, per="threads"),
        HpccKey("SingleSTREAM_Add", "add", lambda p: p.get("threads") == 1, scale=1e-3),
        HpccKey("StarSTREAM_Add", "add", lambda p: (p.get("threads") or 1) > 1, scale=1e-3, per="threads"),
        HpccKey("SingleSTREAM_Triad", "triad", lambda p: p.get("threads") == 1, scale=1e-3),
        HpccKey("StarSTREAM_Triad", "triad", lambda p: (p.get("threads") or 1) > 1, scale=1e-3, per="threads"),
    )
    headlines = (_headlines,)
    findings = (_findings,)
    help = "STREAM copy/scale/add/triad memory bandwidth, pinned, sized from the topology (MB/s = 1e6)"
    kernel = "stream"
    metrics = (
        Metric("copy", "MB/s", True, "STREAM Copy c=a, 16 B/element counted", BW_LIMITS, ("best_bandwidth",)),
        Metric("scale", "MB/s", True, "STREAM Scale b=s*c, 16 B/element counted", BW_LIMITS, ("best_bandwidth",)),
        Metric("add", "MB/s", True, "STREAM Add c=a+b, 24 B/element counted", BW_LIMITS, ("best_bandwidth",)),
        Metric("triad", "MB/s", True, "STREAM Triad a=b+s*c, 24 B/element counted", BW_LIMITS, ("best_bandwidth",)),
        Metric("triad_numa", "MB/s", True,
               "Triad with the threads on CPU node cpu_node and the arrays on memory node mem_node",
               ("best_bandwidth",)),
    )
    params = (
        THREADS, ORDER, SMT, CPUS,
        Param("array_elements", int, None, "elements per array (default: max(4 x last-level cache, 1M))", min=1),
        Param("ntimes", int, 10, "iterations per kernel; the first is excluded (STREAM's NTIMES)", min=2, max=200,
              why="the first iteration is excluded; values overflow beyond 200"),
        Param("variant", str, "both", "store variant: regular, nt (non-temporal) or both",
              ("both", "regular", "nt")),
        Param("sweep", bool, True, "also run fewer threads (1..N; quick: 1 and N)"),
        Param("numa", bool, True, "CPU-node x memory-node Triad matrix when there are several NUMA nodes"),
        Param("corrupt", bool, False, "test hook: damage the data after timing (validation must fail)"),
    )
    profiles = {"quick": {"ntimes": 3}, "full": {"ntimes": 20}}

    # -- parameters ------------------------------------------------------------------------------
    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = resolve_threads(ctx, dict(params))
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
        """With libnuma (its header found once per compiler) the NUMA-capable kernel, else the
        plain one (the NUMA matrix is then unavailable, a note says so)."""
        if numa_header(compiler()):
            try:
                return ctx.build("stream", libs=("numa",), extra_flags=("-DCB_HAVE_NUMA",))
            except EnvironmentProblem:
                pass  # header without a usable library: fall back
        return ctx.build("stream")

    # -- run -----------------------------------------------------------------------------------------
    def run(self, ctx: RunContext, params: dict[str, Any]) -> list[Result]:
        b = self._build(ctx)
        warn = small_array_warning(ctx, params["array_elements"], "array")
        if warn:
            ctx.note(f"stream: {warn.message}")
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
            res, info = self._one(ctx, b, params, params["cpus"][:t], variant, warn, extra)
            out.extend(res)
            if i == 0:
                info_main = info
            winner = self.note_winner(ctx, res, t) or winner
        if params["numa"]:
            out.extend(self._numa(ctx, b, params, info_main, warn))
        return out

    def _one(self, ctx: RunContext, b: Build, params: dict[str, Any], cpus: list[int], variant: str,
             warn: Warning_ | None, extra_args: tuple[str, ...] = ()) -> tuple[list[Result], dict]:
        base = {"threads": len(cpus), "cpus": list(cpus), "order": params["order"], "smt": bool(params["smt"]),
                "array_elements": params["array_elements"], "ntimes": params["ntimes"],
                "in_cache": warn is not None}  # never feeds a memory limit
        out: list[Result] = []
        info: dict = {}
        nt_native = True

        def on(rec: dict) -> None:
            nonlocal nt_native
            if rec["type"] == "info":
                info.update(rec)
                check_placement(rec, cpus, "stream")
                nt_native = bool(rec.get("nt_native", True))
            elif rec["type"] == "validation" and "pages_checked" in rec:
                check_pages(rec)
            elif rec["type"] == "result":
                rp = {**base, **rec.get("params", {})}
                if rp.get("variant") == "nt" and not nt_native:
                    rp["variant"] = "nt-emulated"
                out.append(ctx.emit(self, rec["metric"], rec["samples"][1:], rp, times_s=rec["times_s"][1:],
                                    extra_warnings=(warn,)))
                ctx.progress.advance(1)

        args = [f"--cpus={cpulist(cpus)}", f"--elements={params['array_elements']}",
                f"--ntimes={params['ntimes']}", f"--variant={variant}", *extra_args]
        if params.get("corrupt"):
            args.append("--corrupt=1")
        ctx.run_kernel(b, args, on_record=on)
        return out, info

    @staticmethod
    def note_winner(ctx: RunContext, res: list[Result], threads: int) -> str | None:
        triad = {r.params["variant"]: r.value for r in res if r.metric == "triad"}
        if len(triad) < 2:
            return None
        win = max(triad, key=lambda k: triad[k])
        lose = min(triad, key=lambda k: triad[k])
        ctx.note(f"stream, {threads} thread{'s' if threads > 1 else ''}: triad with {win} stores "
                 f"{triad[win]:.0f} MB/s beats {lose} stores {triad[lose]:.0f} MB/s "
                 f"({triad[win] / triad[lose] - 1:+.1%})")
        # the kernel's name of the variant ("nt-emulated" is how the figure is stored where the stores are not
        # native, e.g. POWER and 32-bit Arm; the kernel takes --variant=nt there too)
        return "nt" if win == "nt-emulated" else win

    def _numa(self, ctx: RunContext, b: Build, params: dict[str, Any], info: dict,
              warn: Warning_ | None) -> list[Result]:
        runs, notes = plan_numa(ctx.probe, params["array_elements"], set(allowed_cpus(ctx)),
                                int(info.get("numa_nodes") or 1))
        if runs and not info.get("libnuma"):
            ctx.note(f"stream: {len({m for r in runs for m in r['mem_nodes']})} NUMA nodes but no libnuma; "
                     "install libnuma-dev for the CPU-node x memory-node matrix")
            return []
        for n in notes:
            ctx.note(n)
        out: list[Result] = []
        for run in runs:
            res, _ = self._one(ctx, b, {**params, "array_elements": run["array_elements"]}, run["cpus"],
                               params["variant"], warn,
                               (f"--mem_nodes={cpulist(run['mem_nodes'])}", f"--cpu_node={run['cpu_node']}"))
            out.extend(res)
        return out
