"""Hand-made collective figures of issue 26's record contract (the params coll-kernel writes), on a
network of known alpha and beta, for the network model's tests (tests/unit/test_collmodel.py,
tests/unit/test_coll_plots.py, tests/integration/test_collmodel.py)."""
from __future__ import annotations

from clusterbench.analysis import limits as limits_mod
from clusterbench.analysis.collmodel import lower_bound, Line, NetModel
from clusterbench.benchmarks.declare import Result

ALPHA_US, BETA_US_PER_BYTE = 2.0, 1e-3  # 2 us, 1000 MB/s
P2P_SIZES = [0] + [1 << k for k in range(0, 21)]
SIZES = [8, 1024, 65536, 1 << 20]


def p2p(alpha: float = ALPHA_US, beta: float = BETA_US_PER_BYTE, sizes: list[int] = P2P_SIZES) -> dict:
    return {"pair": [0, 3], "size_bytes": list(sizes), "half_rtt_us": [alpha + s * beta for s in sizes],
            "transport_used": "tcp"}


def params(op: str, size: int, p: int = 4, **over) -> dict:
    out = {"op": op, "size_bytes": size, "processes": p, "nodes": p, "hosts": [f"n{i}" for i in range(p)],
           "min_us": 1.0, "max_us": 2.0, "p50_us": 1.5, "p99_us": 3.0, "iterations": 100, "warmup": 10,
           "nonblocking": False, "validated": True, "transport": "auto", "transport_used": "tcp",
           "mpi": {"name": "openmpi", "version": "4.1.4"}, "algorithm": None, "shared_cpus": False, "p2p": p2p()}
    out.update(over)
    return out


def model() -> NetModel:
    return NetModel("hockney", Line(ALPHA_US, BETA_US_PER_BYTE))


def latency(op: str, size: int, measured_us: float, p: int = 4, **over) -> Result:
    r = Result(benchmark=op, metric="latency", value=measured_us, unit="us", higher_is_better=False,
               params=params(op, size, p, **over), samples=[measured_us], summary={"n": 1})
    return judged(r)


def busbw(op: str, size: int, measured_us: float, p: int = 4, **over) -> Result:
    nbytes = size * p if op in ("allgather", "alltoall", "gather", "scatter") else size
    factor = {"allreduce": 2 * (p - 1) / p, "allgather": (p - 1) / p, "reduce-scatter": (p - 1) / p,
              "alltoall": (p - 1) / p}.get(op, 1.0)
    value = nbytes / measured_us * factor
    prm = {**params(op, size, p, **over), "algbw_bytes": nbytes, "busbw_factor": factor}
    return judged(Result(benchmark=op, metric="busbw", value=value, unit="MB/s", higher_is_better=True,
                         params=prm, samples=[value], summary={"n": 1}))


def judged(r: Result) -> Result:
    from dataclasses import replace

    got = limits_mod.judge(None, r, ("collective_model",))  # type: ignore[arg-type] - the limit reads no context
    return replace(r, limits=got, limit=got[0] if got else None)


def at_efficiency(op: str, size: int, eff: float, p: int = 4, **over) -> list[Result]:
    """latency and busbw of (op, size) measured at ``eff`` of the model on :func:`model`'s network."""
    _, us = lower_bound(op, p, size, model())
    out = [latency(op, size, us / eff, p, **over)]
    if op != "barrier":
        out.append(busbw(op, size, us / eff, p, **over))
    return out


def coll_run_results() -> list:
    """A run of allreduce (8 B fine, 1 KiB far off: a switch point), bcast and barrier on 4 ranks, with a
    non-blocking bcast series beside (no model curve, not in the heat map)."""
    out = []
    for op, effs in (("allreduce", (0.9, 0.2, 0.8, 0.7)), ("bcast", (0.8, 0.7, 0.6, 0.6))):
        for size, eff in zip(SIZES, effs):
            out += at_efficiency(op, size, eff)
    out += at_efficiency("barrier", 0, 0.5)
    out += at_efficiency("bcast", 1024, 0.3, nonblocking=True)
    return out
