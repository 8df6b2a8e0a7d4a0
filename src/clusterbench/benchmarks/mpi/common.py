"""What the MPI benchmarks share (pingpong, bw, multipair, ring, placement, hpl, hpcg, hpcc's
ptrans, randomaccess and fft): the base class
:class:`MpiBenchmark` (the MPI parameters declared once, the root rule, the kernel built with the
MPI's own mpicc, one launch with its record handling), hosts, rank placement and the virtual cluster, message
sizes, the launch spec, the placement report and transport proof, and the run note."""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from clusterbench.analysis.warnings import Warning_
from clusterbench.benchmarks.base import Benchmark, Param, RunContext
from clusterbench.errors import EnvironmentProblem, KernelFailed, UsageError
from clusterbench.launch import allocation
from clusterbench.launch import mpi as mpimod
from clusterbench.launch import simcluster
from clusterbench import process

MiB = 1 << 20

#: parameters every mpibw benchmark takes, as pingpong's
TRANSPORT = Param("transport", str, "auto", "MPI transport: auto, shm (vader), tcp, rdma (UCX)", mpimod.TRANSPORTS)
MPI = Param("mpi", str, None, "which MPI: openmpi, mpich, or the path of its launcher (default: mpirun on PATH)")
LAUNCHER = Param("launcher", str, "auto", "how ranks start: auto (srun inside a Slurm allocation, else "
                 f"mpirun/mpiexec), {', '.join(mpimod.launcher_choices()[1:])}", mpimod.launcher_choices())
TCP_INCLUDE = Param("tcp_include", str, None, "network (CIDR) or interface for the tcp transport")
ALLOW_ROOT = Param("allow_root", bool, None, "let Open MPI run as root (--allow-run-as-root); "
                   "also CLUSTERBENCH_ALLOW_RUN_AS_ROOT=1")
LAUNCH_TIMEOUT = Param("launch_timeout", float, 60.0, "seconds MPI may take to start the ranks",
                       min=0, max=3600, min_open=True)
WINDOW = Param("window", int, 64, "messages in flight per iteration (osu_bw's window)", min=1, max=4096,
               why="osu_bw: 64")
#: the two-rank benchmarks' hosts and cpus (pingpong, bw)
PAIR_HOSTS = Param("hosts", str, None, "two hosts, rank 0 on the first and rank 1 on the second, e.g. node1,node2 "
                   "(default: both ranks on this node)")
PAIR_HOSTFILE = Param("hostfile", str, None, "Open MPI hostfile (name slots=N); the first two hosts are used")
PAIR_CPUS = Param("cpus", "intlist", None, "the two cpus for rank 0 and rank 1 (default: the first two cores)", min=0)


def time_budget(default: float, what: str) -> Param:
    return Param("time_budget", float, default, f"seconds of timed iterations per {what}", min=0, max=60,
                 min_open=True)


def max_size(default: int, smallest: int = 1) -> Param:
    return Param("max_size", int, default, f"largest message in bytes (sweep {'0, ' if smallest == 0 else ''}1, 2, "
                 "4, ... max)", min=smallest, max=1 << 30, why="1 GiB at most")


def sizes(smallest: int = 1, note: str = "overrides --max-size") -> Param:
    return Param("sizes", "intlist", None, f"explicit message sizes in bytes ({note})", min=smallest, max=1 << 30,
                 why="1 GiB at most")
VALIDATE = Param("validate", bool, True, "check the received data after each size's timed loop (outside it)")

#: what each message buffer convention models, stored with every figure (params.buffers_definition)
BUFFER_CONVENTIONS = {
    "separate": "separate send and receive buffers on every rank (the convention of OSU, IMB and hpcc): "
                "no message is data its sender has just received",
    "shared": "one buffer per rank for sending and receiving: each message is the data just received (data freshly "
              "written by the application, as when it passes on what it was given; on shared memory the lines "
              "written by the receive must travel back to the other core on the next send; NetPIPE's default, "
              "one buffer without -I)",
}
BUFFERS = Param("buffers", str, "separate", "message buffers: separate (send and receive buffers apart, the "
                "OSU/IMB convention) or shared (each message is the data just received, as an application "
                "passing on fresh data)", tuple(BUFFER_CONVENTIONS))


