"""Node probe: topology, memory, CPU identity, theoretical peak and environment.

``probe(sysfs_root=None, use_hwloc=None) -> dict`` never raises on missing
files: anything it cannot determine is ``None`` and explained in
``result["unknown"][dotted_path]``.

* ``sysfs_root``: None = live machine; a directory = a snapshot holding
  ``sys/`` and ``proc/`` (hwloc's "fsroot"); live-only items are then None.
* ``use_hwloc``: None = use ``lstopo-no-graphics`` if installed, True/False
  force.  Both sources are normalised by the same code and cross-checked; when
  they disagree the automatic mode keeps sysfs and says why in ``notes``.

Returned keys (JSON-serialisable)::

  probe_schema: 1          source: "hwloc" | "sysfs"     root: str     hostname: str|None
  topology: packages, numa_nodes, cores, pus, smt_per_core,
            cpus [{pu, core (global id), package, numa, kind}],
            numa [{os_index, cpus, memory_total_bytes, memory_available_bytes}],
            caches [{level, type, name, size_bytes, line_bytes, ways, cpus}] (one per instance),
            core_kinds [{kind, cpus, name, freq_max_mhz}] (least to most powerful),
            restriction {source, cpus, mems} | None   (cpuset cgroup applied, like hwloc)
  memory: total_bytes, available_bytes, hugepage_sizes_bytes [..], hugepages_free {size: count}
  cpu: arch, vendor, model_name, family, model, stepping, implementer, part,
       microarchitecture, isa [..], sve_vector_bits, freq_nominal_mhz, freq_max_mhz, freq_source
  rpeak: dp_/sp_flops_per_cycle_per_core {label: n}, per_core {dp_gflops_nominal, dp_gflops_max,
         sp_gflops_nominal, sp_gflops_max}, per_kind [{kind, name, cores, ...same four...}],
         node {...same four...}, clock_nominal_mhz, clock_max_mhz, basis, fma_units_ambiguous, notes;
         where cores share an FPU (AMD Bulldozer family): per_kind[].fpus, per_kind[].cores_per_fpu and
         dp_flops_per_cycle_per_fpu {label: n} (Rpeak counts FPUs, the per-core rate is the FPU's share)
  environment: kernel, preemption, governor, turbo, smt_active, thp, thp_defrag, hypervisor,
               container, nics, mpi, blas, compilers, numa_balancing, cpu_mitigations,
               emulation (None natively; under QEMU user mode {mode, guest_arch, host_cpuinfo_arch,
               interpreter, isa, detail}: cpu and rpeak are then unknown, see probe/emulation.py)
  notes: [str]             unknown: {dotted_path: reason}
"""
from __future__ import annotations

import os
import platform
import socket
from typing import Any

from clusterbench.probe import emulation
from clusterbench.probe import hwloc as _hwloc
from clusterbench.probe.cpu import cpuinfo_clock_mhz, model_name_ghz, read_cpu, HYBRID_INTEL
from clusterbench.probe.environment import read_environment
from clusterbench.probe.rpeak import compute_rpeak, fpu_count
from clusterbench.probe.sysfs import FsRoot, RawTopology, read_meminfo, read_raw_topology, topology_from_raw
from clusterbench.probe.topology import cache_sizes, cpu_order, l1d_bytes, llc_total_bytes

__all__ = ["probe", "cpu_order", "cache_sizes", "l1d_bytes", "llc_total_bytes", "PROBE_SCHEMA"]

PROBE_SCHEMA = 1
_COUNT_KEYS = ("packages", "numa_nodes", "cores", "pus")


