"""The pure tests (they start no process) of what tests/integration/test_membw.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.node.membw import default_counts
from clusterbench.errors import UsageError


def test_default_counts():
    assert default_counts(4, "default") == [1, 2, 3, 4]
    assert default_counts(4, "quick") == [1, 4]
    assert default_counts(48, "default") == [1, 2, 4, 8, 16, 32, 48]
    assert default_counts(20, "full") == list(range(1, 21))


@pytest.mark.parametrize("given, match", [
    ({"threads": 0}, "--threads 0"),
    ({"counts": [0]}, "--counts 0"),
    ({"threads": 10_000}, "exceeds"),
    ({"counts": [1, 10_000]}, "exceeds"),
    ({"array_elements": 10**13}, "largest size that fits"),
    ({"ntimes": 1}, "ntimes"),
    ({"variant": "fast"}, "not one of"),
    ({"store": "nt"}, "no parameter 'store'"),  # renamed to variant, as in stream
    ({"cpus": [0], "threads": 2}, "does not match"),
    ({"cpus": [0, 0]}, "twice"),
    ({"cpus": []}, "empty"),
    ({"cpus": [0], "counts": [2]}, "exceeds"),
])
def test_bad_input(ctx, given, match):
    with pytest.raises(UsageError, match=match):
        get_benchmark("membw").resolve(ctx, given)