def buffers_record(buffers: str) -> dict[str, str]:
    """The buffer convention of a run, for the params of every figure."""
    return {"buffers": buffers, "buffers_definition": BUFFER_CONVENTIONS[buffers]}


def sim_cluster_of(hosts: Sequence[mpimod.Host]) -> simcluster.SimCluster | None:
    """The virtual cluster, when every host is one of its nodes (else a real cluster)."""
    sim = simcluster.load()
    if sim is None:
        return None
    names = {n.name for n in sim.nodes}
    return sim if all(h.name in names for h in hosts) else None


def allow_root_default() -> bool:
    """Standing consent: CLUSTERBENCH_ALLOW_RUN_AS_ROOT=1 or allow_run_as_root = true in the config file."""
    from clusterbench import config
    return config.allow_run_as_root()


def starts_with_mpirun(p: dict[str, Any]) -> bool:
    """Whether the ranks start through Open MPI's mpirun (the only launcher that refuses root
    without --allow-run-as-root): not with MPICH's Hydra, not through srun."""
    launcher = p.get("launcher") or "auto"
    if launcher == "srun" or (launcher == "auto" and allocation.inside("slurm")):
        return False
    kind = str(p.get("mpi") or "")
    return not (kind == "mpich" or "mpich" in kind or "hydra" in kind)


def check_allow_root(p: dict[str, Any]) -> None:
    if p.get("allow_root") is None:
        p["allow_root"] = allow_root_default()
    if hasattr(os, "geteuid") and os.geteuid() == 0 and not p["allow_root"] and starts_with_mpirun(p):
        from clusterbench import config
        retype = config.retype_with("--allow-root")
        how = f"retype: {retype}" if retype else "pass allow_root=True (--allow-root on the command line)"
        raise UsageError(f"running as root needs your consent, {how}", config.permanent_root_hint())


def power_sizes(max_size: int, min_size: int = 1) -> list[int]:
    """The powers of two from min_size to max_size (as mpibw.c)."""
    out, p = [], 1
    while p <= max_size:
        if p >= min_size:
            out.append(p)
        p *= 2
    return out


def check_sizes(p: dict[str, Any]) -> list[int]:
    """``sizes`` (explicit) or the powers of two up to ``max_size``: 1 B .. 1 GiB, at most 100."""
    if p.get("sizes"):
        sizes = sorted(dict.fromkeys(int(s) for s in p["sizes"]))
    else:
        sizes = power_sizes(p["max_size"])
    if sizes[-1] > 1 << 30:
        raise UsageError(f"message size {sizes[-1]} B is above 1 GiB", "choose --max-size 1073741824 or less")
    if len(sizes) > 100:
        raise UsageError(f"{len(sizes)} message sizes is too many", "give at most 100")
    return sizes


def check_common(p: dict[str, Any]) -> None:
    """What every MPI benchmark checks besides the declared bounds: the root rule, then (before
    the run is opened, so a doomed run stores nothing) the environment the options need."""
    check_allow_root(p)
    check_tcp_include(p)
    check_rdma(p)
    check_srun(p)


def _local_only(p: dict[str, Any]) -> bool:
    """Whether the ranks run on this machine only (what is here is what they will see)."""
    return not p.get("hosts") and not p.get("hostfile")


def check_tcp_include(p: dict[str, Any]) -> None:
    """``--tcp-include``: each part a CIDR or, on a local run, an interface that exists here."""
    value = p.get("tcp_include")
    if not value:
        return
    mpimod.check_cidr(value)  # a malformed CIDR is a UsageError
    have = sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else []
    for part in value.split(","):
        if "/" not in part and _local_only(p) and part not in have:
            raise EnvironmentProblem(f"--tcp-include {part} is neither a network (CIDR) nor an interface of "
                                     f"this machine (interfaces: {', '.join(have) or 'none'})",
                                     "give one of those interfaces or a network such as 10.0.0.0/8")


