"""Helpers shared by tests/unit/test_pingpong.py (pure tests) and tests/integration/test_pingpong.py
(tests that start processes)."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks.base import RunContext


def _cpus(ctx: RunContext) -> list[int]:
    from clusterbench.benchmarks.base import allowed_cpus

    cpus = allowed_cpus(ctx)
    if len(cpus) < 2:
        pytest.skip("pingpong needs two cpus")
    return cpus[:2]
