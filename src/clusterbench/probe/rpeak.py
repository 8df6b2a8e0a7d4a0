"""Theoretical peak (Rpeak) = cores x clock x FLOPs/cycle/core, from a data table.

Where cores share an FPU (AMD's Bulldozer family: one FPU per two-core module), the rate in
the table is per FPU and Rpeak = FPUs x clock x FLOPs/cycle/FPU; the per-core rate reported is
the FPU's rate divided among its cores (what each core gets when all of them compute).

Why data-driven and explicit: FLOPs/cycle is a property of the core design and
of the SIMD extensions actually enabled (a VM may hide AVX-512), so every rate
carries its requirement and every deviation is written to ``notes``.  Unknown
core → ``None`` with a reason; we never guess.

DP FLOPs/cycle/core = FMA pipes x DP lanes x 2.  SP is 2x DP for SIMD.
Sources: cpufetch's microarchitecture tables, John McCalpin's measurements of the
Skylake-SP FMA units, numberworld.org's Zen 4/5 articles; for the 32-bit Cortex-A cores GCC's
pipeline models and vfpbench's measurements (see the entries); for POWER/PowerPC IBM's FPU and
VSX widths. The seeds' figures (Pi 4, JULI's 970MP) are checked on recorded /proc/cpuinfo in
tests/unit/test_rpeak_seeds.py.
"""
from __future__ import annotations

import re
from typing import Any

