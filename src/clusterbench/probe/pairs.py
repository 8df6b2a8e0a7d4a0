"""Rank-pair distance classes from the probe's topology (``placement`` benchmark, Khadka (Multicore-Multinode)).

:func:`classify` names how close two cpus of one node are, from the probe dict alone (pure: no
I/O, works on snapshots), nearest first:

========== ===================================================================================
class      the two cpus ...
========== ===================================================================================
smt        are SMT siblings (hardware threads of one core)
l2         are on different cores that share an L2 (or a closer) cache
l3         share an L3 (or any level >= 3) cache but no L2
numa       are in one NUMA node and one package, sharing no cache
socket     are in one NUMA node but in different packages (a UMA multi-socket machine)
remote-numa are in different NUMA nodes (in one package or not)
node       run on different nodes (not a topology relation: the benchmark adds it with --hosts)
========== ===================================================================================

A shared cache wins over the NUMA relation: on a package split into several NUMA nodes whose
cores still share the L3 (Intel SNC), a pair is ``l3`` because messages between them pass
through that cache. A cpu whose NUMA node is unknown (None) is taken to be in its peer's node.

:func:`choose_pairs` picks one representative pair per class present: the first cpu (cpu 0) with
the nearest (lowest-numbered, first thread of its core where it matters) cpu of each class; a
class that cpu 0 has no partner in (e.g. two E-cores sharing an L2 on a hybrid chip) is taken
from the first pair of cpus that has it.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

#: nearest first; "node" is added by the benchmark for pairs on two hosts
CLASSES: tuple[str, ...] = ("smt", "l2", "l3", "numa", "socket", "remote-numa", "node")
TOPOLOGY_CLASSES: tuple[str, ...] = CLASSES[:-1]


class _Index:
    """Lookup tables built once per probe: cpu -> (core, package, numa), cpu -> shared caches."""

    def __init__(self, probe: dict[str, Any]) -> None:
        topo = probe.get("topology") or {}
        self.cpus: dict[int, dict[str, Any]] = {int(c["pu"]): c for c in topo.get("cpus") or []}
        # per cpu: the caches (level >= 1, data or unified) it belongs to, as (level, name, frozenset)
        self.caches: dict[int, list[tuple[int, str, frozenset[int]]]] = {c: [] for c in self.cpus}
        for cache in topo.get("caches") or []:
            if cache.get("type") == "instruction":
                continue
            members = frozenset(int(x) for x in cache.get("cpus") or [])
            if len(members) < 2:
                continue
            entry = (int(cache.get("level") or 0), str(cache.get("name") or f"L{cache.get('level')}"), members)
            for c in members:
                if c in self.caches:
                    self.caches[c].append(entry)

    def cpu(self, pu: int) -> dict[str, Any]:
        try:
            return self.cpus[int(pu)]
        except KeyError:
            raise ValueError(f"cpu {pu} is not in the probe's topology "
                             f"(cpus {min(self.cpus, default='-')}..{max(self.cpus, default='-')})") from None

    def shared(self, a: int, b: int) -> list[tuple[int, str]]:
        """(level, name) of every cache both cpus belong to, closest first."""
        return sorted({(lvl, name) for lvl, name, members in self.caches.get(a, []) if b in members})

    def classify(self, a: int, b: int) -> str:
        ca, cb = self.cpu(a), self.cpu(b)
        if int(a) == int(b):
            raise ValueError(f"cpu {a} paired with itself: a pair needs two cpus")
        if ca.get("core") is not None and ca.get("core") == cb.get("core"):
            return "smt"
        levels = [lvl for lvl, _ in self.shared(a, b)]
        if levels:
            return "l2" if min(levels) <= 2 else "l3"
        na, nb = ca.get("numa"), cb.get("numa")
        if na is not None and nb is not None and na != nb:
            return "remote-numa"
        if ca.get("package") is not None and cb.get("package") is not None and ca["package"] != cb["package"]:
            return "socket"
        return "numa"


def classify(probe: dict[str, Any], cpu_a: int, cpu_b: int) -> str:
    """The distance class of two cpus of one node (see the module docstring). ValueError for a
    cpu the probe does not list or for a cpu paired with itself."""
    return _Index(probe).classify(cpu_a, cpu_b)


def describe(probe: dict[str, Any], cpu_a: int, cpu_b: int) -> dict[str, Any]:
    """What the class rests on: core, package and NUMA node of each cpu and the caches they share."""
    idx = _Index(probe)
    ca, cb = idx.cpu(cpu_a), idx.cpu(cpu_b)
    return {"core_a": ca.get("core"), "core_b": cb.get("core"), "package_a": ca.get("package"),
            "package_b": cb.get("package"), "numa_a": ca.get("numa"), "numa_b": cb.get("numa"),
            "shared_caches": [name for _, name in idx.shared(cpu_a, cpu_b)]}


def choose_pairs(probe: dict[str, Any], cpus: Iterable[int] | None = None,
                 classes: Sequence[str] | None = None) -> dict[str, tuple[int, int]]:
    """One representative pair per distance class present among ``cpus`` (default: every cpu of
    the probe), nearest class first: ``{class: (cpu_a, cpu_b)}``.

    The anchor is the first cpu; its partner in each class is the lowest-numbered cpu of that
    class, preferring the first hardware thread of a core (so a pair of cores is measured, not a
    core and a sibling's thread) outside the ``smt`` class. Classes the anchor has no partner in
    are taken from the first pair (in cpu order) that has them. ``classes`` restricts the result."""
    idx = _Index(probe)
    pool = sorted(idx.cpus) if cpus is None else [c for c in dict.fromkeys(int(x) for x in cpus) if c in idx.cpus]
    wanted = [c for c in (classes or TOPOLOGY_CLASSES) if c in TOPOLOGY_CLASSES]
    if len(pool) < 2 or not wanted:
        return {}
    first_thread: dict[Any, int] = {}
    for c in sorted(idx.cpus):
        first_thread.setdefault(idx.cpus[c].get("core", c), c)

    def primary(c: int) -> bool:
        return first_thread.get(idx.cpus[c].get("core", c)) == c

    found: dict[str, tuple[int, int]] = {}
    anchor = pool[0]
    # partners of the anchor: primary threads first, then any thread
    for pref in (True, False):
        for b in pool[1:]:
            if pref and not primary(b):
                continue
            cls = idx.classify(anchor, b)
            if cls in wanted and cls not in found:
                found[cls] = (anchor, b)
    missing = [c for c in wanted if c not in found]
    if missing:
        for i, a in enumerate(pool[1:], 1):
            for b in pool[i + 1:]:
                cls = idx.classify(a, b)
                if cls in missing and cls not in found:
                    found[cls] = (a, b)
            if all(c in found for c in missing):
                break
    return {c: found[c] for c in CLASSES if c in found}


def pair_matrix(probe: dict[str, Any], cpus: Iterable[int] | None = None) -> dict[str, dict[str, str]]:
    """Every pair's class, ``{str(a): {str(b): class}}`` (for display; the benchmark measures
    one pair per class)."""
    idx = _Index(probe)
    pool = sorted(idx.cpus) if cpus is None else sorted(int(c) for c in cpus if int(c) in idx.cpus)
    return {str(a): {str(b): idx.classify(a, b) for b in pool if b != a} for a in pool}
