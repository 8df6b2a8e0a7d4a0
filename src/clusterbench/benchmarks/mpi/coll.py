"""MPI collectives: allreduce, bcast, alltoall, allgather, reduce, reduce-scatter, gather, scatter
and barrier, measured the OSU Micro-Benchmarks' way (osu_<op>; osu_i<op> with ``--nonblocking``),
every result checked against its definition (kernels/mpi/coll.c).

One benchmark per op (``run allreduce`` ...) and the set in one launch (``run coll [--quick]``,
also a member of ``run mpi``); every figure is stored under its op's name.

Figures (per op and message size):

* ``latency`` (us): OSU's convention: each rank's average over the timed iterations, then the
  average over ranks; ``params.min_us``/``max_us`` the min and max over ranks of those averages
  (OSU's ``-f``; IMB's t_min/t_max, with t_avg the value); ``p50_us``/``p99_us`` over the
  iterations of the slowest rank's time in each iteration (``samples``: those times, at most 1000).
  Each iteration is the collective alone between two barriers (outside the timer), warm-up
  iterations excluded, the same buffers every iteration, no cache flush.
* ``algbw`` and ``busbw`` (MB/s = 1e6 B/s, ops with data): nccl-tests' definitions. algbw =
  bytes / latency with nccl-tests' byte count (``params.algbw_bytes``): the message size for
  allreduce, reduce, reduce-scatter and bcast, P x the message size for allgather, alltoall,
  gather and scatter (nccl-tests counts their whole receive or send buffer); busbw = algbw x
  2(P-1)/P for allreduce, (P-1)/P for allgather, reduce-scatter and alltoall, 1 for bcast, reduce,
  gather and scatter.

Message sizes (``size_bytes``) are OSU's, as osu_<op> prints them: the whole buffer of every rank
for allreduce, reduce and bcast; the whole send vector of every rank for reduce-scatter (its
size/8 doubles split as osu_reduce_scatter splits them: size/8/P each, the first (size/8) % P ranks
one element more, so no size % P rule is needed); what every rank contributes for allgather and
gather; the block sent to each rank for alltoall; the block each rank receives for scatter
(buffers of P x size there: no split, so any size works). Reductions sum MPI_DOUBLEs: their sizes
must be multiples of 8 B (default 8 B .. 1 MiB; the others 4 B .. 1 MiB, powers of two). No op
here needs a power of two. Barrier has no size (``size_bytes`` 0, latency only). Roots: rank 0.

Validation: inputs are a deterministic function of (rank, index, iteration); iteration 0 and
every ``--validate-every``-th are checked on every rank (fill and check outside the timer); a
wrong element ends the run with an error naming op, size, rank and element.

``--nonblocking``: OSU's osu_i<op>: the pure collective (start + wait) gives each rank its pure
time; then start, a compute loop of that length, wait: ``latency`` is that overall time;
``params.overlap_pct`` = max(0, 100 - 100 x (overall - compute) / pure) with averages over
iterations then ranks, ``pure_comm_us`` and ``compute_us`` beside it (OSU 7.4's definition, with
no MPI_Test probes in the compute).

``params.p2p``: a ping-pong sweep between rank 0 and rank P-1 (0 B, then powers of two up to the
largest size) by the same kernel run on the same placement, after the collectives (run before, it and
the links changed what the collectives measured): the network model's input.
``params.links`` (runs across 2 or more nodes): a ping-pong between every pair of nodes (one rank
each, one pair at a time) at 8 B and 256 KiB, with the nodes ``sweep network``'s judge calls slow
(``slow_nodes``) and why (``evidence``): the per-node evidence the model check names in its
findings (analysis/colllinks.py); a run where a node is slow notes it with the figures far off the
model.
``params.algorithm``: null when the MPI chose (its default), else the algorithm forced through the
environment (Open MPI's ``OMPI_MCA_coll_tuned_<op>_algorithm`` with dynamic rules on, MPICH's
``MPIR_CVAR_<OP>_INTRA_ALGORITHM``), as ``tune coll`` does.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from clusterbench.analysis import colllinks, collmodel
from clusterbench.benchmarks import get_benchmark, register
from clusterbench.benchmarks.base import Metric, Param, Result, RunContext, available_memory
from clusterbench.benchmarks.mpi.common import (HOSTFILE, HOSTS, RANK_CPUS, KernelSession, MpiBenchmark, detect,
                                                launch_spec, parse_host_params, place_ranks, shares_cores)
from clusterbench.errors import UsageError
from clusterbench.launch import mpi as mpimod

#: the collectives, as the command line names them (one registered benchmark each)
OPS = ("allreduce", "bcast", "alltoall", "allgather", "reduce", "reduce-scatter", "gather", "scatter", "barrier")
#: ops that sum MPI_DOUBLEs (sizes in multiples of 8 B)
REDUCTIONS = ("allreduce", "reduce", "reduce-scatter")
#: ops whose nccl-tests byte count is P x the OSU size (the whole receive or send buffer)
PER_RANK_BLOCK = ("allgather", "alltoall", "gather", "scatter")
MiB = 1 << 20
MAX_SIZE = 1 << 30
MAX_SIZES = 64
#: environment variable only the tests set: the kernel's --corrupt=OP:ITER[:RANK] hook
CORRUPT_ENV = "CLUSTERBENCH_TEST_COLL_CORRUPT"

SIZE_CONVENTIONS = {
    "allreduce": "the whole buffer of every rank (doubles summed)",
    "reduce": "the whole buffer of every rank (doubles summed to rank 0)",
    "reduce-scatter": "the whole send vector of every rank (doubles summed; split as osu_reduce_scatter: "
                      "size/8/P elements each, the first (size/8) % P ranks one more)",
    "bcast": "the buffer broadcast from rank 0",
    "allgather": "what every rank contributes (receive buffer P x size)",
    "gather": "what every rank contributes to rank 0 (rank 0 receives P x size)",
    "alltoall": "the block every rank sends to each rank (buffers P x size)",
    "scatter": "the block every rank receives from rank 0 (rank 0 sends P x size)",
    "barrier": "no data",
}
LATENCY_DEFINITION = ("OSU: each rank's average over the timed iterations (the collective alone between "
                      "barriers, warm-up excluded, buffers reused, no cache flush), then the average over "
                      "ranks; min_us/max_us over ranks (OSU -f, IMB t_min/t_max); p50_us/p99_us over iterations "
                      "of the max over ranks; us")
BANDWIDTH_DEFINITION = ("nccl-tests: algbw = algbw_bytes / latency (algbw_bytes: the size, or P x the size for "
                        "allgather, alltoall, gather and scatter), busbw = algbw x busbw_factor; 1e6 B/s")


def busbw_factor(op: str, p: int) -> float:
    """nccl-tests' bus-bandwidth factor for ``op`` on ``p`` ranks (0 for barrier: no data)."""
    if op == "allreduce":
        return 2.0 * (p - 1) / p
    if op in ("allgather", "reduce-scatter", "alltoall"):
        return (p - 1) / p
    return 0.0 if op == "barrier" else 1.0


