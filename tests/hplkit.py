"""Helpers shared by tests/unit/test_hpl.py (pure tests) and tests/integration/test_hpl.py
(tests that start processes)."""
from __future__ import annotations

from clusterbench.benchmarks.base import RunContext


def _ctx(probe: dict, oversubscribe: bool = False) -> RunContext:
    return RunContext(probe=probe, profile="quick", timeout=120, oversubscribe=oversubscribe)


def _two_sockets(probe: dict) -> dict:
    """This machine's probe with its cpus split over two packages (sockets), as on a 2-socket node."""
    import copy

    p = copy.deepcopy(probe)
    cpus = p["topology"]["cpus"]
    half = len(cpus) // 2
    for i, c in enumerate(cpus):
        c["package"] = 0 if i < half else 1
    p["topology"]["packages"] = 2
    return p
