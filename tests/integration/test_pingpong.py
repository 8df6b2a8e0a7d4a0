"""pingpong: the MPI kernel really run on this node with Open MPI, over shared memory and TCP;
placement, transport proof and bad input."""
from __future__ import annotations

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext

from pingpongkit import _cpus


def _run(ctx: RunContext, **given):
    bench = get_benchmark("pingpong")
    given.setdefault("allow_root", True)
    params = bench.resolve(ctx, given)
    bench.prepare(ctx, params)
    return bench, params, bench.run(ctx, params)


SIZES = [0, 8, 4096, 65536 + 3]


@pytest.fixture(scope="module")
def runs(mpi, live_probe):
    """One shm and one tcp run, shared by the assertions below."""
    out = {}
    for transport in ("shm", "tcp"):
        ctx = RunContext(probe=live_probe, profile="quick", timeout=120)
        _cpus(ctx)
        out[transport] = (ctx, *_run(ctx, transport=transport, sizes=SIZES, time_budget=0.05, validate=True))
    return out


@pytest.mark.integration
@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_pingpong_completes(runs, transport: str) -> None:
    ctx, bench, params, results = runs[transport]
    lat = {r.params["size_bytes"]: r for r in results if r.metric == "latency"}
    bw = {r.params["size_bytes"]: r for r in results if r.metric == "bandwidth"}
    assert sorted(lat) == SIZES and sorted(bw) == SIZES[1:]
    for size, r in lat.items():
        st = r.params["all"]
        assert r.unit == "us" and not r.higher_is_better and r.value > 0
        # the headline is the best batch loop's average (no timer inside it); the per-iteration samples
        # come from another loop and carry one timer call each, so the headline sits near or below their
        # fastest, not far below it: under load a whole per-iteration loop ran 16% above the best batch
        # (3.16 vs 2.72 us, cv 0.98); half of it would be a unit or half-round-trip error
        assert st["min"] * 0.6 <= r.value and r.params["batch_iterations"] >= 1
        assert st["min"] <= st["median"] <= st["p99"] <= st["max"] and st["n"] == r.params["iterations"] >= 10
        assert 0 < len(r.samples) <= 1000
        assert r.params["validated"] and r.params["cpus"] == params["cpus"]
        assert [p["cpus"] for p in r.params["placement"]] == [str(c) for c in params["cpus"]]
    r = bw[65536 + 3]
    assert r.unit == "MB/s" and r.higher_is_better
    assert r.value == pytest.approx((65536 + 3) / lat[65536 + 3].value, rel=1e-6)
    want = {"shm": "vader", "tcp": "tcp"}[transport]
    proof = lat[8].params["transport_proof"]
    assert proof["pml"] == "ob1" and proof["btl"] == [want] and lat[8].params["transport_used"] == transport
    assert any(f"Using {want} btl" in line for line in proof["evidence"])
    assert any(f"btl {want}" in n for n in ctx.notes)


@pytest.mark.integration
def test_shm_latency_below_tcp(runs) -> None:
    shm = next(r for r in runs["shm"][3] if r.metric == "latency" and r.params["size_bytes"] == 8)
    tcp = next(r for r in runs["tcp"][3] if r.metric == "latency" and r.params["size_bytes"] == 8)
    assert shm.value < tcp.value and shm.params["all"]["median"] < tcp.params["all"]["median"]


@pytest.mark.integration
def test_auto_records_what_was_chosen(mpi, ctx) -> None:
    _cpus(ctx)
    _, _, results = _run(ctx, sizes=[8], time_budget=0.02)
    r = results[0]
    assert r.params["transport"] == "auto" and r.params["transport_used"] in ("shm", "tcp", "rdma")
    assert r.params["transport_proof"]["pml"]


