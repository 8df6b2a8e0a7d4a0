"""The registry of HPL engines: what an engine is (:class:`Engine`), what a passed run gives
(:class:`HplOutcome`), and :data:`ENGINES` (the built-in engine registers itself from
``builtin_engine.py``; hpcc and xhpl come through ``engine_plugins.py``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from clusterbench.analysis.warnings import Warning_
from clusterbench.benchmarks.base import RunContext
from clusterbench.energy.phase import Phase


@dataclass
class HplOutcome:
    """One passed HPL run, whatever engine ran it (a failed check never becomes one)."""

    n: int
    nb: int
    p: int
    q: int
    pmap: str
    time_s: float
    gflops: float
    residual: float
    breakdown_s: dict[str, float] | None = None  # pfact, bcast, swap, update, solve, other
    breakdown_of: str | None = None
    params: dict[str, Any] = field(default_factory=dict)  # engine-specific facts (placement, BLAS, ...)
    warnings: list[Warning_ | None] = field(default_factory=list)
    #: the timed phase (factorisation + solve) in wall-clock seconds, for the energy over exactly it
    phase: Phase | None = None


class Engine(Protocol):
    name: str

    def prepare(self, ctx: RunContext, params: dict[str, Any]) -> None: ...

    def run(self, ctx: RunContext, params: dict[str, Any]) -> HplOutcome: ...


ENGINES: dict[str, Engine] = {}


def register_engine(engine: Engine) -> Engine:
    ENGINES[engine.name] = engine
    return engine
