"""What the standard algorithms of each MPI collective cost on a network of point-to-point time t(m).

Pure. Each algorithm is written as the sequence of communication steps on its critical path: a step
is ``(count, message_bytes, reduced_bytes)``, ``count`` steps each sending (and receiving) one message
of ``message_bytes`` and reducing ``reduced_bytes``. Its time is ``sum(count * (t(m) + gamma * r))``
where ``t`` is the fitted point-to-point time (:class:`clusterbench.analysis.collmodel.NetModel`).
With Hockney's ``t(m) = alpha + m * beta`` this is exactly the closed form each docstring gives (the
textbook formula); with a two-regime fit each message pays the regime of its own size.

Sizes: ``size`` is OSU's size, as the collective's record carries it (``params.size_bytes``):

* allreduce, reduce, bcast: ``n`` = the whole buffer of every rank;
* reduce-scatter: ``n`` = the whole send vector of every rank (each rank keeps ``n/p``);
* allgather, gather: ``s`` = what each rank contributes (``N = p*s`` gathered);
* scatter: ``s`` = the block each rank receives (``N = p*s`` scattered);
* alltoall: ``s`` = the block each rank sends to each rank;
* barrier: no data.

``p`` ranks; ``L = ceil(log2 p)``, ``lg = floor(log2 p)``, ``p' = 2**lg``. Chunks of ``n/p`` are taken
as real numbers (the algorithms' ceil(n/p) differs by under one element). Where an algorithm is only
defined for a power of two and the MPIs use another one otherwise, it is left out for other ``p``
(said per algorithm). Sources: R. Thakur, R. Rabenseifner, W. Gropp, "Optimization of collective
communication operations in MPICH", IJHPCA 19(1), 2005 ("Thakur 2005"); E. Chan, M. Heimlich,
A. Purkayastha, R. van de Geijn, "Collective communication: theory, practice, and experience",
CCPE 19(13), 2007 ("Chan 2007"); R. Hockney, "The communication challenge for MPP", Parallel
Computing 20, 1994 (the alpha-beta model).
"""
from __future__ import annotations

from collections.abc import Callable

#: one step of an algorithm's critical path: (count, message bytes, bytes reduced)
Step = tuple[float, float, float]
AlgorithmFn = Callable[[int, float], list[Step]]
#: op -> algorithm name -> steps(p, size)
ALGORITHMS: dict[str, dict[str, AlgorithmFn]] = {}


def algorithm(op: str, name: str) -> Callable[[AlgorithmFn], AlgorithmFn]:
    def deco(fn: AlgorithmFn) -> AlgorithmFn:
        ALGORITHMS.setdefault(op, {})[name] = fn
        return fn
    return deco


def ceil_log2(p: int) -> int:
    return max(0, (p - 1).bit_length())


def floor_log2(p: int) -> int:
    return max(0, p.bit_length() - 1)


def is_pow2(p: int) -> bool:
    return p > 0 and p & (p - 1) == 0


def binomial_root_blocks(p: int) -> list[int]:
    """Blocks the root of a binomial scatter sends (or of a binomial gather receives) at each of its
    ``L`` steps: to relative rank ``m`` (m = 2**(L-1) .. 1, m < p) the blocks of ranks m .. min(2m, p)-1,
    i.e. ``min(m, p - m)`` blocks. The root takes part in every step: it is the critical path. For a
    power of two: p/2, p/4, .. 1 blocks (Thakur 2005 sec. 4.3: ``lg p * alpha + (p-1)/p * n * beta``)."""
    return [min(m, p - m) for m in (1 << k for k in range(ceil_log2(p) - 1, -1, -1)) if m < p]


# -- allreduce (n = the whole buffer) ------------------------------------------------------------
@algorithm("allreduce", "recursive doubling")
def allreduce_recursive_doubling(p: int, n: float) -> list[Step]:
    """Thakur 2005 sec. 4.5: ``lg p * (alpha + n*beta + n*gamma)``. Not a power of two (MPICH): the
    ``p - p'`` extra ranks first fold their data into a partner and get the result back at the end,
    two more steps of ``n`` bytes (one reducing): ``(lg + 2) * (alpha + n*beta) + (lg + 1) * n * gamma``."""
    lg = floor_log2(p)
    steps: list[Step] = [(lg, n, n)]
    if not is_pow2(p):
        steps += [(1, n, n), (1, n, 0)]
    return steps


@algorithm("allreduce", "ring")
def allreduce_ring(p: int, n: float) -> list[Step]:
    """A ring reduce-scatter then a ring allgather (Chan 2007; Thakur 2005 sec. 4.5 for long
    messages in the bandwidth term): ``2(p-1) * alpha + 2(p-1)/p * n * beta + (p-1)/p * n * gamma``;
    any p."""
    return [(p - 1, n / p, n / p), (p - 1, n / p, 0)]


