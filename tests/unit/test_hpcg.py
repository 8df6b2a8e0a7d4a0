"""The pure tests (they start no process) of what tests/integration/test_hpcg.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext
from clusterbench.benchmarks.hpcg.hpcg import (
    official_reasons,
    parse_local,
    process_grid,
)
from clusterbench.errors import UsageError


def test_local_parsing_and_grid() -> None:
    assert parse_local("104x104x104") == (104, 104, 104) and parse_local("32") == (32, 32, 32)
    assert parse_local("16x24x32") == (16, 24, 32)
    for bad, match in (("20", "20 is not a multiple of 8"), ("8", "from 16"), ("16x16", "NXxNYxNZ"),
                       ("axbxc", "NXxNYxNZ"), ("2048", "from 16 to 1024")):
        with pytest.raises(UsageError, match=match):
            parse_local(bad)
    assert [process_grid(n) for n in (1, 2, 4, 6, 8, 12)] == [(1, 1, 1), (1, 1, 2), (1, 2, 2), (1, 2, 3),
                                                             (2, 2, 2), (2, 2, 3)]


def test_official_rules() -> None:
    gib = 1 << 30
    assert official_reasons(1800, 4 * gib, 16 * gib) == []
    why = official_reasons(60, 1 * gib, 16 * gib)
    assert len(why) == 2 and "1800" in why[0] and "quarter" in why[1]
    assert official_reasons(3600, gib, None) == ["the node's memory size is unknown"]


def test_bad_input_is_one_line(ctx) -> None:
    bench = get_benchmark("hpcg")
    for given, match in (({"local": "100"}, "not a multiple of 8"),
                         ({"local": "1024"}, "above 80% of the .* GiB available"),
                         ({"time": 0}, "time 0 is not allowed"),
                         ({"official": True, "time": 60}, "not an official HPCG run: --time 60 s"),
                         ({"ranks": 1, "cpus": [0, 1]}, "one cpu per rank"),
                         ({"time": 1000}, "above the 300 s timeout")):
        with pytest.raises(UsageError, match=match) as exc:
            bench.resolve(ctx, {"allow_root": True, **given})
        assert "\n" not in str(exc.value)


def test_stream_bound_limit() -> None:
    """The STREAM-bound ceiling: best triad with as many threads as ranks x HPCG's flops per byte;
    unknown without a triad figure."""
    from clusterbench.analysis import limits
    from clusterbench.benchmarks.base import Result

    def res(bench: str, metric: str, value: float, params: dict) -> Result:
        return Result(benchmark=bench, metric=metric, value=value, unit="", higher_is_better=True, params=params,
                      samples=[value], summary={})

    ctx = RunContext(probe={})
    hpcg = res("hpcg", "rating", 2.0, {"processes": 2, "credited_flops_per_set": 1.0e9, "bytes_per_set": 6.0e9})
    providers = {"best_bandwidth": {("stream", "triad"), ("stream", "copy")}}
    assert limits.judge(ctx, hpcg, ("stream_bound",), providers) == []
    ctx.results += [res("stream", "triad", 18000.0, {"threads": 2}), res("stream", "triad", 30000.0, {"threads": 1}),
                    res("stream", "copy", 24000.0, {"threads": 2})]
    (got,) = limits.judge(ctx, hpcg, ("stream_bound",), providers)
    assert got["value"] == pytest.approx(18.0 / 6.0) and got["fraction"] == pytest.approx(2.0 / 3.0)


def test_long_run_raises_the_default_timeout(live_probe) -> None:
    ctx = RunContext(probe=live_probe, profile="quick", timeout=900, timeout_given=False)
    get_benchmark("hpcg").resolve(ctx, {"allow_root": True, "ranks": 1, "local": "16", "time": 1800})
    assert ctx.timeout > 1800 and "timeout" in ctx.notes[-1]
