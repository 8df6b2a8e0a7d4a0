"""Rpeak for the seeds' cores, on recorded /proc/cpuinfo of those boards (tests/data/cpuinfo/SOURCES.md).

Each capture is laid out as a snapshot the probe reads (``proc/cpuinfo``, a ``sys/devices/system/cpu/cpuN``
directory per processor the capture lists, ``cpufreq/cpuinfo_max_freq`` where the source recorded it) and the
probe's core name, cores, clock and Rpeak are checked against the seeds' figures: Pi 4 node 24 Gflop/s DP
(seed 000 section 5.1), PPC970MP 10 Gflop/s per core at 2.5 GHz (JULI, seed 001); the Cortex-A9/A15/A7 rates
are rpeak.py's (VFP double precision, sources in its notes). Pure: no process is started.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.probe import probe
from clusterbench.probe.cpu import ISA_FLAGS, cpuinfo_clock_mhz, ppc_uarch, read_cpu
from clusterbench.probe.rpeak import DP_FLOPS, compute_rpeak

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "cpuinfo"
#: ISA flags only x86 has: an Arm or POWER capture must never yield one
X86_ONLY = {f for f in ISA_FLAGS if f.startswith(("sse", "ssse", "avx", "amx")) or f in ("fma", "f16c")}


def snapshot(tmp_path: Path, name: str) -> Path:
    """The capture ``name`` as a /proc + /sys root: only what the capture itself records."""
    text = (CAPTURES / f"{name}.cpuinfo").read_text()
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cpuinfo").write_text(text)
    n = sum(1 for line in text.splitlines() if line.split(":")[0].strip() == "processor")
    cpu = tmp_path / "sys" / "devices" / "system" / "cpu"
    for i in range(n):
        (cpu / f"cpu{i}").mkdir(parents=True)
    (cpu / "online").write_text(f"0-{n - 1}\n")
    freq = CAPTURES / f"{name}.cpufreq"
    if freq.exists():
        for line in freq.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                c, khz = line.split()
                (cpu / c / "cpufreq").mkdir()
                (cpu / c / "cpufreq" / "cpuinfo_max_freq").write_text(khz + "\n")
    return tmp_path


def read(tmp_path: Path, name: str) -> dict:
    return probe(sysfs_root=str(snapshot(tmp_path, name)), use_hwloc=False)


def test_every_capture_has_its_source():
    sources = (CAPTURES / "SOURCES.md").read_text()
    for f in CAPTURES.iterdir():
        if f.suffix in (".cpuinfo", ".cpufreq"):
            assert f"`{f.name}`" in sources, f.name


def test_pi4_node_is_24_gflops(tmp_path):
    """Seed 000 section 5.1: 4 cores x 1.5 GHz x 2 doubles x 2 (FMA) = 24 Gflop/s DP per node."""
    p = read(tmp_path, "pi4-bcm2711b0")
    assert p["cpu"]["microarchitecture"] == "Cortex-A72"
    assert p["cpu"]["arch"] == "aarch64" and p["cpu"]["vendor"] == "ARM"
    assert p["topology"]["cores"] == 4
    assert p["cpu"]["freq_max_mhz"] == 1500.0
    r = p["rpeak"]
    assert r["dp_flops_per_cycle_per_core"] == {"Cortex-A72": 4}
    assert r["node"]["dp_gflops_nominal"] == pytest.approx(24.0)
    assert r["node"]["dp_gflops_max"] == pytest.approx(24.0)
    assert r["per_core"]["dp_gflops_max"] == pytest.approx(6.0)
    assert any("nominal clock unknown, max clock used" in n for n in r["notes"])


def test_odroid_u2_a9_without_clock_is_unknown_not_guessed(tmp_path):
    """The U2/U3 capture has no /sys: the core is known (Cortex-A9, VFP DP 1 FLOP/cycle), the clock is not."""
    p = read(tmp_path, "odroid-u2u3-exynos4412")
    assert p["cpu"]["microarchitecture"] == "Cortex-A9"
    assert p["cpu"]["arch"] == "arm" and p["cpu"]["model_name"] == "ARMv7 Processor rev 0 (v7l)"
    assert {"neon", "vfpv3"} <= set(p["cpu"]["isa"])
    assert p["topology"]["cores"] == 4
    assert p["cpu"]["freq_nominal_mhz"] is None and p["cpu"]["freq_max_mhz"] is None
    r = p["rpeak"]
    assert r["dp_flops_per_cycle_per_core"] == {"Cortex-A9": 1}
    assert r["node"]["dp_gflops_nominal"] is None
    assert p["unknown"]["rpeak.per_kind.Cortex-A9"] == "no clock frequency known"
    assert "rpeak.node" in p["unknown"]


def test_odroid_u2_figure_at_seed_clock():
    """Seed 003: 4 Cortex-A9 cores at 1.7 GHz; VFP double precision 1 FLOP/cycle -> 6.8 Gflop/s DP per node."""
    r, unknown = compute_rpeak([{"kind": None, "name": None, "uarch": "Cortex-A9", "cores": 4,
                                 "nominal_mhz": 1700.0, "max_mhz": 1700.0}], {"neon", "vfpv3"}, None)
    assert not unknown
    assert r["node"]["dp_gflops_nominal"] == pytest.approx(6.8)
    assert r["per_core"]["dp_gflops_nominal"] == pytest.approx(1.7)


def test_exynos5422_big_little(tmp_path):
    """XU4: 4 Cortex-A7 at 1.4 GHz (1 DP FLOP/cycle) + 4 Cortex-A15 at 2.0 GHz (2) = 5.6 + 16.0 Gflop/s DP."""
    p = read(tmp_path, "odroid-xu4-exynos5422")
    assert p["cpu"]["microarchitecture"] == "Cortex-A7 + Cortex-A15"
    assert p["topology"]["cores"] == 8
    r = p["rpeak"]
    assert r["dp_flops_per_cycle_per_core"] == {"Cortex-A7": 1, "Cortex-A15": 2}
    kinds = {k["name"]: k for k in r["per_kind"]}
    assert kinds["Cortex-A7"]["cores"] == 4 and kinds["Cortex-A7"]["clock_max_mhz"] == 1400.0
    assert kinds["Cortex-A7"]["dp_gflops_max"] == pytest.approx(5.6)
    assert kinds["Cortex-A15"]["cores"] == 4 and kinds["Cortex-A15"]["clock_max_mhz"] == 2000.0
    assert kinds["Cortex-A15"]["dp_gflops_max"] == pytest.approx(16.0)
    assert r["node"]["dp_gflops_max"] == pytest.approx(21.6)
    assert r["per_core"]["dp_gflops_max"] == pytest.approx(4.0)  # the big core's


def test_odroid_xu_exynos5410_from_figures():
    """Seed 003's XU (no capture found): cluster migration, 4 cores at a time: A15 4 x 1.6 x 2, A7 4 x 1.2 x 1."""
    for uarch, mhz, want in (("Cortex-A15", 1600.0, 12.8), ("Cortex-A7", 1200.0, 4.8)):
        r, _ = compute_rpeak([{"kind": None, "name": None, "uarch": uarch, "cores": 4,
                               "nominal_mhz": mhz, "max_mhz": mhz}], set(), None)
        assert r["node"]["dp_gflops_nominal"] == pytest.approx(want), uarch


