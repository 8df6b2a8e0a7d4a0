"""intcpu: sysbench cpu's prime search, validated; parameters, parsing, the real kernel briefly."""
from __future__ import annotations

import math
import re
import subprocess

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext
from clusterbench.benchmarks.node import intcpu as mod
from clusterbench.errors import KernelFailed, UsageError
from clusterbench.kernels.build import build_kernel


def sysbench_event(max_prime: int) -> tuple[int, int]:
    """sysbench's event in Python, for small max_prime: (primes counted, remainders computed)."""
    found = divs = 0
    for c in range(3, max_prime):
        root = math.sqrt(float(c))
        d = 2
        prime = True
        while float(d) <= root:
            divs += 1
            if c % d == 0:
                prime = False
                break
            d += 1
        found += prime
    return found, divs


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
    lines = mod._headlines([r.as_json() for r in res])
    assert lines and "200.0 events/s" in lines[0] and "max-prime 10000" in lines[0]


def test_the_results_table_does_not_call_a_whole_run_rate_best() -> None:
    """Issue 23: intcpu's figure (total events / total time, the whole run's) was printed under the
    table's "best" column. The column says what it holds: "best" only when every value there is a
    best sample (``Metric.value_is``); otherwise "value", with each other kind beside its figure."""
    from io import StringIO

    from clusterbench.ui import print_results

    def res(bench: str, metric: str, value: float, unit: str, samples: list[float]) -> dict:
        return {"benchmark": bench, "metric": metric, "value": value, "unit": unit, "params": {"threads": 1},
                "samples": samples, "summary": {"best": max(samples), "median": value, "cv": 0.01}, "warnings": []}

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


@pytest.mark.integration
def test_run_intcpu_prints_its_rate_as_the_whole_runs(capsys: pytest.CaptureFixture) -> None:
    from clusterbench import cli

    assert cli.main(["run", "intcpu", "--threads", "1", "--time", "0.2", "--samples", "2", "--no-store"]) == 0
    out = capsys.readouterr().out
    header = next(ln for ln in out.splitlines() if ln.startswith("benchmark"))
    assert header.split()[3] == "value", out
    assert "events/s (whole run)" in out and "ms (mean of the run)" in out


# -- integration tier: the real kernel, briefly ------------------------------------------------
@pytest.mark.integration
def test_intcpu_runs_validated_and_consistent(ctx: RunContext) -> None:
    bench = get_benchmark("intcpu")
    p = bench.resolve(ctx, {"time": 0.3, "samples": 3})
    res = bench.run(ctx, p)
    counts = sorted({r.params["threads"] for r in res})
    assert counts == sorted({1, p["threads"]})
    for r in res:
        kp = r.params
        assert kp["expected_primes"] == 1228 and kp["divisions_per_event"] == 117526
        assert sum(kp["events_per_thread"]) == kp["total_events"] >= 1
        assert len(kp["events_per_thread"]) == kp["threads"]
        assert kp["total_time_s"] >= 0.3  # the last event ends after the limit, never before
        if r.metric == "events_per_s":
            assert r.value == pytest.approx(kp["total_events"] / kp["total_time_s"], rel=1e-6)
        else:
            assert r.unit == "ms"
            assert kp["latency_min_ms"] <= kp["latency_avg_ms"] <= kp["latency_max_ms"]
            assert kp["latency_min_ms"] <= kp["latency_p95_ms"] <= kp["latency_max_ms"]
            assert r.value == pytest.approx(kp["latency_avg_ms"], rel=1e-6)


@pytest.mark.integration
def test_intcpu_event_budget_and_other_max_primes(ctx: RunContext) -> None:
    b = build_kernel("intcpu")
    recs = ctx.run_kernel(b, ["--cpus=0", "--max_prime=20000", "--events=30", "--time=60", "--samples=2"])
    val = next(r for r in recs if r["type"] == "validation")
    assert val["ok"] and val["events_checked"] == 30 and val["expected_primes"] == 2261
    eps = next(r for r in recs if r["type"] == "result" and r["metric"] == "events_per_s")
    assert eps["params"]["total_events"] == 30
    for max_prime in (3, 4, 100, 1000):  # the sieve and the loop agree, 2 and max_prime excluded
        recs = ctx.run_kernel(b, ["--cpus=0", f"--max_prime={max_prime}", "--events=5", "--samples=1"])
        info = next(r for r in recs if r["type"] == "info")
        assert (info["expected_primes"], info["divisions_per_event"]) == sysbench_event(max_prime)


@pytest.mark.integration
def test_intcpu_wrong_count_is_refused(ctx: RunContext) -> None:
    bench = get_benchmark("intcpu")
    p = bench.resolve(ctx, {"threads": 1, "time": 0.1, "corrupt": True})
    with pytest.raises(KernelFailed) as err:
        bench.run(ctx, p)
    assert "computed a wrong result" in str(err.value) and "1229 primes" in str(err.value)
    assert not ctx.results  # nothing was emitted


@pytest.mark.integration
def test_intcpu_hot_loop_is_a_64_bit_divide() -> None:
    """objdump: the event keeps sysbench's work: a 64-bit unsigned divide and one sqrt per candidate."""
    b = build_kernel("intcpu")
    try:
        dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(b.path)], capture_output=True,
                             text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("objdump not available")
    if "<prime_event>:" not in dis or "sqrtsd" not in dis:
        pytest.skip("not an x86 build")
    start = dis.index("<prime_event>:")
    body = dis[start:dis.index("ret", start)]
    assert re.search(r"\bdiv\s+%r\w+", body)  # div r64, not a 32-bit divide
    assert body.count("sqrtsd") == 1
