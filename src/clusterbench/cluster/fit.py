"""Fitting each stage of ``run cluster`` to its time (pure: no process, no store).

A stage's timeout bounds the stage, and part of it is the launch's: starting the agents or MPI's
ranks over ssh, building kernels on the nodes, which on a loaded machine takes many seconds and is
not the stage's to shrink. So a stage's timeout is never below :func:`launch_allowance` plus the
least work that says something (:data:`MIN_WORK_S`), and what the stage measures is chosen to fit
the rest: the node profile leaves out its least needed parts (:data:`NODE_DROP_ORDER`; DGEMM and
peak, which size HPL, stay), the network matrix measures each pair for less time. A machine busy
with other work (load above its cpus) makes everything slower by about :func:`slowdown`; the
estimates are scaled by it.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

#: the node profile's parts, least needed first: what a short stage leaves out (peak and dgemm size HPL)
NODE_DROP_ORDER = ("memlat", "membw", "intcpu", "fpu", "stream")
#: the parts the node stage always runs (HPL is sized from DGEMM's rate, Rpeak from peak)
NODE_KEEP = ("peak", "dgemm")
#: seconds of a stage's work below which it is not worth starting (besides its launch), unloaded
MIN_WORK_S = {"node": 8.0, "network": 4.0}
#: seconds a node's kernels may take to build and start there, unloaded (on top of the launcher's timeout)
BUILD_S = 8.0
#: a pair's measuring time in the network matrix: at most, at least (s)
PAIR_MAX_S, PAIR_MIN_S = 1.0, 0.2
#: the all-pairs benchmark's own allowance for MPI's start, over its estimate
#: (:meth:`clusterbench.benchmarks.mpi.allpairs.AllPairs.prepare` refuses a timeout below the two)
ALLPAIRS_LAUNCH_S = 30.0
#: passes of the matrix the network stage runs: one, and the re-measurement of suspect pairs (at most one)
NETWORK_PASSES = 2


def slowdown(load: float | None = None, cpus: int | None = None) -> float:
    """How much slower than idle this machine runs now: its 1-minute load per cpu, at least 1."""
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = 0.0
    cpus = cpus or os.cpu_count() or 1
    return max(1.0, float(load) / cpus)


def launch_allowance(n: int, *, virtual: bool) -> float:
    """Seconds a launch across ``n`` nodes may take before the launcher gives up on it: the virtual
    cluster's launch timeout (:func:`~clusterbench.launch.mpi.pernode.sim_launch_timeout`), else MPI's."""
    from clusterbench.launch.mpi.pernode import sim_launch_timeout
    from clusterbench.launch.mpi.run import LAUNCH_TIMEOUT

    return sim_launch_timeout(n) if virtual else LAUNCH_TIMEOUT


def stage_timeout(stage: str, allotted: float, launch_s: float, slow: float) -> float:
    """The stage's timeout: its allotted seconds, but never less than the launch plus the kernels'
    builds and the least work (scaled by ``slow``)."""
    return max(allotted, launch_s + (BUILD_S + MIN_WORK_S.get(stage, 0.0)) * slow)


def work_seconds(stage: str, timeout: float, launch_s: float, slow: float) -> float:
    """Seconds left for the stage's own measuring once the launch and builds had theirs, unloaded
    (divided by ``slow``)."""
    return max(MIN_WORK_S.get(stage, 0.0), (timeout - launch_s) / slow - BUILD_S)


def node_skip(estimates: Mapping[str, float], work_s: float) -> tuple[str, ...]:
    """The parts of the node profile to leave out so the rest's estimated seconds (``estimates``,
    unloaded, per part) fit ``work_s``: least needed first (:data:`NODE_DROP_ORDER`), never
    :data:`NODE_KEEP`."""
    total = sum(estimates.values())
    skip: list[str] = []
    for part in NODE_DROP_ORDER:
        if total <= work_s:
            break
        if part in estimates:
            skip.append(part)
            total -= estimates[part]
    return tuple(skip)


def rounds(n: int) -> int:
    """Rounds of the round-robin schedule of ``n`` nodes: n-1 for even n, n for odd."""
    return max(1, n - 1 if n % 2 == 0 else n)


def allpairs_seconds(n: int, pair_s: float) -> float:
    """The all-pairs benchmark's own estimate of its measuring (its ``estimate_seconds``) for ``n``
    nodes at ``pair_s`` per pair, with the re-measurement pass."""
    return 2.0 + NETWORK_PASSES * rounds(n) * (pair_s * 1.1 + 0.05)


def pair_budget(n: int, work_s: float) -> float:
    """Measuring seconds per pair of the network matrix for ``n`` nodes whose measuring fits ``work_s``
    (:func:`allpairs_seconds`), between :data:`PAIR_MIN_S` and :data:`PAIR_MAX_S`."""
    pair = ((work_s - 2.0) / (NETWORK_PASSES * rounds(n)) - 0.05) / 1.1
    return max(PAIR_MIN_S, min(PAIR_MAX_S, pair))


def network_timeout(n: int, timeout: float, pair_s: float) -> float:
    """The network stage's timeout: ``timeout``, but never below what the all-pairs benchmark asks of
    a run of ``pair_s`` per pair (its estimate and :data:`ALLPAIRS_LAUNCH_S`)."""
    return max(timeout, allpairs_seconds(n, pair_s) + ALLPAIRS_LAUNCH_S + 1.0)


def node_estimates(probe_data: dict[str, Any], profile: str = "quick") -> dict[str, float]:
    """Each part of the node profile's estimated seconds on this machine (the benchmarks' own
    :meth:`estimate_seconds`), unloaded; empty when they cannot tell."""
    from clusterbench import session
    from clusterbench.benchmarks.base import RunContext
    from clusterbench.errors import ClusterbenchError

    try:
        ctx = RunContext(probe=probe_data, profile=profile, oversubscribe=True)
        (bench, params), = session.plan(["node"], {"node": {}}, ctx)
        from clusterbench.benchmarks import get_benchmark

        return {name: float(get_benchmark(name).estimate_seconds(ctx, p)) for name, p in params["parts"].items()}
    except (ClusterbenchError, KeyError, TypeError, ValueError):
        return {}


def missing_lines(stages: Mapping[str, Mapping[str, Any]], order: Sequence[str]) -> list[str]:
    """One line per stage not done: the stage, why, and what to do."""
    out = []
    for s in order:
        st = stages.get(s) or {}
        if st.get("done") is False:
            out.append(f"stage {s} not done: {st.get('reason')}" + (f" ({st['fix']})" if st.get("fix") else ""))
    return out


__all__ = ["slowdown", "launch_allowance", "stage_timeout", "work_seconds", "node_skip", "pair_budget",
           "rounds", "allpairs_seconds", "network_timeout",
           "node_estimates", "missing_lines", "NODE_DROP_ORDER", "NODE_KEEP"]