#: name -> (DP FLOPs/cycle/core, required ISA flag or None, note or None)
DP_FLOPS: dict[str, tuple[int, str | None, str | None]] = {
    # Arm, 32-bit (ARMv7-A): double precision on VFP only (NEON has no doubles on ARMv7). Arm publishes no DP
    # issue rates for A15/A7; the sources used are GCC's pipeline models (cortex-a9.md, cortex-a15-neon.md,
    # cortex-a7.md, the A9 and A15 ones contributed by ARM) and vfpbench's measurements (wlog.flatlib.jp).
    # Where they disagree: the lowest rate no measurement exceeds (an Rpeak below a measured rate is wrong).
    "Cortex-A9": (1, None, "A9 (VFPv3, no FMA): VMLA.F64 and VMUL.F64 hold the VFP 2 cycles (GCC cortex-a9.md: "
                  "fmacd/fmuld reserve cortex_a9_vfp*2): 1 DP FLOP/cycle; VADD.F64 interleaved could give more, "
                  "not counted (the A9 FPU TRM, DDI 0408, has the table; not read here)"),
    "Cortex-A15": (2, None, "A15 (VFPv4): GCC cortex-a15-neon.md holds its one VFP multiply pipe 2 cycles per "
                   "VMLA/VFMA.F64 (1 DP FLOP/cycle), but vfpbench measured 2.655 GF on one Tegra 4 A15 at "
                   "1.8 GHz (1.47/cycle), above that: 2 used (one DP FMA per cycle)"),
    "Cortex-A7": (1, None, "A7 (VFPv4, in-order): GCC cortex-a7.md holds the multiplier 4 cycles per DP "
                  "multiply-accumulate (0.5 DP FLOP/cycle from MACs), adds issue between; vfpbench measured "
                  "1.165 GF on one MT8389 A7 at 1.2 GHz (0.97/cycle): 1 used"),
    # Arm
    "Cortex-A53": (2, None, "A53: one 64-bit DP FMA per cycle (NEON DP is not faster); some sources say 2, some 4 — 2 used"),
    "Cortex-A55": (2, None, "A55: same FP datapath width as A53"),
    "Cortex-A72": (4, None, "A72: 2x64-bit FMA per 128-bit pipe pair; ~7.9 GF/core measured at 2.0 GHz"),
    "Cortex-A76": (8, None, "A76: 2x128-bit FMA pipes"),
    "Neoverse N1": (8, None, "N1: 2x128-bit FMA pipes"),
    "Neoverse N2": (8, None, "N2: 2x128-bit SVE2/NEON FMA pipes"),
    "Cortex-A725": (8, None, "A725: 2x128-bit FMA pipes"),
    "Neoverse V1": (16, None, "V1: 4x128-bit NEON or 2x256-bit SVE FMA"),
    "Neoverse V2": (16, None, "V2: 4x128-bit FMA pipes"),
    "Cortex-X925": (16, None, "X925: 6x128-bit SIMD pipes but 4 FMA-capable assumed (16); unverified, `peak` benchmark should confirm"),
    "A64FX": (32, "sve", "A64FX: 2x512-bit SVE FMA"),
    # IBM POWER / PowerPC (AltiVec/VMX has no doubles; DP is the scalar FPUs, or VSX from POWER7)
    "PPC970MP": (4, None, "970MP: two FPUs, one DP fused multiply-add each (4 DP FLOPs/cycle; JULI, Eicker and "
                 "Lippert (2007): 10 GFlop/s per core at 2.5 GHz)"),
    "PPC970FX": (4, None, "970FX: two FPUs, one DP fused multiply-add each (same core as the 970MP)"),
    "PPC970": (4, None, "970: two FPUs, one DP fused multiply-add each"),
    "POWER8": (8, None, "POWER8: two VSX pipes, each a 2x64-bit FMA (8 DP FLOPs/cycle per core)"),
    "POWER9": (8, None, "POWER9 SMT4 core: 8 DP FLOPs/cycle (2x128-bit VSX FMA); an SMT8 core is two of them "
               "and Linux lists its threads, so cores are counted from /sys"),
    # AMD
    "Zen": (8, "fma", "Zen/Zen+: 2x128-bit FMA (256-bit ops split)"),
    "Zen 2": (16, "fma", "Zen 2: 2x256-bit FMA"),
    "Zen 3": (16, "fma", "Zen 3: 2x256-bit FMA"),
    "Zen 4": (16, "fma", "Zen 4: AVX-512 double-pumped on 2x256-bit FMA"),
    "Zen 5": (32, "avx512f", "Zen 5 desktop/server: native 512-bit FMA (mobile parts: 256-bit, 16)"),
    # Intel
    "Nehalem": (4, None, "SSE: 1x128-bit add + 1x128-bit mul"),
    "Westmere": (4, None, "SSE: 1x128-bit add + 1x128-bit mul"),
    "Sandy Bridge": (8, "avx", "AVX: 1x256-bit add + 1x256-bit mul, no FMA"),
    "Ivy Bridge": (8, "avx", "AVX: 1x256-bit add + 1x256-bit mul, no FMA"),
    "Haswell": (16, "fma", "2x256-bit FMA"),
    "Broadwell": (16, "fma", "2x256-bit FMA"),
    "Skylake": (16, "fma", "client: 2x256-bit FMA"),
    "Ice Lake": (16, "avx512f", "client Ice Lake: 1x512-bit FMA"),
    "Tiger Lake": (16, "avx512f", "client Tiger Lake: 1x512-bit FMA"),
    "Ice Lake-SP": (32, "avx512f", "2x512-bit FMA"),
    "Sapphire Rapids": (32, "avx512f", "2x512-bit FMA"),
    "Emerald Rapids": (32, "avx512f", "2x512-bit FMA (Raptor Cove, same core as Sapphire Rapids)"),
    "Granite Rapids": (32, "avx512f", "2x512-bit FMA"),
    "Golden Cove": (16, "fma", "hybrid P-core with AVX-512 disabled: 2x256-bit FMA"),
    "Raptor Cove": (16, "fma", "hybrid P-core with AVX-512 disabled: 2x256-bit FMA"),
    "Gracemont": (8, "fma", "E-core: 2x128-bit FMA"),
    # AMD Bulldozer family: rate per two-core module (one shared FPU, see SHARED_FPU)
    "Bulldozer": (8, "fma4", "Bulldozer: one FPU per two-core module, 2x128-bit FMAC (FMA4): 8 DP FLOPs/cycle "
                  "per module, 4 per core when both compute"),
    "Piledriver": (8, "fma", "Piledriver: one FPU per two-core module, 2x128-bit FMAC: 8 DP FLOPs/cycle per "
                   "module, 4 per core when both compute"),
    "Steamroller": (8, "fma", "Steamroller: one FPU per two-core module, 2x128-bit FMAC: 8 DP FLOPs/cycle per "
                    "module, 4 per core when both compute"),
    "Excavator": (8, "fma", "Excavator: one FPU per two-core module, 2x128-bit FMAC: 8 DP FLOPs/cycle per "
                  "module, 4 per core when both compute"),
    # Skylake-SP / Cascade Lake are decided by skx_fma_units()
}
#: cores that share one FPU, for the designs whose DP_FLOPS rate is per FPU
SHARED_FPU: dict[str, int] = {"Bulldozer": 2, "Piledriver": 2, "Steamroller": 2, "Excavator": 2}
#: the rate when the required flag is absent (e.g. a VM hides AVX-512 or FMA)
FALLBACK_WITHOUT: dict[str, tuple[int, str]] = {
    "avx512f": (16, "avx512f absent: AVX2 2x256-bit FMA rate"),
    "fma": (0, "fma absent: rate halved (separate multiply and add)"),
    "fma4": (0, "fma4 absent: rate halved (separate multiply and add)"),
}