def algbw_bytes(op: str, size: int, p: int) -> int:
    """The bytes nccl-tests divides by the time: P x size where OSU's size is a per-rank block."""
    return size * p if op in PER_RANK_BLOCK else size


def default_sizes(op: str, max_size: int = MiB) -> list[int]:
    """OSU-like powers of two: 4 B (8 B for reductions: one double) up to ``max_size``; [0] for barrier."""
    if op == "barrier":
        return [0]
    out, s = [], 8 if op in REDUCTIONS else 4
    while s <= max_size:
        out.append(s)
        s *= 2
    return out


def check_op_sizes(op: str, sizes: list[int] | None) -> list[int]:
    """The sizes ``op`` runs: the default list, or the given ones sorted, each within 1 B .. 1 GiB,
    multiples of 8 B for reductions; barrier ignores sizes."""
    if op not in OPS:
        raise UsageError(f"unknown collective '{op}'", f"choose one of: {', '.join(OPS)}")
    if op == "barrier":
        return [0]
    if not sizes:
        return default_sizes(op)
    out = sorted(dict.fromkeys(int(s) for s in sizes))
    if len(out) > MAX_SIZES:
        raise UsageError(f"{len(out)} message sizes is too many", f"give at most {MAX_SIZES}")
    bad = [s for s in out if s < 1 or s > MAX_SIZE]
    if bad:
        raise UsageError(f"message size {bad[0]} B is out of range", "give sizes from 1 B to 1073741824 B (1 GiB)")
    if op in REDUCTIONS:
        odd = [s for s in out if s % 8]
        if odd:
            raise UsageError(f"{op} sums doubles: {odd[0]} B is not a multiple of 8 B",
                             "give multiples of 8, e.g. 8,64,1024")
    return out