def _same_topology(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Names of the topology facts on which two readings disagree."""
    diff = [k for k in _COUNT_KEYS + ("cpus", "caches") if a.get(k) != b.get(k)]
    if [n["cpus"] for n in a.get("numa", [])] != [n["cpus"] for n in b.get("numa", [])]:
        diff.append("numa")
    return diff


def _memory(fs: FsRoot, unknown: dict[str, str]) -> dict[str, Any]:
    mi = read_meminfo(fs.read("/proc/meminfo"))
    sizes, free = [], {}
    for d in fs.listdir("/sys/kernel/mm/hugepages"):
        if d.startswith("hugepages-") and d.endswith("kB"):
            try:
                size = int(d[len("hugepages-"):-2]) * 1024
            except ValueError:
                continue
            sizes.append(size)
            n = fs.read_int(f"/sys/kernel/mm/hugepages/{d}/free_hugepages")
            if n is not None:
                free[str(size)] = n
    mem = {"total_bytes": mi.get("MemTotal"), "available_bytes": mi.get("MemAvailable", mi.get("MemFree")),
           "hugepage_sizes_bytes": sorted(sizes), "hugepages_free": free}
    if mem["total_bytes"] is None:
        unknown["memory.total_bytes"] = "no /proc/meminfo"
    if mem["available_bytes"] is None:
        unknown["memory.available_bytes"] = "no /proc/meminfo"
    if not sizes:
        unknown["memory.hugepage_sizes_bytes"] = "no /sys/kernel/mm/hugepages"
    return mem


def _name_kinds(topo: dict[str, Any], cpu: dict[str, Any], per_pu: dict[int, str | None]) -> dict[int, str | None]:
    """Name core kinds and return the uarch of every PU (hybrid Intel: E/P cores)."""
    uarch = dict(per_pu)
    kinds = topo["core_kinds"]
    hybrid = HYBRID_INTEL.get(cpu.get("microarchitecture") or "")
    if hybrid and len(kinds) == 2:
        for k, (label, core) in zip(kinds, (("E-core", hybrid[1]), ("P-core", hybrid[0]))):
            k["name"] = k["name"] or label
            for c in k["cpus"]:
                uarch[c] = core
    elif hybrid:
        for c in topo["cpus"]:
            uarch[c["pu"]] = None  # cannot tell P from E cores without kinds
    for k in kinds:
        names = {uarch.get(c) for c in k["cpus"]}
        if k["name"] is None and len(names) == 1 and None not in names:
            k["name"] = names.pop()
    return uarch


def _frequencies(fs: FsRoot, raw: RawTopology, cpu: dict[str, Any], cpuinfo_mhz: float | None,
                 flags: set[str], pus: list[int], ppc_clock_mhz: float | None = None) -> tuple[float | None, float | None, str]:
    """(nominal MHz, max MHz, source) for a set of PUs, best source first.

    Arm's /proc/cpuinfo has no clock: without cpufreq in /sys both stay None (Rpeak unknown, said so)."""
    base = [raw.cpus[p].base_khz for p in pus if p in raw.cpus and raw.cpus[p].base_khz]
    mx = [raw.cpus[p].max_khz for p in pus if p in raw.cpus and raw.cpus[p].max_khz]
    fmax = min(mx) / 1000.0 if mx else None
    if base:
        return min(base) / 1000.0, fmax, "cpufreq base_frequency"
    by_name = model_name_ghz(cpu.get("model_name"))
    if by_name:
        return by_name, fmax, "model name '@ GHz'"
    has_cpufreq = bool(fs.listdir("/sys/devices/system/cpu/cpufreq")) or bool(mx)
    if ppc_clock_mhz and not has_cpufreq:
        return ppc_clock_mhz, fmax, ("/proc/cpuinfo 'clock' (POWER/PowerPC, no cpufreq: the clock the kernel "
                                     "prints, the current one where a cpufreq driver runs)")
    if cpuinfo_mhz and "constant_tsc" in flags and not has_cpufreq:
        why = "VM without cpufreq" if "hypervisor" in flags else "no cpufreq driver"
        return cpuinfo_mhz, fmax, f"/proc/cpuinfo 'cpu MHz' ({why}; constant TSC clock used as nominal)"
    return None, fmax, "cpufreq cpuinfo_max_freq" if fmax else "none"


def probe(sysfs_root: str | None = None, use_hwloc: bool | None = None) -> dict[str, Any]:
    """Characterise the node (or a /sys+/proc snapshot under ``sysfs_root``); see module docstring."""
    live = sysfs_root is None or os.path.abspath(sysfs_root) == "/"
    fs = FsRoot("/" if sysfs_root is None else sysfs_root)
    unknown: dict[str, str] = {}
    notes: list[str] = []

    cpuinfo_text = fs.read("/proc/cpuinfo")
    emulated = emulation.detect(cpuinfo_text, platform.machine()) if live else None
    if emulated:  # /proc/cpuinfo (and /sys) are the host's: never present them as this machine's CPU
        notes.append(emulated["detail"])
        cpuinfo_text = None
    cpu, per_pu, u = read_cpu(cpuinfo_text, platform.machine() if live else None)
    if emulated:
        u = {k: EMULATED_CPU for k in u}
        cpu["isa"] = list(emulated["isa"])
    unknown.update(u)
    flags = set(cpu.pop("flags", []))
    if cpuinfo_text is None and not emulated:
        unknown["cpu"] = "no /proc/cpuinfo"

    raw = read_raw_topology(fs)
    unknown.update(raw.unknown)
    sys_topo = topology_from_raw(raw, cpu.get("arch"))
    topo, source = sys_topo, "sysfs"
    want = _hwloc.available() if use_hwloc is None else use_hwloc
    if want:
        if not _hwloc.available():
            unknown["source"] = "hwloc requested but lstopo-no-graphics is not installed; read sysfs"
        else:
            try:
                hw_topo = _hwloc.read_topology(None if live else sysfs_root)
            except Exception as exc:  # any lstopo/XML failure: fall back, never crash
                unknown["source"] = f"hwloc failed ({type(exc).__name__}: {exc}); read sysfs"
            else:
                diff = _same_topology(hw_topo, sys_topo) if sys_topo.get("pus") else []
                if diff and use_hwloc is None:
                    notes.append(f"hwloc and sysfs disagree on {', '.join(diff)}; kept sysfs "
                                 f"(hwloc packages={hw_topo['packages']}, sysfs packages={sys_topo['packages']})")
                else:
                    if diff:
                        notes.append(f"hwloc and sysfs disagree on {', '.join(diff)}; hwloc used as requested")
                    topo, source = hw_topo, "hwloc"
                    avail = {n["os_index"]: n for n in sys_topo["numa"]}
                    for n in topo["numa"]:
                        s = avail.get(n["os_index"], {})
                        n["memory_available_bytes"] = s.get("memory_available_bytes")
                        if n["memory_total_bytes"] is None:
                            n["memory_total_bytes"] = s.get("memory_total_bytes")
    if raw.compute_units:
        notes.append(f"AMD compute units: Linux lists the two cores of each of the {len(raw.compute_units)} "
                     "modules as thread siblings with distinct core ids; counted as separate cores, as hwloc "
                     "does (the two cores of a module share one FPU: Rpeak counts modules)")
    r = raw.restriction
    topo["restriction"] = ({"source": r.source, "cpus": sorted(r.cpus or []), "mems": sorted(r.mems or [])}
                           if r is not None else None)
    if not topo.get("pus"):
        unknown.setdefault("topology", "no CPUs found")

    uarch = _name_kinds(topo, cpu, per_pu)
    procs_mhz = None
    for line in (cpuinfo_text or "").splitlines():
        if line.lower().startswith("cpu mhz"):
            try:
                procs_mhz = float(line.split(":", 1)[1])
            except ValueError:
                pass
            break
    all_pus = [c["pu"] for c in topo["cpus"]]
    ppc_mhz = cpuinfo_clock_mhz(cpuinfo_text) if cpu.get("vendor") == "IBM" else None
    nom, fmax, fsrc = _frequencies(fs, raw, cpu, procs_mhz, flags, all_pus, ppc_mhz) if not emulated else (None, None, "none")
    cpu["sve_vector_bits"] = None
    if "sve" in flags:
        vl = fs.read_int("/proc/sys/abi/sve_default_vector_length")
        cpu["sve_vector_bits"] = vl * 8 if vl else None
        if not vl:
            unknown["cpu.sve_vector_bits"] = "no /proc/sys/abi/sve_default_vector_length"
    cpu["freq_nominal_mhz"], cpu["freq_max_mhz"], cpu["freq_source"] = nom, fmax, fsrc
    if emulated:
        unknown["cpu.freq_nominal_mhz"] = unknown["cpu.freq_max_mhz"] = EMULATED_CPU
        notes.append("emulated: the topology (cores, caches, NUMA) is the host's, on which QEMU's threads run")
    elif nom is None:
        unknown["cpu.freq_nominal_mhz"] = "no cpufreq base_frequency, no '@ GHz' in model name, no usable TSC clock"
    if fmax is None and not emulated:
        unknown["cpu.freq_max_mhz"] = "no cpufreq in /sys (VM or driver not loaded)"

    # Rpeak groups: cores of one kind and one core design.
    groups: dict[tuple[Any, Any], dict[str, Any]] = {}
    for c in topo["cpus"]:
        key = (c["kind"], uarch.get(c["pu"]))
        g = groups.setdefault(key, {"kind": c["kind"], "uarch": key[1], "core_ids": set(), "pus": []})
        g["core_ids"].add(c["core"])
        g["pus"].append(c["pu"])
    glist = []
    kind_names = {k["kind"]: k["name"] for k in topo["core_kinds"]}
    for (kind, ua), g in sorted(groups.items(), key=lambda kv: (kv[0][0] is None, kv[0][0] or 0, str(kv[0][1]))):
        n, m, _ = _frequencies(fs, raw, cpu, procs_mhz, flags, g["pus"], ppc_mhz) if not emulated else (None, None, "")
        if m is None and not emulated:
            kfreq = [k["freq_max_mhz"] for k in topo["core_kinds"] if k["kind"] == kind and k["freq_max_mhz"]]
            m = kfreq[0] if kfreq else None
        name = kind_names.get(kind) or ua
        fpus, how = fpu_count(ua, g["pus"], topo["caches"], len(g["core_ids"]))
        if how and how not in notes:
            notes.append(how)
        glist.append({"kind": kind, "name": name if len(groups) > 1 else (ua or name), "uarch": ua,
                      "cores": len(g["core_ids"]), "nominal_mhz": n, "max_mhz": m, "fpus": fpus})
    rpeak, u = compute_rpeak(glist, flags, cpu.get("model_name"))
    unknown.update(u)
    if not glist:
        unknown["rpeak"] = "no CPUs found"

    env, u = read_environment(fs, live, flags)
    unknown.update(u)
    env["emulation"] = emulated
    if emulated:
        unknown["rpeak"] = EMULATED_CPU
    if live:
        hostname: str | None = socket.gethostname()
    else:
        hostname = fs.read("/proc/sys/kernel/hostname")
        if hostname is None:
            unknown["hostname"] = NOT_IN_SNAPSHOT_HOST
    return {
        "probe_schema": PROBE_SCHEMA,
        "source": source,
        "root": "/" if live else os.path.abspath(sysfs_root or "/"),
        "hostname": hostname,
        "topology": topo,
        "memory": _memory(fs, unknown),
        "cpu": cpu,
        "rpeak": rpeak,
        "environment": env,
        "notes": notes,
        "unknown": unknown,
    }


EMULATED_CPU = "emulated (QEMU user mode): /proc/cpuinfo and /sys are the host's, not this CPU's"
NOT_IN_SNAPSHOT_HOST = "not in snapshot (no /proc/sys/kernel/hostname)"
