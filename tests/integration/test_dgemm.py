"""dgemm: the product is checked, the BLAS is chosen at run time and recorded, bad input is refused."""
from __future__ import annotations

import os

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.probe.blas import installed_blas, resolve_blas
from clusterbench.errors import EnvironmentProblem, KernelFailed, UsageError
from clusterbench.session import run as session_run
from clusterbench.store import Store

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass


def _run(ctx, **given):
    b = get_benchmark("dgemm")
    return b.run(ctx, b.resolve(ctx, given))


def _recording(ctx):
    """Keep each kernel process's raw records (ctx.run_parallel runs every dgemm job)."""
    seen: list[list[list[dict]]] = []
    orig = ctx.run_parallel

    def wrapped(jobs, on_record=None, timeout=None):
        out = orig(jobs, on_record, timeout)
        seen.append(out)
        return out
    ctx.run_parallel = wrapped
    return seen


@pytest.mark.integration
def test_dgemm_flops_counting_and_star_sum(ctx):
    """gflops = 2 n^3 / t of each timed product; star = sum over processes, per sample;
    every process validated before printing and ran where it was asked to."""
    calls = _recording(ctx)
    n = 300
    res = _run(ctx, n=n, samples=3)
    modes = [r.params["mode"] for r in res if r.metric == "gflops"]
    assert len(calls) == len(modes)
    for mode, procs in zip(modes, calls):
        g = next(r for r in res if r.metric == "gflops" and r.params["mode"] == mode)
        for recs in procs:
            assert [r["type"] for r in recs] == ["info", "validation", "result"] and recs[1]["ok"]
            info, rec = recs[0], recs[2]
            assert rec["samples"] == pytest.approx([2 * n**3 / t / 1e9 for t in rec["times_s"]], rel=1e-12)
            assert len(rec["samples"]) == 3
            want = [c for c in g.params["cpus"]] if mode == "threaded" else None
            if want:
                assert info["cpus_actual"] == want
            else:
                assert len(info["cpus_actual"]) == 1 and info["cpus_actual"][0] in g.params["cpus"]
        per = [recs[2]["samples"] for recs in procs]
        agg = [sum(s[j] for s in per) for j in range(3)]
        assert g.samples == pytest.approx(agg, rel=1e-12)
        assert g.value == pytest.approx(max(agg), rel=1e-12)
        assert g.params["processes"] == (len(g.params["cpus"]) if mode == "star" else 1)
        if mode == "star":
            lo = next(r for r in res if r.metric == "gflops_min_process")
            assert lo.samples == pytest.approx([min(s[j] for s in per) for j in range(3)], rel=1e-12)
            assert len(g.params["late_s"]) == g.params["processes"]
            assert all(x >= 0 for x in g.params["late_s"])


@pytest.mark.integration
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


@pytest.mark.integration
def test_dgemm_kernel_residual_and_corruption(ctx):
    _, path = resolve_blas("openblas")
    b = ctx.build("dgemm", libs=("dl",))
    env = {"OPENBLAS_NUM_THREADS": "1"}
    recs = ctx.run_kernel(b, [f"--lib={path}", "--n=200", "--samples=1", "--cpus=0", "--check-cols=200"], env=env)
    val = next(r for r in recs if r["type"] == "validation")
    assert val["ok"] and val["residual"] < 16
    with pytest.raises(KernelFailed, match="wrong result"):
        ctx.run_kernel(b, [f"--lib={path}", "--n=200", "--samples=1", "--cpus=0", "--corrupt=1"], env=env)


@pytest.mark.integration
def test_dgemm_corrupted_run_stores_nothing(live_probe, tmp_path):
    store = Store(tmp_path / "r.db")
    with pytest.raises(KernelFailed, match="wrong result"):
        session_run(["dgemm"], {"dgemm": {"corrupt": True, "n": 200, "samples": 1}}, profile="quick",
                    use_store=True, store=store, probe_data=live_probe, argv=["clusterbench"])
    runs = store.list_runs()
    assert len(runs) == 1 and runs[0].status == "incomplete" and runs[0].results == 0
    assert store.results(runs[0].id) == []


