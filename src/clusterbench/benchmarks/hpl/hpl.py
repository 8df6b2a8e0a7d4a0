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
solve, other; the maximum over ranks) that Duffy (2020) needed ``perf`` for. Other engines (hpcc,
xhpl) plug into :data:`ENGINES` from ``engines.py`` when that module exists.

Where it lives: this module is the benchmark (parameters, checks, results); ``sizing.py`` the
flop count, grids, N and NB; ``placement.py`` the ranks' hosts and cpus per topology; ``registry.py``
the engine registry (:data:`ENGINES`, :class:`HplOutcome`); ``builtin_engine.py`` the built-in
engine; ``engine_plugins.py`` the adapter of ``engines.py``'s hpcc and xhpl.

Sizes: N from a fraction ``--mem`` (0.8, the HPL FAQ's 80 %) of the MemAvailable of the nodes
taking part: N = floor(sqrt(mem x bytes / 8) / NB) x NB (Duffy (2020) rounds up and puts the 0.8
outside the square root, i.e. ~64 % of memory; the issue asks for rounding down). An N whose
matrix and work space would not fit (no swapping) is refused with the largest N that would.
Grids: every factorisation of the rank count with P <= Q is offered (default: the squarest).

Topologies (Duffy (2020) §4.4-4.5): ``pure`` runs one rank per core, each pinned, with a serial BLAS
(OPENBLAS/OMP/BLIS/MKL_NUM_THREADS=1); ``hybrid`` one rank per node with a threaded BLAS using
all the node's cores (the rank binds itself to them; its BLAS threads inherit the mask).

Default NB per microarchitecture (the BLAS's blocking; the HPL FAQ's 32..256): 192 with AVX-512
or AVX2+FMA (OpenBLAS's Haswell/SkylakeX dgemm kernels run at full speed from k = 192, and the
panel work, ~N^2 NB, stays small; hpcc's reference point in issue 4 uses 192), 120 on Arm
(Duffy (2020)'s best NB with OpenBLAS on the Pi 4), 128 elsewhere.
"""
from __future__ import annotations

import math
import socket
from typing import Any

from clusterbench.errors import KernelFailed, UsageError
from clusterbench.text import seconds
from clusterbench.launch import mpi as mpimod
from clusterbench.benchmarks import register
from clusterbench.benchmarks.mpi.common import (ALLOW_ROOT, HOSTFILE, HOSTS, LAUNCH_TIMEOUT, TCP_INCLUDE, TRANSPORT,
                                                check_allow_root, parse_host_params, shared_cpu_warning, shares_cores,
                                                sim_cluster_of)
from clusterbench.benchmarks.base import Benchmark, HpccKey, Metric, Param, Result, RunContext, available_memory
from clusterbench.energy.phase import Phase
from clusterbench.probe import blas as blasprobe
from clusterbench.probe.blas import blas_name_of
from clusterbench.benchmarks.hpl.engine_plugins import load_engine_plugins
from clusterbench.benchmarks.hpl.placement import place_hpl_ranks
from clusterbench.benchmarks.hpl.registry import ENGINES
from clusterbench.benchmarks.hpl.sizing import (EST_EFFICIENCY, NB_MAX, PMAPS, THRESHOLD, TOPOLOGIES, choose_grid,
                                                default_n, default_nb, hpl_flops, largest_n, matrix_bytes)


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
        HOSTS,
        HOSTFILE,
        ALLOW_ROOT,
        LAUNCH_TIMEOUT,
        Param("corrupt", bool, False, "test hook: perturb the solution before the check (the run must FAIL)"),
    )
    profiles = {"quick": {"mem": 0.03}}  # N ~ 9600 with 24 GiB: well under a minute

    # -- parameters ------------------------------------------------------------------------------
    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = dict(params)
        load_engine_plugins()
        if p["engine"] not in ENGINES:
            raise UsageError(f"--engine {p['engine']!r} is not available", f"use one of {', '.join(sorted(ENGINES))}")
        check_allow_root(p)
        hosts = parse_host_params(p)
        place_hpl_ranks(ctx, p, hosts)
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