def test_ppc970mp_10_gflops_per_core(tmp_path):
    """Seed 001 (JULI): two FPUs with one FMA each, 10 Gflop/s per core at 2.5 GHz."""
    p = read(tmp_path, "powermac-g5-quad-ppc970mp")
    cpu = p["cpu"]
    assert cpu["microarchitecture"] == "PPC970MP" and cpu["vendor"] == "IBM"
    assert cpu["model_name"] == "PPC970MP, altivec supported"
    assert cpu["arch"] is None and "cpu.arch" in p["unknown"]  # ppc or ppc64: cpuinfo does not say
    assert p["topology"]["cores"] == 4
    assert cpu["freq_nominal_mhz"] == 2500.0 and "'clock'" in cpu["freq_source"]
    r = p["rpeak"]
    assert r["dp_flops_per_cycle_per_core"] == {"PPC970MP": 4}
    assert r["per_core"]["dp_gflops_nominal"] == pytest.approx(10.0)
    assert r["node"]["dp_gflops_nominal"] == pytest.approx(40.0)
    assert "rpeak.node" not in p["unknown"]


def test_ppc970mp_at_rest_reports_the_clock_printed(tmp_path):
    """A G5 at rest prints half its clock; without /sys the probe takes what the kernel printed and says where from."""
    p = read(tmp_path, "powermac-g5-quad-ppc970mp-idle")
    assert p["cpu"]["freq_nominal_mhz"] == 1250.0
    assert "current one where a cpufreq driver runs" in p["cpu"]["freq_source"]
    assert p["rpeak"]["per_core"]["dp_gflops_nominal"] == pytest.approx(5.0)


