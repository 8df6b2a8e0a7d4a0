"""placement: pair classification on real machines' sysfs snapshots (pure), the benchmark on this
node with Open MPI, and the node class on a 2-node virtual cluster (root)."""
from __future__ import annotations

import os

import pytest

from clusterbench.probe.pairs import choose_pairs
from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext, allowed_cpus

IS_ROOT = os.geteuid() == 0


# -- the benchmark ------------------------------------------------------------------------------


def _run(ctx: RunContext, **given):
    bench = get_benchmark("placement")
    given.setdefault("allow_root", True)
    params = bench.resolve(ctx, given)
    bench.prepare(ctx, params)
    return params, bench.run(ctx, params)


@pytest.mark.integration
def test_placement_on_this_node(mpi, ctx) -> None:
    cpus = allowed_cpus(ctx)
    if len(cpus) < 2:
        pytest.skip("placement needs two cpus")
    expected = choose_pairs(ctx.probe, cpus)
    params, res = _run(ctx, time_budget=0.03)
    got = {r.params["class"] for r in res}
    assert got == set(expected)
    if len(cpus) == 2 and expected.keys() == {"l3"}:  # this 2-core VM: private L2, shared L3
        assert [(r.params["cpu_a"], r.params["cpu_b"]) for r in res] == [tuple(expected["l3"])] * 2
    for r in res:
        assert {"class", "cpu_a", "cpu_b", "node_a", "node_b"} <= set(r.params)
        assert r.params["node_a"] == r.params["node_b"] and r.params["transport_used"] == "shm"
        assert [p["cpus"] for p in r.params["placement"]] == [str(r.params["cpu_a"]), str(r.params["cpu_b"])]
        assert r.params["validated"] and r.params["topology"]["core_a"] != r.params["topology"]["core_b"] \
            or r.params["class"] == "smt"
    lat = [r for r in res if r.metric == "latency"]
    bw = [r for r in res if r.metric == "bandwidth"]
    assert len(lat) == len(bw) == len(expected)
    assert all(r.unit == "us" and r.params["size_bytes"] == 8 and r.value > 0 for r in lat)
    assert all(r.unit == "MB/s" and r.params["size_bytes"] == 1 << 20 and r.value > 0 for r in bw)
    assert any(n.startswith("placement: ") for n in ctx.notes)


@pytest.mark.integration
def test_placement_on_the_virtual_cluster(mpi, live_probe, sim_cluster) -> None:
    """Two sim-cluster nodes: the intra-node classes on n1 plus the node class n1-n2 over TCP."""

    if len(allowed_cpus(RunContext(probe=live_probe))) < 2:
        pytest.skip("needs two cpus")
    c = sim_cluster(2)
    ctx = RunContext(probe=live_probe, profile="quick", timeout=120)
    n1, n2 = (n.name for n in c.nodes)
    _, res = _run(ctx, hosts=f"{n1},{n2}", time_budget=0.03)
    by = {}
    for r in res:
        by.setdefault(r.params["class"], {})[r.metric] = r
    assert "node" in by and set(by) == set(choose_pairs(live_probe, allowed_cpus(ctx))) | {"node"}
    node = by["node"]["latency"]
    assert (node.params["node_a"], node.params["node_b"]) == (n1, n2)
    assert node.params["transport_used"] == "tcp"
    assert {p["node"] for p in node.params["placement"]} == {n1, n2}
    assert by["node"]["bandwidth"].value > 0
    for cls, rs in by.items():
        if cls != "node":
            r = rs["latency"]
            assert r.params["node_a"] == r.params["node_b"] == n1
            assert {p["node"] for p in r.params["placement"]} == {n1}
            assert r.value < node.value  # within a node beats across the virtual wire


@pytest.mark.integration
def test_placement_buffer_conventions(mpi, ctx) -> None:
    """The pingpong kernel's buffer convention, in its own words, with every pair's figures:
    separate by default (OSU/IMB), shared on request (validated either way)."""
    if len(allowed_cpus(ctx)) < 2:
        pytest.skip("placement needs two cpus")
    first = sorted(choose_pairs(ctx.probe, allowed_cpus(ctx)))[:1]
    for buffers in ("separate", "shared"):
        given = {"time_budget": 0.02, "classes": first}
        if buffers == "shared":
            given["buffers"] = "shared"
        _, res = _run(ctx, **given)
        assert {r.metric for r in res} == {"latency", "bandwidth"}
        assert all(r.params["buffers"] == buffers and r.params["validated"] for r in res)
