"""HPL's problem: the flop count, the process grid, N and NB.

* N from a fraction ``--mem`` (0.8, the HPL FAQ's 80 %) of the memory of the nodes taking part:
  N = floor(sqrt(mem x bytes / 8) / NB) x NB, at most the largest N whose matrix and work space fit
  (:func:`largest_n`, :func:`matrix_bytes`);
* grids: every factorisation of the rank count with P <= Q (:func:`grids`, the squarest first;
  :func:`choose_grid` checks a given ``--grid``);
* NB per microarchitecture (:func:`default_nb`); the constants the benchmark and its users share.

The conventions are in :mod:`clusterbench.benchmarks.hpl.hpl`'s docstring.
"""
from __future__ import annotations

import math
import re

from clusterbench.errors import UsageError

TOPOLOGIES = ("pure", "hybrid")
PMAPS = ("row", "col")
THRESHOLD = 16.0
NB_MAX = 4096
#: bytes per rank besides its share of the matrix: two panel buffers are counted exactly, this is
#: the MPI library, the BLAS and the process itself
RANK_OVERHEAD = 96 << 20
#: fraction of Rpeak assumed when estimating the run time (for the progress bar and the timeout check)
EST_EFFICIENCY = 0.4


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

