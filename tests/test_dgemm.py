"""dgemm: the product is checked, the BLAS is chosen at run time and recorded, bad input is refused."""
from __future__ import annotations

import os

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.dgemm import installed_blas, resolve_blas
from clusterbench.errors import EnvironmentProblem, KernelFailed, UsageError


def _run(ctx, **given):
    b = get_benchmark("dgemm")
    return b.run(ctx, b.resolve(ctx, given))


def test_dgemm_all_modes_small(ctx):
    res = _run(ctx, n=300, samples=2)
    modes = [r.params["mode"] for r in res if r.metric == "gflops"]
    assert modes == (["single", "star", "threaded"] if ctx.n_cores > 1 else ["single"])
    for r in res:
        assert r.value > 0
        assert r.params["blas"] == "openblas" and "openblas" in r.params["blas_path"]
        assert r.params["blas_config"].startswith("OpenBLAS")
        assert any("openblas" in x for x in r.params["blas_loaded"])
    star = [r for r in res if r.params["mode"] == "star"]
    if star:
        g = next(r for r in star if r.metric == "gflops")
        assert g.params["processes"] == ctx.n_cores and g.params["threads"] == ctx.n_cores
        lo = next(r for r in star if r.metric == "gflops_min_process")
        assert lo.value <= g.value


def test_dgemm_kernel_residual_and_corruption(ctx):
    _, path = resolve_blas("openblas")
    b = ctx.build("dgemm", libs=("dl",))
    env = {"OPENBLAS_NUM_THREADS": "1"}
    recs = ctx.run_kernel(b, [f"--lib={path}", "--n=200", "--samples=1", "--cpus=0", "--check-cols=200"], env=env)
    val = next(r for r in recs if r["type"] == "validation")
    assert val["ok"] and val["residual"] < 16
    with pytest.raises(KernelFailed, match="wrong result"):
        ctx.run_kernel(b, [f"--lib={path}", "--n=200", "--samples=1", "--cpus=0", "--corrupt=1"], env=env)


@pytest.mark.skipif("blis" not in installed_blas(), reason="BLIS not installed")
def test_dgemm_blis_is_loaded(ctx):
    res = _run(ctx, n=300, samples=2, blas="blis", mode="single")
    g = res[0]
    assert g.params["blas"] == "blis" and "blis" in g.params["blas_path"]
    assert g.params["blas_config"].startswith("BLIS")
    assert any("blis" in x for x in g.params["blas_loaded"])
    assert not any("openblas" in x for x in g.params["blas_loaded"])


def test_dgemm_blas_by_path(ctx):
    _, path = resolve_blas("openblas")
    res = _run(ctx, n=200, samples=1, blas=path, mode="single")
    assert res[0].params["blas_path"] == os.path.realpath(path)


def test_dgemm_unknown_blas(ctx):
    with pytest.raises(UsageError, match="unknown --blas 'nosuchblas'.*installed"):
        get_benchmark("dgemm").resolve(ctx, {"blas": "nosuchblas"})
    with pytest.raises(UsageError):
        get_benchmark("dgemm").resolve(ctx, {"blas": "/nonexistent/libblas.so"})


def test_dgemm_missing_known_blas_names_package(ctx, monkeypatch):
    import clusterbench.benchmarks.dgemm as d
    monkeypatch.setattr(d, "installed_blas", lambda: {"openblas": "/x/libopenblas.so.0"})
    with pytest.raises(EnvironmentProblem, match="apt-get install libmkl-rt"):
        get_benchmark("dgemm").resolve(ctx, {"blas": "mkl"})


def test_dgemm_not_a_blas_library(ctx):
    libm = next((p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6",
                             "/lib64/libm.so.6") if os.path.exists(p)), None)
    if not libm:
        pytest.skip("no libm path known")
    with pytest.raises(KernelFailed, match="neither cblas_dgemm nor dgemm_"):
        _run(ctx, n=100, samples=1, blas=libm, mode="single")


@pytest.mark.parametrize("given", [{"threads": 0}, {"threads": 100000}, {"samples": 0}, {"n": 0},
                                   {"n": 10**6}, {"mode": "bogus"}, {"cpus": [0], "threads": 2}])
def test_dgemm_bad_input(ctx, given):
    with pytest.raises(UsageError):
        get_benchmark("dgemm").resolve(ctx, given)


def test_dgemm_measured_peak_limit(ctx):
    """With a peak result in the same run, dgemm is judged against it (scaled by threads)."""
    peak = get_benchmark("peak")
    peak.run(ctx, peak.resolve(ctx, {"samples": 1, "seconds": 0.05, "sp": False, "threads": 1}))
    res = _run(ctx, n=300, samples=1, mode="single")
    assert any(lim["name"] == "measured_peak" for lim in res[0].limits)
