"""The pure tests (they start no process) of what tests/integration/test_probe.py tests with real
processes; its docstring describes the whole."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clusterbench.probe import probe
from clusterbench.probe.rpeak import compute_rpeak, dp_rate, skx_fma_units
from clusterbench.probe.topology import cache_sizes, cpu_order, l1d_bytes, llc_total_bytes


#: hwloc's snapshots of real machines, vendored with hwloc's licence (tests/data/sysfs/README.md)
FIXTURES = Path(os.environ.get("CLUSTERBENCH_FIXTURES", Path(__file__).resolve().parents[1] / "data" / "sysfs"))


def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def _fake_arm(root: Path, part: str, n: int = 4, max_khz: int | None = 1500000) -> Path:
    procs = "".join(
        f"processor\t: {i}\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm crc32 cpuid\n"
        f"CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: {part}\nCPU revision\t: 3\n\n"
        for i in range(n)
    )
    _write(root, "proc/cpuinfo", procs)
    _write(root, "proc/meminfo", "MemTotal:        3884096 kB\nMemFree:  100 kB\nMemAvailable:  2000000 kB\n")
    for i in range(n):
        base = f"sys/devices/system/cpu/cpu{i}"
        _write(root, f"{base}/topology/physical_package_id", "0\n")
        _write(root, f"{base}/topology/core_id", f"{i}\n")
        _write(root, f"{base}/topology/thread_siblings_list", f"{i}\n")
        if max_khz:
            _write(root, f"{base}/cpufreq/cpuinfo_max_freq", f"{max_khz}\n")
    _write(root, "sys/devices/system/cpu/online", f"0-{n - 1}\n")
    return root


def test_empty_root_gives_unknowns_not_crash(tmp_path):
    p = probe(sysfs_root=str(tmp_path), use_hwloc=False)
    json.dumps(p)
    assert p["probe_schema"] == 1 and p["source"] == "sysfs"
    assert p["topology"]["pus"] == 0
    assert p["cpu"]["microarchitecture"] is None
    assert p["rpeak"]["node"]["dp_gflops_nominal"] is None
    for key in ("topology", "cpu.microarchitecture", "memory.total_bytes", "environment.nics", "hostname"):
        assert key in p["unknown"], key


def test_rpeak_a72_pi4(tmp_path):
    p = probe(sysfs_root=str(_fake_arm(tmp_path, "0xd08")), use_hwloc=False)
    assert p["cpu"]["microarchitecture"] == "Cortex-A72"
    assert p["cpu"]["freq_max_mhz"] == 1500.0
    assert p["rpeak"]["node"]["dp_gflops_nominal"] == pytest.approx(24.0)
    assert p["rpeak"]["node"]["sp_gflops_max"] == pytest.approx(48.0)
    assert p["rpeak"]["per_core"]["dp_gflops_max"] == pytest.approx(6.0)
    assert any("nominal" in n for n in p["rpeak"]["notes"])  # only max clock known: said so


def test_qemu_arm_virt_and_pseries_are_named_as_qemu(tmp_path):
    """QEMU's Arm 'virt' machine (no DMI) by its device tree, its vexpress-a9 by the virtio-mmio transports QEMU
    adds to the board's tree, its pseries by cpuinfo; a board (a Pi's own compatible string) is not a VM."""
    virt = _fake_arm(tmp_path / "virt", "0xd08", max_khz=None)
    _write(virt, "sys/firmware/devicetree/base/compatible", "linux,dummy-virt\0")
    assert probe(sysfs_root=str(virt), use_hwloc=False)["environment"]["hypervisor"] == "qemu"
    pi = _fake_arm(tmp_path / "pi", "0xd08")
    _write(pi, "sys/firmware/devicetree/base/compatible", "raspberrypi,4-model-b\0brcm,bcm2711\0")
    assert probe(sysfs_root=str(pi), use_hwloc=False)["environment"]["hypervisor"] is None
    # QEMU's vexpress-a9: the board's own tree (read in such a guest) plus QEMU's virtio-mmio transports
    vx = _fake_arm(tmp_path / "vexpress", "0xc09", max_khz=None)
    _write(vx, "sys/firmware/devicetree/base/compatible", "arm,vexpress,v2p-ca9\0arm,vexpress\0")
    _write(vx, "sys/firmware/devicetree/base/timer@1e000600/compatible", "arm,cortex-a9-twd-timer\0")
    assert probe(sysfs_root=str(vx), use_hwloc=False)["environment"]["hypervisor"] is None  # the board alone
    _write(vx, "sys/firmware/devicetree/base/virtio_mmio@10013000/compatible", "virtio,mmio\0")
    assert probe(sysfs_root=str(vx), use_hwloc=False)["environment"]["hypervisor"] == "qemu"
    ps = tmp_path / "pseries"
    _write(ps, "proc/cpuinfo", "processor\t: 0\ncpu\t\t: POWER9 (architected), altivec supported\nclock\t\t: "
           "1000.000000MHz\nrevision\t: 2.2 (pvr 004e 1202)\n\ntimebase\t: 512000000\nplatform\t: pSeries\n"
           "model\t\t: IBM pSeries (emulated by qemu)\nmachine\t\t: CHRP IBM pSeries (emulated by qemu)\n")
    assert probe(sysfs_root=str(ps), use_hwloc=False)["environment"]["hypervisor"] == "qemu"


def test_unknown_arm_part_gives_none_with_reason(tmp_path):
    p = probe(sysfs_root=str(_fake_arm(tmp_path, "0xfff")), use_hwloc=False)
    assert p["cpu"]["microarchitecture"] is None
    assert "not in table" in p["unknown"]["cpu.microarchitecture"]
    assert p["rpeak"]["node"]["dp_gflops_nominal"] is None
    assert "rpeak.node" in p["unknown"]


def test_skylake_sp_fma_units():
    assert skx_fma_units("Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz") == 2
    assert skx_fma_units("Intel(R) Xeon(R) Gold 5122 CPU @ 3.60GHz") == 2
    assert skx_fma_units("Intel(R) Xeon(R) Gold 5118 CPU @ 2.30GHz") == 1
    assert skx_fma_units("Intel(R) Xeon(R) Silver 4116 CPU @ 2.10GHz") == 1
    assert skx_fma_units("Intel(R) Xeon(R) Platinum 8160 CPU @ 2.10GHz") == 2
    rate, notes, cand = dp_rate("Skylake-SP", {"avx512f", "fma"}, "Intel Xeon Processor (Skylake)")
    assert cand == [32, 16] and rate == 32
    out, _ = compute_rpeak([{"kind": None, "name": None, "uarch": "Skylake-SP", "cores": 2,
                             "nominal_mhz": 2000.0, "max_mhz": None}], {"avx512f"}, "Intel Xeon Processor")
    assert out["fma_units_ambiguous"] is True


def test_avx512_missing_uses_avx2_rate():
    rate, notes, _ = dp_rate("Sapphire Rapids", {"avx2", "fma"}, None)
    assert rate == 16 and any("avx512f absent" in n for n in notes)


@pytest.fixture
def four_socket(sysfs_snapshot) -> dict:
    tb = FIXTURES / "16em64t-4s2c2t.tar.bz2"
    assert tb.exists(), f"{tb} is missing: the snapshots are part of the repository (tests/data/sysfs)"
    return probe(sysfs_root=str(sysfs_snapshot(tb)), use_hwloc=False)


def test_cpu_order_on_4s2c2t(four_socket):
    p = four_socket
    # packages: P0 cores {0,8},{4,12}; P1 {1,9},{5,13}; P2 {2,10},{6,14}; P3 {3,11},{7,15}
    assert cpu_order(p, "compact") == [0, 4, 1, 5, 2, 6, 3, 7]
    assert cpu_order(p, "compact", smt=True) == [0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15]
    # one NUMA node: spread round-robins over packages
    assert cpu_order(p, "spread") == [0, 1, 2, 3, 4, 5, 6, 7]
    assert cpu_order(p, "spread", smt=True)[8:] == [8, 9, 10, 11, 12, 13, 14, 15]
    assert cache_sizes(p) == {"L1d": 16384, "L2": 1048576, "L3": 4194304}
    assert l1d_bytes(p) == 16384
    assert llc_total_bytes(p) == 4 * 4194304
    with pytest.raises(ValueError):
        cpu_order(p, "random")


def test_cpu_order_spread_over_numa(sysfs_snapshot):
    tb = FIXTURES / "16amd64-8n2c.tar.bz2"
    assert tb.exists(), f"{tb} is missing: the snapshots are part of the repository (tests/data/sysfs)"
    p = probe(sysfs_root=str(sysfs_snapshot(tb)), use_hwloc=False)
    order = cpu_order(p, "spread")
    numa_of = {c["pu"]: c["numa"] for c in p["topology"]["cpus"]}
    assert [numa_of[c] for c in order[:8]] == list(range(8))
    assert sorted(order) == list(range(16))


def test_hybrid_fixture_kinds(sysfs_snapshot):
    tb = FIXTURES / "20em64t-hybrid-1p6c2t+2ca4co1t.tar.bz2"
    assert tb.exists(), f"{tb} is missing: the snapshots are part of the repository (tests/data/sysfs)"
    p = probe(sysfs_root=str(sysfs_snapshot(tb)), use_hwloc=False)
    kinds = p["topology"]["core_kinds"]
    assert [k["name"] for k in kinds] == ["E-core", "P-core"]
    assert [len(k["cpus"]) for k in kinds] == [8, 12]
    assert [k["freq_max_mhz"] for k in kinds] == [3900.0, 5000.0]
    per = {k["name"]: k for k in p["rpeak"]["per_kind"]}
    assert per["E-core"]["cores"] == 8 and per["P-core"]["cores"] == 6
    # 6 P x 1.9 GHz x 16 + 8 E x 1.4 GHz x 8
    assert p["rpeak"]["node"]["dp_gflops_nominal"] == pytest.approx(6 * 1.9 * 16 + 8 * 1.4 * 8)
