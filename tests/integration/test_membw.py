"""bandwidth: real kernel at small sizes (validation, corruption, byte counting, bad input)."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.errors import KernelFailed

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass

SMALL = 500_000


def _records(ctx):
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
    bench = get_benchmark("membw")
    params = bench.resolve(ctx, given)
    bench.prepare(ctx, params)
    return params, bench.run(ctx, params)


@pytest.mark.integration
def test_read_write_all_counts_validated(ctx):
    recs = _records(ctx)
    params, res = _run(ctx, array_elements=SMALL, ntimes=4)
    n = ctx.n_cores
    assert params["counts"] == sorted({1, n})  # quick profile
    assert {(r.metric, r.params.get("variant"), r.params["threads"]) for r in res} == {
        (m, v, c) for m, v in (("read", None), ("write", "regular"), ("write", "nt")) for c in params["counts"]}
    for r in res:
        assert r.unit == "MB/s" and len(r.samples) == 3 and r.value == max(r.samples) > 0
        assert r.params["cpus"] == params["cpus"][:r.params["threads"]]
        # small arrays run from cache: flagged, and judged against no memory limit
        assert r.params["in_cache"] is True and r.limit is None
    vals = [r for r in recs if r["type"] == "validation"]
    assert len(vals) == 3 * len(params["counts"]) and all(v["ok"] for v in vals)
    infos = [r for r in recs if r["type"] == "info"]
    assert [i["cpus_actual"] for i in infos] == [params["cpus"][:c] for c in params["counts"]]


@pytest.mark.integration
def test_byte_counting(ctx):
    """Each element is counted once, 8 B, MB = 1e6: rate = 8*N*1e-6/t."""
    recs = _records(ctx)
    _, res = _run(ctx, array_elements=SMALL + 3, ntimes=3, counts=[1])
    raw = {(r["metric"], r["params"].get("variant")): r for r in recs if r["type"] == "result"}
    assert len(raw) == len(res) == 3
    for r in res:
        want = [8 * (SMALL + 3) * 1e-6 / t for t in raw[r.metric, r.params.get("variant")]["times_s"][1:]]
        assert r.samples == pytest.approx(want, rel=1e-12)


@pytest.mark.integration
@pytest.mark.parametrize("variant", ["regular", "nt"])
def test_corruption_is_caught(ctx, variant):
    with pytest.raises(KernelFailed, match="wrong result"):
        _run(ctx, array_elements=SMALL, ntimes=3, counts=[1], corrupt=True, variant=variant)


@pytest.mark.integration
def test_corrupted_read_is_caught(ctx):
    from clusterbench.launch.local import run_kernel

    b = ctx.build("membw")
    with pytest.raises(KernelFailed, match="read: pass"):
        run_kernel(b, ["--cpus=0", "--elements=100000", "--ntimes=3", "--modes=read", "--corrupt=1"], timeout=60)


@pytest.mark.integration
def test_samples_are_ntimes_minus_one(ctx):
    """ntimes counts the dropped warm-up pass: each result has ntimes - 1 samples."""
    _, res = _run(ctx, array_elements=SMALL, ntimes=5, counts=[1], variant="regular")
    assert res and all(len(r.samples) == 4 for r in res)