def _ucx_transports() -> list[str]:
    """The transports ``ucx_info -d`` lists ([] when ucx_info is missing or fails)."""
    import shutil
    import subprocess

    exe = shutil.which("ucx_info")
    if exe is None:
        return []
    try:
        out = process.run([exe, "-d"], timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    names = [ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.strip().startswith("# Transport:")]
    return sorted(dict.fromkeys(names))


RDMA_TLS = ("rc", "rc_verbs", "rc_mlx5", "ud", "ud_verbs", "ud_mlx5", "dc", "dc_mlx5")


def check_rdma(p: dict[str, Any], ib_root: str = "/sys/class/infiniband") -> None:
    """``--transport rdma`` on a local run needs an RDMA device (else Open MPI's UCX pml fails
    with output that is not the kernel's)."""
    if p.get("transport") != "rdma" or not _local_only(p):
        return
    devices = sorted(os.listdir(ib_root)) if os.path.isdir(ib_root) else []
    tls = _ucx_transports()
    if devices and (not tls or any(t in RDMA_TLS for t in tls)):
        return
    seen = f"; ucx_info -d transports: {', '.join(tls) or 'none'}" if tls else ""
    raise EnvironmentProblem(f"--transport rdma: no RDMA device/transport found ({ib_root} "
                             f"{'lists ' + ', '.join(devices) if devices else 'is empty or missing'}{seen})",
                             "use --transport tcp or --transport shm, or bring the RDMA device up (ibv_devinfo)")


def check_srun(p: dict[str, Any]) -> None:
    """``--launcher srun`` needs srun and a PMI plugin the MPI speaks (pmix/pmi2)."""
    if p.get("launcher") != "srun":
        return
    import shutil

    srun = shutil.which("srun")
    if srun is None:
        raise EnvironmentProblem("--launcher srun: srun is not on PATH (no Slurm here)",
                                 "use --launcher mpirun, or run inside a Slurm allocation")
    plugins = mpimod.srun_mpi_plugins(srun)
    kind = str(p.get("mpi") or "")
    want = ("pmi2",) if "mpich" in kind or "hydra" in kind else ("pmix", "pmi2")
    if not any(w in plugins for w in want):
        raise EnvironmentProblem(f"--launcher srun: this Slurm offers no PMI plugin the MPI can use "
                                 f"({'/'.join(want)}; srun --mpi=list: {', '.join(plugins) or 'none'})",
                                 "use --launcher mpirun, or install Slurm's PMI plugins (slurm-wlm-basic-plugins)")


def detect(params: dict[str, Any]) -> mpimod.MpiInstall:
    """The MPI a benchmark's ``--mpi`` names (default: the one on PATH)."""
    return mpimod.detect_mpi(kind=params.get("mpi"))


def transport_note(bench: str, spec: mpimod.LaunchSpec, mpi: mpimod.MpiInstall, proof: mpimod.TransportProof) -> str:
    """One line for the run's notes: what was asked and what the library says it used."""
    if proof.pml or proof.btl:
        used = f"pml {proof.pml or '?'}" + (f" btl {','.join(proof.btl)}" if proof.btl else "") \
            + (f" UCX {','.join(proof.ucx)}" if proof.ucx else "")  # pml ucx: the lanes, e.g. rc_verbs/rxe0:1
    elif proof.ucx:
        used = "UCX " + ",".join(proof.ucx)
    else:
        used = "nothing it would name"
    return (f"{bench}: asked transport {spec.transport}, {mpi.name} {mpi.version} used {used} "
            f"(recorded as {mpimod.used_transport(proof) or 'unproven'})")


#: what a pingpong kernel figure means (pingpong and placement store it with every figure)
PINGPONG_DEFINITIONS = {
    "latency_definition": "half round trip of a blocking MPI_Send/MPI_Recv ping-pong (buffers as params.buffers: "
                          "separate send and receive buffers by default, as OSU and IMB), the average of the "
                          "best of 5 batch-timed loops (hpcc and NetPIPE also report the best of repeated loops; "
                          "the average of all loops, OSU's and IMB's figure, is params.batch_mean; the "
                          "per-iteration distribution is params.all), us",
    "bandwidth_definition": "size / that half round trip, 1e6 B/s",
}


def pingpong_figure(rec: dict) -> tuple[int, float | None, dict[str, Any], list[float]]:
    """(size, value, params, per-iteration durations in s) of one pingpong-kernel result record."""
    kp = rec.get("params", {})
    size = int(kp.get("size", 0))
    allst = kp.get("all") or {}
    latency = rec["metric"] == "latency"
    value = kp.get("batch") or (allst.get("min") if latency else allst.get("max"))
    prm = {"size_bytes": size, "iterations": kp.get("iterations"), "all": allst,
           "batch_mean": kp.get("batch_mean"), "batch_iterations": kp.get("batch_iterations"),
           "batch_loops": kp.get("batch_loops"), "samples_kept": kp.get("samples_kept")}
    if kp.get("buffers"):  # the kernel's own word on the buffer convention it ran
        prm["buffers"] = kp["buffers"]
    samples = rec["samples"]
    times = [2e-6 * s for s in samples] if latency else [2e-6 * size / s for s in samples if s > 0]
    return size, value, prm, times


def parse_host_params(p: dict[str, Any]) -> list[mpimod.Host] | None:
    if p.get("hosts") and p.get("hostfile"):
        raise UsageError("--hosts and --hostfile both given", "give one of them")
    if p.get("hosts"):
        return mpimod.parse_hosts(p["hosts"])
    if p.get("hostfile"):
        return mpimod.parse_hostfile(p["hostfile"])
    return None


def place_pair(ctx: RunContext, p: dict[str, Any], bench: str) -> None:
    """Two ranks (pingpong, bw): from ``hosts``/``hostfile`` and ``cpus``, set ``pair``
    (intra-node or inter-node), ``places``, ``cpus`` and ``host_list`` in ``p``. One node: two
    different cpus this process may use (the first two of the placement order by default);
    two hosts: rank 0 on the first, rank 1 on the second (different cores too, since the virtual
    cluster's nodes share this machine's)."""
    from clusterbench.benchmarks.base import allowed_cpus, placement

    hosts = parse_host_params(p)
    cpus = list(p["cpus"]) if p.get("cpus") is not None else None
    if cpus is not None and len(cpus) != 2:
        raise UsageError(f"--cpus lists {len(cpus)} cpus; {bench} runs 2 ranks", "give two cpus, e.g. 0,1")
    if hosts is None or len(hosts) == 1:  # both ranks on one node
        if hosts:
            mpimod.check_slots(hosts, 2, ctx.oversubscribe)
        if cpus is None:
            if len(allowed_cpus(ctx)) < 2 and not ctx.oversubscribe:
                raise UsageError(f"{bench} needs two cpus and this process may use one",
                                 "widen the cpu set (taskset, Slurm) or add --oversubscribe")
            cpus = placement(ctx, 2)
        elif hosts is None:
            placement(ctx, 2, cpus=cpus)  # refuses cpus this process may not use
        if cpus[0] == cpus[1] and not ctx.oversubscribe:
            raise UsageError(f"both ranks on cpu {cpus[0]}: a shared core measures the scheduler, not MPI",
                             "give two different cpus, e.g. --cpus 0,1")
        p["pair"] = "intra-node"
        node = hosts[0].name if hosts else None
        p["places"] = [(node, cpus[0]), (node, cpus[1])]
    else:
        if cpus is None:
            cpus = placement(ctx, 2)  # different cores: virtual-cluster nodes share this machine's
        p["pair"] = "inter-node"
        hosts = hosts[:2]
        p["places"] = [(hosts[0].name, cpus[0]), (hosts[1].name, cpus[1])]
    p["cpus"] = cpus
    p["host_list"] = host_tuples(hosts)


RANKS = Param("ranks", int, None, "MPI ranks (default: one per core of this node, or the slots of --hosts)",
              min=1, max=4096)
HOSTS = Param("hosts", str, None, "hosts and slots, e.g. node1:2,node2:2 (default: this node)")
HOSTFILE = Param("hostfile", str, None, "Open MPI hostfile (name slots=N)")
RANK_CPUS = Param("cpus", "intlist", None, "cpu of each rank on this node (default: one per core)", min=0)
#: the parameters of a benchmark that runs any number of ranks (hpcg, ptrans, randomaccess, fft)
RANK_PARAMS = (RANKS, HOSTS, HOSTFILE, RANK_CPUS)


def place_ranks(ctx: RunContext, p: dict[str, Any], default_ranks: int | None = None) -> None:
    """Any number of ranks (``ranks``, ``hosts``/``hostfile``, ``cpus``): set ``ranks``, ``cpus``,
    ``places`` ((host, cpu) per rank), ``rank_hosts``, ``host_list`` and ``ranks_per_node`` in
    ``p``. Without hosts: one rank per core this process may use (``default_ranks`` if given),
    refused beyond them unless oversubscribed; with hosts: the slots' total, ranks filling each
    host in turn, distinct cores on one machine or the virtual cluster."""
    from clusterbench.benchmarks.base import allowed_cpus

    hosts = parse_host_params(p)
    cpus = list(p["cpus"]) if p.get("cpus") is not None else None
    allowed = allowed_cpus(ctx)
    n = p.get("ranks") or (len(cpus) if cpus else sum(h.slots for h in hosts) if hosts
                           else default_ranks or min(ctx.n_cores, len(allowed)))
    if cpus is not None and len(cpus) != n:
        raise UsageError(f"--cpus lists {len(cpus)} cpus for {n} ranks", "give one cpu per rank")
    cpus, rank_hosts = spread_ranks(ctx, hosts, n, cpus)
    p.update(ranks=n, cpus=list(cpus), places=list(zip(rank_hosts, cpus)), rank_hosts=rank_hosts,
             host_list=host_tuples(hosts), ranks_per_node=max(rank_hosts.count(h) for h in set(rank_hosts)))


def spread_ranks(ctx: RunContext, hosts: Sequence[mpimod.Host] | None, n: int,
                 cpus: list[int] | None) -> tuple[list[int], list[str | None]]:
    """The cpu and the host (None: this node) of each of ``n`` ranks. With hosts: ranks fill each
    host in turn (slots checked); cpus as given, else distinct cores on one machine or the
    virtual cluster, else each host numbers its ranks' cores from its first in the placement
    order. Without: ``cpus`` (placement order by default), refused beyond the cpus this process
    may use unless oversubscribed."""
    from clusterbench.benchmarks.base import allowed_cpus, placement

    if hosts:
        from clusterbench.benchmarks.mpi.ring import assign_ranks

        hosts = list(hosts)
        mpimod.check_slots(hosts, n, ctx.oversubscribe)
        rank_hosts: list[str | None] = list(assign_ranks(hosts, n))
        if cpus is None:
            if sim_cluster_of(hosts) is not None or len(hosts) == 1:
                cpus = placement(ctx, n)
            else:  # real hosts: per host from its first core in the placement order
                order = placement(ctx, max(rank_hosts.count(h.name) for h in hosts))
                seen: dict[str | None, int] = {}
                cpus = []
                for h in rank_hosts:
                    cpus.append(order[seen.get(h, 0)])
                    seen[h] = seen.get(h, 0) + 1
        return list(cpus), rank_hosts
    allowed = allowed_cpus(ctx)
    if n > len(allowed) and not ctx.oversubscribe:
        raise UsageError(f"--ranks {n} exceeds the {len(allowed)} cpus this process may use",
                         f"use --ranks {len(allowed)} or fewer, or add --oversubscribe")
    cpus = placement(ctx, n, cpus=cpus) if cpus else placement(ctx, n)
    return list(cpus), [None] * n


def host_tuples(hosts: Sequence[mpimod.Host] | None) -> list[tuple] | None:
    return [(h.name, h.slots, h.max_slots) for h in hosts] if hosts else None


def shares_cores(hosts: Sequence[mpimod.Host] | None) -> bool:
    """True when every host is this machine (no hosts) or a virtual-cluster node (the nodes
    share this machine's cores, so ranks on different nodes still need different cores)."""
    return not hosts or sim_cluster_of(list(hosts)) is not None


def launch_spec(ctx: RunContext, params: dict[str, Any], places: Sequence[tuple[str | None, int]],
                host_list: Sequence[tuple] | None) -> mpimod.LaunchSpec:
    """The launch of ``places`` (one (host, cpu) per rank) on ``host_list`` ((name, slots,
    max_slots) tuples, or None for this node); on the virtual cluster, from its head namespace
    through its launch agent."""
    hosts = [mpimod.Host(*h) for h in host_list] if host_list else None
    spec = mpimod.LaunchSpec(nranks=len(places), hosts=hosts,
                             places=[mpimod.RankPlace(h, c) for h, c in places],
                             transport=params["transport"], tcp_include=params.get("tcp_include"),
                             allow_root=bool(params["allow_root"]), oversubscribe=ctx.oversubscribe,
                             launcher=params.get("launcher") or "auto")
    if hosts:
        sim = sim_cluster_of(hosts)
        if sim is not None:  # launch from the head namespace through the sim-cluster's agent
            spec.prefix = simcluster.exec_prefix("head", sim)
            spec.sim = sim  # its launch agent, in the options of the MPI used
            spec.tcp_include = spec.tcp_include or sim.subnet
    return spec


class KernelSession:
    """Handles the mpibw kernel's records for one launch: checks the placement report before
    any figure (:func:`mpimod.verify_placement`), records placement, MPI library and the
    transport proof into ``base`` (the params every figure carries) and notes the transport
    once; result records go to ``on_result``.

    ``hold`` (the default): result records are held while the kernel runs and handed to
    ``on_result`` once the launch has ended. Making a figure (statistics, limits, the store) takes
    this process milliseconds of cpu; done as each record arrived it fell inside the kernel's next
    timed loop, and where the ranks have every cpu it was a rank's time (a tail in the average of
    up to 6x the median iteration; speed/logs/coll-parent-tail.txt, docs/collectives.md). A launch
    that fails or is interrupted still hands over what arrived before it ended, so what finished
    is kept. ``on_arrival`` sees each result record as it arrives (progress only: it must be cheap).
    ``hold=False`` for a caller whose ``on_result`` only collects records and makes its figures
    after the launch itself."""

    def __init__(self, ctx: RunContext, bench: str, spec: mpimod.LaunchSpec, mpi: mpimod.MpiInstall,
                 base: dict[str, Any], on_result: Callable[[dict], None],
                 different_nodes: Sequence[tuple[int, int]] = (), placement_key: str = "placement",
                 allow_shared_cpu: bool = False, note: bool = True, hold: bool = True,
                 on_arrival: Callable[[dict], None] | None = None) -> None:
        self.allow_shared_cpu = allow_shared_cpu
        self.hold, self.on_arrival = hold, on_arrival
        self.held: list[dict] = []
        self.placement_key = placement_key
        self.ctx, self.bench, self.spec, self.mpi = ctx, bench, spec, mpi
        self.base, self.on_result = base, on_result
        self.different_nodes = list(different_nodes)
        self.proof = mpimod.TransportProof()
        self.info: dict | None = None
        self.noted = False
        self.write_note = note  # False: the caller writes its own summary note

    def __call__(self, rec: dict) -> None:
        kind = rec.get("type")
        if kind == "info":
            ranks = rec.get("ranks") or []
            if len(ranks) != self.spec.nranks:
                raise KernelFailed(f"{self.bench}: {len(ranks)} ranks reported, {self.spec.nranks} launched",
                                   "report this as a bug")
            mpimod.verify_placement(ranks, self.spec.places, self.different_nodes,
                                    allow_shared_cpu=self.ctx.oversubscribe or self.allow_shared_cpu)
            if rec.get("timer_resolution_s"):
                self.ctx.timer_resolution_s = float(rec["timer_resolution_s"])
            self.info = rec
            self.base[self.placement_key] = [{k: r.get(k) for k in ("rank", "host", "node", "cpus", "cpu")}
                                      for r in ranks]
            self.base.setdefault("mpi", {})["library"] = rec.get("mpi_library")
            # what started the ranks (mpirun, Hydra's mpiexec, srun): --launcher auto decides by where it runs
            self.base["mpi"]["launcher"] = mpimod.launcher_for(self.mpi, self.spec).name
            return
        if kind != "result":
            return
        if self.info is None:
            raise KernelFailed(f"{self.bench} printed results before reporting its placement", "report this as a bug")
        if not self.noted:
            proof = self.proof
            self.base["transport_used"] = mpimod.used_transport(proof) or "unproven"
            self.base["transport_proof"] = {"pml": proof.pml, "btl": list(proof.btl), "ucx": list(proof.ucx),
                                            "evidence": proof.evidence(3)}
            if self.write_note:
                self.ctx.note(transport_note(self.bench, self.spec, self.mpi, proof))
            self.noted = True
        if not self.hold:
            self.on_result(rec)
            return
        self.held.append(rec)
        if self.on_arrival:
            self.on_arrival(rec)

    def release(self) -> None:
        """Hand the held result records to ``on_result``, in the order they arrived."""
        held, self.held = self.held, []
        for rec in held:
            self.on_result(rec)

    def run(self, args: Sequence[str], launch_timeout: float, proof_ranks: Sequence[int] = (0, 1)) -> mpimod.MpiRun:
        try:
            run = mpimod.run_mpi(self.mpi, self.spec, args, timeout=self.ctx.timeout, launch_timeout=launch_timeout,
                                 on_record=self, name=self.bench, proof_ranks=proof_ranks, proof_out=self.proof)
        except BaseException:
            try:  # what the kernel finished before it failed or was interrupted is kept, as it was measured
                self.release()
            except Exception:  # noqa: BLE001 -- the launch's own failure is the one to report
                pass
            raise
        self.release()
        for why in run.restarts:
            self.ctx.note(why)
        if run.finalize_hung:
            self.ctx.note(f"{self.bench}: {self.mpi.name}'s teardown (MPI_Finalize) did not end within "
                          f"{mpimod.FINALIZE_GRACE:g} s after the kernel finished; its processes were killed "
                          "(the results were complete and validated)")
        return run


def shared_cpu_warning(places: Sequence[tuple[str | None, int]], shares: bool) -> Warning_ | None:
    """A warning when ranks were placed on one cpu (only allowed with --oversubscribe): ranks that
    take turns on a core measure the scheduler as much as MPI. ``shares``: all places are on
    this machine's cores (one node, or a virtual cluster)."""
    seen: dict[tuple, int] = {}
    for host, cpu in places:
        key = (None if shares else host, cpu)
        seen[key] = seen.get(key, 0) + 1
    crowded = {k: n for k, n in seen.items() if n > 1}
    if not crowded:
        return None
    cpus = ", ".join(f"cpu {c}" + (f" of {h}" if h else "") + f" x{n}" for (h, c), n in sorted(
        crowded.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])))
    return Warning_("shared-cpu", f"ranks share cpus ({cpus}, oversubscribed): they take turns on a core, so the "
                    "figures include the scheduler's time slices", "run fewer ranks (pairs) or use more cores or hosts")