def buffer_bytes(op: str, size: int, p: int) -> int:
    """Bytes one rank allocates for ``op`` at ``size`` (the kernel's two buffers, P x the largest size)."""
    return 2 * size * p


#: the environment setting that forces an op's algorithm, per MPI (what ``tune coll`` sets)
def algorithm_env(op: str, mpi_name: str) -> str:
    if mpi_name == "openmpi":
        return f"OMPI_MCA_coll_tuned_{op.replace('-', '_')}_algorithm"
    return f"MPIR_CVAR_{op.replace('-', '_').upper()}_INTRA_ALGORITHM"


def algorithm_from_env(op: str, mpi_name: str, env: Mapping[str, str] | None = None) -> dict | None:
    """The algorithm forced for ``op`` through the environment, or None (the MPI's default):
    Open MPI's ``coll_tuned_<op>_algorithm`` (counted only with ``coll_tuned_use_dynamic_rules``
    on, as Open MPI does) or its rules file (``coll_tuned_dynamic_rules_filename``, what a tuned
    configuration runs with; the file first, as Open MPI 4.1 consults it first), MPICH's
    ``MPIR_CVAR_<OP>_INTRA_ALGORITHM`` or, without it, its selection file (``MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE``)."""
    env = os.environ if env is None else env
    if op == "barrier" and mpi_name != "openmpi":
        name = "MPIR_CVAR_BARRIER_INTRA_ALGORITHM"
    else:
        name = algorithm_env(op, mpi_name)
    value = env.get(name)
    dynamic = env.get("OMPI_MCA_coll_tuned_use_dynamic_rules", "0").lower() in ("1", "true", "yes")
    if mpi_name == "openmpi" and dynamic:
        # Open MPI 4.1's tuned component consults a rules file before a forced algorithm
        # (coll_tuned_decision_dynamic.c), so the file is what decides where both are set
        rules = env.get("OMPI_MCA_coll_tuned_dynamic_rules_filename")
        if rules:
            return {"mpi": "openmpi", "param": "coll_tuned_dynamic_rules_filename", "value": rules}
    if value in (None, "") and mpi_name == "openmpi":
        return None
    if mpi_name == "openmpi":
        if not dynamic:
            return None
        param = name[len("OMPI_MCA_"):]
        return {"mpi": "openmpi", "param": param, "value": int(value) if value.isdigit() else value}
    if value in (None, "", "auto"):
        # MPICH consults a forced CVAR first, then the selection file (what a tuned configuration runs with)
        tree = env.get("MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE")
        return {"mpi": "mpich", "param": "MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE", "value": tree} if tree else None
    return {"mpi": "mpich", "param": name, "value": value}


def nodes_of(placement: list[dict] | None) -> int:
    """Distinct nodes in a placement report (the virtual-cluster node, else the host name)."""
    return len({(p.get("node") or p.get("host")) for p in placement or []}) or 1


# -- parameters ------------------------------------------------------------------------------------
SIZES = Param("sizes", "intlist", None, "message sizes in bytes, OSU's per-op convention (default: powers of two, "
              "4 B (reductions 8 B) to 1 MiB)", min=1, max=MAX_SIZE, why="1 GiB at most")
RANKS = Param("ranks", int, None, "MPI ranks (default: one per core of this node, or the slots of --hosts)",
              min=2, max=4096, why="a collective needs two ranks")
NONBLOCKING = Param("nonblocking", bool, False, "OSU's osu_i<op>: the non-blocking collective overlapped with a "
                    "calibrated compute loop (overlap %)")
TIME_BUDGET = Param("time_budget", float, 0.05, "seconds of timed iterations per size", min=0, max=60, min_open=True)
VALIDATE_EVERY = Param("validate_every", int, 100, "check every rank's result on iteration 0 and every K-th "
                       "(outside the timer)", min=1, max=1_000_000)
WARMUP = Param("warmup", int, 10, "untimed iterations per size (their second half estimates the count)",
               min=1, max=100_000)
MAX_ITERS = Param("max_iters", int, 10_000, "timed iterations per size at most", min=1, max=1_000_000)
COMMON = (SIZES, RANKS, HOSTS, HOSTFILE, RANK_CPUS, NONBLOCKING, TIME_BUDGET, VALIDATE_EVERY, WARMUP, MAX_ITERS)