@pytest.mark.integration
def test_dgemm_pin_failure_is_fatal(ctx):
    _, path = resolve_blas("openblas")
    b = ctx.build("dgemm", libs=("dl",))
    with pytest.raises(KernelFailed, match="cannot pin to cpu 1023: Invalid argument"):
        ctx.run_kernel(b, [f"--lib={path}", "--n=50", "--samples=1", "--cpus=1023"])
    with pytest.raises(KernelFailed, match="cannot bind to cpus"):
        ctx.run_kernel(b, [f"--lib={path}", "--n=50", "--samples=1", "--cpus=1022,1023"])


@pytest.mark.integration
def test_dgemm_blas_threads_mismatch_warns(ctx):
    b = get_benchmark("dgemm")
    params = b.resolve(ctx, {"n": 100, "samples": 1, "mode": "threaded"})
    cores = params["threads"]
    rec = {"samples": [1.0], "times_s": [0.002]}
    info = {"blas_config": "OpenBLAS 0.3.21", "blas_path": params["blas_path"], "blas_threads": cores + 1}
    out = b._emit(ctx, params, "threaded", params["cpus"], {0: info}, {0: rec})
    assert "blas-threads-mismatch" in [w["code"] for w in out[0].warnings]
    out = b._emit(ctx, params, "threaded", params["cpus"], {0: {**info, "blas_threads": cores}}, {0: rec})
    assert "blas-threads-mismatch" not in [w["code"] for w in out[0].warnings]


@pytest.mark.integration
@pytest.mark.skipif("blis" not in installed_blas(), reason="BLIS not installed")
def test_dgemm_blis_is_loaded(ctx):
    res = _run(ctx, n=300, samples=2, blas="blis", mode="single")
    g = res[0]
    assert g.params["blas"] == "blis" and "blis" in g.params["blas_path"]
    assert g.params["blas_config"].startswith("BLIS")
    assert any("blis" in x for x in g.params["blas_loaded"])
    assert not any("openblas" in x for x in g.params["blas_loaded"])


@pytest.mark.integration
def test_dgemm_blas_by_path(ctx):
    _, path = resolve_blas("openblas")
    res = _run(ctx, n=200, samples=1, blas=path, mode="single")
    assert res[0].params["blas_path"] == os.path.realpath(path)


@pytest.mark.integration
def test_dgemm_unknown_blas(ctx):
    with pytest.raises(UsageError, match="unknown --blas 'nosuchblas'.*installed"):
        get_benchmark("dgemm").resolve(ctx, {"blas": "nosuchblas"})
    with pytest.raises(UsageError):
        get_benchmark("dgemm").resolve(ctx, {"blas": "/nonexistent/libblas.so"})


@pytest.mark.integration
def test_dgemm_not_a_blas_library(ctx):
    libm = next((p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6",
                             "/lib64/libm.so.6") if os.path.exists(p)), None)
    if not libm:
        pytest.skip("no libm path known")
    with pytest.raises(EnvironmentProblem, match="without cblas_dgemm or dgemm_: not a BLAS"):
        _run(ctx, n=100, samples=1, blas=libm, mode="single")  # refused before the kernel starts


@pytest.mark.integration
def test_dgemm_measured_peak_limit(ctx):
    """With peak results in the same run, dgemm is judged against the best peak at the same
    thread count: fraction = value / that peak."""
    peak = get_benchmark("peak")
    pk = peak.run(ctx, peak.resolve(ctx, {"samples": 1, "seconds": 0.05, "sp": False}))
    res = _run(ctx, n=300, samples=1)
    for r in (x for x in res if x.metric == "gflops"):
        n = r.params["threads"]
        best = max(p.value for p in pk if p.metric == "gflops" and p.params["threads"] == n)
        lim = next(lim for lim in r.limits if lim["name"] == "measured_peak")
        assert lim["value"] == pytest.approx(best)
        assert lim["fraction"] == pytest.approx(r.value / best)
