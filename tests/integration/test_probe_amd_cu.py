"""AMD compute units (Bulldozer family): the probe counts cores as hwloc does, Rpeak counts FPUs.

No snapshot of such a machine is in the fixtures folder (hwloc's own test snapshot of one,
``64amd64-4s2n4ca2co``, is a binary tarball not copied here), so the sysfs tree is built from the
documented layout of that machine (4 x Opteron 6276: per package two dies of four two-core modules;
Linux lists a module's two cores as thread siblings with distinct core ids, core ids restart at 0
on every die; L1i and L2 per module, L1d per core, L3 per die). hwloc's reading of the real
machine (its ``.console``): 4 packages, 8 NUMA nodes, 64 cores, 64 PUs, L1d 16 KiB, L1i 64 KiB,
L2 2 MiB, L3 6 MiB.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.probe import hwloc as hw
from clusterbench.probe import probe

#: hwloc 2.x's reading of the real machine (tests/hwloc/linux/64amd64-4s2n4ca2co.console)
HWLOC_READING = {"packages": 4, "numa_nodes": 8, "cores": 64, "pus": 64}
HWLOC_CACHES = {"L1d": {16 << 10}, "L1i": {64 << 10}, "L2": {2 << 20}, "L3": {6 << 20}}
MHZ = 2300.0  # Opteron 6276 nominal clock


def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def _mask(lo: int, hi: int, n: int = 64) -> str:
    """The kernel's hex mask of cpus lo..hi (32-bit words, most significant first), as hwloc reads it."""
    value = sum(1 << c for c in range(lo, hi + 1))
    return ",".join(f"{(value >> (32 * w)) & 0xFFFFFFFF:08x}" for w in reversed(range((n + 31) // 32)))


def _set(root: Path, base: str, name: str, lo: int, hi: int) -> None:
    """``name_list`` and the ``name`` mask, as the kernels of that era write both."""
    _write(root, f"{base}/{name}_list", f"{lo}-{hi}\n" if hi > lo else f"{lo}\n")
    _write(root, f"{base}/{name}", _mask(lo, hi) + "\n")


def _cache(root: Path, cpu: int, index: int, level: int, ctype: str, size_k: int, shared: tuple[int, int],
           ways: int) -> None:
    base = f"sys/devices/system/cpu/cpu{cpu}/cache/index{index}"
    _set(root, base, "shared_cpu_map", *shared)
    for name, value in (("level", level), ("type", ctype), ("size", f"{size_k}K"),
                        ("coherency_line_size", 64), ("ways_of_associativity", ways),
                        ("number_of_sets", size_k * 1024 // (64 * ways)), ("physical_line_partition", 1)):
        _write(root, f"{base}/{name}", f"{value}\n")


def opteron_6276_x4(root: Path, *, same_core_id: bool = False, vendor: str = "AuthenticAMD",
                    family: int = 21) -> Path:
    """The sysfs/procfs of a 4-socket Opteron 6276 (64 cores in 32 modules). ``same_core_id``:
    the layout of CU-aware kernels (a module is one core of two threads)."""
    n = 64
    flags = "fpu sse sse2 ht lm constant_tsc nonstop_tsc pni ssse3 sse4_1 sse4_2 avx aes xop fma4 tbm topoext"
    _write(root, "proc/cpuinfo", "".join(
        f"processor\t: {c}\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: 1\n"
        f"model name\t: AMD Opteron(TM) Processor 6276                 \nstepping\t: 2\ncpu MHz\t\t: {MHZ:.3f}\n"
        f"physical id\t: {c // 16}\ncore id\t\t: {c % 8}\nflags\t\t: {flags}\n\n" for c in range(n)))
    _write(root, "proc/meminfo", "MemTotal:       125829120 kB\nMemFree:        120000000 kB\n"
                                 "MemAvailable:   121000000 kB\n")
    _write(root, "proc/hwloc-nofile-info", "Architecture: x86_64\n")  # as hwloc-gather-topology records it
    _write(root, "sys/devices/system/cpu/online", f"0-{n - 1}\n")
    for c in range(n):
        pkg, die, module = c // 16, c // 8, c // 2
        t = f"sys/devices/system/cpu/cpu{c}/topology"
        _write(root, f"{t}/physical_package_id", f"{pkg}\n")
        _write(root, f"{t}/core_id", f"{(c % 8) // 2 if same_core_id else c % 8}\n")
        _set(root, t, "thread_siblings", 2 * module, 2 * module + 1)
        _set(root, t, "core_siblings", 16 * pkg, 16 * pkg + 15)
        _cache(root, c, 0, 1, "Data", 16, (c, c), 4)
        _cache(root, c, 1, 1, "Instruction", 64, (2 * module, 2 * module + 1), 2)
        _cache(root, c, 2, 2, "Unified", 2048, (2 * module, 2 * module + 1), 16)
        _cache(root, c, 3, 3, "Unified", 6144, (8 * die, 8 * die + 7), 64)
    for d in range(8):
        node = f"sys/devices/system/node/node{d}"
        _write(root, f"{node}/cpulist", f"{8 * d}-{8 * d + 7}\n")
        _write(root, f"{node}/cpumap", _mask(8 * d, 8 * d + 7) + "\n")
        _write(root, f"{node}/meminfo", f"Node {d} MemTotal:       16777216 kB\nNode {d} MemFree:  16000000 kB\n")
    return root


@pytest.fixture(scope="module")
def opteron(tmp_path_factory: pytest.TempPathFactory):
    """``opteron(**layout)``: the tree of :func:`opteron_6276_x4`, written once per layout for the
    module (some 3000 files each); tests only read it."""
    made: dict[tuple, Path] = {}

    def get(**layout) -> str:
        key = tuple(sorted(layout.items()))
        if key not in made:
            made[key] = opteron_6276_x4(tmp_path_factory.mktemp("opteron"), **layout)
        return str(made[key])

    return get


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


@pytest.mark.integration
@pytest.mark.skipif(not hw.available(), reason="lstopo-no-graphics not installed")
def test_hwloc_reads_the_synthetic_tree_the_same_way(tmp_path):
    """hwloc itself, on the same tree: the sysfs reader and hwloc agree on every topology fact."""
    root = str(opteron_6276_x4(tmp_path))
    a = probe(sysfs_root=root, use_hwloc=False)["topology"]
    b = probe(sysfs_root=root, use_hwloc=True)
    assert b["source"] == "hwloc"
    for key in ("packages", "numa_nodes", "cores", "pus", "smt_per_core", "cpus", "caches"):
        assert a[key] == b["topology"][key], key
    assert b["rpeak"]["node"]["dp_gflops_nominal"] == pytest.approx(588.8)
