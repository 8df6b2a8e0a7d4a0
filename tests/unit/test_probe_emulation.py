"""probe/emulation.py: under QEMU user mode the probe must not present the host's CPU as the emulated one."""
from __future__ import annotations

import struct

from clusterbench.probe import emulation
from clusterbench.ui import format_probe

X86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel name\t: AMD EPYC\nflags\t\t: fpu lm avx2\n"
A72 = ("processor\t: 0\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm crc32 cpuid\nCPU implementer\t: 0x41\n"
       "CPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd08\nCPU revision\t: 3\n")
A15 = ("processor\t: 0\nmodel name\t: ARMv7 Processor rev 3 (v7l)\nFeatures\t: half thumb fastmult vfp edsp neon "
       "vfpv3 tls vfpv4 idiva idivt\nCPU implementer\t: 0x41\nCPU architecture: 7\nCPU part\t: 0xc0f\n")
POWER9 = "processor\t: 0\ncpu\t\t: POWER9 (architected), altivec supported\nclock\t\t: 2200.000000MHz\n" \
         "revision\t: 2.2 (pvr 004e 1202)\n\ntimebase\t: 512000000\nplatform\t: pSeries\n"


def auxv(pairs: list[tuple[int, int]], word: str = "Q") -> bytes:
    return b"".join(struct.pack("=" + word * 2, k, v) for k, v in pairs + [(0, 0)])


def test_cpuinfo_family_of_each_architecture():
    assert emulation.cpuinfo_family(X86) == "x86"
    assert emulation.cpuinfo_family(A72) == "aarch64"
    assert emulation.cpuinfo_family(A15) == "arm"
    assert emulation.cpuinfo_family(POWER9) == "ppc"
    assert emulation.cpuinfo_family("") is None
    assert [emulation.family(m) for m in ("x86_64", "aarch64", "armv7l", "ppc64le", "riscv64")] == \
        ["x86", "aarch64", "arm", "ppc", "riscv"]


def test_native_machines_are_not_emulated(monkeypatch):
    monkeypatch.setattr(emulation, "_interpreter", lambda: None)
    assert emulation.detect(X86, "x86_64") is None
    assert emulation.detect(A72, "aarch64") is None
    assert emulation.detect(A15, "armv7l") is None
    assert emulation.detect(POWER9, "ppc64le") is None
    assert emulation.detect(None, "aarch64") is None  # nothing says otherwise


def test_user_mode_is_detected_and_the_emulated_isa_read_from_auxv(monkeypatch):
    monkeypatch.setattr(emulation, "_interpreter", lambda: "/usr/libexec/qemu-binfmt/aarch64-binfmt-P")
    monkeypatch.setattr(emulation, "_read_auxv", lambda: auxv([(6, 4096), (16, 0b11 | 1 << 22), (26, 0b10)]))
    e = emulation.detect(X86, "aarch64")
    assert e["mode"] == "qemu-user" and e["guest_arch"] == "aarch64" and e["host_cpuinfo_arch"] == "x86"
    assert e["isa"] == ["fp", "asimd", "sve", "sve2"]
    assert "host" in e["detail"] and "no figure is a hardware figure" in e["detail"]


def test_hwcaps_of_arm32_and_power():
    assert emulation.hwcaps("armv7l", auxv([(16, 1 << 12 | 1 << 13 | 1 << 6)], "I")) == ["vfp", "neon", "vfpv3"]
    assert emulation.hwcaps("ppc64le", auxv([(16, 1 << 28 | 1 << 7), (26, 1 << 31 | 1 << 23)])) == \
        ["vsx", "altivec", "arch_3_00", "arch_2_07"]
    # PPC_FEATURE_HAS_DFP is 0x400 (bit 10); bit 13 is PPC_FEATURE_ICACHE_SNOOP (Linux asm/cputable.h)
    assert emulation.hwcaps("ppc64le", auxv([(16, 1 << 10)])) == ["dfp"]
    assert emulation.hwcaps("ppc64le", auxv([(16, 1 << 13)])) == []
    assert emulation.hwcaps("x86_64", auxv([(16, 7)])) == []


def test_probe_output_says_it_first():
    env = {"emulation": {"detail": "emulated: QEMU user mode runs this aarch64 process on a x86 host"}}
    text = format_probe({"environment": env, "cpu": {"arch": "aarch64"}})
    assert text.splitlines()[0].startswith("EMULATED    emulated: QEMU user mode")
    assert "EMULATED" not in format_probe({"environment": {"emulation": None}})


def test_the_default_kernel_timeout_is_longer_under_emulation_and_says_so() -> None:
    """Under QEMU user mode a quick dgemm of order 1200 on ppc64el took over the native 900 s on 2
    loaded cores: the default timeout is EMULATED_TIMEOUT_FACTOR times longer there, with a note; a
    --timeout given is kept as it is, and a native probe keeps 900 s."""
    from clusterbench.session import DEFAULT_TIMEOUT, EMULATED_TIMEOUT_FACTOR, kernel_timeout

    emulated = {"environment": {"emulation": {"mode": "qemu-user", "guest_arch": "ppc64le"}}}
    t, why = kernel_timeout(emulated, None)
    assert t == DEFAULT_TIMEOUT * EMULATED_TIMEOUT_FACTOR > DEFAULT_TIMEOUT and "qemu-user" in why and "--timeout" in why
    assert kernel_timeout(emulated, 120.0) == (120.0, None)
    assert kernel_timeout({"environment": {"emulation": None}}, None) == (DEFAULT_TIMEOUT, None)
    assert kernel_timeout({}, None) == (DEFAULT_TIMEOUT, None)
