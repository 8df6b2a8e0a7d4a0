"""stream: real kernel at small sizes (validation, corruption, byte counting, placement, NUMA path)."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.node.stream import BYTES_PER_ELEMENT, sweep_counts
from clusterbench.errors import KernelFailed

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass

SMALL = 200_000  # elements per array: fast; in cache, which is fine for correctness tests


def _records(ctx):
    """Capture every kernel record the benchmark sees (to check against the raw times)."""
    seen: list[dict] = []
    orig = ctx.run_kernel

    def run_kernel(build, args, env=None, on_record=None, timeout=None):
        def hook(rec):
            seen.append(rec)
            if on_record:
                on_record(rec)
        return orig(build, args, env=env, on_record=hook, timeout=timeout)

    ctx.run_kernel = run_kernel
    return seen


def _run(ctx, **given):
    bench = get_benchmark("stream")
    params = bench.resolve(ctx, given)
    bench.prepare(ctx, params)
    return bench, params, bench.run(ctx, params)


@pytest.mark.integration
def test_validation_passes_and_results_complete(ctx):
    recs = _records(ctx)
    _, params, res = _run(ctx, array_elements=SMALL, ntimes=4, sweep=False)
    n = ctx.n_cores
    assert params["threads"] == n and len(params["cpus"]) == n
    vals = [r for r in recs if r["type"] == "validation"]
    assert len(vals) == 2 and all(v["ok"] for v in vals)
    got = {(r.metric, r.params["variant"]) for r in res}
    assert got == {(k, v) for k in ("copy", "scale", "add", "triad") for v in ("regular", "nt")}
    for r in res:
        assert r.unit == "MB/s" and r.higher_is_better
        assert r.params["threads"] == n and r.params["cpus"] == params["cpus"]
        assert len(r.samples) == 3  # first iteration excluded
        assert r.value == max(r.samples) > 0
        # arrays this small run from cache: flagged, and judged against no memory limit
        assert r.params["in_cache"] is True and not any(lim["name"] == "best_bandwidth" for lim in r.limits)
    info = next(r for r in recs if r["type"] == "info")
    assert info["cpus_actual"] == params["cpus"]
    assert info["timer_resolution_s"] > 0
    assert ctx.timer_resolution_s == info["timer_resolution_s"]


@pytest.mark.integration
def test_byte_counting_convention(ctx):
    """copy/scale count 16 B and add/triad 24 B per element, MB = 1e6: rate = B*N*1e-6/t."""
    recs = _records(ctx)
    _, _, res = _run(ctx, array_elements=SMALL, ntimes=3, sweep=False, variant="regular", threads=1)
    raw = {r["metric"]: r for r in recs if r["type"] == "result"}
    for r in res:
        times = raw[r.metric]["times_s"][1:]
        want = [BYTES_PER_ELEMENT[r.metric] * SMALL * 1e-6 / t for t in times]
        assert r.samples == pytest.approx(want, rel=1e-12)
    assert BYTES_PER_ELEMENT == {"copy": 16, "scale": 16, "add": 24, "triad": 24}


@pytest.mark.integration
def test_corrupted_array_is_caught(ctx):
    with pytest.raises(KernelFailed, match="wrong result"):
        _run(ctx, array_elements=SMALL, ntimes=3, sweep=False, variant="nt", corrupt=True, threads=1)


@pytest.mark.integration
def test_thread_sweep_quick(ctx):
    n = ctx.n_cores
    assert sweep_counts(n, "quick", True) == ([n, 1] if n > 1 else [1])
    assert sweep_counts(8, "default", True) == [8, 1, 2, 3, 4, 5, 6, 7]
    assert sweep_counts(64, "default", True) == [64, 1, 2, 4, 8, 16, 32]
    assert sweep_counts(8, "default", False) == [8]
    _, _, res = _run(ctx, array_elements=SMALL, ntimes=3)
    assert sorted({r.params["threads"] for r in res}) == sorted({1, n})
    for r in res:
        assert len(r.params["cpus"]) == r.params["threads"]
    if n > 1:  # quick: all kernels, both variants at N; Triad with the winning variant at 1
        assert len([r for r in res if r.params["threads"] == n]) == 8
        one = [r for r in res if r.params["threads"] == 1]
        assert [r.metric for r in one] == ["triad"]
        best = max((r for r in res if r.params["threads"] == n and r.metric == "triad"), key=lambda r: r.value)
        assert one[0].params["variant"] == best.params["variant"]


@pytest.mark.integration
def test_numa_path(ctx):
    """One NUMA node here: the kernel says so and no matrix is produced; the NUMA mode itself
    still runs (threads on node 0, arrays bound to node 0) when libnuma is present."""
    from clusterbench.launch.local import run_kernel

    recs = _records(ctx)
    _, _, res = _run(ctx, array_elements=SMALL, ntimes=3, sweep=False, variant="nt", threads=1)
    info = next(r for r in recs if r["type"] == "info")
    assert "numa_nodes" in info and "libnuma" in info
    if info["numa_nodes"] == 1:
        assert not [r for r in res if r.metric == "triad_numa"]
    if not info["libnuma"]:
        pytest.skip("libnuma not installed: NUMA mode not compiled")
    b = get_benchmark("stream")._build(ctx)
    out = run_kernel(b, ["--cpus=0", f"--elements={SMALL}", "--ntimes=3", "--variant=both",
                         "--mem_nodes=0", "--cpu_node=0"], timeout=60)
    numa = [r for r in out if r["type"] == "result"]
    assert [r["metric"] for r in numa] == ["triad_numa", "triad_numa"]
    assert {r["params"]["variant"] for r in numa} == {"regular", "nt"}
    assert all(r["params"]["cpu_node"] == 0 and r["params"]["mem_node"] == 0 for r in numa)
    assert all(r["ok"] for r in out if r["type"] == "validation")
    with pytest.raises(KernelFailed, match="no NUMA node"):
        run_kernel(b, ["--cpus=0", "--elements=1000", "--mem_nodes=7"], timeout=60)


@pytest.mark.integration
def test_wrong_placement_is_reported(ctx, monkeypatch):
    """If a thread does not run where it was asked, the run fails (KernelFailed)."""
    import clusterbench.benchmarks.node.stream as st

    real = st.check_placement
    monkeypatch.setattr(st, "check_placement", lambda info, wanted, bench: real(
        {**info, "cpus_actual": [c + 1 for c in info["cpus_actual"]]}, wanted, bench))
    with pytest.raises(KernelFailed, match="ran on cpu"):
        _run(ctx, array_elements=SMALL, ntimes=3, sweep=False, threads=1, variant="regular")


@pytest.mark.integration
def test_triad_only_validation_catches_a_triad_that_stores_nothing(ctx):
    """Triad-only runs start from c = 1, so Triad must change a: with the kernels skipped
    (--skip_stores=1) validation fails, in the quick sweep's mode and in the NUMA mode."""
    from clusterbench.launch.local import run_kernel

    b = get_benchmark("stream")._build(ctx)
    args = ["--cpus=0", f"--elements={SMALL}", "--ntimes=3", "--variant=nt", "--kernels=triad"]
    ok = run_kernel(b, args, timeout=60)
    assert [r["metric"] for r in ok if r["type"] == "result"] == ["triad"]
    with pytest.raises(KernelFailed, match="wrong result"):
        run_kernel(b, [*args, "--skip_stores=1"], timeout=60)
    with pytest.raises(KernelFailed, match="wrong result"):  # all four kernels skipped: caught too
        run_kernel(b, ["--cpus=0", f"--elements={SMALL}", "--ntimes=3", "--variant=regular",
                       "--skip_stores=1"], timeout=60)
    info = next(r for r in ok if r["type"] == "info")
    if info["libnuma"]:
        with pytest.raises(KernelFailed, match="wrong result"):
            run_kernel(b, ["--cpus=0", f"--elements={SMALL}", "--ntimes=3", "--variant=regular",
                           "--mem_nodes=0", "--cpu_node=0", "--skip_stores=1"], timeout=60)


