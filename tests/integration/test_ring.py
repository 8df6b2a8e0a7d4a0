"""ring (HPCC b_eff): the MPI kernel really run with Open MPI on this node (2 ranks, 4 ranks
oversubscribed), data validation and its failure, bad input, and across a 2-node virtual cluster."""
from __future__ import annotations

import math
import os

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext, allowed_cpus
from clusterbench.errors import KernelFailed, UsageError
from clusterbench.launch import mpi as M

IS_ROOT = os.geteuid() == 0
FAST = {"random_rings": 3, "measurements": 2, "loop_time": 0.0005}
METRICS = ("natural_ring_latency", "random_ring_latency", "natural_ring_bandwidth", "random_ring_bandwidth")


def _run(ctx: RunContext, **given):
    bench = get_benchmark("ring")
    given.setdefault("allow_root", True)
    params = bench.resolve(ctx, {**FAST, **given})
    bench.prepare(ctx, params)
    return bench, params, {r.metric: r for r in bench.run(ctx, params)}


@pytest.fixture(scope="module")
def two(mpi, live_probe):
    ctx = RunContext(probe=live_probe, profile="quick", timeout=120)
    if len(allowed_cpus(ctx)) < 2:
        pytest.skip("needs two cpus")
    return (ctx, *_run(ctx, ranks=2, seed=7))


@pytest.mark.parallel
@pytest.mark.integration
def test_two_ranks_complete_and_validate(two) -> None:
    ctx, bench, params, res = two
    assert set(res) == set(METRICS)
    for name, r in res.items():
        assert r.params["ranks"] == 2 and r.params["validated"] and r.value > 0 and len(r.samples) == 2
        assert r.params["transport_used"] == "shm" and r.params["cpus"] == params["cpus"]
        assert [p["cpus"] for p in r.params["placement"]] == [str(c) for c in params["cpus"]]
        assert r.params["size_bytes"] == (8 if name.endswith("latency") else 2_000_000)
        assert r.params["sendrecv_wins"] + r.params["nonblocking_wins"] == 2 * (3 + 1) * 2  # ranks x rings x meas
        assert r.unit == ("us" if name.endswith("latency") else "MB/s")
    nat, rnd = res["natural_ring_latency"], res["random_ring_latency"]
    assert nat.value == min(nat.samples)  # min over measurements (each already the max over ranks)
    per_ring = rnd.params["per_ring_us"]
    assert len(per_ring) == 3 and rnd.value == pytest.approx(math.exp(sum(map(math.log, per_ring)) / 3), rel=1e-6)
    assert rnd.params["rings"] and all(sorted(ring) == [0, 1] for ring in rnd.params["rings"])
    bw = res["random_ring_bandwidth"]
    assert bw.value == pytest.approx(2_000_000 / bw.params["time_per_message_us"], rel=1e-6)  # 1e6 B/s
    assert bw.params["seed"] == 7 and "ring: natural" in ctx.notes[-1]


@pytest.mark.parallel
@pytest.mark.integration
def test_corrupted_data_is_caught(two, mpi) -> None:
    ctx, bench, params, _ = two
    b = ctx.build("ring", openmp=False, cc=mpi.mpicc)
    with pytest.raises(KernelFailed, match="differ"):
        M.run_mpi(mpi, bench.launch_spec(ctx, params), [str(b.path), *bench.kernel_args(params), "--corrupt=1"],
                  timeout=60)


@pytest.mark.parallel
@pytest.mark.integration
def test_four_ranks_oversubscribed(mpi, live_probe) -> None:
    ctx = RunContext(probe=live_probe, profile="quick", timeout=120)
    n = len(allowed_cpus(ctx))
    if n >= 4:
        _, params, res = _run(ctx, ranks=4)
    else:
        with pytest.raises(UsageError, match="oversubscribe"):
            get_benchmark("ring").resolve(ctx, {"ranks": 4, "allow_root": True})
        ctx.oversubscribe = True
        _, params, res = _run(ctx, ranks=4, seed=3)
        assert params["shared_cpus"]
    assert set(res) == set(METRICS)
    rnd = res["random_ring_latency"]
    assert len(rnd.params["placement"]) == 4 and rnd.value > 0
    rings = rnd.params["rings"]
    assert len(rings) == 3 and all(sorted(r) == [0, 1, 2, 3] for r in rings)


@pytest.mark.parallel
@pytest.mark.integration
def test_ring_on_the_virtual_cluster(mpi, live_probe, sim_cluster) -> None:
    pass

    c = sim_cluster(2)
    ctx = RunContext(probe=live_probe, profile="quick", timeout=120)
    if len(allowed_cpus(ctx)) < 2:
        ctx.oversubscribe = True
    hosts = ",".join(n.name for n in c.nodes)
    _, params, res = _run(ctx, hosts=hosts)
    assert params["ranks"] == 2 and set(res) == set(METRICS)
    r = res["natural_ring_latency"]
    assert r.params["transport_used"] == "tcp"
    assert [p["node"] for p in r.params["placement"]] == [n.name for n in c.nodes]
    assert len(set(params["cpus"])) == len(params["cpus"]) or ctx.oversubscribe  # distinct cores


# -- message buffers: separate (HPCC/OSU/IMB) by default, shared on request ----------------------


@pytest.mark.parallel
@pytest.mark.integration
def test_shared_buffers_pass_data_on_and_validate(two, mpi) -> None:
    """Default: separate buffers, in the kernel's words. Shared: what arrived from the left goes
    on to the right (validation checks the neighbour's neighbour's data arrives), and a damaged
    byte is still caught."""
    ctx, bench, params, res = two
    assert all(r.params["buffers"] == "separate" for r in res.values())
    _, sparams, shared = _run(ctx, ranks=2, seed=7, buffers="shared")
    assert set(shared) == set(METRICS)
    for r in shared.values():
        assert r.params["buffers"] == "shared" and "just received" in r.params["buffers_definition"]
        assert r.params["validated"] and r.value > 0
    b = ctx.build("ring", openmp=False, cc=mpi.mpicc)
    with pytest.raises(KernelFailed, match="differ"):
        M.run_mpi(mpi, bench.launch_spec(ctx, sparams), [str(b.path), *bench.kernel_args(sparams), "--corrupt=1"],
                  timeout=60)


@pytest.mark.parallel
@pytest.mark.integration
def test_shared_buffers_three_ranks(mpi, live_probe) -> None:
    """Three ranks (oversubscribed on a 2-core machine): passed-on data comes from the neighbour's
    neighbour, a different rank in every ring, and validates."""
    ctx = RunContext(probe=live_probe, profile="quick", timeout=120, oversubscribe=True)
    _, _, res = _run(ctx, ranks=3, seed=5, buffers="shared")
    assert set(res) == set(METRICS) and all(r.params["buffers"] == "shared" and r.value > 0 for r in res.values())
