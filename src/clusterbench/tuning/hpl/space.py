"""What ``tune hpl`` searches: NB x grid x process mapping x topology x BLAS."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from clusterbench.benchmarks.hpl.sizing import grids
from clusterbench.errors import UsageError

DEFAULT_NBS = (32, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512)
TOPOLOGIES = ("pure", "hybrid")
#: BLAS libraries searched by default, when installed (the others are reference or wrappers)
DEFAULT_BLAS = ("openblas", "blis", "mkl")

# ---------------------------------------------------------------------------------------------
# The space
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, order=True)
class Config:
    """One point of the space (what an ``hpl`` run is given besides N)."""

    blas: str
    topology: str
    nb: int
    p: int
    q: int
    pmap: str = "row"

    @property
    def grid(self) -> str:
        return f"{self.p}x{self.q}"

    def label(self) -> str:
        return f"{self.blas}/{self.topology}/{self.grid}/{self.pmap}/nb{self.nb}"


@dataclass
class Space:
    """What is searched. ``blas=None``: every installed library of :data:`DEFAULT_BLAS`."""

    nbs: Sequence[int] = DEFAULT_NBS
    topologies: Sequence[str] = TOPOLOGIES
    blas: Sequence[str] | None = None
    #: pmap both ways where P > 1 and Q > 1 (HPL's PMAP); row only otherwise (it makes no difference)
    pmaps: bool = True

    def check(self) -> None:
        if not self.nbs:
            raise UsageError("the NB list is empty", "give NBs like --nb-list 64,128,192")
        bad = [nb for nb in self.nbs if not 1 <= int(nb) <= 4096]
        if bad:
            raise UsageError(f"NB {bad[0]} is not allowed", "use NBs from 1 to 4096 (HPL: 32 to 256)")
        wrong = [t for t in self.topologies if t not in TOPOLOGIES]
        if wrong or not self.topologies:
            raise UsageError(f"topology {wrong[0] if wrong else '(none)'!r} is not one of {', '.join(TOPOLOGIES)}",
                             "give --topologies pure,hybrid (or one of them)")


def grid_options(ranks: int, pmaps: bool) -> list[tuple[int, int, str]]:
    """Every P x Q = ranks with P <= Q (HPL's advice: Q at least P), both mappings where they differ."""
    out = []
    for p, q in grids(ranks):
        out.append((p, q, "row"))
        if pmaps and p > 1 and q > 1:
            out.append((p, q, "col"))
    return out
