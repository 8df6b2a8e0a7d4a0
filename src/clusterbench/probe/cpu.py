"""CPU identity from /proc/cpuinfo: vendor, model, ISA flags, microarchitecture.

Why identify the microarchitecture: the peak FLOP rate per cycle is a property
of the core design (number and width of FMA pipes), which neither cpuinfo nor
CPUID states directly.  Identification is table-driven; an unknown model is
reported as ``None`` with a reason, never guessed.
"""
from __future__ import annotations

import re
from typing import Any

#: ISA extensions worth reporting (subset of cpuinfo flags / Features).
ISA_FLAGS = [
    "sse2", "sse3", "ssse3", "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c",
    "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl", "avx512ifma", "avx512vbmi",
    "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8",
    "neon", "asimd", "asimdhp", "asimddp", "fphp", "sve", "sve2", "sme", "i8mm", "bf16", "vfpv3", "vfpv4",
]

# x86: (vendor, family) -> list of (model set, uarch name, stepping predicate or None)
_INTEL_FAM6: list[tuple[set[int], str]] = [
    ({60, 63, 69, 70}, "Haswell"),
    ({61, 71, 79, 86}, "Broadwell"),
    ({78, 94, 142, 158, 165, 166}, "Skylake"),  # client Skylake/Kaby/Coffee/Comet Lake
    ({106, 108}, "Ice Lake-SP"),
    ({125, 126}, "Ice Lake"),
    ({140, 141}, "Tiger Lake"),
    ({143}, "Sapphire Rapids"),
    ({207}, "Emerald Rapids"),
    ({173, 174}, "Granite Rapids"),
    ({151, 154}, "Alder Lake"),
    ({183, 186, 191}, "Raptor Lake"),
    ({42, 45}, "Sandy Bridge"),
    ({58, 62}, "Ivy Bridge"),
    ({26, 30, 31, 46}, "Nehalem"),
    ({37, 44, 47}, "Westmere"),
]
HYBRID_INTEL = {"Alder Lake": ("Golden Cove", "Gracemont"), "Raptor Lake": ("Raptor Cove", "Gracemont")}

# Arm: (implementer, part) -> name
ARM_PARTS: dict[tuple[int, int], str] = {
    (0x41, 0xC07): "Cortex-A7", (0x41, 0xC09): "Cortex-A9", (0x41, 0xC0F): "Cortex-A15",
    (0x41, 0xD03): "Cortex-A53", (0x41, 0xD04): "Cortex-A35", (0x41, 0xD05): "Cortex-A55",
    (0x41, 0xD07): "Cortex-A57", (0x41, 0xD08): "Cortex-A72", (0x41, 0xD09): "Cortex-A73",
    (0x41, 0xD0A): "Cortex-A75", (0x41, 0xD0B): "Cortex-A76", (0x41, 0xD0C): "Neoverse N1",
    (0x41, 0xD0D): "Cortex-A77", (0x41, 0xD40): "Neoverse V1", (0x41, 0xD41): "Cortex-A78",
    (0x41, 0xD44): "Cortex-X1", (0x41, 0xD46): "Cortex-A510", (0x41, 0xD47): "Cortex-A710",
    (0x41, 0xD48): "Cortex-X2", (0x41, 0xD49): "Neoverse N2", (0x41, 0xD4F): "Neoverse V2",
    (0x41, 0xD80): "Cortex-A520", (0x41, 0xD81): "Cortex-A720", (0x41, 0xD82): "Cortex-X4",
    (0x41, 0xD84): "Neoverse V3", (0x41, 0xD85): "Cortex-X925", (0x41, 0xD87): "Cortex-A725",
    (0x46, 0x001): "A64FX", (0x48, 0xD01): "TaiShan v110",
}