@algorithm("allreduce", "rabenseifner")
def allreduce_rabenseifner(p: int, n: float) -> list[Step]:
    """Rabenseifner's: reduce-scatter by recursive halving, allgather by recursive doubling (Thakur
    2005 sec. 4.5): ``2 lg p * alpha + 2(p-1)/p * n * beta + (p-1)/p * n * gamma`` for a power of
    two. Otherwise the ``p - p'`` extra ranks first send their whole vector to a partner (``alpha +
    n*beta + n*gamma``) and receive the result at the end (``alpha + n*beta``), the halving and
    doubling running on p' ranks."""
    lg = floor_log2(p)
    pp = 1 << lg
    steps: list[Step] = []
    for k in range(1, lg + 1):
        steps += [(1, n / 2 ** k, n / 2 ** k), (1, n / 2 ** k, 0)]
    if pp != p:
        steps += [(1, n, n), (1, n, 0)]
    return steps


@algorithm("allreduce", "binomial reduce + bcast")
def allreduce_reduce_bcast(p: int, n: float) -> list[Step]:
    """A binomial reduce to rank 0 then a binomial bcast (Thakur 2005 sec. 4.5, MPICH's fallback):
    ``2L * (alpha + n*beta) + L * n * gamma``; any p."""
    L = ceil_log2(p)
    return [(L, n, n), (L, n, 0)]


# -- bcast (n = the buffer) -----------------------------------------------------------------------
@algorithm("bcast", "binomial tree")
def bcast_binomial(p: int, n: float) -> list[Step]:
    """Thakur 2005 sec. 4.1: ``L * (alpha + n*beta)``; any p."""
    return [(ceil_log2(p), n, 0)]


@algorithm("bcast", "scatter + ring allgather")
def bcast_van_de_geijn(p: int, n: float) -> list[Step]:
    """van de Geijn's: a binomial scatter of n/p blocks then a ring allgather (Thakur 2005 sec. 4.1;
    Chan 2007): ``(L + p - 1) * alpha + 2(p-1)/p * n * beta`` for a power of two; otherwise the root's
    scatter steps carry min(m, p-m) blocks (:func:`binomial_root_blocks`)."""
    return [(1, b * n / p, 0) for b in binomial_root_blocks(p)] + [(p - 1, n / p, 0)]


@algorithm("bcast", "linear")
def bcast_linear(p: int, n: float) -> list[Step]:
    """The root sends the buffer to each rank in turn: ``(p-1) * (alpha + n*beta)`` (Hockney's model
    has one link per rank, so the root's sends serialize); any p."""
    return [(p - 1, n, 0)]


# -- reduce (n = the buffer) ----------------------------------------------------------------------
@algorithm("reduce", "binomial tree")
def reduce_binomial(p: int, n: float) -> list[Step]:
    """Thakur 2005 sec. 4.4: ``L * (alpha + n*beta + n*gamma)``; any p."""
    return [(ceil_log2(p), n, n)]


@algorithm("reduce", "rabenseifner")
def reduce_rabenseifner(p: int, n: float) -> list[Step]:
    """Rabenseifner's: reduce-scatter by recursive halving, then a binomial gather to the root
    (Thakur 2005 sec. 4.4): ``2 lg p * alpha + 2(p-1)/p * n * beta + (p-1)/p * n * gamma`` for a
    power of two; otherwise one more first step of the whole vector from each of the ``p - p'``
    extra ranks to a partner (``alpha + n*beta + n*gamma``)."""
    lg = floor_log2(p)
    pp = 1 << lg
    steps: list[Step] = [(1, n / 2 ** k, n / 2 ** k) for k in range(1, lg + 1)]
    steps += [(1, b * n / pp, 0) for b in reversed(binomial_root_blocks(pp))]
    if pp != p:
        steps.append((1, n, n))
    return steps


# -- allgather (s = each rank's contribution) ------------------------------------------------------
@algorithm("allgather", "ring")
def allgather_ring(p: int, s: float) -> list[Step]:
    """Thakur 2005 sec. 4.2: ``(p-1) * alpha + (p-1)/p * N * beta`` with ``N = p*s``; any p."""
    return [(p - 1, s, 0)]


@algorithm("allgather", "recursive doubling")
def allgather_recursive_doubling(p: int, s: float) -> list[Step]:
    """Thakur 2005 sec. 4.2: ``lg p * alpha + (p-1)/p * N * beta`` (step k exchanges 2**k blocks).
    Powers of two only: MPICH takes Bruck's otherwise (left out for other p)."""
    if not is_pow2(p):
        return []
    return [(1, (1 << k) * s, 0) for k in range(floor_log2(p))]


@algorithm("allgather", "bruck")
def allgather_bruck(p: int, s: float) -> list[Step]:
    """Bruck's (Thakur 2005 sec. 4.2): ``L * alpha + (p-1)/p * N * beta``, step k sending
    min(2**k, p - 2**k) blocks; any p (the local rotations not counted)."""
    return [(1, min(1 << k, p - (1 << k)) * s, 0) for k in range(ceil_log2(p))]