@pytest.mark.parallel
@pytest.mark.integration
def test_inter_node_on_the_virtual_cluster(mpi, live_probe, sim_cluster, tmp_path) -> None:
    """Two sim-cluster nodes, through a whole session: ranks land on different nodes, TCP is
    proven, results validate, and the stored run holds the cluster definition and every node's
    probe and NIC settings (MTU of the cluster link)."""
    from clusterbench import session
    from clusterbench.store import Store

    c = sim_cluster(2, mtu=9000)
    hosts = ",".join(n.name for n in c.nodes)
    store = Store(tmp_path / "r.db")
    report = session.run(["pingpong"], {"pingpong": {"hosts": hosts, "sizes": [8, 65536], "time_budget": 0.05,
                                                     "validate": True, "allow_root": True}},
                         profile="quick", store=store, timeout=120, probe_data=live_probe)
    lat = [r for r in report.results if r.metric == "latency"]
    assert len(lat) == 2 and all(r.params["transport_used"] == "tcp" for r in lat)
    assert lat[0].params["pair"] == "inter-node"
    nodes = {p["node"] for p in lat[0].params["placement"]}
    assert nodes == {n.name for n in c.nodes}
    cluster = store.get_run(report.run.id).cluster
    assert cluster["hosts"] == [n.name for n in c.nodes] and cluster["sim_cluster"]["mtu"] == 9000
    for n in c.nodes:
        node = cluster["nodes"][n.name]
        assert node["probe"]["probe_schema"] == 1
        assert {x["name"]: x["mtu"] for x in node["network"]["nics"]}["cb0"] == 9000
    assert cluster["differences"] == []


@pytest.mark.integration
def test_two_transports_side_by_side(mpi, ctx) -> None:
    """--transports tcp,shm: the same pair over both, each proven, in one run."""
    _, params, res = _run(ctx, transports=["tcp", "shm"], sizes=[8], time_budget=0.02)
    used = {r.params["transport"]: r.params["transport_used"] for r in res if r.metric == "latency"}
    assert used == {"tcp": "tcp", "shm": "shm"}  # shm proven from the vader btl lines


# -- message buffers: separate (OSU/IMB) by default, shared on request ----------------------------


@pytest.mark.integration
def test_buffer_conventions_recorded_and_validated(mpi, runs) -> None:
    """The default run (the module's shm run, validated) says, in the kernel's own words, that it
    used separate buffers; a shared-buffer run validates too (rank 0 then checks its own data
    echoed back, rank 1 what rank 0 sent) and says so with every figure."""
    for r in runs["shm"][3]:
        assert r.params["buffers"] == "separate" and "OSU" in r.params["buffers_definition"]
    ctx = runs["shm"][0]
    _, _, res = _run(ctx, transport="shm", sizes=[8, 65536 + 3], time_budget=0.02, validate=True,
                     buffers="shared", cpus=_cpus(ctx))
    assert {(r.metric, r.params["size_bytes"]) for r in res} >= {("latency", 8), ("bandwidth", 65539)}
    for r in res:
        assert r.params["buffers"] == "shared" and "just received" in r.params["buffers_definition"]
        assert r.params["validated"] and r.value > 0


@pytest.mark.integration
@pytest.mark.parametrize("buffers", ["separate", "shared"])
def test_corrupted_data_is_caught_with_either_buffers(mpi, ctx, buffers: str) -> None:
    from clusterbench.errors import KernelFailed
    from clusterbench.launch import mpi as M

    bench = get_benchmark("pingpong")
    params = bench.resolve(ctx, {"transport": "shm", "allow_root": True, "cpus": _cpus(ctx)})
    b = ctx.build("pingpong", openmp=False, cc=mpi.mpicc)
    args = [str(b.path), "--sizes=8,4096", "--time_budget=0.01", "--validate=1", f"--buffers={buffers}", "--corrupt=1"]
    with pytest.raises(KernelFailed, match="differs from the pattern"):
        M.run_mpi(mpi, bench.launch_spec(ctx, params), args, timeout=60, name="pingpong")
