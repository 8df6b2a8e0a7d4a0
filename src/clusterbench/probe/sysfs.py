"""Raw reader of Linux ``/sys`` and ``/proc`` (optionally under a snapshot root).

Why a hand-written reader and not only hwloc: hwloc is not installed everywhere
(minimal containers, compute-node images), and the numbers clusterbench needs
(PUs, cores, packages, NUMA nodes, caches, core kinds) are all in sysfs.  The
rules mirror hwloc's Linux backend so that both sources give the same answer:

* offline CPUs (``cpuN/online`` = 0, or absent from ``cpu/online``) are dropped;
* CPUs and NUMA nodes outside the process's cpuset cgroup (v1 or v2) are dropped,
  but a package stays if it holds an allowed NUMA node (hwloc keeps CPU-less
  allowed nodes and their packages);
* core kinds are grouped by (cpu_capacity, cpuinfo_max_freq, base_frequency),
  ranked from least to most powerful, as hwloc's ``cpukinds`` does;
* AMD compute units (Bulldozer family, cpuinfo vendor AuthenticAMD, family 21 or
  22, hwloc's ``is_amd_with_CU``): older kernels list the two cores of a module
  as thread siblings but give them distinct ``core_id``s.  hwloc then makes one
  core per PU; so do we (:func:`split_compute_units`), keeping the modules in
  ``RawTopology.compute_units`` (their two cores share one FPU: see rpeak).

Every reader returns ``None`` for a missing file: snapshots, VMs and old kernels
lack many entries and the probe must never crash.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

_CPU_DIR_RE = re.compile(r"^cpu(\d+)$")
_NODE_DIR_RE = re.compile(r"^node(\d+)$")


@dataclass
class FsRoot:
    """A filesystem root (``/`` for the live machine, or a snapshot directory)."""

    root: str = "/"

    def path(self, rel: str) -> str:
        """Absolute path of ``rel`` (written as an absolute path like ``/sys/...``) under the root."""
        return os.path.join(self.root, rel.lstrip("/"))

    def read(self, rel: str) -> str | None:
        """File content stripped, or None if missing/unreadable."""
        try:
            with open(self.path(rel), "r", encoding="utf-8", errors="replace") as f:
                return f.read().strip()
        except (OSError, ValueError):
            return None

    def read_int(self, rel: str) -> int | None:
        """File content as an int, or None."""
        text = self.read(rel)
        if text is None:
            return None
        try:
            return int(text.split()[0], 0) if text else None
        except (ValueError, IndexError):
            return None

    def listdir(self, rel: str) -> list[str]:
        """Directory entries, or [] if missing."""
        try:
            return sorted(os.listdir(self.path(rel)))
        except OSError:
            return []

    def exists(self, rel: str) -> bool:
        return os.path.exists(self.path(rel))


def parse_cpulist(text: str | None) -> set[int] | None:
    """Parse a kernel cpu list like ``0-3,8,10-11``; None if unparsable."""
    if text is None:
        return None
    out: set[int] = set()
    text = text.strip()
    if not text:
        return out
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            if "-" in part:
                lo, hi = part.split("-", 1)
                hi_s, _, stride = hi.partition(":")  # "0-7:2" form is rare but legal
                out.update(range(int(lo), int(hi_s) + 1, int(stride.split("/")[0]) if stride else 1))
            else:
                out.add(int(part))
    except ValueError:
        return None
    return out


def parse_cpumask(text: str | None) -> set[int] | None:
    """Parse a kernel hex cpu mask like ``00000000,00001111`` (old kernels lack ``*_list`` files)."""
    if text is None:
        return None
    try:
        value = int(text.replace(",", "").strip() or "0", 16)
    except ValueError:
        return None
    out: set[int] = set()
    bit = 0
    while value:
        if value & 1:
            out.add(bit)
        value >>= 1
        bit += 1
    return out


def read_set(fs: FsRoot, base: str, list_name: str, mask_name: str) -> set[int] | None:
    """Read ``base/list_name`` as a cpulist, else ``base/mask_name`` as a mask."""
    got = parse_cpulist(fs.read(f"{base}/{list_name}"))
    if got is None:
        got = parse_cpumask(fs.read(f"{base}/{mask_name}"))
    return got


def parse_size(text: str | None) -> int | None:
    """Parse a sysfs cache size like ``32K``, ``1024K``, ``30M`` into bytes."""
    if not text:
        return None
    m = re.match(r"^\s*(\d+)\s*([KMG]?)", text, re.I)
    if not m:
        return None
    mult = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2).upper()]
    return int(m.group(1)) * mult


def read_meminfo(text: str | None) -> dict[str, int]:
    """Parse /proc/meminfo or nodeN/meminfo into {key: bytes} (the ``Node N`` prefix is dropped)."""
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        m = re.match(r"^(?:Node\s+\d+\s+)?([^:]+):\s+(\d+)\s*(kB)?", line)
        if m:
            out[m.group(1).strip()] = int(m.group(2)) * (1024 if m.group(3) else 1)
    return out


@dataclass
class CgroupRestriction:
    """The cpuset restriction applied to this process (hwloc applies the same)."""

    source: str
    cpus: set[int] | None
    mems: set[int] | None


def _mounts(fs: FsRoot) -> list[tuple[str, str, str]]:
    out = []
    for line in (fs.read("/proc/mounts") or "").splitlines():
        parts = line.split()
        if len(parts) >= 4:
            out.append((parts[1], parts[2], parts[3]))
    return out


def read_cgroup_restriction(fs: FsRoot) -> CgroupRestriction | None:
    """Find the cpuset cgroup of this process (``/proc/self/cpuset`` or ``/proc/self/cgroup``).

    Why: inside a Slurm/Torque job or a container only some CPUs are usable; a
    benchmark that pins to a forbidden CPU fails.  hwloc hides forbidden CPUs,
    so we do too (and report the restriction).
    """
    cg_path = fs.read("/proc/self/cpuset")
    if cg_path is None:
        for line in (fs.read("/proc/self/cgroup") or "").splitlines():
            parts = line.split(":", 2)
            if len(parts) == 3 and (parts[0] == "0" or "cpuset" in parts[1].split(",")):
                cg_path = parts[2]
                break
    if not cg_path:
        return None
    for mountpoint, fstype, opts in _mounts(fs):
        base = f"{mountpoint.rstrip('/')}/{cg_path.strip('/')}".rstrip("/") or "/"
        if fstype == "cgroup2":
            cpus = parse_cpulist(fs.read(f"{base}/cpuset.cpus.effective"))
            mems = parse_cpulist(fs.read(f"{base}/cpuset.mems.effective"))
        elif fstype == "cpuset" or (fstype == "cgroup" and "cpuset" in opts.split(",")):
            cpus = parse_cpulist(fs.read(f"{base}/cpuset.cpus") or fs.read(f"{base}/cpus"))
            mems = parse_cpulist(fs.read(f"{base}/cpuset.mems") or fs.read(f"{base}/mems"))
            cpus = cpus if cpus else parse_cpulist(fs.read(f"{base}/cpuset.effective_cpus"))
        else:
            continue
        if cpus or mems:
            return CgroupRestriction(source=f"{fstype}:{cg_path}", cpus=cpus or None, mems=mems or None)
    return None


@dataclass
class RawCpu:
    """Facts about one online PU straight from sysfs."""

    pu: int
    package: int
    core_id: int | None
    siblings: frozenset[int]
    capacity: int | None = None
    max_khz: int | None = None
    base_khz: int | None = None


@dataclass
class RawTopology:
    """Unnormalised topology facts; :func:`build_topology` turns them into the probe dict."""

    cpus: dict[int, RawCpu] = field(default_factory=dict)
    numa: dict[int, dict[str, Any]] = field(default_factory=dict)  # os_index -> {cpus, total, avail}
    numa_package: dict[int, int] = field(default_factory=dict)  # node -> package (for CPU-less nodes)
    caches: list[dict[str, Any]] = field(default_factory=list)
    restriction: CgroupRestriction | None = None
    unknown: dict[str, str] = field(default_factory=dict)
    #: AMD modules split into one core per PU (see :func:`split_compute_units`), lowest PU first
    compute_units: list[frozenset[int]] = field(default_factory=list)


def online_cpus(fs: FsRoot) -> list[int]:
    """Online CPU indexes: ``cpuN`` directories minus offline ones."""
    present = sorted(int(m.group(1)) for d in fs.listdir("/sys/devices/system/cpu") if (m := _CPU_DIR_RE.match(d)))
    online = parse_cpulist(fs.read("/sys/devices/system/cpu/online"))
    out = []
    for c in present:
        if fs.read(f"/sys/devices/system/cpu/cpu{c}/online") == "0":
            continue
        if online is not None and c not in online:
            continue
        out.append(c)
    return out


def _numa_nodes(fs: FsRoot) -> dict[int, dict[str, Any]]:
    """NUMA nodes with their full (unrestricted) cpu sets and memory."""
    nodes: dict[int, dict[str, Any]] = {}
    base = "/sys/devices/system/node"
    for d in fs.listdir(base):
        m = _NODE_DIR_RE.match(d)
        if not m:
            continue
        n = int(m.group(1))
        cpus = read_set(fs, f"{base}/{d}", "cpulist", "cpumap")
        if cpus is None:  # very old kernels only have cpuN symlinks
            cpus = {int(mm.group(1)) for e in fs.listdir(f"{base}/{d}") if (mm := _CPU_DIR_RE.match(e))}
        mi = read_meminfo(fs.read(f"{base}/{d}/meminfo"))
        total = mi.get("MemTotal")
        avail = None
        if "MemFree" in mi:
            # Per-node meminfo has no MemAvailable; approximate it like the kernel does
            # (free + reclaimable page cache + reclaimable slab).
            avail = mi["MemFree"] + mi.get("Active(file)", 0) + mi.get("Inactive(file)", 0) + mi.get("SReclaimable", 0)
        nodes[n] = {"cpus": cpus, "total": total, "avail": avail}
    return nodes


def _read_caches(fs: FsRoot, cpus: Iterable[int]) -> list[dict[str, Any]]:
    """One entry per cache instance (deduplicated by level, type and shared CPUs)."""
    seen: dict[tuple[int, str, frozenset[int]], dict[str, Any]] = {}
    for c in cpus:
        base = f"/sys/devices/system/cpu/cpu{c}/cache"
        for idx in fs.listdir(base):
            if not idx.startswith("index"):
                continue
            d = f"{base}/{idx}"
            level = fs.read_int(f"{d}/level")
            ctype = (fs.read(f"{d}/type") or "").lower()
            size = parse_size(fs.read(f"{d}/size"))
            if level is None or not size or ctype not in ("data", "instruction", "unified"):
                continue
            shared = read_set(fs, d, "shared_cpu_list", "shared_cpu_map") or {c}
            line = fs.read_int(f"{d}/coherency_line_size") or None
            ways = fs.read_int(f"{d}/ways_of_associativity") or None
            sets = fs.read_int(f"{d}/number_of_sets")
            part = fs.read_int(f"{d}/physical_line_partition") or 1
            if sets and line and size % (sets * line * part) == 0:
                # like hwloc: derive ways from the geometry (some ARM firmware reports wrong ways)
                ways = size // (sets * line * part)
            key = (level, ctype, frozenset(shared))
            if key in seen:
                continue
            seen[key] = {
                "level": level,
                "type": ctype,
                "size_bytes": size,
                "line_bytes": line,
                "ways": ways,
                "cpus": set(shared),
            }
    return list(seen.values())


def amd_with_compute_units(fs: FsRoot) -> bool:
    """hwloc's ``is_amd_with_CU`` quirk switch: the first processor in /proc/cpuinfo is
    AuthenticAMD of family 21 (0x15: Bulldozer, Piledriver, Steamroller, Excavator) or 22 (0x16)."""
    from clusterbench.probe.cpu import parse_cpuinfo

    procs, glob = parse_cpuinfo(fs.read("/proc/cpuinfo"))
    first = procs[0] if procs else glob
    return first.get("vendor_id") == "AuthenticAMD" and first.get("cpu family", "").strip() in ("21", "22")


def split_compute_units(fs: FsRoot, raw: RawTopology) -> None:
    """Make every PU of an AMD compute unit a core of its own, as hwloc's Linux backend does.

    Why: on AMD family 15h, kernels that predate the CU-aware topology list the two cores of a
    module as thread siblings but give each its own ``core_id``.  They are real cores (own
    integer pipelines and L1d) sharing a front end, L2 and FPU, and hwloc counts them as cores.
    hwloc decides once, on the first PU with siblings: if its ``core_id`` differs from that of its
    first other sibling, every PU becomes a core; equal ids mean SMT, left as is.
    """
    first = next((c for c in sorted(raw.cpus) if len(raw.cpus[c].siblings) > 1), None)
    if first is None:
        return
    me = raw.cpus[first]
    other = min(s for s in me.siblings if s != first)
    other_core = fs.read_int(f"/sys/devices/system/cpu/cpu{other}/topology/core_id")
    if me.core_id == other_core:
        return
    raw.compute_units = sorted({c.siblings for c in raw.cpus.values() if len(c.siblings) > 1}, key=min)
    for c in raw.cpus.values():
        c.siblings = frozenset([c.pu])


def read_raw_topology(fs: FsRoot) -> RawTopology:
    """Read PUs, cores, packages, NUMA nodes and caches from sysfs."""
    raw = RawTopology()
    cpus = online_cpus(fs)
    if not cpus:
        raw.unknown["topology"] = "no /sys/devices/system/cpu/cpuN directories (not Linux sysfs?)"
        return raw
    for c in cpus:
        t = f"/sys/devices/system/cpu/cpu{c}/topology"
        pkg = fs.read_int(f"{t}/physical_package_id")
        if pkg is None or pkg < 0:
            pkg = 0  # hwloc also puts CPUs without package info in a single package
        sib = read_set(fs, t, "thread_siblings_list", "thread_siblings")
        if not sib:
            sib = read_set(fs, t, "core_cpus_list", "core_cpus") or {c}
        f = f"/sys/devices/system/cpu/cpu{c}/cpufreq"
        raw.cpus[c] = RawCpu(
            pu=c,
            package=pkg,
            core_id=fs.read_int(f"{t}/core_id"),
            siblings=frozenset(sib),
            capacity=fs.read_int(f"/sys/devices/system/cpu/cpu{c}/cpu_capacity"),
            max_khz=fs.read_int(f"{f}/cpuinfo_max_freq"),
            base_khz=fs.read_int(f"{f}/base_frequency"),
        )
    if amd_with_compute_units(fs):
        split_compute_units(fs, raw)
    nodes = _numa_nodes(fs)
    if not nodes:
        # hwloc also invents one NUMA node holding all memory when /sys has none.
        mi = read_meminfo(fs.read("/proc/meminfo"))
        nodes = {0: {"cpus": set(cpus), "total": mi.get("MemTotal"), "avail": mi.get("MemAvailable", mi.get("MemFree"))}}
        raw.unknown["topology.numa"] = "no /sys/devices/system/node; assumed one NUMA node"
    raw.caches = _read_caches(fs, cpus)
    if not raw.caches:
        raw.unknown["topology.caches"] = "no /sys/devices/system/cpu/cpuN/cache entries"
    # Package of each node: from the (unrestricted) CPUs it holds.
    for n, info in nodes.items():
        pk = {raw.cpus[c].package for c in info["cpus"] if c in raw.cpus}
        if len(pk) == 1:
            raw.numa_package[n] = pk.pop()
    raw.restriction = read_cgroup_restriction(fs)
    r = raw.restriction
    if r is not None and r.cpus:
        allowed = r.cpus
        if allowed & set(raw.cpus):
            raw.cpus = {c: v for c, v in raw.cpus.items() if c in allowed}
    if r is not None and r.mems:
        kept = {n: v for n, v in nodes.items() if n in r.mems}
        if kept:
            nodes = kept
    for n, info in nodes.items():
        info["cpus"] = {c for c in info["cpus"] if c in raw.cpus}
    raw.numa = nodes
    for cache in raw.caches:
        cache["cpus"] &= set(raw.cpus)
    raw.caches = [c for c in raw.caches if c["cpus"]]
    return raw


def raw_kinds(raw: RawTopology, arch: str | None = None) -> list[dict[str, Any]]:
    """Group CPUs into kinds, least powerful first, following hwloc's Linux rules.

    * With ``base_frequency`` (Intel hybrid), CPUs are grouped by base frequency:
      Turbo Boost Max 3.0 "favoured" cores have a higher max but are the same kind,
      and the kind's max frequency is the lowest of its members.
    * Otherwise by ``cpuinfo_max_freq``, and by ``cpu_capacity`` (ARM big.LITTLE;
      recent x86 kernels expose a uniform 1024 which yields one kind, as in hwloc).
    """
    use_cap = True
    groups: dict[tuple[int, int], list[RawCpu]] = {}
    for c in raw.cpus.values():
        cap = (c.capacity or 0) if use_cap else 0
        freq = c.base_khz or c.max_khz or 0
        if not cap and not freq:
            continue
        groups.setdefault((cap, freq), []).append(c)
    out = []
    for key in sorted(groups, key=lambda k: (k[0], min((c.max_khz or 0) for c in groups[k]), k[1])):
        members = groups[key]
        maxes = [c.max_khz for c in members if c.max_khz]
        out.append({"cpus": {c.pu for c in members}, "name": None,
                    "freq_max_mhz": (min(maxes) / 1000.0) if maxes else None})
    return out


def topology_from_raw(raw: RawTopology, arch: str | None = None) -> dict[str, Any]:
    """Turn :class:`RawTopology` into the probe's ``topology`` section."""
    from clusterbench.probe.topology import build_topology

    pu_package = {c.pu: c.package for c in raw.cpus.values()}
    numa = [
        {"os_index": n, "cpus": v["cpus"], "memory_total_bytes": v["total"], "memory_available_bytes": v["avail"]}
        for n, v in raw.numa.items()
    ]
    extra = {raw.numa_package[n] for n in raw.numa if n in raw.numa_package}
    return build_topology(pu_package, [c.siblings for c in raw.cpus.values()], numa, extra, raw.caches, raw_kinds(raw, arch))
