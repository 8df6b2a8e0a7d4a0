"""hpl: High Performance Linpack, A x = b in double precision on a P x Q process grid.

Conventions (HPL 2.3's, ``testing/ptest/HPL_pdtest.c``; shared/notes/anchors-hpl.md §1):

* **flop count**: Gflop/s = (2/3 N^3 + 3/2 N^2) / t / 1e9, t the wall time of the factorisation
  and the solve (matrix generation and the check excluded), whatever the engine did;
* **residual**: ||Ax - b||_oo / (eps (||A||_oo ||x||_oo + ||b||_oo) N), eps = 2^-53 (LAPACK
  dlamch('E'), what HPL prints), computed on the regenerated A and b; the run PASSES when it is
  below 16 (HPL's threshold). A run that fails the check is a failed run (KernelFailed, exit code
  4), never a result: nothing of it is stored.

The ``builtin`` engine (kernels/hpl.c, HPL's algorithm written afresh): seeded random matrix,
2-D block-cyclic distribution over P x Q (row- or column-major process mapping), right-looking LU
with partial pivoting, recursive panel factorisation, panel broadcast along process rows, row
swaps, trailing update through the BLAS (dtrsm, dgemm) with look-ahead of depth 1, then the
triangular solve. It reports the time breakdown (panel factorisation, broadcast, swaps, update,
solve, other; the maximum over ranks) that seed 000 needed ``perf`` for. Other engines (hpcc,
xhpl) plug into :data:`ENGINES` from ``engines.py`` when that module exists.

Sizes: N from a fraction ``--mem`` (0.8, the HPL FAQ's 80 %) of the MemAvailable of the nodes
taking part: N = floor(sqrt(mem x bytes / 8) / NB) x NB (seed 000 rounds up and puts the 0.8
outside the square root, i.e. ~64 % of memory; the issue asks for rounding down). An N whose
matrix and work space would not fit (no swapping) is refused with the largest N that would.
Grids: every factorisation of the rank count with P <= Q is offered (default: the squarest).

Topologies (seed 000 §4.4-4.5): ``pure`` runs one rank per core, each pinned, with a serial BLAS
(OPENBLAS/OMP/BLIS/MKL_NUM_THREADS=1); ``hybrid`` one rank per node with a threaded BLAS using
all the node's cores (the rank binds itself to them; its BLAS threads inherit the mask).

Default NB per microarchitecture (the BLAS's blocking; the HPL FAQ's 32..256): 192 with AVX-512
or AVX2+FMA (OpenBLAS's Haswell/SkylakeX dgemm kernels run at full speed from k = 192, and the
panel work, ~N^2 NB, stays small; hpcc's reference point in issue 4 uses 192), 120 on Arm
(seed 000's best NB with OpenBLAS on the Pi 4), 128 elsewhere.
"""
from __future__ import annotations

import importlib
import math
import os
import re
import socket
from dataclasses import dataclass, field
from typing import Any, Protocol

from clusterbench.analysis.warnings import Warning_
from clusterbench.errors import KernelFailed, UsageError
from clusterbench.text import seconds
from clusterbench.launch import mpi as mpimod
from clusterbench.benchmarks import register
from clusterbench.benchmarks.mpi.common import (ALLOW_ROOT, LAUNCH_TIMEOUT, TCP_INCLUDE, TRANSPORT, KernelSession, check_allow_root,
                          host_tuples, launch_spec, parse_host_params, shared_cpu_warning, shares_cores,
                          sim_cluster_of)
from clusterbench.benchmarks.base import (Benchmark, HpccKey, Metric, Param, Result, RunContext, allowed_cpus,
                                          available_memory, placement)
from clusterbench.energy.phase import Phase
from clusterbench.benchmarks.node.dgemm import coretype_warning, thread_env
from clusterbench.probe import blas as blasprobe
from clusterbench.probe.blas import OPENBLAS_OLD_CORES, blas_name_of
from clusterbench.benchmarks.mpi.ring import assign_ranks

TOPOLOGIES = ("pure", "hybrid")
PMAPS = ("row", "col")
THRESHOLD = 16.0
NB_MAX = 4096
#: bytes per rank besides its share of the matrix: two panel buffers are counted exactly, this is
#: the MPI library, the BLAS and the process itself
RANK_OVERHEAD = 96 << 20
#: fraction of Rpeak assumed when estimating the run time (for the progress bar and the timeout check)
EST_EFFICIENCY = 0.4


def cpuset(text: str) -> set[int]:
    """'0-3,8' -> {0, 1, 2, 3, 8} (the ranks' placement report)."""
    out: set[int] = set()
    for part in filter(None, (text or "").split(",")):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def hpl_flops(n: int) -> float:
    """HPL's operation count for order n."""
    return 2.0 / 3.0 * n ** 3 + 1.5 * n ** 2


