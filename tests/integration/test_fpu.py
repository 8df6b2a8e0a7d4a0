"""fpu: the real kernel compiled and run; validation, bad input, sane figures."""
from __future__ import annotations

import math
import subprocess

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.errors import KernelFailed
from clusterbench.kernels.build import build_kernel


@pytest.mark.integration
def test_fpu_quick_runs_and_is_plausible(ctx):
    bench = get_benchmark("fpu")
    params = bench.resolve(ctx, {"samples": 3, "min_time": 0.001})
    res = bench.run(ctx, params)
    assert {r.metric for r in res} == {"latency", "latency_cycles", "throughput", "throughput_cycles"}
    by = {(r.metric, r.params["op"]): r for r in res}
    assert len(by) == len(res) == 20
    for op in ("add", "mul", "fma", "div", "sqrt"):
        for metric in ("latency", "latency_cycles", "throughput", "throughput_cycles"):
            r = by[metric, op]
            assert math.isfinite(r.value) and r.value > 0 and not r.higher_is_better
            assert r.unit == ("cycles" if metric.endswith("cycles") else "ns")
            assert r.params["threads"] == 1 and r.params["cpus"] == [params["cpu"]]
        # a dependent chain cannot beat 1 cycle; scalar throughput cannot beat 1/4 cycle per op
        assert by["latency_cycles", op].value >= 0.9
        assert by["throughput_cycles", op].value >= 0.2
        assert by["throughput", op].value <= by["latency", op].value * 1.2
    assert by["latency_cycles", "div"].value > by["latency_cycles", "add"].value
    # the sqrt chain (x = sqrt(x) * K) is reported net of the multiply measured beside it
    sq = by["latency", "sqrt"]
    assert 0 < sq.params["mul_latency_subtracted_ns"] < sq.value
    assert by["latency_cycles", "sqrt"].value > by["latency_cycles", "mul"].value
    assert 0.3 < by["latency_cycles", "add"].params["clock_ghz"] < 7


@pytest.mark.parallel
@pytest.mark.integration
def test_fpu_operands_are_not_trivial(ctx):
    """sqrt must not settle at 1.0 (x = sqrt(x) * sqrt(1.7) settles near 1.7) and div must not
    divide by a short-mantissa constant (x = e / x alternates around sqrt(e)); long chains still
    match their closed forms."""
    b = build_kernel("fpu")
    recs = ctx.run_kernel(b, ["--cpu=0", "--ops=div,sqrt", "--samples=2", "--min_time=0.01"])
    vals = {v["op"]: v for v in recs if v["type"] == "validation"}
    assert set(vals) == {"div", "sqrt"} and all(v["ok"] for v in vals.values())
    assert vals["sqrt"]["final_value"] == pytest.approx(1.7, rel=1e-12)
    x = vals["div"]["final_value"]
    assert x in (pytest.approx(math.sqrt(2), rel=1e-12), pytest.approx(math.e / math.sqrt(2), rel=1e-12))
    for v in (vals["sqrt"]["final_value"], x):  # full mantissa: not a short binary fraction
        assert (v * 2 ** 40) % 1 != 0


@pytest.mark.parallel
@pytest.mark.integration
def test_fpu_corrupted_result_is_caught(ctx):
    b = build_kernel("fpu")
    with pytest.raises(KernelFailed):
        ctx.run_kernel(b, ["--cpu=0", "--ops=add,div", "--samples=2", "--min_time=0.0005", "--corrupt=1"])


@pytest.mark.parallel
@pytest.mark.integration
def test_fpu_hot_loops_are_scalar_and_unfolded():
    """objdump: the latency chain is a run of scalar vaddsd/vsqrtsd, not a folded or packed loop."""
    b = build_kernel("fpu")
    try:
        dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(b.path)], capture_output=True,
                             text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("objdump not available")
    if "vaddsd" not in dis and "addsd" not in dis:
        pytest.skip("not an x86 build")

    def body(fn: str) -> str:
        start = dis.index(f"<{fn}>:")
        return dis[start:dis.index("ret", start)]

    assert body("lat_add").count("addsd") >= 32
    assert body("lat_sqrt").count("sqrtsd") >= 32
    tput = body("tput_fma")
    import re

    fmas = re.findall(r"vfmadd\w+", tput)
    assert len(fmas) >= 128 and all(f.endswith("sd") for f in fmas)  # scalar, never packed