# POWER / PowerPC: the leading word of /proc/cpuinfo's "cpu" line -> name ("PPC970MP, altivec supported",
# "POWER8 (raw), altivec supported", "POWER9 (architected), altivec supported", "POWER8E (raw)", ...)
PPC_CPUS: list[tuple[str, str]] = [
    (r"PPC970MP\b", "PPC970MP"), (r"PPC970FX\b", "PPC970FX"), (r"PPC970\b", "PPC970"),
    (r"POWER8(E|NVL)?\b", "POWER8"), (r"POWER9\b", "POWER9"),
]
#: a "cpu" line that is a POWER/PowerPC kernel's (other architectures have no plain "cpu" key, or not this)
PPC_LINE = re.compile(r"^(PPC|POWER|RS64|\d{3,4}[A-Z]*,)|altivec supported")


def parse_cpuinfo(text: str | None) -> tuple[list[dict[str, str]], dict[str, str]]:
    """Split /proc/cpuinfo into per-processor dicts and global (processor-less) keys.

    Old ARM kernels print ``CPU part`` etc. once after all processors; those land
    in the global dict and are applied to every processor.
    """
    procs: list[dict[str, str]] = []
    glob: dict[str, str] = {}
    cur: dict[str, str] | None = None
    for line in (text or "").splitlines():
        if ":" not in line:
            cur = None if not line.strip() else cur
            continue
        k, _, v = line.partition(":")
        k, v = k.strip(), v.strip()
        if k == "processor" and v.isdigit():
            cur = {"processor": v}
            procs.append(cur)
        elif cur is not None:
            cur[k] = v
        else:
            glob[k] = v
    for p in procs:
        for k, v in glob.items():
            p.setdefault(k, v)
    return procs, glob


def _int(v: str | None) -> int | None:
    try:
        return int(v, 0) if v is not None else None
    except ValueError:
        return None


def x86_uarch(vendor: str | None, family: int | None, model: int | None, stepping: int | None) -> str | None:
    """Microarchitecture from vendor/family/model (None if not in the table)."""
    if vendor == "GenuineIntel" and family == 6 and model is not None:
        if model == 85:
            return "Cascade Lake" if (stepping or 0) >= 5 else "Skylake-SP"
        for models, name in _INTEL_FAM6:
            if model in models:
                return name
    if vendor in ("AuthenticAMD", "HygonGenuine") and model is not None:
        if family == 21:
            return bulldozer_family(model)
        if family == 23:
            return "Zen" if model <= 0x2F else "Zen 2"
        if family == 25:
            if model <= 0x0F or 0x20 <= model <= 0x5F:
                return "Zen 3"
            if 0x10 <= model <= 0x1F or 0x60 <= model <= 0x7F or 0xA0 <= model <= 0xAF:
                return "Zen 4"
        if family == 26:
            return "Zen 5"
    return None


def bulldozer_family(model: int) -> str | None:
    """AMD family 15h by model: Bulldozer (01h), Piledriver (02h, 10h-1Fh), Steamroller
    (30h-3Fh), Excavator (60h-7Fh)."""
    if model <= 0x01:
        return "Bulldozer"
    if model == 0x02 or 0x10 <= model <= 0x1F:
        return "Piledriver"
    if 0x30 <= model <= 0x3F:
        return "Steamroller"
    if 0x60 <= model <= 0x7F:
        return "Excavator"
    return None


def arm_uarch(implementer: int | None, part: int | None) -> str | None:
    """Arm core name from MIDR implementer/part (None if not in the table)."""
    if implementer is None or part is None:
        return None
    return ARM_PARTS.get((implementer, part))


def ppc_uarch(cpu_line: str | None) -> str | None:
    """POWER/PowerPC core name from the /proc/cpuinfo "cpu" line (None if not in the table)."""
    for pattern, name in PPC_CPUS:
        if re.match(pattern, cpu_line or ""):
            return name
    return None


def cpuinfo_clock_mhz(text: str | None) -> float | None:
    """The clock a POWER/PowerPC kernel prints per processor (``clock : 2500.000000MHz``), in MHz.

    From the device tree on pSeries and blades (the fixed clock); on a PowerMac with a cpufreq
    driver it follows the current frequency (a G5 at rest prints half its clock)."""
    m = re.search(r"^clock\s*:\s*([\d.]+)\s*MHz", text or "", re.M)
    return float(m.group(1)) if m else None