def test_ppc_cpufreq_max_wins_over_printed_clock(tmp_path):
    """With cpufreq in /sys the printed (current) clock is not used as nominal; the max is, said so."""
    root = snapshot(tmp_path, "powermac-g5-quad-ppc970mp-idle")
    for i in range(4):
        d = root / "sys" / "devices" / "system" / "cpu" / f"cpu{i}" / "cpufreq"
        d.mkdir()
        (d / "cpuinfo_max_freq").write_text("2500000\n")
    p = probe(sysfs_root=str(root), use_hwloc=False)
    assert p["cpu"]["freq_nominal_mhz"] is None and p["cpu"]["freq_max_mhz"] == 2500.0
    assert p["rpeak"]["per_core"]["dp_gflops_max"] == pytest.approx(10.0)


@pytest.mark.parametrize("name", ["pi4-bcm2711b0", "odroid-u2u3-exynos4412", "odroid-xu4-exynos5422",
                                  "powermac-g5-quad-ppc970mp"])
def test_no_x86_isa_from_arm_or_ppc(tmp_path, name):
    p = read(tmp_path, name)
    assert not set(p["cpu"]["isa"]) & X86_ONLY
    assert p["cpu"]["family"] is None and p["cpu"]["stepping"] is None
    assert not any(n in (p["cpu"]["microarchitecture"] or "") for n in ("Zen", "Lake", "Bridge", "well"))


@pytest.mark.parametrize("line, name", [
    ("PPC970MP, altivec supported", "PPC970MP"), ("PPC970FX, altivec supported", "PPC970FX"),
    ("PPC970, altivec supported", "PPC970"), ("POWER8 (raw), altivec supported", "POWER8"),
    ("POWER8E (raw), altivec supported", "POWER8"), ("POWER8NVL (raw), altivec supported", "POWER8"),
    ("POWER9 (architected), altivec supported", "POWER9"), ("POWER9, altivec supported", "POWER9"),
    ("POWER10 (architected), altivec supported", None), ("7447A, altivec supported", None),
])
def test_ppc_names(line, name):
    assert ppc_uarch(line) == name
    assert name is None or name in DP_FLOPS


def test_power8_from_cpuinfo_lines():
    """zig's std.zig.system test input (a real POWER8 line); POWER's SMT threads are counted from /sys."""
    text = "processor\t: 0\ncpu\t\t: POWER8 (raw), altivec supported\nclock\t\t: 2926.000000MHz\nrevision\t: 2.0 (pvr 004d 0200)\n"
    cpu, per_pu, unknown = read_cpu(text, None)
    assert cpu["microarchitecture"] == "POWER8" and per_pu == {0: "POWER8"} and cpu["vendor"] == "IBM"
    assert "cpu.microarchitecture" not in unknown
    assert cpuinfo_clock_mhz(text) == 2926.0


def test_unknown_ppc_says_which():
    cpu, _, unknown = read_cpu("processor\t: 0\ncpu\t\t: POWER10 (architected), altivec supported\n", None)
    assert cpu["microarchitecture"] is None
    assert unknown["cpu.microarchitecture"] == "not in table (cpu=POWER10 (architected), altivec supported)"
