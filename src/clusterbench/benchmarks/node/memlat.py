"""memlat: load-to-use latency vs working-set size by a random pointer chase; L1/L2/L3/DRAM plateaus.

Kernel ``memlat.c``: one pointer per cache line, a single random cycle through every line
(Sattolo), warm-up pass that verifies the cycle, timed unrolled chase whose
final pointer is checked. ``pattern=page`` visits pages in random order and the lines of each page
in random order (one TLB miss per page) — the default ``random`` is the classic figure including
TLB cost; the ``hugepages`` variant (THP via madvise) shows how much of it is page walks.

Working sets: from ``min_bytes`` (1 KiB) to ``max_bytes``, by default ``max(4 x LLC, 256 MiB)``
where LLC is the last-level cache instance that holds the pinned cpu (not the node's total),
at most 1/4 of MemAvailable; the ``quick`` profile stops at 256 MiB (so on a node whose LLC
exceeds 64 MiB the quick curve may end before DRAM: a note says so), with two points per octave
(about 2.5 s on a 2-core VM).

The curve is emitted as metric ``latency`` (and ``latency_cycles``) per size; the plateaus found
by :mod:`clusterbench.analysis.plateaus` on the measured curve are emitted as ``l1_latency`` ..
``dram_latency``. A plateau result's samples are the repeated timed chases of its representative
working set (the median-size point of the plateau), so its CV is about repeatability; how flat
the plateau is goes in ``params["flatness"]`` (max/min latency over the plateau), beside the cache
size it implies and the probe's.
"""
from __future__ import annotations

import math
import os
from typing import Any

from clusterbench.analysis.plateaus import find_plateaus
from clusterbench.analysis.warnings import Warning_
from clusterbench.errors import UsageError
from clusterbench.analysis.summary import pick
from clusterbench.benchmarks import register
from clusterbench.benchmarks.base import KernelBenchmark, check_placement, CPU, Metric, Param, Result, RunContext, available_memory, check_cpu

KIB = 1024
MIB = 1024 * 1024
GIB = 1024 * MIB
THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"
#: smallest default largest working set (the run rule's floor)
MIN_TOP = 256 * MIB
#: upper bound of the default largest working set, per profile (None: memory only)
DEFAULT_CAP = {"quick": 256 * MIB}
PLATEAU_METRICS = {"L1": "l1_latency", "L2": "l2_latency", "L3": "l3_latency", "DRAM": "dram_latency"}


def thp_mode(path: str = THP_ENABLED) -> str | None:
    """The bracketed THP mode ("always", "madvise", "never"), or None when THP is absent."""
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError:
        return None
    if "[" in text:
        return text.split("[", 1)[1].split("]", 1)[0]
    return text.strip() or None


def probe_cache_levels(probe: dict, cpu: int | None = None) -> dict[int, int]:
    """{level: bytes} of the data/unified caches the given cpu sees (the instances holding it);
    without a cpu, or when the topology names none for it, those of a typical core."""
    caches = [c for c in (probe.get("topology") or {}).get("caches", [])
              if c.get("type") in ("data", "unified") and c.get("level") and c.get("size_bytes")]
    if cpu is not None:
        mine = {int(c["level"]): int(c["size_bytes"]) for c in caches if cpu in (c.get("cpus") or ())}
        if mine:
            return mine
    out: dict[int, int] = {}
    try:
        from clusterbench.probe.topology import cache_sizes

        for name, size in cache_sizes(probe).items():
            if name.startswith("L") and name[1:2].isdigit() and (name[2:] in ("", "d")) and size:
                out[int(name[1])] = int(size)
    except Exception:  # noqa: BLE001 - a probe without caches must not stop the benchmark
        pass
    return out


def llc_of_cpu(probe: dict, cpu: int | None) -> int | None:
    """Size of the last-level cache instance that holds ``cpu`` (what its working set must exceed)."""
    levels = probe_cache_levels(probe, cpu)
    return levels[max(levels)] if levels else None


def line_bytes(probe: dict) -> int:
    for c in (probe.get("topology") or {}).get("caches", []):
        if c.get("level") == 1 and c.get("type") in ("data", "unified") and c.get("line_bytes"):
            lb = int(c["line_bytes"])
            if 8 <= lb <= 4096 and lb & (lb - 1) == 0:
                return lb
    return 64


def size_list(lo: int, hi: int, per_octave: int, line: int) -> list[int]:
    """Geometric sizes from lo to hi (both included), per_octave points per doubling."""
    out: list[int] = []
    steps = int(math.floor(math.log2(hi / lo) * per_octave + 1e-9))
    for i in range(steps + 1):
        s = int(round(lo * 2 ** (i / per_octave) / line)) * line
        if s >= 2 * line and (not out or s > out[-1]):
            out.append(s)
    hi_r = hi // line * line
    if out and out[-1] < hi_r:
        out.append(hi_r)
    return out


LEVELS = ("l1", "l2", "l3", "dram")


def _headlines(rs: list[Result]) -> list[str]:
    parts = [f"{lvl.upper()} {r.value:.1f} ns" for lvl in LEVELS if (r := pick(rs, "memlat", f"{lvl}_latency"))]
    return ["latency  " + ", ".join(parts)] if parts else []


