"""Topology from hwloc (``lstopo-no-graphics --of xml``) parsed with the stdlib.

Why use hwloc when sysfs is read anyway: hwloc encodes years of workarounds
for buggy firmware and kernels; agreeing with it is the acceptance test of the
sysfs reader, and on machines where it is installed it is the reference.

I/O discovery is disabled (``--no-io``): the probe needs no PCI tree, and
broken PCI locality can make hwloc drop a whole package (see the
``40intel64-4n10c+pci-conflicts`` fixture).
"""
from __future__ import annotations

import os
import shutil
import xml.etree.ElementTree as ET
from typing import Any

from clusterbench.probe.topology import build_topology
from clusterbench import process

LSTOPO = "lstopo-no-graphics"
_CACHE_TYPES = {"0": "unified", "1": "data", "2": "instruction"}


def available() -> bool:
    """True if ``lstopo-no-graphics`` is on PATH."""
    return shutil.which(LSTOPO) is not None


def parse_bitmap(text: str | None) -> set[int]:
    """Parse an hwloc bitmap like ``0x00000011,0x11111111`` (32-bit chunks, most significant first)."""
    if not text:
        return set()
    text = text.strip()
    if text.startswith("0xf...f"):
        text = text[len("0xf...f"):].lstrip(",")  # infinite set: keep the finite part
    value = 0
    for chunk in text.split(","):
        chunk = chunk.strip()
        if chunk.startswith("0x"):
            chunk = chunk[2:]
        value = (value << 32) | int(chunk or "0", 16)
    return {i for i in range(value.bit_length()) if value >> i & 1}


def run_lstopo(sysfs_root: str | None, timeout: float = 60.0) -> str:
    """Run lstopo and return its XML; raises OSError/subprocess errors on failure."""
    cmd = [LSTOPO, "--no-io", "--of", "xml"]
    env = dict(os.environ)
    for var in ("HWLOC_XMLFILE", "HWLOC_SYNTHETIC", "HWLOC_FSROOT", "HWLOC_CPUID_PATH"):
        env.pop(var, None)  # a user setting would make hwloc describe some other machine
    if sysfs_root and os.path.abspath(sysfs_root) != "/":
        cmd += ["--input", os.path.abspath(sysfs_root)]
        env["HWLOC_THISSYSTEM"] = "0"  # a snapshot is not this system: no binding, no live queries
        env["HWLOC_COMPONENTS"] = "linux,-x86"  # use only the snapshot's files, never the live CPUID
    cmd.append("-")
    proc = process.run(cmd, timeout=timeout, env=env, check=True)
    return proc.stdout


def _cache_level_type(obj: ET.Element) -> tuple[int, str] | None:
    typ = obj.get("type", "")
    if typ in ("L1Cache", "L2Cache", "L3Cache", "L4Cache", "L5Cache", "L1iCache", "L2iCache", "L3iCache", "Cache"):
        depth = obj.get("depth")
        level = int(depth) if depth else int(typ[1])
        return level, _CACHE_TYPES.get(obj.get("cache_type", "0"), "unified")
    return None


def topology_from_xml(xml_text: str) -> dict[str, Any]:
    """Build the probe ``topology`` section from an hwloc XML export (v1 or v2 format)."""
    root = ET.fromstring(xml_text)
    pu_package: dict[int, int] = {}
    core_groups: list[frozenset[int]] = []
    numa: list[dict[str, Any]] = []
    caches: list[dict[str, Any]] = []
    extra_packages: set[int] = set()

    def walk(obj: ET.Element, package: int | None) -> None:
        typ = obj.get("type", "")
        cpus = parse_bitmap(obj.get("cpuset"))
        if typ in ("Package", "Socket"):
            package = int(obj.get("os_index", "0"))
            if not cpus and any(c.get("type") == "NUMANode" for c in obj.iter("object")):
                extra_packages.add(package)
        elif typ == "PU":
            pu_package[int(obj.get("os_index", "0"))] = package if package is not None else 0
        elif typ == "Core" and cpus:
            core_groups.append(frozenset(cpus))
        elif typ == "NUMANode":
            mem = obj.get("local_memory")
            numa.append({
                "os_index": int(obj.get("os_index", "0")),
                "cpus": cpus,
                "memory_total_bytes": int(mem) if mem else None,
                "memory_available_bytes": None,
            })
        else:
            lt = _cache_level_type(obj)
            if lt is not None and cpus and int(obj.get("cache_size", "0") or 0) > 0:
                ways = int(obj.get("cache_associativity", "0") or 0)
                line = int(obj.get("cache_linesize", "0") or 0)
                caches.append({
                    "level": lt[0], "type": lt[1], "size_bytes": int(obj.get("cache_size", "0")),
                    "line_bytes": line or None, "ways": ways if ways > 0 else None, "cpus": cpus,
                })
        for child in obj.findall("object"):
            walk(child, package)

    for top in root.findall("object"):
        walk(top, None)
    kinds = []
    for i, ck in enumerate(root.findall("cpukind")):
        infos = {e.get("name"): e.get("value") for e in ck.findall("info")}
        fmax = infos.get("FrequencyMaxMHz")
        eff = ck.get("forced_efficiency") or ck.get("efficiency")
        kinds.append({
            "cpus": parse_bitmap(ck.get("cpuset")),
            "name": infos.get("CoreType"),
            "freq_max_mhz": float(fmax) if fmax else None,
            "_rank": (int(eff) if eff not in (None, "-1") else i, i),
        })
    kinds.sort(key=lambda k: k["_rank"])
    return build_topology(pu_package, core_groups, numa, extra_packages, caches, kinds)


def read_topology(sysfs_root: str | None) -> dict[str, Any]:
    """Run lstopo (on the live machine or a snapshot root) and parse its topology."""
    return topology_from_xml(run_lstopo(sysfs_root))
