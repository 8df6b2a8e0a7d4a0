"""HPC Challenge benchmarks beyond HPL/DGEMM/STREAM: PTRANS, RandomAccess, FFT (issue 9), and the
``hpcc`` suite (suite.py)."""
from __future__ import annotations


def hpcc_modes(mode: str, ranks: int) -> list[str]:
    """HPCC's Single/Star/MPI modes to run for ``--mode`` (``all``: single, then star and mpi when
    there is more than one rank)."""
    if mode == "all":
        return ["single", "star", "mpi"] if ranks > 1 else ["single"]
    return [mode]
