"""The pure tests (they start no process) of what tests/integration/test_intcpu.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import Result, RunContext
from clusterbench.benchmarks.node import intcpu as mod
from clusterbench.errors import UsageError

from intcpukit import sysbench_event


# -- unit tier -------------------------------------------------------------------------------
def test_reference_counts() -> None:
    # 2 and max_prime itself are not candidates: pi(max_prime - 1) - 1
    assert sysbench_event(3) == (0, 0)
    assert sysbench_event(4)[0] == 1
    assert sysbench_event(100)[0] == 24
    assert sysbench_event(10000) == (1228, 117526)


def test_divisions_estimate_is_in_the_right_range() -> None:
    assert 0.5 < mod.divisions_estimate(10000) / 117526 < 2
    assert mod.divisions_estimate(20000) > mod.divisions_estimate(10000)


@pytest.mark.parametrize("given, message", [
    ({"max_prime": 2}, "--max-prime 2 is not allowed"),
    ({"max_prime": 100_000_001}, "--max-prime 100000001 is not allowed"),
    ({"time": 0.0}, "--time 0.0 is not allowed"),
    ({"time": -1.0}, "--time -1.0 is not allowed"),
    ({"events": 0}, "--events 0 is not allowed"),
    ({"samples": 0}, "--samples 0 is not allowed"),
    ({"threads": 0}, "--threads 0 is not allowed"),
    ({"threads": 100_000}, "--threads 100000 exceeds"),
])
def test_bad_input_is_refused(ctx: RunContext, given: dict, message: str) -> None:
    with pytest.raises(UsageError) as err:
        get_benchmark("intcpu").resolve(ctx, given)
    assert str(err.value).startswith(message)


def test_defaults_are_sysbenchs_and_a_huge_event_exceeds_the_timeout(ctx: RunContext) -> None:
    bench = get_benchmark("intcpu")
    d = bench.defaults("default")
    assert d["max_prime"] == 10000 and d["time"] == 10.0 and d["events"] is None
    p = bench.resolve(ctx, {"threads": 1})
    assert p["threads"] == 1 and len(p["cpus"]) == 1 and p["time"] == 2.0  # the fixture's profile is quick
    with pytest.raises(UsageError) as err:  # one event at 1e8 is minutes, above the fixture's 300 s
        bench.resolve(ctx, {"threads": 1, "max_prime": 100_000_000})
    assert "timeout" in str(err.value)
    assert "intcpu" not in get_benchmark("node").members()  # decided: not in the node suite


def test_records_are_parsed_into_results(ctx: RunContext, monkeypatch: pytest.MonkeyPatch) -> None:
    """The figure is the kernel's whole-run events/s (total events / total time), not the best
    slice; the kernel's params (per-thread events, latency figures) are kept."""
    bench = get_benchmark("intcpu")
    p = bench.resolve(ctx, {"threads": 1, "time": 0.5})
    kp = {"max_prime": 10000, "expected_primes": 1228, "total_events": 100, "total_time_s": 0.5,
          "events_per_thread": [100], "latency_min_ms": 4.0, "latency_avg_ms": 5.0, "latency_max_ms": 9.0,
          "latency_p95_ms": 6.0}
    recs = [{"type": "result", "metric": "events_per_s", "unit": "events/s", "value": 200.0, "params": kp,
             "samples": [180.0, 250.0], "times_s": [0.25, 0.25]},
            {"type": "result", "metric": "latency", "unit": "ms", "value": 5.0, "params": kp,
             "samples": [5.5, 4.5], "times_s": [0.25, 0.25]}]
    monkeypatch.setattr(RunContext, "build", lambda self, name, **k: None)

    def fake_measure(self, ctx_, args, cpus, on_result, build=None, **k):
        assert f"--cpus={cpus[0]}" in args and "--max_prime=10000" in args and "--time=0.5" in args
        for r in recs:
            on_result(r)
        return {}

    monkeypatch.setattr(type(bench), "measure", fake_measure)
    res = bench.run(ctx, p)
    by = {r.metric: r for r in res}
    assert by["events_per_s"].value == 200.0 and by["events_per_s"].summary["best"] == 250.0
    assert by["latency"].value == 5.0 and not by["latency"].higher_is_better
    assert by["events_per_s"].params["threads"] == 1 and by["events_per_s"].params["latency_p95_ms"] == 6.0
    lines = [line for rule in bench.headlines for line in rule(res)]  # what the run's summary prints
    assert lines and "200.0 events/s" in lines[0] and "max-prime 10000" in lines[0]


def test_the_results_table_does_not_call_a_whole_run_rate_best() -> None:
    """Issue 23: intcpu's figure (total events / total time, the whole run's) was printed under the
    table's "best" column. The column says what it holds: "best" only when every value there is a
    best sample (``Metric.value_is``); otherwise "value", with each other kind beside its figure."""
    from io import StringIO

    from clusterbench.ui import print_results

    def res(bench: str, metric: str, value: float, unit: str, samples: list[float]) -> Result:
        return Result(benchmark=bench, metric=metric, value=value, unit=unit, higher_is_better=True,
                      params={"threads": 1}, samples=samples,
                      summary={"best": max(samples), "median": value, "cv": 0.01})

    peak = res("peak", "gflops", 40.0, "Gflop/s", [39.0, 40.0])
    out = StringIO()
    print_results([peak], out)
    assert out.getvalue().split()[3] == "best"
    out = StringIO()
    print_results([res("intcpu", "events_per_s", 200.0, "events/s", [180.0, 250.0]),
                   res("intcpu", "latency", 5.0, "ms", [5.5, 4.5]), peak], out)
    header, *rows = out.getvalue().splitlines()
    assert header.split()[3] == "value" and "best" not in header.split()
    assert "200.0 events/s (whole run)" in rows[0] and "5.00 ms (mean of the run)" in rows[1]  # clusterbench.units: 3 digits shown
    assert "40.0 Gflop/s" in rows[2] and "(" not in rows[2].split("Gflop/s")[1].split()[0]
