"""Helpers shared by tests/unit/test_probe_amd_cu.py (pure tests) and tests/integration/test_probe_amd_cu.py
(tests that start processes)."""
from __future__ import annotations

from pathlib import Path


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