def skx_fma_units(model_name: str | None) -> int | None:
    """Number of AVX-512 FMA units on Skylake-SP/Cascade Lake from the model name, None if undecidable.

    2 on Platinum, Gold 6xxx, Gold 5122 and Xeon W; 1 on other Gold 5xxx, Silver, Bronze.
    CPUID cannot tell them apart.
    """
    name = model_name or ""
    if re.search(r"Platinum|\bW-\d{4}", name):
        return 2
    m = re.search(r"Gold\s+(\d{4})", name)
    if m:
        num = m.group(1)
        return 2 if num[0] == "6" or num == "5122" else 1
    if re.search(r"Silver|Bronze", name):
        return 1
    return None


def dp_rate(uarch: str | None, flags: set[str], model_name: str | None) -> tuple[int | None, list[str], list[int] | None]:
    """DP FLOPs/cycle/core for one core type: (rate or None, notes, ambiguous candidates or None)."""
    notes: list[str] = []
    if uarch is None:
        return None, ["microarchitecture unknown: no FLOPs/cycle"], None
    if uarch in ("Skylake-SP", "Cascade Lake"):
        units = skx_fma_units(model_name)
        if "avx512f" not in flags:
            return 16, [f"{uarch}: avx512f absent, AVX2 2x256-bit FMA rate"], None
        if units is None:
            return 32, [f"{uarch}: 1 or 2 AVX-512 FMA units cannot be decided from '{model_name}'; "
                        "reporting the 2-unit rate (32), 16 if 1 unit — the `peak` benchmark settles it"], [32, 16]
        return 16 * units, [f"{uarch}: {units} AVX-512 FMA unit(s) from model name"], None
    if uarch not in DP_FLOPS:
        return None, [f"{uarch}: no DP FLOPs/cycle in table"], None
    rate, need, note = DP_FLOPS[uarch]
    if note:
        notes.append(note)
    if need and flags and need not in flags:
        fb, why = FALLBACK_WITHOUT.get(need, (0, f"{need} absent"))
        rate = fb or rate // 2
        notes.append(f"{uarch}: {why} -> {rate}")
    return rate, notes, None


def _gf(cores: int, mhz: float | None, fpc: int | None) -> float | None:
    if mhz is None or fpc is None:
        return None
    return round(cores * mhz * fpc / 1000.0, 3)


