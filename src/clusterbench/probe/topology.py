"""Normalised topology and the helpers benchmarks use to place threads.

Both readers (sysfs and hwloc XML) reduce what they found to the same neutral
facts and call :func:`build_topology`, so the numbering (global core ids, kind
ranks, ordering) is identical whichever source was used.

Helpers:

* :func:`cpu_order` — OS CPU indexes to pin threads/ranks to, physical cores
  first (one PU per core), then the SMT siblings if asked.  ``compact`` fills a
  NUMA node (and package) before the next; ``spread`` round-robins across NUMA
  nodes (or packages when there is one NUMA node) so memory bandwidth scales
  with the thread count.
* :func:`cache_sizes`, :func:`l1d_bytes`, :func:`llc_total_bytes` — working-set
  sizes for cache/memory benchmarks.
"""
from __future__ import annotations

from typing import Any, Iterable

_CACHE_NAMES = {("data", 1): "L1d", ("instruction", 1): "L1i"}


def cache_name(level: int, ctype: str) -> str:
    """hwloc-style short name: L1d, L1i, L2, L3 (L2i/L2d for split higher levels)."""
    if (ctype, level) in _CACHE_NAMES:
        return _CACHE_NAMES[(ctype, level)]
    if ctype == "unified":
        return f"L{level}"
    return f"L{level}{'d' if ctype == 'data' else 'i'}"


def build_topology(
    pu_package: dict[int, int],
    core_groups: Iterable[frozenset[int]],
    numa: list[dict[str, Any]],
    extra_packages: Iterable[int],
    caches: list[dict[str, Any]],
    kinds: list[dict[str, Any]],
) -> dict[str, Any]:
    """Build the ``topology`` section of the probe dict.

    ``core_groups``: sets of PUs sharing a core.  ``numa``: ``{os_index, cpus,
    memory_total_bytes, memory_available_bytes}``.  ``extra_packages``: package
    ids holding allowed CPU-less NUMA nodes.  ``kinds``: ordered least to most
    powerful, each ``{cpus, name, freq_max_mhz}``.
    """
    pus = sorted(pu_package)
    groups = {frozenset(g) & frozenset(pus) for g in core_groups}
    groups = {g for g in groups if g}
    covered = set().union(*groups) if groups else set()
    groups |= {frozenset([p]) for p in pus if p not in covered}
    ordered = sorted(groups, key=lambda g: (pu_package[min(g)], min(g)))
    pu_core = {p: i for i, g in enumerate(ordered) for p in g}
    pu_numa: dict[int, int] = {}
    for node in numa:
        for c in node["cpus"]:
            pu_numa.setdefault(c, node["os_index"])
    kind_list = []
    pu_kind: dict[int, int] = {}
    for i, k in enumerate(kinds):
        cpus = sorted(set(k["cpus"]) & set(pus))
        if not cpus:
            continue
        idx = len(kind_list)
        kind_list.append({"kind": idx, "cpus": cpus, "name": k.get("name"), "freq_max_mhz": k.get("freq_max_mhz")})
        for c in cpus:
            pu_kind[c] = idx
    cache_list = []
    for c in sorted(caches, key=lambda c: (c["level"], c["type"], min(c["cpus"]))):
        cache_list.append({
            "level": c["level"],
            "type": c["type"],
            "name": cache_name(c["level"], c["type"]),
            "size_bytes": c["size_bytes"],
            "line_bytes": c.get("line_bytes"),
            "ways": c.get("ways"),
            "cpus": sorted(c["cpus"]),
        })
    packages = set(pu_package.values()) | set(extra_packages)
    return {
        "packages": len(packages),
        "numa_nodes": len(numa),
        "cores": len(ordered),
        "pus": len(pus),
        "smt_per_core": max((len(g) for g in ordered), default=0),
        "cpus": [
            {"pu": p, "core": pu_core[p], "package": pu_package[p], "numa": pu_numa.get(p), "kind": pu_kind.get(p)}
            for p in pus
        ],
        "numa": [
            {
                "os_index": n["os_index"],
                "cpus": sorted(n["cpus"]),
                "memory_total_bytes": n.get("memory_total_bytes"),
                "memory_available_bytes": n.get("memory_available_bytes"),
            }
            for n in sorted(numa, key=lambda n: n["os_index"])
        ],
        "caches": cache_list,
        "core_kinds": kind_list,
    }


