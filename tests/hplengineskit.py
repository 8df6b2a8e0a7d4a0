"""Helpers shared by tests/unit/test_hpl_engines.py (pure tests) and tests/integration/test_hpl_engines.py
(tests that start processes)."""
from __future__ import annotations


def hpl_flops(n: int) -> float:
    return 2.0 / 3.0 * n**3 + 1.5 * n**2