class CollBase(MpiBenchmark):
    """What every collective benchmark shares: placing ranks, the kernel's arguments, one launch
    and the figures of its records. ``ops`` are the collectives one launch measures."""

    kernel = "coll"
    #: a figure far off what the network model of its own p2p sweep says is a finding
    findings = (collmodel.findings,)
    key_params = ("op", "size_bytes", "processes", "nonblocking", "transport_used")
    profiles = {"quick": {"time_budget": 0.02}, "full": {"time_budget": 0.5}}

    def ops(self, params: dict[str, Any]) -> list[str]:
        return [self.name]

    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = super().check(ctx, params)
        ops = self.ops(p)
        hosts = parse_host_params(p)
        place_ranks(ctx, p)
        n = int(p["ranks"])
        if n < 2:
            raise UsageError(f"{', '.join(ops)} needs 2 or more ranks, {n} given"
                             + ("" if p.get("hosts") or p.get("hostfile") else " (this process may use one core)"),
                             "give --ranks 2 or more (add --oversubscribe on a single core), or more host slots")
        sizes = {op: check_op_sizes(op, p.get("sizes")) for op in ops}
        # one size list for the kernel; it skips, for reductions, sizes that are not whole doubles
        data_sizes = sorted({s for op in ops if op != "barrier" for s in sizes[op]})
        p["size_list"] = data_sizes or [0]
        p["sizes_by_op"] = sizes
        keys = [(None if shares_cores(hosts) else h, c) for h, c in p["places"]]
        p["shared_cpus"] = len(set(keys)) < len(keys)
        if p["shared_cpus"] and not ctx.oversubscribe:
            raise UsageError(f"{n} ranks need {n} cpus and only {len(set(keys))} are free: ranks would share cores",
                             "run fewer ranks, or add --oversubscribe")
        biggest = max(data_sizes or [0])
        mem = available_memory(ctx.probe)
        need = max((buffer_bytes(op, biggest, n) for op in ops), default=0) * int(p["ranks_per_node"])
        if mem and need > 0.5 * mem:
            raise UsageError(f"{p['ranks_per_node']} ranks x 2 buffers of {n} x {biggest} B need "
                             f"{need / 2**30:.1f} GiB, above half the {mem / 2**30:.1f} GiB available",
                             "choose smaller --sizes")
        return p

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        runs = sum(len(s) for s in params["sizes_by_op"].values())
        per = params["time_budget"] * (2 if params["nonblocking"] else 1) * 1.2 + 0.01
        return 1.5 + runs * per

    def launch_spec(self, ctx: RunContext, params: dict[str, Any]) -> mpimod.LaunchSpec:
        spec = launch_spec(ctx, params, params["places"], params["host_list"])
        if params.get("shared_cpus"):
            spec.yield_when_idle = True  # ranks on a shared core must yield while they wait
        return spec

    def kernel_args(self, params: dict[str, Any], ops: list[str] | None = None) -> list[str]:
        ops = ops or self.ops(params)
        args = [f"--ops={','.join(ops)}", f"--sizes={','.join(map(str, params['size_list']))}",
                f"--time_budget={params['time_budget']}", f"--warmup={params['warmup']}",
                f"--max_iters={params['max_iters']}", f"--validate_every={params['validate_every']}",
                f"--nonblocking={int(bool(params['nonblocking']))}"]
        reps = link_ranks(params.get("rank_hosts"))
        if len(reps) >= 2:
            args.append(f"--links={','.join(map(str, reps))}")
        if os.environ.get(CORRUPT_ENV):  # test hook only
            args.append(f"--corrupt={os.environ[CORRUPT_ENV]}")
        return args

    def run(self, ctx: RunContext, params: dict[str, Any]) -> list:
        mpi = detect(params)
        ops = self.ops(params)
        n = int(params["ranks"])
        out: list[Result] = []
        base: dict[str, Any] = {
            "processes": n, "cpus": list(params["cpus"]), "transport": params["transport"],
            "hosts": [h[0] for h in params["host_list"]] if params["host_list"] else None,
            "warmup": params["warmup"], "time_budget_s": params["time_budget"],
            "validate_every": params["validate_every"], "nonblocking": bool(params["nonblocking"]),
            "shared_cpus": bool(params["shared_cpus"]), "mpi": {"name": mpi.name, "version": mpi.version},
            "latency_definition": LATENCY_DEFINITION, "bandwidth_definition": BANDWIDTH_DEFINITION,
        }
        by_op = params["sizes_by_op"]
        ctx.progress.start(self.name, total=sum(len(by_op[o]) for o in ops))
        # each size's figures are made once the kernel has ended (KernelSession holds the records: made as
        # each arrived, that work fell inside the next size's timed loop; docs/collectives.md)

        def wanted(rec: dict) -> tuple[str, int] | None:
            kp = rec.get("params") or {}
            op = kp.get("op")
            if op not in ops or int(kp["size"]) not in by_op[op]:  # the set's one size list: this op's own only
                return None
            return op, int(kp["size"])

        def on_result(rec: dict) -> None:
            got = wanted(rec)
            if got:
                out.extend(self.figures(ctx, got[0], got[1], rec.get("params") or {}, rec["samples"], base))

        def on_arrival(rec: dict) -> None:
            if wanted(rec):
                ctx.progress.advance(1)

        first_host = params["places"][0][0]
        different = [(0, n - 1)] if params["host_list"] and params["places"][-1][0] != first_host else []
        session = CollSession(ctx, self.name, self.launch_spec(ctx, params), mpi, base, on_result, different,
                              allow_shared_cpu=bool(params["shared_cpus"]), on_arrival=on_arrival)
        b = ctx.build(self.kernel, openmp=False, cc=mpi.mpicc)
        session.run([str(b.path), *self.kernel_args(params, ops)], params["launch_timeout"], proof_ranks=(0, n - 1))
        note = slow_node_note(self.name, base.get("links"), out)
        if note:
            ctx.note(note)
        return out

    def figures(self, ctx: RunContext, op: str, size: int, kp: dict, samples: list[float],
                base: dict[str, Any]) -> list[Result]:
        """The op's Results of one kernel record: latency, and algbw/busbw for ops with data."""
        bench = get_benchmark(op)
        n = int(base["processes"])
        prm = {**base, "op": op, "size_bytes": size, "size_convention": SIZE_CONVENTIONS[op],
               "nodes": nodes_of(base.get("placement")), "min_us": kp.get("min_us"), "max_us": kp.get("max_us"),
               "p50_us": kp.get("p50_us"), "p99_us": kp.get("p99_us"), "iterations": kp.get("iterations"),
               "warmup": kp.get("warmup"), "checked_iterations": kp.get("checked_iterations"),
               "validated": op != "barrier", "algorithm": algorithm_from_env(op, base["mpi"]["name"]),
               "p2p": {**base.get("p2p", {}), "transport_used": base.get("transport_used")}}
        if base["nonblocking"]:
            prm.update(overlap_pct=kp.get("overlap_pct"), pure_comm_us=kp.get("pure_comm_us"),
                       compute_us=kp.get("compute_us"))
        avg = float(kp["avg_us"])
        lat = [float(s) for s in samples]
        res = [ctx.emit(bench, "latency", lat, prm, times_s=[s * 1e-6 for s in lat], value=avg, check_cv=False)]
        if op != "barrier" and avg > 0:
            nbytes, factor = algbw_bytes(op, size, n), busbw_factor(op, n)
            bw = {**prm, "algbw_bytes": nbytes, "busbw_factor": factor}
            alg = [nbytes / s for s in lat if s > 0]
            res.append(ctx.emit(bench, "algbw", alg, bw, value=nbytes / avg, check_cv=False))
            res.append(ctx.emit(bench, "busbw", [a * factor for a in alg], bw, value=nbytes / avg * factor,
                                check_cv=False))
        return res


