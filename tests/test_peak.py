"""peak: the FMA kernel really runs, validates its chains, and the benchmark reports sane figures."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.peak import fpc_for_isa, infer_fma_units
from clusterbench.errors import KernelFailed, UsageError


def _rows(results, metric):
    return [r for r in results if r.metric == metric]


def test_peak_quick_validates_and_is_sane(ctx):
    b = get_benchmark("peak")
    p = b.resolve(ctx, {"samples": 2, "seconds": 0.1, "sp": True})
    res = b.run(ctx, p)
    g = _rows(res, "gflops")
    assert [r.params["threads"] for r in g] == ([1, ctx.n_cores] if ctx.n_cores > 1 else [1])
    one = g[0]
    assert one.params["precision"] == "dp" and one.params["isa"] in ("avx512", "avx2", "sve", "neon", "scalar")
    assert len(one.params["cpus"]) == 1
    rpeak = next((lim for lim in one.limits if lim["name"] == "rpeak"), None)
    if rpeak:  # a shared, noisy machine still gives well over a tenth of Rpeak
        assert 0.1 < rpeak["fraction"] < 3.0
    assert _rows(res, "effective_clock") and all(r.value > 100 for r in _rows(res, "effective_clock"))
    assert all(r.value > 0 for r in _rows(res, "sp"))
    for r in _rows(res, "gflops_per_core"):
        assert r.value == pytest.approx(
            next(x for x in g if x.params["threads"] == r.params["threads"]).value / r.params["threads"], rel=1e-9)


def test_peak_forced_scalar_is_slower(ctx):
    b = get_benchmark("peak")
    auto = b.run(ctx, b.resolve(ctx, {"samples": 2, "seconds": 0.1, "sp": False, "threads": 1}))
    scal = b.run(ctx, b.resolve(ctx, {"samples": 2, "seconds": 0.1, "sp": False, "threads": 1, "isa": "scalar"}))
    ga, gs = _rows(auto, "gflops")[0], _rows(scal, "gflops")[0]
    assert gs.params["isa"] == "scalar"
    if ga.params["isa"] != "scalar":
        assert ga.value > 1.5 * gs.value


def test_peak_corrupted_chain_fails_validation(ctx):
    b = ctx.build("peak")
    with pytest.raises(KernelFailed, match="wrong result"):
        ctx.run_kernel(b, ["--cpus=0", "--seconds=0.02", "--samples=1", "--corrupt=1"])
    recs = ctx.run_kernel(b, ["--cpus=0", "--seconds=0.02", "--samples=1"])
    assert any(r["type"] == "validation" and r["ok"] for r in recs)


@pytest.mark.parametrize("given", [{"threads": 0}, {"threads": 100000}, {"threads": -1}, {"samples": 0},
                                   {"seconds": 0.0}, {"isa": "mmx"}, {"cpus": [0], "threads": 2}])
def test_peak_bad_input(ctx, given):
    with pytest.raises(UsageError):
        get_benchmark("peak").resolve(ctx, given)


def test_peak_bad_cpu(ctx):
    b = get_benchmark("peak")
    p = b.resolve(ctx, {"cpus": [ctx.n_pus + 7]})
    with pytest.raises(UsageError, match="not an online cpu"):
        b.run(ctx, p)


def test_fma_unit_inference():
    assert infer_fma_units(28.5, [16, 32])[:2] == (2, 32)
    assert infer_fma_units(15.0, [16, 32]) == (1, 16, False)
    units, _cand, ambiguous = infer_fma_units(10.0, [16, 32])
    assert (units, ambiguous) == (1, True)
    assert fpc_for_isa(32, "avx512", "avx512", 512) == 32
    assert fpc_for_isa(32, "avx2", "avx512", 256) == 16
    assert fpc_for_isa(16, "avx2", "avx512", 256) == 16  # Zen 4: AVX-512 double-pumped
    assert fpc_for_isa(32, "scalar", "avx512", 64) == 4
