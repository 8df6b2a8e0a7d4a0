"""kernels.build.arch_flags: the -march/-mcpu the build path chooses, on recorded /proc/cpuinfo of real boards
(tests/data/cpuinfo/) and on the x86 cpuinfo a QEMU user-mode armhf process sees (gcc 12's -mcpu=native then
falls back to an ARMv5TE core that cannot build for armhf's hard-float ABI: found by the emulated tier)."""
from __future__ import annotations

from pathlib import Path

from clusterbench.kernels.build import arch_flags

DATA = Path(__file__).resolve().parent.parent / "data" / "cpuinfo"
X86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)\nflags\t\t: fpu sse2 avx2\n"


def test_real_boards_get_their_native_cpu():
    assert arch_flags("armv7l", (DATA / "odroid-u2u3-exynos4412.cpuinfo").read_text()) == ["-mcpu=native"]
    assert arch_flags("armv7l", (DATA / "odroid-xu4-exynos5422.cpuinfo").read_text()) == ["-mcpu=native"]
    assert arch_flags("aarch64", (DATA / "pi4-bcm2711b0.cpuinfo").read_text()) == ["-mcpu=native"]
    assert arch_flags("ppc64", (DATA / "powermac-g5-quad-ppc970mp.cpuinfo").read_text()) == ["-mcpu=native"]
    assert arch_flags("x86_64", X86) == ["-march=native"]


def test_armhf_under_qemu_user_mode_keeps_the_compilers_default():
    assert arch_flags("armv7l", X86) == []
    assert arch_flags("armv7l", "") == []  # no /proc/cpuinfo at all: nothing for -mcpu=native to read


def test_ppc64el_under_qemu_user_mode_keeps_the_compilers_default():
    assert arch_flags("ppc64le", X86) == []  # gcc's -mcpu=native would become 'powerpc': "-m64 requires PowerPC64"