def read_cpu(cpuinfo_text: str | None, machine: str | None) -> tuple[dict[str, Any], dict[int, str | None], dict[str, str]]:
    """Build the ``cpu`` section (minus frequencies) and per-PU uarch names.

    Returns (cpu dict, {pu: uarch or None}, unknown reasons).
    """
    unknown: dict[str, str] = {}
    procs, glob = parse_cpuinfo(cpuinfo_text)
    first = procs[0] if procs else dict(glob)
    flags = set((first.get("flags") or first.get("Features") or "").split())
    vendor = first.get("vendor_id")
    implementer = _int(first.get("CPU implementer"))
    arch = machine
    if arch is None:
        if vendor:
            arch = "x86_64" if "lm" in flags else "i686"
        elif implementer is not None:
            arch = "aarch64" if first.get("CPU architecture") == "8" else "arm"
    isa = [f for f in ISA_FLAGS if f in flags]
    family, model, stepping = _int(first.get("cpu family")), _int(first.get("model")), _int(first.get("stepping"))
    ppc_line = first.get("cpu") if not vendor and implementer is None and PPC_LINE.search(first.get("cpu") or "") else None
    model_name = first.get("model name") or first.get("Processor") or first.get("cpu model") or ppc_line
    per_pu: dict[int, str | None] = {}
    uarch: str | None = None
    if vendor:
        uarch = x86_uarch(vendor, family, model, stepping)
        for p in procs:
            per_pu[int(p["processor"])] = uarch
    elif implementer is not None:
        names = []
        for p in procs:
            n = arm_uarch(_int(p.get("CPU implementer")), _int(p.get("CPU part")))
            per_pu[int(p["processor"])] = n
            if n not in names:
                names.append(n)
        known = [n for n in names if n]
        uarch = " + ".join(known) if known and None not in names else None
    elif ppc_line:
        uarch = ppc_uarch(ppc_line)
        for p in procs:
            per_pu[int(p["processor"])] = ppc_uarch(p.get("cpu"))
    if uarch is None:
        unknown["cpu.microarchitecture"] = (
            f"not in table (vendor={vendor}, family={family}, model={model})" if vendor else
            f"not in table (implementer={first.get('CPU implementer')}, part={first.get('CPU part')})"
            if implementer is not None else f"not in table (cpu={ppc_line})" if ppc_line
            else "no identification in /proc/cpuinfo"
        )
    cpu: dict[str, Any] = {
        "arch": arch,
        "vendor": vendor or ({0x41: "ARM", 0x46: "Fujitsu", 0x48: "HiSilicon", 0x51: "Qualcomm", 0x61: "Apple",
                              0xC0: "Ampere", 0x4E: "NVIDIA"}.get(implementer, None) if implementer is not None
                             else "IBM" if ppc_uarch(ppc_line) else None),
        "model_name": model_name,
        "family": family,
        "model": model,
        "stepping": stepping,
        "implementer": first.get("CPU implementer"),
        "part": first.get("CPU part"),
        "microarchitecture": uarch,
        "isa": isa,
        "flags": sorted(flags),
    }
    for key in ("arch", "vendor", "model_name"):
        if cpu[key] is None:
            unknown[f"cpu.{key}"] = "not in /proc/cpuinfo"
    return cpu, per_pu, unknown


def model_name_ghz(model_name: str | None) -> float | None:
    """Nominal clock from a model name like ``... @ 2.10GHz`` (Intel style), in MHz."""
    m = re.search(r"@\s*([\d.]+)\s*GHz", model_name or "", re.I)
    if m:
        return float(m.group(1)) * 1000.0
    m = re.search(r"\b([\d.]+)\s*GHz", model_name or "", re.I)
    return float(m.group(1)) * 1000.0 if m else None
