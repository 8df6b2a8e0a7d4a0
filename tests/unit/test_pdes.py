"""The pure tests (they start no process) of what tests/integration/test_pdes.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import math

import pytest

from clusterbench.analysis.stats import mean_ci, median_ci, t_quantile
from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.apps.pdes import runtime_stats
from clusterbench.benchmarks.base import RunContext
from clusterbench.errors import UsageError


def test_bad_input_is_one_line(ctx) -> None:
    bench = get_benchmark("pdes")
    for given, match in (({"remote": 1.5}, "--remote 1.5 is not allowed"),
                         ({"remote": -0.1}, "--remote -0.1 is not allowed"),
                         ({"mean": 0.0}, "--mean 0.0 is not allowed"),
                         ({"end": -1.0}, "--end -1.0 is not allowed"),
                         ({"lps": 0}, "--lps 0 is not allowed"),
                         ({"lps": 3_000_000_000, "model": "qnet"}, "GiB per node, above 80%"),
                         ({"sync": "conservative", "lookahead": 0.0}, "needs --lookahead above 0"),
                         ({"sync": "sequential", "ranks": 2}, "runs one process on this node"),
                         ({"sync": "lazy"}, "--sync 'lazy' is not one of"),
                         ({"lps": 1, "ranks": 2, "oversubscribe": True}, "fewer than the 2 ranks"),
                         ({"event_memory": 1e7}, "event-memory .* above 80%")):
        c = RunContext(probe=ctx.probe, timeout=300, oversubscribe=bool(given.pop("oversubscribe", False)))
        with pytest.raises(UsageError, match=match) as exc:
            bench.resolve(c, {"allow_root": True, **given})
        assert "\n" not in str(exc.value)


def test_statistics() -> None:
    assert t_quantile(1) == 63.657 and t_quantile(30, 0.95) == 2.042
    assert t_quantile(60) == pytest.approx(2.660, abs=0.002) and t_quantile(120) == pytest.approx(2.617, abs=0.002)
    lo, hi = mean_ci([1.0, 2.0, 3.0])
    assert (lo + hi) / 2 == 2.0 and hi - 2.0 == pytest.approx(9.925 * 1.0 / math.sqrt(3))
    assert median_ci(range(7)) is None and median_ci(range(8)) == (0.0, 7.0)
    assert median_ci(range(20)) == (3.0, 16.0)  # ranks 4 and 17 of 20 at 99%
    assert median_ci(range(10), 0.95) == (1.0, 8.0)  # ranks 2 and 9 of 10 at 95%
    s = runtime_stats([1.0, 1.2, 1.1])
    assert s["median_s"] == 1.1 and s["ci99_median_s"] is None and s["ci99_mean_s"][0] < 1.1 < s["ci99_mean_s"][1]
