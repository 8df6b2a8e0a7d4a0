"""The pure tests (they start no process) of what tests/integration/test_probe_amd_cu.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import functools

import pytest

from clusterbench.probe import probe as _probe

from probeamdcukit import MHZ, opteron_6276_x4


#: hwloc 2.x's reading of the real machine (tests/hwloc/linux/64amd64-4s2n4ca2co.console)
HWLOC_READING = {"packages": 4, "numa_nodes": 8, "cores": 64, "pus": 64}
HWLOC_CACHES = {"L1d": {16 << 10}, "L1i": {64 << 10}, "L2": {2 << 20}, "L3": {6 << 20}}


@pytest.fixture(scope="module")
def opteron(shared_tree):
    """``opteron(**layout)``: the tree of :func:`opteron_6276_x4`, written once per layout for the
    test run (some 3000 files each; conftest's shared_tree); tests only read it."""
    def get(**layout) -> str:
        name = "opteron-" + "-".join(f"{k}={v}" for k, v in sorted(layout.items()))
        return str(shared_tree(name, lambda dest: opteron_6276_x4(dest, **layout)))

    return get


@functools.lru_cache(maxsize=None)
def _probed(root: str) -> dict:
    return _probe(sysfs_root=root, use_hwloc=False)


def probe(*, sysfs_root: str, use_hwloc: bool) -> dict:
    """The probe of a tree, once per tree for the test run (a second of cpu each; the tests only read it)."""
    assert use_hwloc is False
    return _probed(sysfs_root)


def _cache_sizes(topo: dict) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for c in topo["caches"]:
        out.setdefault(c["name"], set()).add(c["size_bytes"])
    return out


def test_compute_unit_cores_counted_as_hwloc_does(opteron):
    p = probe(sysfs_root=opteron(), use_hwloc=False)
    t = p["topology"]
    assert {k: t[k] for k in HWLOC_READING} == HWLOC_READING
    assert t["smt_per_core"] == 1
    assert _cache_sizes(t) == HWLOC_CACHES
    assert len({c["core"] for c in t["cpus"]}) == 64  # every PU a core of its own
    assert p["cpu"]["microarchitecture"] == "Bulldozer"
    assert any("AMD compute units" in n and "32 modules" in n for n in p["notes"])


def test_rpeak_counts_one_fpu_per_module(opteron):
    """147.2 Gflop/s per Opteron 6276 (8 modules x 2.3 GHz x 8), not twice that."""
    rp = probe(sysfs_root=opteron(), use_hwloc=False)["rpeak"]
    assert rp["node"]["dp_gflops_nominal"] == pytest.approx(4 * 8 * MHZ * 8 / 1000)  # 588.8
    assert rp["per_core"]["dp_gflops_nominal"] == pytest.approx(MHZ * 4 / 1000)
    assert rp["dp_flops_per_cycle_per_core"] == {"Bulldozer": 4}
    assert rp["dp_flops_per_cycle_per_fpu"] == {"Bulldozer": 8}
    (kind,) = rp["per_kind"]
    assert (kind["cores"], kind["fpus"], kind["cores_per_fpu"]) == (64, 32, 2)


def test_cu_aware_kernel_layout_gives_the_same_rpeak(opteron):
    """Kernels that give both cores of a module one core id show it as a core of two threads:
    no split (hwloc does not split either), and Rpeak still counts 32 FPUs."""
    p = probe(sysfs_root=opteron(same_core_id=True), use_hwloc=False)
    t = p["topology"]
    assert (t["cores"], t["pus"], t["smt_per_core"]) == (32, 64, 2)
    assert not any("AMD compute units" in n for n in p["notes"])
    assert p["rpeak"]["node"]["dp_gflops_nominal"] == pytest.approx(588.8)


@pytest.mark.parametrize("vendor,family", [("GenuineIntel", 6), ("AuthenticAMD", 23)])
def test_distinct_core_ids_split_only_on_amd_compute_unit_families(opteron, vendor, family):
    """hwloc applies the rule to AMD families 21 and 22 only; elsewhere siblings are threads."""
    t = probe(sysfs_root=opteron(vendor=vendor, family=family), use_hwloc=False)["topology"]
    assert (t["cores"], t["pus"]) == (32, 64)
