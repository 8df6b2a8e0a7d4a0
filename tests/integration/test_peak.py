"""peak: the FMA kernel really runs, validates its chains, and the benchmark reports sane figures."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.errors import KernelFailed
from clusterbench.session import run as session_run
from clusterbench.store import Store


def _rows(results, metric):
    return [r for r in results if r.metric == metric]


def _recording(ctx):
    """Keep every kernel process's raw records (ctx.run_parallel is what run_kernel calls)."""
    seen: list[list[dict]] = []
    orig = ctx.run_parallel

    def wrapped(jobs, on_record=None, timeout=None):
        out = orig(jobs, on_record, timeout)
        seen.extend(out)
        return out
    ctx.run_parallel = wrapped
    return seen


@pytest.mark.parallel
@pytest.mark.integration
def test_peak_gflops_is_flops_over_time(ctx):
    """The figure is threads x flops/iteration x iterations / sample span, from the raw records;
    the kernel validates before it prints results and reports where each thread ran."""
    b = get_benchmark("peak")
    procs = _recording(ctx)
    res = b.run(ctx, b.resolve(ctx, {"samples": 2, "seconds": 0.1, "sp": True}))
    assert len(procs) == (4 if ctx.n_cores > 1 else 2)  # (1 thread, all) x (dp, sp)
    for recs in procs:  # info, then a successful validation, then the result
        assert [r["type"] for r in recs] == ["info", "validation", "result"] and recs[1]["ok"]
    infos = [recs[0] for recs in procs]
    kres = [recs[2] for recs in procs]
    for info in infos:
        assert info["cpus_actual"] == info["cpus"] and info["warmup_samples"] == 1
        assert info["flops_per_iteration"] == 2 * info["accumulators"] * info["lanes"]
    for rec in kres:
        n = rec["threads"]
        want = [n * rec["flops_per_iteration"] * rec["iterations"] / t / 1e9 for t in rec["times_s"]]
        assert rec["samples"] == pytest.approx(want, rel=1e-12)
    # the emitted figures are the best of exactly those samples
    for metric, prec in (("gflops", "dp"), ("sp_gflops", "sp")):
        emitted = _rows(res, metric)
        raws = [r for r in kres if r["params"]["precision"] == prec]
        assert [r.params["threads"] for r in emitted] == [r["threads"] for r in raws]
        for r, rec in zip(emitted, raws):
            assert r.value == pytest.approx(max(rec["samples"]), rel=1e-12)
            assert r.samples == pytest.approx(rec["samples"], rel=1e-12)
            assert r.params["iterations"] == rec["iterations"]


@pytest.mark.integration
def test_peak_quick_validates_and_is_sane(ctx):
    b = get_benchmark("peak")
    p = b.resolve(ctx, {"samples": 2, "seconds": 0.1, "sp": True})
    res = b.run(ctx, p)
    g = _rows(res, "gflops")
    assert [r.params["threads"] for r in g] == ([1, ctx.n_cores] if ctx.n_cores > 1 else [1])
    one = g[0]
    assert one.params["precision"] == "dp" and one.params["isa"] in ("avx512", "avx2", "sve", "neon", "scalar")
    assert len(one.params["cpus"]) == 1 and one.params["cpus_actual"] == one.params["cpus"]
    rpeak = next((lim for lim in one.limits if lim["name"] == "rpeak"), None)
    if rpeak:  # a shared, noisy machine still gives well over a tenth of Rpeak
        assert 0.1 < rpeak["fraction"] < 3.0
    assert _rows(res, "effective_clock") and all(r.value > 100 for r in _rows(res, "effective_clock"))
    sp = _rows(res, "sp_gflops")
    assert sp and all(r.value > 0 and r.unit == "Gflop/s" for r in sp)
    sp_rpeak = ((ctx.probe.get("rpeak") or {}).get("per_core") or {}).get("sp_gflops_nominal")
    for r in sp:
        lim = r.limit
        if sp_rpeak:
            assert lim and lim["name"] == "rpeak_sp"
            assert lim["value"] == pytest.approx(sp_rpeak * r.params["threads"])
            assert lim["fraction"] == pytest.approx(r.value / lim["value"])
    for r in _rows(res, "gflops_per_core"):
        assert r.value == pytest.approx(
            next(x for x in g if x.params["threads"] == r.params["threads"]).value / r.params["threads"], rel=1e-9)
    for r in _rows(res, "fma_units"):
        assert r.unit == "count"


@pytest.mark.integration
def test_peak_forced_scalar_is_slower(ctx):
    b = get_benchmark("peak")
    auto = b.run(ctx, b.resolve(ctx, {"samples": 2, "seconds": 0.1, "sp": False, "threads": 1}))
    scal = b.run(ctx, b.resolve(ctx, {"samples": 2, "seconds": 0.1, "sp": False, "threads": 1, "isa": "scalar"}))
    ga, gs = _rows(auto, "gflops")[0], _rows(scal, "gflops")[0]
    assert gs.params["isa"] == "scalar"
    if ga.params["isa"] != "scalar":
        assert ga.value > 1.5 * gs.value


@pytest.mark.parallel
@pytest.mark.integration
def test_peak_corrupted_chain_fails_validation(ctx):
    b = ctx.build("peak")
    with pytest.raises(KernelFailed, match="wrong result"):
        ctx.run_kernel(b, ["--cpus=0", "--seconds=0.02", "--samples=1", "--corrupt=1"])
    recs = ctx.run_kernel(b, ["--cpus=0", "--seconds=0.02", "--samples=1"])
    assert any(r["type"] == "validation" and r["ok"] for r in recs)


@pytest.mark.parallel
@pytest.mark.integration
def test_peak_corrupted_run_stores_nothing(live_probe, tmp_path):
    store = Store(tmp_path / "r.db")
    with pytest.raises(KernelFailed, match="wrong result"):
        session_run(["peak"], {"peak": {"corrupt": True, "samples": 1, "seconds": 0.02, "sp": False}},
                    profile="quick", use_store=True, store=store, probe_data=live_probe, argv=["clusterbench"])
    runs = store.list_runs()
    assert len(runs) == 1 and runs[0].status == "incomplete" and runs[0].results == 0
    assert store.results(runs[0].id) == []


@pytest.mark.parallel
@pytest.mark.integration
def test_peak_pin_failure_is_fatal(ctx):
    b = ctx.build("peak")
    with pytest.raises(KernelFailed, match="cannot pin"):
        ctx.run_kernel(b, ["--cpus=1023", "--seconds=0.02", "--samples=1", "--clock-seconds=0"])
    if ctx.n_pus > 1:  # the calibration thread pins fine, a worker does not
        with pytest.raises(KernelFailed, match="cannot pin thread 1"):
            ctx.run_kernel(b, ["--cpus=0,1023", "--seconds=0.02", "--samples=1", "--clock-seconds=0",
                               "--iters=1000"])


