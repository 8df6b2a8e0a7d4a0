"""bw / bibw and multipair: the mpibw kernel really run with Open MPI on this node (shared memory)
and across a 2-node virtual cluster; arithmetic, validation, placement and bad input."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext, allowed_cpus
from clusterbench.errors import KernelFailed
from clusterbench.launch import mpi as M

SIZES = [8, 65536, 1 << 20]


def _two_cpus(ctx: RunContext) -> None:
    if len(allowed_cpus(ctx)) < 2:
        pytest.skip("needs two cpus")


def _run(ctx: RunContext, name: str, **given):
    bench = get_benchmark(name)
    given.setdefault("allow_root", True)
    params = bench.resolve(ctx, given)
    bench.prepare(ctx, params)
    return bench, params, bench.run(ctx, params)


@pytest.fixture(scope="module")
def bw_run(mpi, live_probe):
    ctx = RunContext(probe=live_probe, profile="quick", timeout=120)
    _two_cpus(ctx)
    return (ctx, *_run(ctx, "bw", transport="shm", sizes=SIZES, time_budget=0.05))


@pytest.mark.integration
def test_bw_and_bibw_complete_and_validate(bw_run) -> None:
    ctx, bench, params, results = bw_run
    got = {(r.metric, r.params["size_bytes"]) for r in results}
    assert got == {(m, s) for m in ("bw", "bibw") for s in SIZES}
    for r in results:
        assert r.unit == "MB/s" and r.higher_is_better and r.value > 0
        assert r.params["validated"] and r.params["window"] == 64 and r.params["pair"] == "intra-node"
        assert r.params["transport_used"] == "shm" and r.params["transport_proof"]["btl"] == ["vader"]
        assert [p["cpus"] for p in r.params["placement"]] == [str(c) for c in params["cpus"]]
        st = r.params["all"]
        assert st["min"] <= st["median"] <= st["p99"] <= st["max"] and st["n"] == r.params["iterations"] >= 3
        assert 0 < len(r.samples) <= 1000
    assert any("btl vader" in n for n in ctx.notes)


@pytest.mark.integration
def test_mbs_arithmetic(bw_run) -> None:
    """value = size x window x iterations / 1e6 / t (x 2 for bibw), from the raw fields."""
    for r in bw_run[3]:
        p = r.params
        ways = 2 if r.metric == "bibw" else 1
        assert p["bytes_per_iteration"] == ways * p["size_bytes"] * p["window"]
        want = ways * p["size_bytes"] * p["window"] * p["iterations"] / 1e6 / p["time_s"]
        assert r.value == pytest.approx(want, rel=1e-6)
        assert p["time_s"] <= p["loop_s"]  # the synchronisation between iterations is not timed
        assert p["all"]["min"] <= r.value <= p["all"]["max"] * 1.000001


@pytest.mark.integration
def test_bibw_not_below_bw_for_large_messages(bw_run) -> None:
    res = bw_run[3]
    large = [s for s in SIZES if s >= 65536]
    bw = max(r.value for r in res if r.metric == "bw" and r.params["size_bytes"] in large)
    bibw = max(r.value for r in res if r.metric == "bibw" and r.params["size_bytes"] in large)
    # both directions at once move at least as much data; 0.6: two ranks share 2 busy cores here
    assert bibw >= 0.6 * bw


@pytest.mark.integration
def test_corrupted_data_is_caught(mpi, bw_run) -> None:
    ctx, bench, params, _ = bw_run
    b = ctx.build("mpibw", openmp=False, cc=mpi.mpicc)
    spec = bench.launch_spec(ctx, params)
    with pytest.raises(KernelFailed, match="differs from the pattern"):
        M.run_mpi(mpi, spec, [str(b.path), "--sizes=4096", "--modes=bw", "--time_budget=0.01", "--corrupt=1"],
                  timeout=60, name="mpibw")


@pytest.mark.integration
def test_multipair_local_one_and_two_pairs(mpi, live_probe) -> None:
    """pairs=1,2 on this node (2 pairs = 4 ranks: oversubscribed on a 2-core machine)."""
    ctx = RunContext(probe=live_probe, profile="quick", timeout=120, oversubscribe=True)
    _, params, res = _run(ctx, "multipair", pairs=[1, 2], sizes=[8, 65536], time_budget=0.03)
    assert params["pair_counts"] == [1, 2]
    for k in (1, 2):
        for size in (8, 65536):
            by = {r.metric: r for r in res if r.params["pairs"] == k and r.params["size_bytes"] == size}
            assert set(by) == {"pair_bandwidth", "aggregate_bandwidth", "pair_latency"}
            pb, agg, lat = by["pair_bandwidth"], by["aggregate_bandwidth"], by["pair_latency"]
            assert len(pb.params["pair_bandwidths"]) == k and len(pb.params["per_pair"]) == k
            assert pb.value == pytest.approx(sum(pb.params["pair_bandwidths"]) / k, rel=1e-9)
            assert agg.value == pytest.approx(sum(pb.params["pair_bandwidths"]), rel=1e-6)
            assert pb.params["min_pair_bandwidth"] <= pb.value <= pb.params["max_pair_bandwidth"]
            assert lat.unit == "us" and not lat.higher_is_better and lat.value > 0
            assert lat.params["max_pair_latency"] >= lat.value
            for q in pb.params["per_pair"]:  # each pair's MB/s from its own raw fields
                want = size * 64 * q["iterations"] / 1e6 / q["time_s"]
                assert q["mbs"] == pytest.approx(want, rel=1e-6)
            assert [q["ranks"] for q in pb.params["per_pair"]] == [[i, i + k] for i in range(k)]
            placed = pb.params["rank_placement"]
            assert len(placed) == 2 * k
            assert [int(p["cpus"]) for p in placed] == pb.params["cpus"]
            assert pb.params["placement"] == "intra-node" and pb.params["validated"]
            assert pb.params["transport_used"] == "shm"
            shared = len(set(pb.params["cpus"])) < len(pb.params["cpus"])
            for r in (pb, agg, lat):
                assert any(w["code"] == "shared-cpu" for w in r.warnings) == shared


@pytest.mark.parallel
@pytest.mark.integration
def test_multipair_and_bw_on_the_virtual_cluster(mpi, live_probe, sim_cluster) -> None:
    """Two sim-cluster nodes: one pair spans both nodes, TCP is proven, the aggregate reported."""

    c = sim_cluster(2)
    ctx = RunContext(probe=live_probe, profile="quick", timeout=120)
    _two_cpus(ctx)
    names = [n.name for n in c.nodes]
    _, params, res = _run(ctx, "multipair", hosts=",".join(names), pairs=[1], sizes=[8, 65536],
                          time_budget=0.03)
    assert params["placement"] == "inter-node"
    agg = [r for r in res if r.metric == "aggregate_bandwidth"]
    assert len(agg) == 2 and all(r.value > 0 for r in agg)
    for r in res:
        assert r.params["transport_used"] == "tcp" and r.params["pairs"] == 1
        assert [p["node"] for p in r.params["rank_placement"]] == names
    _, _, res = _run(ctx, "bw", hosts=",".join(names), sizes=[65536], time_budget=0.03, direction="uni")
    assert len(res) == 1 and res[0].params["pair"] == "inter-node" and res[0].params["transport_used"] == "tcp"
    assert {p["node"] for p in res[0].params["placement"]} == set(names)


@pytest.mark.integration
def test_mtu_1500_vs_9000_shows_in_mpi_bandwidth(mpi, live_probe, sim_cluster, tmp_path) -> None:
    """A 2-node virtual cluster with offloads off (MTU-sized frames, as on a wire): each run stores
    the MTU of every node's link in its cluster record, and jumbo frames carry more MPI bandwidth
    at 4 MiB over TCP. Interleaved 1500/9000, best of up to two each, because the machine is shared (the
    ratio measured while writing this was 2.7x to 5x); the second 1500/9000 round runs only when the
    first does not already show the ratio (each round is two virtual clusters and two runs)."""
    from clusterbench import session
    from clusterbench.store import Store

    store = Store(tmp_path / "r.db")
    best: dict[int, float] = {}
    for i, mtu in enumerate((1500, 9000) * 2):
        if i == 2 and best[9000] > 1.3 * best[1500]:
            break
        c = sim_cluster(2, mtu=mtu, offload=False)
        from clusterbench.launch import simcluster
        report = session.run(["bw"], {"bw": {"hosts": ",".join(n.name for n in c.nodes), "sizes": [4 << 20],
                                             "direction": "uni", "time_budget": 0.3, "transport": "tcp",
                                             "allow_root": True}},
                             profile="quick", store=store, timeout=120, probe_data=live_probe)
        (res,) = report.results
        assert res.params["transport_used"] == "tcp"
        cluster = store.get_run(report.run.id).cluster
        assert cluster["sim_cluster"]["mtu"] == mtu and cluster["sim_cluster"]["offload"] is False
        for n in c.nodes:
            assert {x["name"]: x["mtu"] for x in cluster["nodes"][n.name]["network"]["nics"]}["cb0"] == mtu
        best[mtu] = max(best.get(mtu, 0.0), res.value)
        simcluster.down()
    assert best[9000] > 1.3 * best[1500], best


# -- message buffers: separate (OSU/IMB) by default, shared on request ---------------------------


@pytest.mark.integration
def test_separate_buffers_by_default(bw_run) -> None:
    """The kernel itself reports the convention it ran, with every figure."""
    for r in bw_run[3]:
        assert r.params["buffers"] == "separate" and "OSU" in r.params["buffers_definition"]


@pytest.mark.integration
def test_shared_buffers_pass_on_what_arrived_and_validate(mpi, live_probe) -> None:
    """bibw and the latency ping-pong with shared buffers, 1 and 2 pairs (4 ranks oversubscribed):
    every rank sends on the data it has just received (bibw: the previous iteration's window),
    and validation checks that what arrives is the partner's data, or the rank's own back."""
    ctx = RunContext(probe=live_probe, profile="quick", timeout=120, oversubscribe=True)
    _, _, res = _run(ctx, "multipair", pairs=[1, 2], sizes=[8, 65536], direction="bi", time_budget=0.02,
                     buffers="shared")
    got = {(r.metric, r.params["pairs"], r.params["size_bytes"]) for r in res}
    assert got == {(m, k, s) for m in ("pair_bandwidth", "aggregate_bandwidth", "pair_latency")
                   for k in (1, 2) for s in (8, 65536)}
    for r in res:
        assert r.params["buffers"] == "shared" and "just received" in r.params["buffers_definition"]
        assert r.params["validated"] and r.value > 0


@pytest.mark.integration
@pytest.mark.parametrize("modes", ["bibw", "lat"])
def test_corrupted_data_is_caught_with_shared_buffers(mpi, bw_run, modes: str) -> None:
    ctx, bench, params, _ = bw_run
    b = ctx.build("mpibw", openmp=False, cc=mpi.mpicc)
    with pytest.raises(KernelFailed, match="differs from the pattern"):
        M.run_mpi(mpi, bench.launch_spec(ctx, params), [str(b.path), "--sizes=4096", f"--modes={modes}",
                  "--time_budget=0.01", "--buffers=shared", "--corrupt=1"], timeout=60, name="mpibw")
