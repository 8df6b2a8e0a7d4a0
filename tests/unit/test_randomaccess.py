"""The pure tests (they start no process) of what tests/integration/test_randomaccess.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext
from clusterbench.benchmarks.hpcc.randomaccess import default_log2
from clusterbench.errors import UsageError


def test_default_size() -> None:
    gib = 1 << 30
    assert default_log2(1 * gib) == 25  # 8 B x 2^25 = 256 MiB, a quarter of 1 GiB
    assert default_log2(3 * gib) == 26  # not a power of two: the largest table within a quarter
    assert default_log2(64 * gib) == 27  # capped
    assert default_log2(None) == 24
    assert default_log2(1 << 14) == 10  # at least the smallest table


def test_bad_input_is_one_line(ctx) -> None:
    bench = get_benchmark("randomaccess")
    for given, match in (({"log2_size": 9}, "log2-size 9 is not allowed"),
                         ({"log2_size": 40, "mode": "single"}, "above 80% of the .* GiB available"),
                         ({"mode": "lcg"}, "mode"),
                         ({"variant": "xorshift"}, "variant"),
                         ({"log2_size": 10, "mode": "mpi", "ranks": 100, "oversubscribe": True},
                          "too small for 100 ranks"),
                         ({"ranks": 1, "cpus": [0, 1]}, "one cpu per rank")):
        c = RunContext(probe=ctx.probe, timeout=300, oversubscribe=bool(given.pop("oversubscribe", False)))
        with pytest.raises(UsageError, match=match) as exc:
            bench.resolve(c, {"allow_root": True, **given})
        assert "\n" not in str(exc.value)