def subsampled_times(samples: Sequence[float], bytes_per_iteration: float, latency: bool) -> list[float]:
    """Per-iteration durations (s) behind the per-iteration samples, for the coarse-timer check."""
    if latency:
        return [2e-6 * s for s in samples if s > 0]
    return [bytes_per_iteration / (s * 1e6) for s in samples if s > 0]


class MpiBenchmark(Benchmark):
    """An MPI kernel benchmark. Subclasses declare their own ``params``; the MPI parameters every
    MPI benchmark takes (:attr:`shared_params`: transport, tcp_include, mpi, launcher, allow_root,
    launch_timeout) are added once here, after them (a subclass's own parameter of the same name
    wins). :meth:`check` applies the root rule (call it first from a subclass's check);
    :meth:`prepare` builds the kernel with the chosen MPI's ``mpicc``; :meth:`launch` runs it once
    with the standard record handling (placement report verified before any figure, MPI library
    and transport proof recorded with every figure, the transport noted)."""

    shared_params: ClassVar[tuple[Param, ...]] = (TRANSPORT, TCP_INCLUDE, MPI, LAUNCHER, ALLOW_ROOT, LAUNCH_TIMEOUT)
    #: libraries the kernel links besides the MPI (e.g. fftw3_mpi, fftw3)
    kernel_libs: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = tuple(cls.__dict__.get("params", ()))
        names = {p.name for p in own}
        cls.params = own + tuple(p for p in cls.shared_params if p.name not in names)

    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = dict(params)
        check_common(p)
        return p

    def prepare(self, ctx: RunContext, params: dict[str, Any]) -> None:
        if self.kernel:
            ctx.build(self.kernel, libs=self.kernel_libs, openmp=False, cc=detect(params).mpicc)

    def launch(self, ctx: RunContext, params: dict[str, Any], args: Sequence[str], base: dict[str, Any],
               on_result: Callable[[dict], None], places: Sequence[tuple[str | None, int]] | None = None,
               host_list: Sequence[tuple] | None = None, different_nodes: Sequence[tuple[int, int]] = (),
               proof_ranks: Sequence[int] = (0, 1), mpi: mpimod.MpiInstall | None = None,
               **session: Any) -> mpimod.MpiRun:
        """Build (cached) and run the kernel once with ``args`` on ``places`` (default: the
        resolved ``params["places"]`` on ``params["host_list"]``); ``base`` gets the placement,
        MPI library and transport proof; each result record goes to ``on_result``. ``mpi``: the
        MPI already detected for ``params`` (default: detect it)."""
        mpi = mpi or detect(params)
        b = ctx.build(self.kernel or self.name, libs=self.kernel_libs, openmp=False, cc=mpi.mpicc)
        spec = launch_spec(ctx, params, params["places"] if places is None else places,
                           params.get("host_list") if host_list is None else host_list)
        name = session.pop("name", self.name)
        ks = KernelSession(ctx, name, spec, mpi, base, on_result, different_nodes, **session)
        return ks.run([str(b.path), *args], params["launch_timeout"], proof_ranks=proof_ranks)


#: the options of a suite of MPI benchmarks (``mpi``, ``hpcc``), each handed to every part that declares a
#: parameter of the same name (``SUITE_SHARED``)
SUITE_PARAMS = (
    Param("hosts", str, None, "hosts, e.g. node1:4,node2:4 or cbsim-n1,cbsim-n2 (default: this node)"),
    HOSTFILE,
    Param("transport", str, None, "MPI transport for every part: auto, shm, tcp, rdma", ("auto", "shm", "tcp", "rdma")),
    Param("allow_root", bool, None, "let Open MPI run as root (--allow-run-as-root)"),
    Param("mpi", str, None, "which MPI: openmpi, mpich, or the path of its launcher (default: mpirun on PATH)"),
    Param("launcher", str, None, f"how ranks start: {', '.join(mpimod.launcher_choices())}", mpimod.launcher_choices()),
)
SUITE_SHARED = tuple(p.name for p in SUITE_PARAMS)
