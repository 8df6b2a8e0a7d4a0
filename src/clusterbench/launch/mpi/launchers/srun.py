"""Slurm's ``srun``: ranks started by slurmd through PMIx or PMI-2 (no mpirun), the transport as
environment, placement as ``--cpu-bind=map_cpu`` (or a per-rank wrapper when nodes differ)."""
from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from clusterbench.errors import EnvironmentProblem, UsageError
from clusterbench.launch.mpi.detect import MpiInstall, run_text
from clusterbench.launch.mpi.launchers import OutputTag, register_launcher
from clusterbench.launch.mpi.launchers.mpich import _mpich_bind_wrapper, mpich_transport_env
from clusterbench.launch.mpi.spec import LaunchSpec
from clusterbench.launch.mpi.transport import OMPI_TRANSPORT_MCA, PROOF_ARGS, UCX_PROOF_ENV, rdma_env

def srun_mpi_plugins(srun: str) -> tuple[str, ...]:
    """``srun --mpi=list``: the PMI plugins this Slurm has (``pmix``, ``pmi2``, ...); asked at every
    launch (it reads the Slurm configuration in force, ``$SLURM_CONF``)."""
    text = run_text([srun, "--mpi=list"])
    return tuple(ln.strip() for ln in text.splitlines()[1:] if ln.startswith(("\t", " ")) and ln.strip())


def srun_pmi(mpi: MpiInstall, srun: str) -> str:
    """The PMI both sides speak: Open MPI 4.1 uses PMIx (Slurm's pmix plugin), PMI-2 otherwise;
    MPICH's Hydra-built library speaks PMI-1, which Slurm's pmi2 plugin also serves."""
    plugins = srun_mpi_plugins(srun)
    want = ("pmix", "pmi2") if mpi.name == "openmpi" else ("pmi2",)
    for name in want:
        if name in plugins:
            return name
    raise EnvironmentProblem(f"this Slurm offers no PMI plugin {mpi.name} can use ({'/'.join(want)}; "
                             f"srun --mpi=list: {', '.join(plugins) or 'none'})",
                             "build Slurm with PMIx or PMI-2 (Debian: slurm-wlm-basic-plugins)")


def _mca_env(args: Sequence[str]) -> dict[str, str]:
    """``--mca NAME VALUE`` pairs as Open MPI's ``OMPI_MCA_NAME`` variables (for direct launch)."""
    return {f"OMPI_MCA_{args[i + 1]}": args[i + 2] for i in range(0, len(args) - 2, 3) if args[i] == "--mca"}


def _srun_cpu_map(spec: LaunchSpec) -> list[int] | None:
    """One ``map_cpu`` list for every node (Slurm applies it to each node's local task ids), or
    None when the ranks of two nodes want different cpus at the same local id."""
    assert spec.places
    per_node: dict[str | None, int] = {}
    cpus: list[int] = []
    for p in spec.places:
        local = per_node.get(p.host, 0)
        per_node[p.host] = local + 1
        if local == len(cpus):
            cpus.append(p.cpu)  # type: ignore[arg-type]
        elif cpus[local] != p.cpu:
            return None
    return cpus


def check_job_cpus(spec: LaunchSpec, env: Mapping[str, str] | None = None) -> None:
    """Ranks pinned to more distinct cpus of a node than the Slurm job holds there: named before the
    launch (slurmd refuses a binding outside the step's cpus, and srun says only "Job step
    aborted"). ``salloc -N 2`` holds one cpu per node; pinned pairs on one node need more."""
    from clusterbench.launch import allocation
    from clusterbench.launch.allocation import slurm

    env = os.environ if env is None else env
    if not spec.places or not allocation.inside("slurm", env):
        return
    try:
        job = allocation.current(env)
    except EnvironmentProblem:
        return
    held = slurm.job_cpus(env, list(job.hosts)) if job is not None and job.scheduler == "slurm" else None
    if not held:
        return
    wanted: dict[str, set[int]] = {}
    for p in spec.places:
        if p.host is not None and p.cpu is not None:
            wanted.setdefault(p.host, set()).add(p.cpu)
    for host, cpus in wanted.items():
        if host in held and len(cpus) > held[host]:
            raise EnvironmentProblem(
                f"the ranks are pinned to {len(cpus)} cpus of {host} ({','.join(map(str, sorted(cpus)))}) but "
                f"Slurm job {job.job_id} holds {held[host]} cpu(s) there",
                f"allocate whole nodes (salloc --exclusive) or more cpus per node (salloc -c {len(cpus)})")


#: ``--label``: ``RANK: `` at the start of every line
TAG = OutputTag(rb"^\s*(\d+): ", anywhere=False)


