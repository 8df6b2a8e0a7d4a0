"""intcpu: sysbench cpu's prime search, validated; parameters, parsing, the real kernel briefly."""
from __future__ import annotations

import re
import subprocess

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext
from clusterbench.errors import KernelFailed
from clusterbench.kernels.build import build_kernel

from intcpukit import sysbench_event

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass


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
