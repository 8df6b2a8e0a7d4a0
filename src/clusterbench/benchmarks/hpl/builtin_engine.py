"""The ``builtin`` HPL engine: clusterbench's own HPL (kernels/hpl/hpl.c) launched through
launch/mpi.py, its ranks' placement checked from their own report, its result and time breakdown
read from the kernel's records, the BLAS it mapped checked (:func:`blas_warnings`)."""
from __future__ import annotations

import os
from typing import Any

from clusterbench.analysis.warnings import Warning_
from clusterbench.errors import KernelFailed
from clusterbench.launch import mpi as mpimod
from clusterbench.benchmarks.mpi.common import KernelSession, launch_spec
from clusterbench.benchmarks.base import RunContext
from clusterbench.energy.phase import Phase
from clusterbench.benchmarks.node.dgemm import coretype_warning, generic_kernels_warning, thread_env
from clusterbench.benchmarks.hpl.sizing import THRESHOLD
from clusterbench.benchmarks.hpl.placement import cpuset
from clusterbench.benchmarks.hpl.registry import HplOutcome, register_engine


def blas_warnings(ctx: RunContext, config: str, loaded: list[str], path: str, threads_reported: Any,
                  threads: int) -> list[Warning_ | None]:
    """As dgemm's: OpenBLAS on generic kernels, another library mapped, a thread count mismatch."""
    out: list[Warning_ | None] = []
    out.append(generic_kernels_warning(ctx, config, "the dgemm that HPL spends its time in runs"))
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

        session = KernelSession(ctx, "hpl", spec, mpi, base, on_result, hold=False)  # on_result collects only

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

        run = mpimod.run_mpi(mpi, spec, [str(b.path), *self.kernel_args(params)], timeout=ctx.timeout,
                             launch_timeout=params["launch_timeout"], on_record=on, name="hpl",
                             proof_ranks=(0, 1) if spec.nranks > 1 else (0,), proof_out=session.proof)
        for why in run.restarts:
            ctx.note(why)
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