def _tagged_command(srun: str, spec: LaunchSpec, program: Sequence[str]) -> list[str]:
    """One process per node of ``spec.hosts``, unbound (what the step gives it), labelled, without
    PMI (not an MPI program), and a task that ends leaves the others running."""
    assert spec.hosts
    n = len(spec.hosts)
    return [srun, f"--nodes={n}", f"--ntasks={n}", "--ntasks-per-node=1",
            "--nodelist=" + ",".join(h.name for h in spec.hosts), "--cpu-bind=none", "--label",
            "--kill-on-bad-exit=0", "--mpi=none", f"--job-name={spec.job_name}", *spec.extra_args, *program]


@register_launcher("srun", serves="srun", tag=TAG, exports_env=True)
def _srun_command(mpi: MpiInstall | None, spec: LaunchSpec, program: Sequence[str], wd: Path,
                  env: dict[str, str]) -> list[str]:
    """``srun --mpi=PMI -n N --cpu-bind=map_cpu:... [--distribution=arbitrary] program``: ranks
    started by slurmd (no mpirun), the transport as environment (srun exports it to every task).
    One tagged process per node: ``srun --ntasks-per-node=1 --cpu-bind=none --label
    --kill-on-bad-exit=0 --mpi=none``."""
    srun = shutil.which("srun")
    if not srun:
        raise EnvironmentProblem("--launcher srun: srun is not on PATH", "install slurm-client or load Slurm's module")
    if spec.tagged:
        return _tagged_command(srun, spec, program)
    assert mpi is not None  # build_command: only a tagged spec comes without its MPI
    if mpi.name == "openmpi":
        mca = list(OMPI_TRANSPORT_MCA[spec.transport])
        if spec.transport == "rdma":
            if not mpi.has_ucx:
                raise EnvironmentProblem("--transport rdma needs Open MPI's UCX pml, which this Open MPI lacks",
                                         "install an Open MPI built with UCX, or use --transport tcp")
            env.setdefault("UCX_TLS", spec.ucx_tls)
            for k, v in rdma_env().items():  # soft-RoCE: UD's wireup needs UCX's GRH check off
                env.setdefault(k, v)
            if spec.prove_transport:  # as mpirun: UCX's endpoint lines name the lanes (the device proven)
                for k, v in UCX_PROOF_ENV.items():
                    env.setdefault(k, v)
        if spec.transport == "tcp" and spec.tcp_include:
            mca += ["--mca", "btl_tcp_if_include", spec.tcp_include]
        if spec.prove_transport:
            mca += PROOF_ARGS
        tenv = _mca_env(mca)
        if spec.yield_when_idle:
            tenv["OMPI_MCA_mpi_yield_when_idle"] = "1"
    else:
        tenv = mpich_transport_env(mpi, spec)
    env.update({k: v for k, v in tenv.items() if k not in spec.env})
    cmd = [srun, f"--mpi={srun_pmi(mpi, srun)}", "-n", str(spec.nranks), "--kill-on-bad-exit=1",
           f"--job-name={spec.job_name}"]
    if spec.places and all(p.host for p in spec.places):
        hf = wd / "slurm-hostfile"  # one line per rank, in rank order
        hf.write_text("".join(f"{p.host}\n" for p in spec.places))
        env["SLURM_HOSTFILE"] = str(hf)
        cmd += ["--distribution=arbitrary"]
    elif spec.hosts:
        cmd += ["--nodelist=" + ",".join(h.name for h in spec.hosts)]
        if spec.per_node:
            cmd += [f"--ntasks-per-node={spec.per_node}"]
    else:
        cmd += ["--nodes=1"]  # "this node": the ranks share one node of the allocation
    if spec.oversubscribe:
        cmd.append("--overcommit")
    wrapper: list[str] = []
    if spec.places and all(p.cpu is not None for p in spec.places):
        check_job_cpus(spec)
        cpu_map = _srun_cpu_map(spec)
        if cpu_map is not None:
            cmd.append("--cpu-bind=map_cpu:" + ",".join(map(str, cpu_map)))
        else:
            cmd.append("--cpu-bind=none")
            wrapper = _mpich_bind_wrapper(spec, wd, rank_var="SLURM_PROCID")
    elif spec.places and any(p.cpu is not None for p in spec.places):
        raise UsageError("give a cpu for every rank or for none", "list one cpu per rank")
    elif spec.per_node:
        cmd.append("--cpu-bind=none")
    else:
        cmd.append("--cpu-bind=cores")
    cmd += list(spec.extra_args)
    return cmd + wrapper + list(program)