@pytest.mark.integration
def test_numa_results_params_from_plan(ctx, monkeypatch):
    """The run path drives the kernel from the plan: with a (fake) 2-node plan on this machine's
    cpus, each (cpu_node, mem_node) result carries the run's threads and cpus."""
    import clusterbench.benchmarks.node.stream as st

    if not st.numa_header(st.compiler()):
        pytest.skip("libnuma not installed")
    bench = get_benchmark("stream")
    b = bench._build(ctx)
    recs = _records(ctx)
    cpu = ctx.probe["topology"]["cpus"][0]["pu"]
    fake = [{"cpu_node": 0, "cpus": [cpu], "mem_nodes": [0], "array_elements": SMALL, "pairs": [(0, 0)]}]
    monkeypatch.setattr(st, "plan_numa", lambda *a, **k: (fake, []))
    params = bench.resolve(ctx, {"array_elements": SMALL, "ntimes": 3, "variant": "regular", "threads": 1})
    info = {"numa_nodes": 2, "libnuma": True}
    res = bench._numa(ctx, b, params, info, None)
    assert [(r.metric, r.params["cpu_node"], r.params["mem_node"], r.params["threads"], r.params["cpus"])
            for r in res] == [("triad_numa", 0, 0, 1, [cpu])]
    assert any(r["type"] == "validation" and r["ok"] for r in recs)


@pytest.mark.integration
def test_numa_build_skipped_without_header(ctx, monkeypatch):
    """No <numa.h>: the plain kernel is built straight away, no failing -lnuma attempt."""
    import clusterbench.benchmarks.node.stream as st

    calls = []
    real = ctx.build

    def build(name, libs=(), extra_flags=()):
        calls.append(libs)
        return real(name, libs=libs, extra_flags=extra_flags)

    monkeypatch.setattr(ctx, "build", build)
    monkeypatch.setattr(st, "numa_header", lambda cc: False)
    get_benchmark("stream")._build(ctx)
    assert calls == [()]
