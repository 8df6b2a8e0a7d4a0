"""Is this process's CPU emulated by QEMU's user mode?

Under ``qemu-<arch>`` user mode (binfmt_misc), a foreign binary sees the emulated architecture in
``uname -m`` and in its auxiliary vector (AT_HWCAP: the emulated CPU's features), but ``/proc/cpuinfo``
and ``/sys`` are the host's: a probe reading them would present the host's x86 CPU as the Arm or
POWER machine. The sign: the architecture ``uname`` reports and the one ``/proc/cpuinfo`` describes
differ. The emulator's own binary is a second sign: ``/proc/<parent>/exe`` (QEMU hides itself from
``/proc/self`` only) names ``qemu-<arch>`` or binfmt's ``/usr/libexec/qemu-binfmt/<arch>-binfmt-P``.

``detect(cpuinfo_text, machine)`` returns None on a native machine, else a dict (stored with the probe
as ``environment.emulation``)::

  mode: "qemu-user"   guest_arch: uname -m   host_cpuinfo_arch: x86|arm|ppc|...   interpreter: path|None
  isa: [features from AT_HWCAP/AT_HWCAP2]    detail: one line for people
"""
from __future__ import annotations

import os
import re
import struct
from typing import Any

AT_HWCAP, AT_HWCAP2 = 16, 26

#: AT_HWCAP / AT_HWCAP2 bits worth naming, per architecture family (Linux uapi asm/hwcap.h, cputable.h)
HWCAP_BITS: dict[str, tuple[dict[int, str], dict[int, str]]] = {
    "aarch64": ({0: "fp", 1: "asimd", 8: "atomics", 20: "asimddp", 22: "sve"},
                {1: "sve2", 9: "i8mm", 14: "bf16"}),
    "arm": ({2: "thumb", 6: "vfp", 12: "neon", 13: "vfpv3", 16: "vfpv4", 17: "idiva", 19: "vfpd32"}, {}),
    "ppc": ({28: "altivec", 7: "vsx", 10: "dfp"},
            {31: "arch_2_07", 23: "arch_3_00", 18: "arch_3_1", 22: "ieee128"}),
}


def family(machine: str | None) -> str | None:
    """x86 / aarch64 / arm / ppc / s390 / riscv from ``uname -m``."""
    m = (machine or "").lower()
    if re.fullmatch(r"x86_64|amd64|i[3-6]86", m):
        return "x86"
    if m.startswith(("aarch64", "arm64")):
        return "aarch64"
    if m.startswith("arm"):
        return "arm"
    if m.startswith(("ppc", "powerpc")):
        return "ppc"
    if m.startswith("s390"):
        return "s390"
    if m.startswith("riscv"):
        return "riscv"
    return None


def cpuinfo_family(text: str | None) -> str | None:
    """The architecture family a /proc/cpuinfo describes (None when it says too little)."""
    keys = {line.split(":", 1)[0].strip().lower(): line.split(":", 1)[1].strip()
            for line in (text or "").splitlines() if ":" in line}
    if "vendor_id" in keys and ("flags" in keys or "cpu family" in keys):
        return "s390" if "s390" in keys["vendor_id"].lower() else "x86"
    if "cpu implementer" in keys:
        return "aarch64" if keys.get("cpu architecture") == "8" else "arm"
    if re.match(r"power|ppc|970", keys.get("cpu", ""), re.I) or keys.get("platform", "").lower() in (
            "powernv", "pseries", "powermac"):
        return "ppc"
    if "isa" in keys and keys["isa"].startswith("rv"):
        return "riscv"
    return None


def hwcaps(machine: str | None, auxv: bytes | None) -> list[str]:
    """Feature names from the auxiliary vector's AT_HWCAP/AT_HWCAP2 (the emulated CPU's, under QEMU)."""
    fam = family(machine)
    if not auxv or fam not in HWCAP_BITS:
        return []
    word = "Q" if "64" in (machine or "") else "I"
    size = struct.calcsize(word)
    vals = {}
    for i in range(0, len(auxv) - 2 * size + 1, 2 * size):
        key, val = struct.unpack_from("=" + word * 2, auxv, i)
        if key == 0:
            break
        vals[key] = val
    bits1, bits2 = HWCAP_BITS[fam]
    out = [n for b, n in sorted(bits1.items()) if vals.get(AT_HWCAP, 0) >> b & 1]
    out += [n for b, n in sorted(bits2.items()) if vals.get(AT_HWCAP2, 0) >> b & 1]
    return out


def _interpreter() -> str | None:
    """The emulator running our parent (QEMU hides itself from /proc/self only), if it is one."""
    try:
        exe = os.readlink(f"/proc/{os.getppid()}/exe")
    except OSError:
        return None
    return exe if "qemu" in exe and "qemu-system" not in exe else None


def _read_auxv() -> bytes | None:
    try:
        with open("/proc/self/auxv", "rb") as f:
            return f.read()
    except OSError:
        return None


def detect(cpuinfo_text: str | None, machine: str | None) -> dict[str, Any] | None:
    """See the module docstring; None on a native machine (or when nothing says otherwise)."""
    guest, host = family(machine), cpuinfo_family(cpuinfo_text)
    interp = _interpreter()
    if not interp and (guest is None or host is None or guest == host):
        return None
    isa = hwcaps(machine, _read_auxv())
    detail = (f"emulated: QEMU user mode runs this {machine} process on a {host or 'foreign'} host; "
              f"/proc/cpuinfo and /sys describe the host, not the emulated CPU; no figure is a hardware figure")
    return {"mode": "qemu-user", "guest_arch": machine, "host_cpuinfo_arch": host, "interpreter": interp,
            "isa": isa, "detail": detail}