def grids(ranks: int) -> list[tuple[int, int]]:
    """Every P x Q = ranks with P <= Q, squarest first (HPL's advice: P ~ Q, Q slightly larger)."""
    out = [(p, ranks // p) for p in range(1, int(math.isqrt(ranks)) + 1) if ranks % p == 0]
    return sorted(out, key=lambda g: g[1] - g[0])


def parse_grid(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*[xX*]\s*(\d+)\s*", text or "")
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise UsageError(f"--grid {text!r} is not P x Q", "write it as PxQ, e.g. --grid 1x2")
    return int(m.group(1)), int(m.group(2))


def choose_grid(grid: str | None, ranks: int) -> tuple[int, int, list[tuple[int, int]]]:
    """(P, Q, every grid ``ranks`` allows): ``grid`` as given (refused in one line when it does not
    have ``ranks`` processes, naming the grids that do), else the squarest. HPL's and PTRANS's rule."""
    options = grids(ranks)
    if not grid:
        return options[0][0], options[0][1], options
    gp, gq = parse_grid(grid)
    if gp * gq != ranks:
        listed = ", ".join(f"{a}x{b}" + (f", {b}x{a}" if a != b else "") for a, b in options)
        raise UsageError(f"--grid {gp}x{gq} has {gp * gq} processes and {ranks} ranks run",
                         f"use one of {listed}, or --ranks {gp * gq}" + (" --oversubscribe" if gp * gq > ranks else ""))
    return gp, gq, options


def default_nb(probe: dict) -> int:
    cpu = probe.get("cpu") or {}
    flags = set(cpu.get("isa") or [])
    if "avx512f" in flags or {"avx2", "fma"} <= flags:
        return 192
    if str(cpu.get("arch") or "").startswith(("aarch64", "arm")):
        return 120
    return 128


def hybrid_groups(ctx: RunContext, cpus: list[int], per: str) -> list[list[int]]:
    """The cpus of each hybrid rank on a node: all of ``cpus`` (per node), or those of each socket
    (per socket; sockets from the probe, in order). Sockets with different numbers of usable cores
    are refused: every rank runs the same number of BLAS threads."""
    if per != "socket":
        return [list(cpus)]
    package = {c["pu"]: c.get("package", 0) for c in (ctx.probe.get("topology") or {}).get("cpus") or []}
    groups: dict[int, list[int]] = {}
    for c in cpus:
        groups.setdefault(package.get(c, 0), []).append(c)
    out = [groups[k] for k in sorted(groups)]
    if len({len(g) for g in out}) > 1:
        raise UsageError("the sockets have different numbers of usable cores ("
                         + ", ".join(f"socket {k}: {len(groups[k])}" for k in sorted(groups)) + ")",
                         "use --hybrid-per node, or --topology pure")
    return out


def matrix_bytes(n: int, nb: int, ranks: int, p: int) -> float:
    """What a run of order n needs in all: [A b] (N x (N+1) doubles), each rank's two panel
    buffers and its check vectors, and a fixed overhead per rank."""
    rows = math.ceil(n / p) + nb
    return 8.0 * n * (n + 1) + ranks * (16.0 * rows * nb + 40.0 * rows + RANK_OVERHEAD)


def largest_n(avail: float, nb: int, ranks: int, p: int) -> int:
    """The largest N (any multiple of 1) whose run fits in ``avail`` bytes (0 when none does)."""
    hi = int(math.sqrt(max(avail, 0) / 8)) + 1
    lo = 0
    while lo < hi:  # matrix_bytes grows with n
        mid = (lo + hi + 1) // 2
        if matrix_bytes(mid, nb, ranks, p) <= avail:
            lo = mid
        else:
            hi = mid - 1
    return lo


def default_n(total: float, nb: int, ranks: int, p: int, mem: float = 0.8) -> int:
    """HPL's default N: a multiple of NB whose matrix takes ``mem`` of ``total`` bytes (rounded
    down), at most the largest that fits with its work space (hpcc's PTRANS runs N / 2)."""
    n = int(math.sqrt(mem * total / 8) // nb * nb)
    return min(n, largest_n(total, nb, ranks, p) // nb * nb)


# ---------------------------------------------------------------------------------------------
# Engines
# ---------------------------------------------------------------------------------------------
@dataclass
class HplOutcome:
    """One passed HPL run, whatever engine ran it (a failed check never becomes one)."""

    n: int
    nb: int
    p: int
    q: int
    pmap: str
    time_s: float
    gflops: float
    residual: float
    breakdown_s: dict[str, float] | None = None  # pfact, bcast, swap, update, solve, other
    breakdown_of: str | None = None
    params: dict[str, Any] = field(default_factory=dict)  # engine-specific facts (placement, BLAS, ...)
    warnings: list[Warning_ | None] = field(default_factory=list)
    #: the timed phase (factorisation + solve) in wall-clock seconds, for the energy over exactly it
    phase: Phase | None = None


def phase_from_hpl_lines(start: float | None, end: float | None, time_s: float, engine: str) -> Phase:
    """The timed phase from HPL's "HPL_pdgesv() start time"/"end time" lines: whole seconds (time()
    truncated) around the HPL_pdgesv call HPL's own ``time_s`` measures. The phase is placed where both
    truncations allow ([max(start, end - t), min(start + 1, end + 1 - t)], its middle), so it is
    ``time_s`` long, its ends known to half a second or better; flagged as 1 s resolution. Without the
    lines (hpcc's HPL 2.0 prints none) the phase is unknown and says so."""
    if start is None or end is None:
        return Phase.unknown(f"{engine}'s HPL printed no 'HPL_pdgesv() start/end time' lines (HPL 2.0, as in "
                             "hpcc, has none), so its timed phase is not known; the whole benchmark's energy is in "
                             "the run's energy record",
                             "for Gflops/W use --engine builtin, or xhpl of HPL 2.1 or later (both state their timed phase)")
    lo, hi = max(start, end - time_s), min(start + 1.0, end + 1.0 - time_s)
    if hi < lo:
        return Phase.unknown(f"{engine}'s 'HPL_pdgesv() start/end time' lines ({end - start:.0f} s apart) do not "
                             f"agree with its time of {time_s:.2f} s (was the clock stepped?)")
    t0 = (lo + hi) / 2
    return Phase(t0, t0 + time_s, resolution_s=1.0,
                 source=f"{engine}'s 'HPL_pdgesv() start/end time' lines (whole seconds), placed by its time_s")


class Engine(Protocol):
    name: str

    def prepare(self, ctx: RunContext, params: dict[str, Any]) -> None: ...

    def run(self, ctx: RunContext, params: dict[str, Any]) -> HplOutcome: ...


ENGINES: dict[str, Engine] = {}


def register_engine(engine: Engine) -> Engine:
    ENGINES[engine.name] = engine
    return engine


def _load_engine_plugins() -> None:
    """Engines that live in ``engines.py`` (hpcc, xhpl), when that module exists: it either
    registers itself (``register_engine``) or offers ``run_external(engine, HplCase, ...)`` and an
    ``ENGINES`` tuple, which :class:`ExternalEngine` adapts."""
    try:
        mod = importlib.import_module(f"{__package__}.engines")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__package__}.engines":
            raise
        return
    if hasattr(mod, "run_external") and hasattr(mod, "HplCase"):
        for name in getattr(mod, "ENGINES", ()):
            if isinstance(name, str) and name not in ENGINES:
                register_engine(ExternalEngine(name, mod))


def blas_warnings(ctx: RunContext, config: str, loaded: list[str], path: str, threads_reported: Any,
                  threads: int) -> list[Warning_ | None]:
    """As dgemm's: OpenBLAS on generic kernels, another library mapped, a thread count mismatch."""
    out: list[Warning_ | None] = []
    m = re.search(r"OpenBLAS.*\b(" + "|".join(OPENBLAS_OLD_CORES) + r")\b", config or "")
    flags = set((ctx.probe.get("cpu") or {}).get("isa") or [])
    if m and flags & {"avx2", "avx512f"}:
        better = "SkylakeX" if "avx512f" in flags else "Haswell"
        out.append(Warning_(
            "blas-generic-kernels",
            f"OpenBLAS did not recognise this CPU and uses its {m.group(1)} kernels (no AVX2/AVX-512): the dgemm "
            "that HPL spends its time in runs several times below what the cores can do",
            f"rerun with --openblas-coretype {better} (sets OPENBLAS_CORETYPE), or use a newer OpenBLAS or --blas blis"))
    if loaded and not any(os.path.realpath(x) == os.path.realpath(path) for x in loaded):
        out.append(Warning_("blas-not-loaded", f"asked for {path} but the ranks mapped {loaded}",
                            "check LD_PRELOAD and the library path"))
    if isinstance(threads_reported, int) and threads_reported > 0 and threads_reported != threads:
        out.append(Warning_("blas-threads-mismatch",
                            f"the BLAS reports {threads_reported} thread(s) per rank, {threads} were asked",
                            "check OPENBLAS_NUM_THREADS / OMP_NUM_THREADS / BLIS_NUM_THREADS and the library's "
                            "thread limit"))
    return out


class BuiltinEngine:
    """clusterbench's own HPL (kernels/hpl.c), launched through launch/mpi.py."""

    name = "builtin"
    kernel = "hpl"

    def prepare(self, ctx: RunContext, params: dict[str, Any]) -> None:
        ctx.build(self.kernel, openmp=False, cc=mpimod.detect_mpi().mpicc, libs=("dl",))

    def kernel_args(self, params: dict[str, Any]) -> list[str]:
        args = [f"--lib={params['blas_path']}", f"--n={params['n']}", f"--nb={params['nb']}",
                f"--p={params['p']}", f"--q={params['q']}", f"--pmap={params['pmap']}", f"--seed={params['seed']}",
                f"--threshold={THRESHOLD}"]
        if params["topology"] == "hybrid":  # the rank takes the group of its local rank on its node
            args.append("--cpus=" + "/".join(",".join(map(str, g)) for g in params["rank_cpu_groups"]))
        if params.get("corrupt"):
            args.append("--corrupt=1")
        return args + list(params.get("kernel_extra") or [])

    def launch_spec(self, ctx: RunContext, params: dict[str, Any]) -> mpimod.LaunchSpec:
        spec = launch_spec(ctx, params, params["places"], params["host_list"])
        threads = params["threads_per_rank"]
        env = thread_env(threads, params["rank_cpus"] if threads > 1 else [])
        if len(params.get("rank_cpu_groups") or []) > 1:  # ranks with different cores: places from each mask
            env.pop("OMP_PLACES", None)
        env.update(params.get("openblas_env") or {})  # settled by Hpl.prepare/run (probe/blas.py)
        spec.env.update(env)
        if params["topology"] == "hybrid":
            # one rank per node, unbound by the launcher: the rank binds itself to the node's cores
            # (--cpus) and its BLAS threads inherit that mask
            spec.per_node = len(params["rank_cpu_groups"])
        if params.get("shared_cpus"):
            # ranks sharing a core must yield while they wait, or each wait lasts a time slice
            spec.yield_when_idle = True
        return spec

    def run(self, ctx: RunContext, params: dict[str, Any]) -> HplOutcome:
        mpi = mpimod.detect_mpi()
        b = ctx.build(self.kernel, openmp=False, cc=mpi.mpicc, libs=("dl",))
        spec = self.launch_spec(ctx, params)
        base: dict[str, Any] = {"mpi": {"name": mpi.name, "version": mpi.version}}
        got: dict[str, Any] = {}

        def on_result(rec: dict) -> None:
            got["result"] = rec

        session = KernelSession(ctx, "hpl", spec, mpi, base, on_result)

        def on(rec: dict) -> None:
            session(rec)
            if rec.get("type") == "info":
                got["info"] = rec
                if params["topology"] == "hybrid":  # each rank bound to all the cores given to it
                    groups = params["rank_cpu_groups"]
                    for r in rec.get("ranks") or []:
                        want = set(groups[int(r.get("rank", 0)) % len(groups)])
                        if cpuset(r.get("cpus", "")) != want:
                            raise KernelFailed(f"hpl: rank {r.get('rank')} runs on cpus {r.get('cpus')}, not on "
                                               f"{','.join(map(str, sorted(want)))} as asked",
                                               "check cgroup/cpuset limits on the node")

        mpimod.run_mpi(mpi, spec, [str(b.path), *self.kernel_args(params)], timeout=ctx.timeout,
                       launch_timeout=params["launch_timeout"], on_record=on, name="hpl",
                       proof_ranks=(0, 1) if spec.nranks > 1 else (0,), proof_out=session.proof)
        rec, info = got.get("result"), got.get("info") or {}
        if rec is None:
            raise KernelFailed("hpl ended without a result", "rerun; report it if it persists")
        kp = rec.get("params") or {}
        threads = params["threads_per_rank"]
        extra = {**base, "blas_path": info.get("blas_path"), "blas_config": info.get("blas_config"),
                 "blas_symbol": info.get("blas_symbol"), "blas_loaded": info.get("blas_loaded"),
                 "blas_threads_reported": info.get("blas_threads"), "nbmin": info.get("nbmin"),
                 "depth": info.get("depth"), "update_chunk_cols": info.get("chunk"),
                 "breakdown_mean_s": kp.get("breakdown_mean_s"),
                 "local_matrix_bytes_max": info.get("local_matrix_bytes_max")}
        ws = blas_warnings(ctx, info.get("blas_config") or "", info.get("blas_loaded") or [],
                           params["blas_path"], info.get("blas_threads"), threads)
        ws.append(coretype_warning(params.get("openblas_record") or {}, info.get("blas_config") or ""))
        ph = kp.get("phase_unix")
        phase = (Phase(float(ph[0]), float(ph[1])) if isinstance(ph, list) and len(ph) == 2
                 else Phase.unknown("the hpl kernel reported no timed phase"))
        return HplOutcome(n=int(kp["n"]), nb=int(kp["nb"]), p=int(kp["p"]), q=int(kp["q"]), pmap=str(kp["pmap"]),
                          time_s=float(kp["time_s"]), gflops=float(kp["gflops"]), residual=float(kp["residual"]),
                          breakdown_s=kp.get("breakdown_s"), breakdown_of=kp.get("breakdown_of"), params=extra,
                          warnings=ws, phase=phase)


register_engine(BuiltinEngine())


class ExternalEngine:
    """hpcc or xhpl through ``engines.run_external``: the same ranks, placement and BLAS
    environment as the built-in engine (the program links its own BLAS; ``--blas`` is not
    applied to it), its HPL result line and residual parsed; no time breakdown."""

    def __init__(self, name: str, module: Any) -> None:
        self.name = name
        self.module = module

    def prepare(self, ctx: RunContext, params: dict[str, Any]) -> None:
        params["engine_exe"] = self.module.find_engine(self.name, params.get("engine_path"))

    def run(self, ctx: RunContext, params: dict[str, Any]) -> HplOutcome:
        mpi = mpimod.detect_mpi()
        spec = BuiltinEngine().launch_spec(ctx, params)
        case = self.module.HplCase(n=params["n"], nb=params["nb"], p=params["p"], q=params["q"], pmap=params["pmap"])
        res = self.module.run_external(self.name, case, mpi=mpi, spec=spec, timeout=ctx.timeout,
                                       exe=params.get("engine_exe") or self.module.find_engine(
                                           self.name, params.get("engine_path")))
        rec = res["hpl"]
        extra = {"engine_exe": res.get("exe"), "engine_version": res.get("version"), "variant": rec.get("variant"),
                 "algorithm": rec.get("algorithm"), "transport_used": res.get("transport"),
                 "mpi": {"name": mpi.name, "version": mpi.version}, "engine_wall_s": res.get("wall_s")}
        return HplOutcome(n=int(rec["n"]), nb=int(rec["nb"]), p=int(rec["p"]), q=int(rec["q"]),
                          pmap=str(rec["pmap"]), time_s=float(rec["time_s"]), gflops=float(rec["gflops"]),
                          residual=float(rec["residual"]), params=extra,
                          phase=phase_from_hpl_lines(rec.get("start_unix"), rec.get("end_unix"),
                                                     float(rec["time_s"]), self.name))


# ---------------------------------------------------------------------------------------------
# The benchmark
# ---------------------------------------------------------------------------------------------
@register
class Hpl(Benchmark):
    name = "hpl"
    help = "High Performance Linpack: LU with partial pivoting on a P x Q grid, HPL's Gflop/s and residual check"
    kernel = "hpl"
    key_params = ('n', 'nb', 'grid', 'topology', 'blas')
    suites = {"hpcc": 10}
    hpcc_keys = (HpccKey("HPL_Tflops", "rmax", scale=1e-3),)
    per_watt = {"rmax": "gflops_per_watt"}
    metrics = (
        Metric("rmax", "Gflop/s", True, "HPL's rate: (2/3 N^3 + 3/2 N^2) / t / 1e9, t = factorisation + solve "
               "(wall); only runs whose scaled residual is below 16", ("rpeak", "measured_peak", "rpeak_max")),
        Metric("time_s", "s", False, "wall time of the factorisation and the solve (HPL's time)"),
        Metric("residual", "1", False, "scaled residual ||Ax-b||_oo / (eps (||A||_oo ||x||_oo + ||b||_oo) N), "
               "eps = 2^-53; PASSED below 16"),
        Metric("gflops_per_watt", "Gflop/s/W", True, "rmax over the average power of the run's nodes during "
               "exactly the timed phase (--power/--watts; the Green500's figure, EEHPC Level 1-like)"),
    )
    params = (
        Param("n", int, None, "matrix order N (default: from --mem; given, it wins over --mem)", min=1),
        Param("mem", float, 0.8, "fraction of the nodes' MemAvailable for the matrix when --n is not given",
              min=0, max=0.95, min_open=True, why="HPL: 0.8"),
        Param("nb", int, None, "block size NB (default: per microarchitecture, 192 on AVX2/AVX-512)", min=1,
              max=NB_MAX, why="HPL: 32 to 256, a multiple of the BLAS blocking"),
        Param("grid", str, None, "process grid PxQ, P*Q = ranks (default: the squarest with P <= Q)"),
        Param("pmap", str, "row", "process mapping: row- or column-major (HPL's PMAP 0/1)", PMAPS),
        Param("topology", str, "pure", "pure: a rank per core, serial BLAS; hybrid: a rank per node, "
              "threaded BLAS", TOPOLOGIES),
        Param("hybrid_per", str, "node", "hybrid: one rank per node, or per socket (each bound to its socket's "
              "cores, Duffy 2020, §4.5)", ("node", "socket")),
        Param("ranks", int, None, "MPI ranks (default: pure one per core, hybrid one per node; more than the "
              "cores only with --oversubscribe)", min=1),
        Param("blas", str, "openblas", "BLAS library: openblas, blis, mkl, system... or a path to a .so"),
        Param("openblas_coretype", str, "auto", "OpenBLAS kernels for every engine: auto (a better core type when "
              "OpenBLAS fell back below the CPU's ISA), none (the library's own choice), or a core name, checked"),
        Param("engine", str, "builtin", "HPL implementation: builtin (clusterbench's own); others (hpcc, xhpl) "
              "when their engine module is installed"),
        Param("engine_path", str, None, "the hpcc or xhpl executable (or its directory) for --engine hpcc|xhpl "
              "(default: found on PATH)"),
        Param("seed", int, 42, "seed of the random matrix", min=0),
        TRANSPORT,
        TCP_INCLUDE,
        Param("hosts", str, None, "hosts and slots, e.g. node1:2,node2:2 (default: this node)"),
        Param("hostfile", str, None, "Open MPI hostfile (name slots=N)"),
        ALLOW_ROOT,
        LAUNCH_TIMEOUT,
        Param("corrupt", bool, False, "test hook: perturb the solution before the check (the run must FAIL)"),
    )
    profiles = {"quick": {"mem": 0.03}}  # N ~ 9600 with 24 GiB: well under a minute

    # -- parameters ------------------------------------------------------------------------------
    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = dict(params)
        _load_engine_plugins()
        if p["engine"] not in ENGINES:
            raise UsageError(f"--engine {p['engine']!r} is not available", f"use one of {', '.join(sorted(ENGINES))}")
        check_allow_root(p)
        hosts = parse_host_params(p)
        self._place(ctx, p, hosts)
        self._grid(p)
        self._size(ctx, p, hosts)
        p["blas_name"], p["blas_path"] = blasprobe.resolve_blas(p["blas"])
        est = self.estimate_seconds(ctx, p)
        if est > ctx.timeout and not ctx.timeout_given:
            ctx.timeout = float(math.ceil(est * 2))
            ctx.note(f"hpl: N={p['n']} should take about {seconds(est)} s (at {EST_EFFICIENCY:.0%} of Rpeak): the "
                     f"timeout is {seconds(ctx.timeout)} s for this run (--timeout sets it)")
        if est > ctx.timeout:
            raise UsageError(f"N={p['n']} would take about {seconds(est)} s (at {EST_EFFICIENCY:.0%} of Rpeak), "
                             f"above the {seconds(ctx.timeout)} s timeout",
                             f"pass --timeout {math.ceil(est * 2)} or a smaller --n/--mem")
        return p

    def _place(self, ctx: RunContext, p: dict[str, Any], hosts: list[mpimod.Host] | None) -> None:
        """ranks, their hosts and cpus, and the BLAS threads per rank, from the topology."""
        allowed = allowed_cpus(ctx)
        cores = min(ctx.n_cores, len(allowed))
        hybrid = p["topology"] == "hybrid"
        nodes: list[str | None] = [h.name for h in hosts] if hosts else [None]
        rank_hosts: list[str | None]
        if hybrid:
            groups = hybrid_groups(ctx, placement(ctx, cores), p["hybrid_per"])
            per_node = len(groups)
            ranks = p["ranks"] or len(nodes) * per_node
            if ranks != len(nodes) * per_node:
                raise UsageError(f"hybrid runs one rank per {p['hybrid_per']} ({per_node} per node): {ranks} ranks "
                                 f"on {len(nodes)} node(s)", f"use --ranks {len(nodes) * per_node} (or --topology pure)")
            p["threads_per_rank"] = len(groups[0])
            p["rank_cpus"] = groups[0]
            p["rank_cpu_groups"] = groups  # the cpus of the node's 1st, 2nd, ... rank
            rank_hosts = [nodes[i // per_node] for i in range(ranks)]  # mpirun's ppr:N:node fills a node first
            p["places"] = [(h, None) for h in rank_hosts]
            p["shared_cpus"] = False
        else:
            slots = sum(h.slots for h in hosts) if hosts else cores
            ranks = p["ranks"] or slots
            p["threads_per_rank"] = 1
            p["rank_cpus"] = []
            p["rank_cpu_groups"] = []
            if hosts:
                mpimod.check_slots(hosts, ranks, ctx.oversubscribe)
                named = assign_ranks(hosts, ranks)
                rank_hosts = list(named)
                if sim_cluster_of(hosts) is not None or len(hosts) == 1:
                    cpus = placement(ctx, ranks)
                else:  # each host numbers its ranks' cores from its first
                    seen: dict[str, int] = {}
                    order = placement(ctx, max(named.count(h.name) for h in hosts))
                    cpus = []
                    for name in named:
                        cpus.append(order[seen.get(name, 0)])
                        seen[name] = seen.get(name, 0) + 1
                shared_machine = sim_cluster_of(hosts) is not None or len(hosts) == 1
            else:
                if ranks > len(allowed) and not ctx.oversubscribe:
                    raise UsageError(f"{ranks} ranks exceed the {len(allowed)} cpus this process may use",
                                     f"use --ranks {len(allowed)} or fewer, or add --oversubscribe")
                cpus = placement(ctx, ranks)
                rank_hosts = [None] * ranks
                shared_machine = True
            keys = [(None if shared_machine else h, c) for h, c in zip(rank_hosts, cpus)]
            p["shared_cpus"] = len(set(keys)) < len(keys)
            if p["shared_cpus"] and not ctx.oversubscribe:
                raise UsageError(f"{ranks} ranks need {ranks} cores and {len(set(keys))} are free",
                                 "run fewer ranks, or add --oversubscribe")
            p["places"] = list(zip(rank_hosts, cpus))
        p["ranks"] = ranks
        p["nodes"] = len(nodes)
        p["host_list"] = host_tuples(hosts)

    def _grid(self, p: dict[str, Any]) -> None:
        gp, gq, options = choose_grid(p["grid"], p["ranks"])
        p["p"], p["q"] = gp, gq
        p["grid"] = f"{gp}x{gq}"
        p["grid_options"] = [f"{a}x{b}" for a, b in options]

    @staticmethod
    def _memory(ctx: RunContext, hosts: list[mpimod.Host] | None) -> tuple[float | None, str]:
        """(bytes the matrix may use in all, how that was found). One machine (no hosts, the
        virtual cluster, or hosts that are all this machine) counts its MemAvailable once; real
        nodes are asked (their probes, through the launcher's path) and the smallest MemAvailable
        counts once per node, since HPL spreads the matrix evenly over the ranks."""
        avail = available_memory(ctx.probe)
        names = {h.name for h in hosts or []}
        if not hosts or sim_cluster_of(hosts) is not None or names <= {"localhost", socket.gethostname()}:
            return (float(avail) if avail else None), "this machine's MemAvailable"
        from clusterbench.launch import remote

        got = remote.gather_probes(sorted(names))
        per = {h: available_memory(d.get("probe") or {}) for h, d in got.items()}
        if any(v is None for v in per.values()):
            return None, "MemAvailable unknown on " + ", ".join(h for h, v in per.items() if v is None)
        low = min(per, key=lambda h: per[h])  # type: ignore[arg-type, return-value]
        return float(per[low]) * len(names), f"{len(names)} x the smallest MemAvailable ({low})"

    def _size(self, ctx: RunContext, p: dict[str, Any], hosts: list[mpimod.Host] | None) -> None:
        total, how = self._memory(ctx, hosts)
        p["mem_available_bytes"] = total
        p["mem_available_from"] = how
        nb = p["nb"] if p["nb"] is not None else default_nb(ctx.probe)
        if p["n"] is None:
            if not total:
                raise UsageError("MemAvailable is unknown here, so N cannot be derived from --mem", "give --n")
            n = default_n(total, nb, p["ranks"], p["p"], p["mem"])
            if n < nb:
                raise UsageError(f"--mem {p['mem']} of {total / 2**30:.1f} GiB gives N below NB={nb}", "give --n")
            p["n_from"] = f"{p['mem']:g} x {total / 2**30:.1f} GiB ({how})"
        else:
            n = p["n"]
            p["n_from"] = "--n"
        if nb > n:
            raise UsageError(f"--nb {nb} is larger than N={n}", f"use --nb {min(n, default_nb(ctx.probe))} or less")
        if total:
            need = matrix_bytes(n, nb, p["ranks"], p["p"])
            if need > total:
                fit = largest_n(total, nb, p["ranks"], p["p"])
                raise UsageError(f"N={n} needs {need / 2**30:.1f} GiB ({n}^2 x 8 B for the matrix plus work space), "
                                 f"more than the {total / 2**30:.1f} GiB available (no swapping)",
                                 f"use --n {fit} or less ({fit // nb * nb} is a multiple of NB={nb})")
        p["n"], p["nb"] = n, nb

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        rp = ((ctx.probe.get("rpeak") or {}).get("per_core") or {}).get("dp_gflops_nominal") or 10.0
        cores = params["ranks"] * params["threads_per_rank"]
        if params.get("shared_cpus"):
            cores = min(cores, max(1, ctx.n_cores) * params.get("nodes", 1))
        return 2.0 + hpl_flops(params["n"]) / (EST_EFFICIENCY * rp * 1e9 * cores) + 5e-8 * params["n"] ** 2

    def prepare(self, ctx: RunContext, params: dict[str, Any]) -> None:
        ENGINES[params["engine"]].prepare(ctx, params)
        # hpcc/xhpl load the system BLAS themselves; the core type is checked on the --blas library
        # (Debian: the same OpenBLAS behind libblas.so.3) and exported to every engine's ranks
        blasprobe.settle_for(ctx, params)

    # -- running -----------------------------------------------------------------------------------
    def run(self, ctx: RunContext, params: dict[str, Any]) -> list[Result]:
        engine = ENGINES[params["engine"]]
        blasprobe.settle_for(ctx, params)
        ctx.progress.start("hpl", total=1)
        out = engine.run(ctx, params)
        if not out.residual < THRESHOLD:  # engines raise on a failed check; this is the last guard
            raise KernelFailed(f"hpl: scaled residual {out.residual:.3g} is not below {THRESHOLD:g}: FAILED",
                               "the result is not trustworthy; check the BLAS, the hardware and the MPI")
        cores = params["ranks"] * params["threads_per_rank"]
        rp = ((ctx.probe.get("rpeak") or {}).get("per_core") or {}).get("dp_gflops_nominal")
        hosts = [h[0] for h in params["host_list"]] if params["host_list"] else None
        prm: dict[str, Any] = {
            "n": out.n, "nb": out.nb, "grid": f"{out.p}x{out.q}", "p": out.p, "q": out.q, "pmap": out.pmap,
            "topology": params["topology"], "engine": params["engine"], "ranks": params["ranks"],
            "threads_per_rank": params["threads_per_rank"], "cores": cores, "hosts": hosts,
            "cpus": [c for _, c in params["places"]] if params["topology"] == "pure" else [c for g in params["rank_cpu_groups"] for c in g],
            "blas": blas_name_of(out.params.get("blas_path") or params["blas_path"]),
            "blas_requested": params["blas"], **(params.get("openblas_record") or {}),
            "seed": params["seed"], "n_from": params["n_from"], "time_s": out.time_s, "gflops": out.gflops,
            "residual": out.residual, "threshold": THRESHOLD, "passed": True,
            "breakdown_s": out.breakdown_s, "breakdown_of": out.breakdown_of,
            "breakdown_percent": ({k: round(100 * v / out.time_s, 2) for k, v in out.breakdown_s.items()}
                                  if out.breakdown_s and out.time_s > 0 else None),
            "percent_of_rpeak": round(100 * out.gflops / (rp * cores), 2) if rp and not params["shared_cpus"] else None,
            "shared_cpus": bool(params["shared_cpus"]), "transport": params["transport"],
            "flops_definition": "(2/3 N^3 + 3/2 N^2) / t / 1e9, t = factorisation + solve (HPL)",
            "residual_definition": "||Ax-b||_oo / (eps (||A||_oo ||x||_oo + ||b||_oo) N), eps = 2^-53; PASSED < 16",
            **out.params,
        }
        crowded = shared_cpu_warning([(h, c) for h, c in params["places"] if c is not None],
                                     shares_cores([mpimod.Host(*h) for h in params["host_list"]]
                                                  if params["host_list"] else None))
        ws = [*out.warnings, crowded]
        ph = out.phase or Phase.unknown(f"the {params['engine']} engine reported no timed phase")
        results = [ctx.emit(self, "rmax", [out.gflops], prm, times_s=[out.time_s], extra_warnings=ws, phase=ph),
                   ctx.emit(self, "time_s", [out.time_s], prm, times_s=[out.time_s], phase=ph),
                   ctx.emit(self, "residual", [out.residual], prm, phase=ph)]
        shares = out.params.get("breakdown_mean_s") or out.breakdown_s
        if shares and out.time_s > 0:  # the mean over ranks adds up to the time; the maxima need not
            top = sorted(shares.items(), key=lambda kv: -kv[1])
            ctx.note("hpl: " + ", ".join(f"{k} {100 * v / out.time_s:.0f}%" for k, v in top)
                     + f" of {out.time_s:.2f} s ("
                     + ("mean over ranks" if out.params.get("breakdown_mean_s") else str(out.breakdown_of)) + ")")
        ctx.progress.advance(1)
        return results