def fpu_count(uarch: str | None, pus: list[int], caches: list[dict[str, Any]], cores: int) -> tuple[int | None, str | None]:
    """FPUs serving ``pus`` where cores share them (None elsewhere), and how they were counted.

    Every Bulldozer-family module has its own L2, shared by its two cores only, so the L2
    instances are the modules whatever the kernel called the cores (two cores with distinct core
    ids, or one core of two PUs)."""
    per = SHARED_FPU.get(uarch or "")
    if not per:
        return None, None
    mine = set(pus)
    l2 = {frozenset(c["cpus"]) & mine for c in caches if c.get("level") == 2 and c.get("type") != "instruction"}
    l2.discard(frozenset())
    if l2 and set().union(*l2) == mine:
        return len(l2), f"{uarch}: {len(l2)} FPUs, one per module (L2 instance) of {per} cores"
    return -(-cores // per), f"{uarch}: module L2s unknown, FPUs counted as cores / {per}"


def compute_rpeak(groups: list[dict[str, Any]], flags: set[str], model_name: str | None) -> tuple[dict[str, Any], dict[str, str]]:
    """Rpeak from core groups ``{kind, name, uarch, cores, nominal_mhz, max_mhz}`` (plus ``fpus``
    where cores share an FPU: see :func:`fpu_count`; missing, cores / cores-per-FPU).

    Returns (rpeak dict, unknown reasons).
    """
    unknown: dict[str, str] = {}
    notes: list[str] = []
    per_kind = []
    dp_table: dict[str, int | None] = {}
    sp_table: dict[str, int | None] = {}
    ambiguous = False
    candidates: dict[str, list[int]] = {}
    fpu_table: dict[str, int | None] = {}
    for g in groups:
        rate, n, cand = dp_rate(g["uarch"], flags, model_name)
        notes.extend(x for x in n if x not in notes)
        label = g.get("name") or g["uarch"] or f"kind {g['kind']}"
        per = SHARED_FPU.get(g["uarch"] or "")
        units = g["cores"]  # what the rate multiplies: cores, or the FPUs they share
        if per:
            units = g.get("fpus") or -(-g["cores"] // per)
            fpu_table[label] = rate
            rate_core = rate / per if rate else None
            dp_table[label] = int(rate_core) if rate_core and rate_core == int(rate_core) else rate_core
        else:
            dp_table[label] = rate
        sp_table[label] = dp_table[label] * 2 if dp_table[label] else None
        if cand:
            ambiguous = True
            candidates[label] = cand
        nom, mx = g.get("nominal_mhz"), g.get("max_mhz")
        if nom is None and mx is not None:
            notes.append(f"{label}: nominal clock unknown, max clock used for both")
            nom = mx
        elif mx is None and nom is not None:
            notes.append(f"{label}: max clock unknown, nominal clock used for both")
            mx = nom
        entry = {
            "kind": g["kind"], "name": label, "cores": g["cores"],
            "dp_gflops_nominal": _gf(units, nom, rate), "dp_gflops_max": _gf(units, mx, rate),
            "sp_gflops_nominal": _gf(units, nom, rate * 2 if rate else None),
            "sp_gflops_max": _gf(units, mx, rate * 2 if rate else None),
            "clock_nominal_mhz": nom, "clock_max_mhz": mx,
        }
        if per:
            entry.update(fpus=units, cores_per_fpu=per)
        per_kind.append(entry)
        if rate is None:
            unknown[f"rpeak.per_kind.{label}"] = "; ".join(n)
        elif nom is None:
            unknown[f"rpeak.per_kind.{label}"] = "no clock frequency known"
    keys = ("dp_gflops_nominal", "dp_gflops_max", "sp_gflops_nominal", "sp_gflops_max")
    node: dict[str, float | None] = {}
    for k in keys:
        vals = [pk[k] for pk in per_kind]
        node[k] = round(sum(vals), 3) if vals and all(v is not None for v in vals) else None
    if any(node[k] is None for k in keys):
        unknown["rpeak.node"] = "Rpeak of at least one core kind unknown (see rpeak.notes)"
    best = max(per_kind, key=lambda pk: (pk["dp_gflops_nominal"] or 0) / max(pk["cores"], 1), default=None)
    per_core = {k: (round(best[k] / best["cores"], 3) if best and best[k] is not None and best["cores"] else None) for k in keys}
    out: dict[str, Any] = {
        "dp_flops_per_cycle_per_core": dp_table,
        "sp_flops_per_cycle_per_core": sp_table,
        "per_core": per_core,
        "per_kind": per_kind,
        "node": node,
        "clock_nominal_mhz": best["clock_nominal_mhz"] if best else None,
        "clock_max_mhz": best["clock_max_mhz"] if best else None,
        "basis": "cores x clock x FLOPs/cycle",
        "fma_units_ambiguous": ambiguous,
        "notes": notes,
    }
    if candidates:
        out["dp_flops_per_cycle_candidates"] = candidates
    if fpu_table:  # cores share FPUs: the rate of one FPU, per kind
        out["dp_flops_per_cycle_per_fpu"] = fpu_table
        out["basis"] = "FPUs x clock x FLOPs/cycle (cores share an FPU)"
    return out, unknown
