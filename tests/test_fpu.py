"""fpu: the real kernel compiled and run; validation, bad input, sane figures."""
from __future__ import annotations

import math
import subprocess

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.errors import KernelFailed, UsageError
from clusterbench.kernels.build import build_kernel


def test_fpu_quick_runs_and_is_plausible(ctx):
    bench = get_benchmark("fpu")
    params = bench.resolve(ctx, {"samples": 3, "min_time": 0.001})
    res = bench.run(ctx, params)
    by = {r.metric: r for r in res}
    for op in ("add", "mul", "fma", "div", "sqrt"):
        for kind in ("latency", "throughput"):
            for unit in ("ns", "cycles"):
                r = by[f"{op}_{kind}_{unit}"]
                assert math.isfinite(r.value) and r.value > 0
                assert r.params["threads"] == 1 and r.params["cpus"] == [params["cpu"]]
        # a dependent chain cannot beat 1 cycle; scalar throughput cannot beat 1/4 cycle per op
        assert by[f"{op}_latency_cycles"].value >= 0.9
        assert by[f"{op}_throughput_cycles"].value >= 0.2
        assert by[f"{op}_throughput_ns"].value <= by[f"{op}_latency_ns"].value * 1.2
    assert by["div_latency_cycles"].value > by["add_latency_cycles"].value
    assert 0.3 < by["add_latency_cycles"].params["clock_ghz"] < 7


def test_fpu_corrupted_result_is_caught(ctx):
    b = build_kernel("fpu")
    with pytest.raises(KernelFailed):
        ctx.run_kernel(b, ["--cpu=0", "--ops=add,div", "--samples=2", "--min_time=0.0005", "--corrupt=1"])


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