def _topo(p: dict[str, Any]) -> dict[str, Any]:
    """Accept either the whole probe dict or its ``topology`` section."""
    return p.get("topology", p) if isinstance(p, dict) else {}


def _cores(p: dict[str, Any]) -> list[dict[str, Any]]:
    """Cores as {core, package, numa, pus (sorted)} ordered by package, NUMA node, core id."""
    by_core: dict[int, dict[str, Any]] = {}
    for c in _topo(p).get("cpus", []):
        e = by_core.setdefault(c["core"], {"core": c["core"], "package": c["package"], "numa": c["numa"], "pus": []})
        e["pus"].append(c["pu"])
    for e in by_core.values():
        e["pus"].sort()
    return sorted(by_core.values(), key=lambda e: (e["package"], -1 if e["numa"] is None else e["numa"], e["core"]))


def cpu_order(p: dict[str, Any], order: str = "compact", smt: bool = False) -> list[int]:
    """OS CPU indexes for pinning: one PU per physical core first, then SMT siblings if ``smt``.

    ``compact``: package by package, NUMA node by node, in core order.
    ``spread``: round-robin over NUMA nodes (over packages if one NUMA node).
    """
    if order not in ("compact", "spread"):
        raise ValueError(f"order must be 'compact' or 'spread', not {order!r}")
    cores = _cores(p)
    if order == "spread":
        numas = {e["numa"] for e in cores}
        key = "numa" if len(numas) > 1 else "package"
        buckets: dict[Any, list[dict[str, Any]]] = {}
        for e in cores:
            buckets.setdefault(e[key], []).append(e)
        lists = list(buckets.values())
        spread: list[dict[str, Any]] = []
        for i in range(max((len(b) for b in lists), default=0)):
            spread.extend(b[i] for b in lists if i < len(b))
        cores = spread
    out = [e["pus"][0] for e in cores]
    if smt:
        for rank in range(1, max((len(e["pus"]) for e in cores), default=1)):
            out.extend(e["pus"][rank] for e in cores if rank < len(e["pus"]))
    return out


def cache_sizes(p: dict[str, Any]) -> dict[str, int]:
    """Per-instance cache size seen by one core, e.g. {"L1d": 49152, "L2": 2097152, "L3": ...}.

    When instances differ (hybrid CPUs) the size seen by the first CPU of the
    most powerful core kind is used, since benchmarks size for those cores.
    """
    topo = _topo(p)
    kinds = topo.get("core_kinds") or []
    ref = kinds[-1]["cpus"][0] if kinds else (topo.get("cpus") or [{"pu": None}])[0]["pu"]
    out: dict[str, int] = {}
    for c in topo.get("caches", []):
        if ref in c["cpus"] or (c["name"] not in out and ref is None):
            out[c["name"]] = c["size_bytes"]
    for c in topo.get("caches", []):  # names the reference CPU does not see
        out.setdefault(c["name"], c["size_bytes"])
    return out


def l1d_bytes(p: dict[str, Any]) -> int | None:
    """L1 data cache size of one core, or None."""
    return cache_sizes(p).get("L1d")


def llc_level(p: dict[str, Any]) -> int | None:
    """Highest cache level present (the last-level cache)."""
    levels = [c["level"] for c in _topo(p).get("caches", []) if c["type"] != "instruction"]
    return max(levels) if levels else None


def llc_total_bytes(p: dict[str, Any]) -> int | None:
    """Sum of the sizes of all last-level cache instances (what a working set must exceed)."""
    lvl = llc_level(p)
    if lvl is None:
        return None
    return sum(c["size_bytes"] for c in _topo(p)["caches"] if c["level"] == lvl and c["type"] != "instruction")
