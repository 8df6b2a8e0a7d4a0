"""The pure tests (they start no process) of what tests/integration/test_fpu.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.errors import UsageError


def test_fpu_bad_input(ctx):
    bench = get_benchmark("fpu")
    with pytest.raises(UsageError):
        bench.resolve(ctx, {"cpu": 10_000})
    with pytest.raises(UsageError):
        bench.resolve(ctx, {"ops": "add,pow"})
    with pytest.raises(UsageError):
        bench.resolve(ctx, {"samples": 0})
    with pytest.raises(UsageError):
        bench.resolve(ctx, {"threads": 2})  # single-threaded: no such parameter