def _findings(rs: list[Result]) -> list[str]:
    out = []
    for lvl in LEVELS[:-1]:
        r = pick(rs, "memlat", f"{lvl}_latency")
        implied, size = (r.params.get("implied_size_bytes"), r.params.get("probe_size_bytes")) if r else (0, 0)
        if implied and size and not 0.25 <= implied / size <= 4:
            out.append(f"{lvl.upper()} behaves like {implied / 2**20:.1f} MiB, not the {size / 2**20:.0f} MiB the probe "
                       "reports (a VM or container sees the host's cache, or it is shared)")
    return out


@register
class Memlat(KernelBenchmark):
    name = "memlat"
    suites = {"node": 50}
    key_params = ('hugepages', 'size_bytes', 'implied_size_bytes', 'probe_size_bytes')
    headlines = (_headlines,)
    findings = (_findings,)
    help = "memory latency vs working set (random pointer chase); L1/L2/L3/DRAM plateaus (lat_mem_rd)"
    kernel = "memlat"
    metrics = (
        Metric("latency", "ns", False, "ns per dependent load at one working-set size"),
        Metric("latency_cycles", "cycles", False, "cycles per dependent load (ns x measured clock)"),
        Metric("l1_latency", "ns", False, "L1 plateau of the latency curve"),
        Metric("l2_latency", "ns", False, "L2 plateau of the latency curve"),
        Metric("l3_latency", "ns", False, "L3 plateau of the latency curve"),
        Metric("dram_latency", "ns", False, "DRAM plateau of the latency curve"),
    )
    params = (
        CPU,
        Param("hugepages", str, "both", "transparent huge pages: off, on, or both variants", ("off", "on", "both")),
        Param("pattern", str, "random", "random: one random cycle over all lines; page: random pages, "
              "random lines within each page (fewer TLB misses)", ("random", "page")),
        Param("min_bytes", int, 1 * KIB, "smallest working set (bytes)", min=64),
        Param("max_bytes", int, None, "largest working set (default: max(4 x LLC of the pinned cpu, 256 MiB), "
              "at most 1/4 of MemAvailable; quick: 256 MiB)"),
        Param("per_octave", int, 4, "working-set sizes per doubling", min=1, max=16),
        Param("samples", int, 5, "timed chases per size (best is reported)", min=1, max=1000),
        Param("min_time", float, 0.005, "seconds per timed chase", min=0, max=10, min_open=True),
    )
    profiles = {
        "quick": {"hugepages": "off", "per_octave": 2, "samples": 3, "min_time": 0.002},
        "full": {"per_octave": 4, "samples": 10, "min_time": 0.01},
    }

    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = dict(params)
        p["cpu"] = check_cpu(ctx, p["cpu"])
        line = line_bytes(ctx.probe)
        p["line_bytes"] = line
        if p["min_bytes"] < 2 * line:
            raise UsageError(f"--min-bytes {p['min_bytes']} is under two cache lines",
                             f"use --min-bytes {2 * line} or more")
        avail = available_memory(ctx.probe)
        llc = llc_of_cpu(ctx.probe, p["cpu"])
        p["llc_bytes"] = llc
        if p["max_bytes"] is None:
            want = max(4 * (llc or 0), MIN_TOP)
            cap = DEFAULT_CAP.get(ctx.profile)
            if cap:
                want = min(want, cap)
            if avail:
                want = min(want, avail // 4)
            p["max_bytes"] = max(want, p["min_bytes"])
        elif avail and p["max_bytes"] > avail // 2:
            raise UsageError(f"--max-bytes {p['max_bytes']} does not fit in memory "
                             f"({avail // MIB} MiB available)", f"use --max-bytes {avail // 4} or less")
        if p["max_bytes"] < p["min_bytes"]:
            raise UsageError(f"--max-bytes {p['max_bytes']} is below --min-bytes {p['min_bytes']}",
                             "raise --max-bytes")
        p["threads"] = 1
        p["cpus"] = [p["cpu"]]
        return p

    def sizes(self, params: dict[str, Any]) -> list[int]:
        return size_list(params["min_bytes"], params["max_bytes"], params["per_octave"], params["line_bytes"])

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        sizes = self.sizes(params)
        t = len(sizes) * (params["samples"] + 1) * params["min_time"] * 2
        t += sum(s for s in sizes if s > 8 * MIB) / 64 * 150e-9  # build and verified walks of the large sets
        return t * (2 if params["hugepages"] == "both" else 1)

    def variants(self, params: dict[str, Any]) -> tuple[list[str], list[Warning_]]:
        """The variants to run, and the warnings that belong to the huge-page variant."""
        want = {"off": ["off"], "on": ["on"], "both": ["off", "on"]}[params["hugepages"]]
        notes: list[Warning_] = []
        if "on" in want:
            mode = thp_mode()
            if mode in (None, "never"):
                notes.append(Warning_(
                    "no-hugepages",
                    f"transparent huge pages are {'absent' if mode is None else 'disabled (never)'}: "
                    "the huge-page variant was skipped",
                    f"echo madvise > {THP_ENABLED} (as root) to measure it"))
                want = [v for v in want if v != "on"] or ["off"]
        return want, notes

    def run(self, ctx: RunContext, params: dict[str, Any]) -> list:
        b = ctx.build("memlat")
        line = params["line_bytes"]
        sizes = self.sizes(params)
        variants, notes = self.variants(params)
        for w in notes:
            ctx.note(w.message)
        llc = params.get("llc_bytes")
        if llc and params["max_bytes"] < 4 * llc:
            ctx.note(f"memlat: the largest working set ({params['max_bytes'] // MIB} MiB) is under 4 x the "
                     f"last-level cache ({llc // MIB} MiB): the DRAM plateau may be missing or read low"
                     + (" (the quick profile stops at 256 MiB)" if ctx.profile == "quick" else ""))
        levels = probe_cache_levels(ctx.probe, params["cpu"])
        out = []
        ctx.progress.start("memlat", total=len(sizes) * len(variants))
        for var in variants:
            info: dict = {}
            curve: list[tuple[int, float, list[float]]] = []
            base = {"threads": 1, "cpus": [params["cpu"]], "cpu": params["cpu"], "hugepages": var,
                    "pattern": params["pattern"], "line_bytes": line}

            def on(rec: dict, var: str = var, info: dict = info, curve: list = curve, base: dict = base) -> None:
                if rec["type"] == "info":
                    check_placement(rec, [params["cpu"]], self.name)
                    info.update(rec)
                    return
                if rec["type"] != "result":
                    return
                rp = dict(rec.get("params", {}))
                size = int(rp.pop("size_bytes"))
                huge_kib = rp.pop("huge_kib", -1)
                touched = -(-size // (2 * MIB)) * 2 * MIB
                got_huge = huge_kib is not None and huge_kib >= 0 and huge_kib * 1024 >= 0.5 * touched
                ws: list[Warning_ | None] = []
                if var == "on" and not got_huge:
                    ws.append(Warning_("no-hugepages",
                                       f"huge pages were requested but only {max(huge_kib, 0)} KiB were obtained",
                                       "check /sys/kernel/mm/transparent_hugepage/enabled and defrag, or free memory"))
                prm = {**base, "size_bytes": size, "hugepages_obtained": bool(got_huge),
                       "anon_huge_kib": huge_kib, "clock_ghz": rp.get("clock_ghz"),
                       "clock_source": "measured (dependent integer add chain)", "loads": rp.get("loads")}
                out.append(ctx.emit(self, rec["metric"], rec["samples"], prm, times_s=rec.get("times_s"),
                                    extra_warnings=ws))
                if rec["metric"] == "latency":
                    curve.append((size, min(rec["samples"]), list(rec["samples"])))
                    ctx.progress.advance(1)

            args = [f"--cpu={params['cpu']}", "--sizes=" + ",".join(map(str, sizes)), f"--line={line}",
                    f"--page={os.sysconf('SC_PAGE_SIZE') if hasattr(os, 'sysconf') else 4096}",
                    f"--hugepages={1 if var == 'on' else 0}", f"--pattern={params['pattern']}",
                    f"--samples={params['samples']}", f"--min_time={params['min_time']}"]
            ctx.run_kernel(b, args, on_record=on)
            out.extend(self.emit_plateaus(ctx, curve, levels, base, notes if var == "on" else []))
        return out

    def emit_plateaus(self, ctx: RunContext, curve: list, levels: dict[int, int], base: dict,
                      notes: list[Warning_]) -> list:
        """Find the plateaus of the measured curve and emit one result per named level.

        Samples: the repeated chases of the plateau's representative working set (its
        median-size point); ``flatness`` (max/min of the per-size latencies on the plateau)
        and the plateau's median latency go in params."""
        if not curve:
            return []
        expected = len(levels) + 1 if levels else None
        plats = find_plateaus([c[0] for c in curve], [c[1] for c in curve], expected=expected,
                              probe_sizes=levels)
        by_size = {c[0]: c[2] for c in curve}
        res = []
        missing: list[Warning_] = list(notes)
        if expected and len(plats) < expected:
            missing.append(Warning_(
                "plateaus-missing",
                f"found {len(plats)} latency plateaus where the probe's {len(levels)} cache levels suggest "
                f"{expected}", "raise --max-bytes or --per-octave, or rerun on a quieter machine"))
        for p in plats:
            metric = PLATEAU_METRICS.get(p.label)
            if not metric:
                continue
            rep = sorted(p.sizes)[len(p.sizes) // 2]
            prm = {**base, "size_bytes": rep, "implied_size_bytes": p.implied_size_bytes,
                   "first_size_bytes": p.first_size_bytes, "probe_size_bytes": p.probe_size_bytes,
                   "plateau_sizes_bytes": p.sizes, "plateau_latencies_ns": p.latencies,
                   "plateau_median_ns": p.latency, "flatness": max(p.latencies) / min(p.latencies),
                   "plateaus_found": len(plats), "open_ended": p.last}
            res.append(ctx.emit(self, metric, by_size[rep], prm, extra_warnings=missing))
        return res