# -- alltoall (s = the block each rank sends to each rank) ----------------------------------------
@algorithm("alltoall", "pairwise exchange")
def alltoall_pairwise(p: int, s: float) -> list[Step]:
    """Thakur 2005 sec. 4.6: ``(p-1) * (alpha + s*beta)``, step k exchanging with rank ± k (XOR for a
    power of two); any p."""
    return [(p - 1, s, 0)]


@algorithm("alltoall", "bruck")
def alltoall_bruck(p: int, s: float) -> list[Step]:
    """Bruck's (Thakur 2005 sec. 4.6): ``L * alpha + (p/2) * L * s * beta`` for a power of two; step k
    sends the blocks whose index has bit k set (exactly counted for any p)."""
    return [(1, sum(1 for j in range(p) if (j >> k) & 1) * s, 0) for k in range(ceil_log2(p))]


@algorithm("alltoall", "linear")
def alltoall_linear(p: int, s: float) -> list[Step]:
    """Every send and receive posted at once (Open MPI's basic linear, MPICH's scattered):
    ``(p-1) * (alpha + s*beta)`` in Hockney's model, which cannot tell overlapped latencies from
    serialized ones (one link per rank): the same time as the pairwise exchange; any p."""
    return [(p - 1, s, 0)]


# -- reduce-scatter (n = the whole send vector; each rank keeps n/p) ------------------------------
@algorithm("reduce-scatter", "ring")
def reduce_scatter_ring(p: int, n: float) -> list[Step]:
    """Chan 2007: ``(p-1) * alpha + (p-1)/p * n * (beta + gamma)``; any p."""
    return [(p - 1, n / p, n / p)]


@algorithm("reduce-scatter", "recursive halving")
def reduce_scatter_halving(p: int, n: float) -> list[Step]:
    """Thakur 2005 sec. 4.7: ``lg p * alpha + (p-1)/p * n * (beta + gamma)`` for a power of two;
    otherwise (MPICH) the ``p - p'`` extra ranks first send their whole vector to a partner
    (``alpha + n*(beta + gamma)``) and get their n/p block back at the end (``alpha + n/p * beta``)."""
    lg = floor_log2(p)
    steps: list[Step] = [(1, n / 2 ** k, n / 2 ** k) for k in range(1, lg + 1)]
    if not is_pow2(p):
        steps += [(1, n, n), (1, n / p, 0)]
    return steps


# -- gather / scatter (s = one rank's block) ------------------------------------------------------
@algorithm("gather", "binomial tree")
def gather_binomial(p: int, s: float) -> list[Step]:
    """Thakur 2005 sec. 4.3 (the mirror of the binomial scatter): ``L * alpha + (p-1)/p * N * beta``
    with ``N = p*s`` for a power of two; the root's steps receive min(m, p-m) blocks."""
    return [(1, b * s, 0) for b in reversed(binomial_root_blocks(p))]


@algorithm("gather", "linear")
def gather_linear(p: int, s: float) -> list[Step]:
    """The root receives each rank's block in turn: ``(p-1) * (alpha + s*beta)``; any p."""
    return [(p - 1, s, 0)]


@algorithm("scatter", "binomial tree")
def scatter_binomial(p: int, s: float) -> list[Step]:
    """Thakur 2005 sec. 4.3: ``L * alpha + (p-1)/p * N * beta`` with ``N = p*s`` for a power of
    two; the root's steps send min(m, p-m) blocks."""
    return [(1, b * s, 0) for b in binomial_root_blocks(p)]


@algorithm("scatter", "linear")
def scatter_linear(p: int, s: float) -> list[Step]:
    """The root sends each rank its block in turn: ``(p-1) * (alpha + s*beta)``; any p."""
    return [(p - 1, s, 0)]


# -- barrier (no data) ----------------------------------------------------------------------------
@algorithm("barrier", "dissemination")
def barrier_dissemination(p: int, s: float) -> list[Step]:
    """Hensgen, Finkel & Manber's dissemination (Thakur 2005 sec. 4.8, MPICH's): ``L * alpha``
    (zero-byte messages); any p."""
    return [(ceil_log2(p), 0, 0)]


@algorithm("barrier", "recursive doubling")
def barrier_recursive_doubling(p: int, s: float) -> list[Step]:
    """Pairwise exchanges with rank XOR 2**k (Open MPI's): ``lg p * alpha`` for a power of two;
    otherwise the extra ranks fold in before and are released after: ``(lg + 2) * alpha``."""
    return [(floor_log2(p) + (0 if is_pow2(p) else 2), 0, 0)]


def steps(op: str, name: str, p: int, size: float) -> list[Step]:
    """The critical-path steps of one algorithm (empty: not defined for this p)."""
    return ALGORITHMS[op][name](p, float(size))


__all__ = ["ALGORITHMS", "Step", "algorithm", "binomial_root_blocks", "ceil_log2", "floor_log2", "is_pow2", "steps"]