class CollSession(KernelSession):
    """The kernel's records: also its ``p2p`` sweep (into the params of every figure) and the
    ``debug`` records of ``--debug`` (kept in :attr:`debug`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.debug: list[dict] = []
        self.links: list[dict] = []

    def __call__(self, rec: dict) -> None:
        if rec.get("type") == "link":
            self.links.append(rec)
            return
        if rec.get("type") == "p2p":
            self.base["p2p"] = {"pair": rec.get("pair"), "size_bytes": [int(s) for s in rec.get("size_bytes", [])],
                                "half_rtt_us": rec.get("half_rtt_us"), "definition": rec.get("definition")}
            return
        if rec.get("type") == "debug":
            self.debug.append(rec)
            return
        super().__call__(rec)

    def release(self) -> None:
        """The links (printed after the collectives) go into ``base`` before the figures are made."""
        if self.links and "links" not in self.base:
            self.base["links"] = colllinks.links_doc(self.links, self.base.get("placement"))
        super().release()


def link_ranks(rank_hosts: list | None) -> list[int]:
    """The first rank on each node (the ranks the kernel's ``--links`` ping-pong pairs), in rank order;
    [] on one node."""
    first: dict[Any, int] = {}
    for r, h in enumerate(rank_hosts or []):
        first.setdefault(h, r)
    return list(first.values()) if len(first) >= 2 else []


def slow_node_note(name: str, links: Mapping[str, Any] | None, results: list) -> str | None:
    """The run's note when the links call a node (or a link) slow: which, why, and the figures the
    model check flags with it; None when nothing is slow."""
    evidence = (links or {}).get("evidence") or []
    if not evidence:
        return None
    far = [j for j in collmodel.judge_results(results) if j.reason == "slow link or node"]
    where = ", ".join(f"{j.op} {j.size_bytes:.0f} B ({j.efficiency:.0%} of the model)" for j in far)
    return (f"{name}: {'; '.join(evidence)}; far off the network model with it: {where or 'no figure'}")


METRICS_DATA = (
    Metric("latency", "us", False, "OSU: per-rank average over iterations, averaged over ranks (params op, "
           "size_bytes, processes; min_us/max_us over ranks, p50_us/p99_us)", limits=("collective_model",)),
    Metric("algbw", "MB/s", True, "nccl-tests' algorithm bandwidth: algbw_bytes / latency, 1e6 B/s",
           limits=("collective_model",)),
    Metric("busbw", "MB/s", True, "nccl-tests' bus bandwidth: algbw x busbw_factor, 1e6 B/s",
           limits=("collective_model",)),
)
HELP = {
    "allreduce": "MPI_Allreduce latency and bandwidth against size (OSU osu_allreduce; doubles summed)",
    "bcast": "MPI_Bcast latency and bandwidth against size (OSU osu_bcast; root 0)",
    "alltoall": "MPI_Alltoall latency and bandwidth against the per-rank block (OSU osu_alltoall)",
    "allgather": "MPI_Allgather latency and bandwidth against the per-rank block (OSU osu_allgather)",
    "reduce": "MPI_Reduce latency and bandwidth against size (OSU osu_reduce; doubles summed to rank 0)",
    "reduce-scatter": "MPI_Reduce_scatter latency and bandwidth against size (OSU osu_reduce_scatter)",
    "gather": "MPI_Gather latency and bandwidth against the per-rank block (OSU osu_gather; root 0)",
    "scatter": "MPI_Scatter latency and bandwidth against the per-rank block (OSU osu_scatter; root 0)",
    "barrier": "MPI_Barrier latency (OSU osu_barrier)",
}


def _op_class(op: str) -> type[CollBase]:
    attrs = {"name": op, "help": HELP[op], "params": COMMON,
             "metrics": METRICS_DATA[:1] if op == "barrier" else METRICS_DATA,
             "__doc__": f"{op}: {SIZE_CONVENTIONS[op]} (see the module's docstring)", "__module__": __name__}
    return type("Coll_" + op.replace("-", "_"), (CollBase,), attrs)


#: the registered benchmark of each op (one class each, sharing CollBase)
OP_BENCHMARKS = {op: register(_op_class(op)) for op in OPS}


@register
class CollSet(CollBase):
    """``coll``: the collectives in one launch (each figure stored under its op's name)."""

    name = "coll"
    help = "the MPI collectives in one run, OSU's way (--quick: 3 sizes)"
    suites = {"mpi": 70}
    metrics = METRICS_DATA
    params = (Param("ops", "strlist", OPS, "collectives to run", OPS), *COMMON)
    profiles = {"quick": {"sizes": [8, 1024, 65536], "time_budget": 0.01}, "full": {"time_budget": 0.5}}

    def ops(self, params: dict[str, Any]) -> list[str]:
        return list(dict.fromkeys(params.get("ops") or OPS))


__all__ = ["OPS", "REDUCTIONS", "CollBase", "CollSet", "algbw_bytes", "algorithm_from_env", "busbw_factor",
           "check_op_sizes", "default_sizes", "link_ranks", "slow_node_note"]
