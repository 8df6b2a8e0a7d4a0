"""The pure tests (they start no process) of what tests/integration/test_placement.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from clusterbench.probe.pairs import CLASSES, choose_pairs, classify, describe, pair_matrix
from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import allowed_cpus
from clusterbench.errors import UsageError
from clusterbench.probe import probe


#: hwloc's snapshots of real machines, vendored with hwloc's licence (tests/data/sysfs/README.md)
FIXTURES = Path(os.environ.get("CLUSTERBENCH_FIXTURES", Path(__file__).resolve().parents[1] / "data" / "sysfs"))


@pytest.fixture(scope="module")
def snap(sysfs_snapshot):
    """name -> probe of that snapshot (extracted once per session)."""
    cache: dict[str, dict] = {}

    def get(name: str) -> dict:
        if name not in cache:
            tb = FIXTURES / f"{name}.tar.bz2"
            assert tb.exists(), f"fixture {tb} missing (the snapshots are part of the repository)"
            cache[name] = probe(sysfs_root=str(sysfs_snapshot(tb)), use_hwloc=False)
        return cache[name]
    return get


# -- classification on snapshots -------------------------------------------------------------
def test_4_sockets_2_cores_2_threads(snap) -> None:
    """16em64t-4s2c2t: 4 packages x 2 cores x 2 threads, L2 per core, L3 per package, 1 NUMA node."""
    p = snap("16em64t-4s2c2t")
    assert classify(p, 0, 8) == "smt" and classify(p, 4, 12) == "smt"   # threads of one core
    assert classify(p, 0, 4) == "l3" and classify(p, 8, 12) == "l3"     # other core, same package
    assert classify(p, 0, 1) == "socket" and classify(p, 0, 15) == "socket"  # other package, same NUMA
    assert classify(p, 0, 4) == classify(p, 4, 0)                        # symmetric
    assert choose_pairs(p) == {"smt": (0, 8), "l3": (0, 4), "socket": (0, 1)}
    d = describe(p, 0, 4)
    assert d["shared_caches"] == ["L3"] and d["package_a"] == d["package_b"] and d["core_a"] != d["core_b"]


def test_numa_opteron(snap) -> None:
    """16amd64-8n2c: 8 packages, each its own NUMA node of 2 cores with private L2s."""
    p = snap("16amd64-8n2c")
    assert classify(p, 0, 1) == "numa"          # same NUMA node and package, no shared cache
    assert classify(p, 0, 2) == "remote-numa"   # other NUMA node
    assert classify(p, 0, 15) == "remote-numa"
    assert choose_pairs(p) == {"numa": (0, 1), "remote-numa": (0, 2)}


def test_hybrid_l2_cluster(snap) -> None:
    """20em64t hybrid: P-cores with 2 threads, E-cores sharing an L2 by 4, one L3."""
    p = snap("20em64t-hybrid-1p6c2t+2ca4co1t")
    assert classify(p, 0, 1) == "smt"
    assert classify(p, 12, 13) == "l2"          # two E-cores of one cluster
    assert classify(p, 0, 2) == "l3" and classify(p, 12, 16) == "l3"
    pairs = choose_pairs(p)
    assert pairs == {"smt": (0, 1), "l2": (12, 13), "l3": (0, 2)}  # l2 found away from cpu 0
    assert list(pairs) == [c for c in CLASSES if c in pairs]        # nearest first


def test_sub_numa_and_other_package(snap) -> None:
    p = snap("128arm-2pa2n8cluster4co")  # 2 packages x 2 NUMA nodes, L3 per NUMA node
    assert classify(p, 0, 1) == "l3" and classify(p, 0, 32) == "remote-numa" and classify(p, 0, 64) == "remote-numa"
    assert describe(p, 0, 32)["package_a"] == describe(p, 0, 32)["package_b"] != describe(p, 0, 64)["package_b"]
    assert choose_pairs(p) == {"l3": (0, 1), "remote-numa": (0, 32)}  # the nearest remote node
    p = snap("32amd64-4s2n4c-cgroup2")    # cgroup-restricted: 6 cpus, 2 NUMA nodes in package 0
    assert choose_pairs(p) == {"l3": (0, 1), "remote-numa": (0, 4)}
    assert choose_pairs(p, cpus=[4, 5]) == {"l3": (4, 5)}
    assert choose_pairs(p, classes=["remote-numa"]) == {"remote-numa": (0, 4)}


def test_bad_pairs(snap) -> None:
    p = snap("16em64t-4s2c2t")
    with pytest.raises(ValueError, match="itself"):
        classify(p, 3, 3)
    with pytest.raises(ValueError, match="not in the probe"):
        classify(p, 0, 99)
    assert choose_pairs(p, cpus=[0]) == {}
    m = pair_matrix(p, [0, 1, 8])
    assert m["0"] == {"1": "socket", "8": "smt"} and m["8"]["1"] == "socket"


def test_hand_made_shared_l2() -> None:
    """Cores sharing an L2 (no SMT), two packages on one memory controller."""
    p = {"topology": {"cpus": [{"pu": i, "core": i, "package": i // 4, "numa": 0} for i in range(8)],
                      "caches": [{"level": 2, "type": "unified", "name": "L2", "cpus": [0, 1]},
                                 {"level": 2, "type": "unified", "name": "L2", "cpus": [2, 3]},
                                 {"level": 1, "type": "instruction", "name": "L1i", "cpus": [0, 2]}]}}
    assert classify(p, 0, 1) == "l2" and classify(p, 0, 2) == "numa" and classify(p, 0, 4) == "socket"
    assert choose_pairs(p) == {"l2": (0, 1), "numa": (0, 2), "socket": (0, 4)}


def test_placement_bad_input(ctx) -> None:
    bench = get_benchmark("placement")
    with pytest.raises(UsageError, match="not a distance class"):
        bench.resolve(ctx, {"classes": ["far"], "allow_root": True})
    with pytest.raises(UsageError, match="needs two hosts"):
        bench.resolve(ctx, {"classes": ["node"], "allow_root": True})
    with pytest.raises(UsageError, match="no pair"):
        bench.resolve(ctx, {"cpus": [allowed_cpus(ctx)[0]], "allow_root": True})
    present = set(choose_pairs(ctx.probe, allowed_cpus(ctx)))
    absent = next((c for c in ("smt", "socket", "remote-numa") if c not in present), None)
    if absent:
        with pytest.raises(UsageError, match=f"class {absent} has no pair"):
            bench.resolve(ctx, {"classes": [absent], "allow_root": True})
    p = bench.resolve(ctx, {"hosts": "a,b", "allow_root": True})  # names only: nothing is launched
    node = p["pair_list"][-1]
    assert node["class"] == "node" and (node["node_a"], node["node_b"]) == ("a", "b")
    assert all(q["node_a"] == "a" for q in p["pair_list"][:-1])
