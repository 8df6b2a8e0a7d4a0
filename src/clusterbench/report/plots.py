"""The plots of ``clusterbench report``: which ones the data allows, and drawing each as a PNG.

Two layers. :func:`plan` is pure (no matplotlib): from the report's sources (a run, or the trials
of one ``tune hpl``, with their result dicts and probe) it picks the plots the data allows, each
only where its data exists, and extracts what each one draws into a :class:`PlotSpec` (plain
lists and numbers, so tests can check the selection on hand-made results). :func:`render` draws
one spec with the function of its kind (``draw_<kind>``), matplotlib's Agg canvas, no pyplot
state, into a PNG file. matplotlib is imported there only, so the rest of clusterbench never pays
for it.

Conventions: every axis names its quantity and unit; limits (Rpeak, the best bandwidth measured,
the caches of the probe, the ideal scaling) are drawn as horizontal or vertical lines and named in
the legend; message and working-set sizes are on log axes.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: the order plots appear in the page
KINDS = ("stream_threads", "stream_numa", "memlat", "fpu", "compute_rpeak", "roofline", "pingpong", "multipair",
         "hpl_nb", "hpl_grid", "hpl_scaling", "comparison")

#: STREAM's flops per byte it counts: scale 1 flop / 16 B, add 1 / 24, triad 2 / 24 (copy has none)
STREAM_INTENSITY = {"scale": 1 / 16, "add": 1 / 24, "triad": 2 / 24}
STREAM_KERNELS = ("copy", "scale", "add", "triad")


@dataclass
class Source:
    """What one column of the report shows: one run, or every trial of one ``tune hpl``."""

    label: str
    runs: list[dict]
    results: list[dict]

    @property
    def probe(self) -> dict:
        return (self.runs[0].get("probe") if self.runs else None) or {}

    @property
    def host(self) -> str | None:
        return self.runs[0].get("host") if self.runs else None


@dataclass
class PlotSpec:
    kind: str
    slug: str
    title: str
    caption: str
    data: dict[str, Any] = field(default_factory=dict)


# -- small helpers ------------------------------------------------------------------------------
def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def _of(results: Iterable[dict], bench: str, *metrics: str) -> list[dict]:
    return [r for r in results if r.get("benchmark") == bench and r.get("metric") in metrics
            and _num(r.get("value")) is not None]


def _better(a: dict, b: dict) -> dict:
    """The better of two results of one metric (by its direction)."""
    if a.get("higher_is_better", True):
        return a if a["value"] >= b["value"] else b
    return a if a["value"] <= b["value"] else b


def _best_by(results: Iterable[dict], key: Callable[[dict], Any]) -> dict[Any, dict]:
    out: dict[Any, dict] = {}
    for r in results:
        k = key(r)
        if k is None:
            continue
        out[k] = _better(out[k], r) if k in out else r
    return out


def _prefix(src: Source, many: bool, text: str) -> str:
    return f"{src.label}: {text}" if many else text


def _limit_lines(results: Iterable[dict], names: tuple[str, ...] = ()) -> list[dict]:
    """Distinct limits of these results (by description), the largest of each name."""
    best: dict[str, dict] = {}
    for r in results:
        for lim in r.get("limits") or ([r["limit"]] if r.get("limit") else []):
            if not isinstance(lim, Mapping) or (names and lim.get("name") not in names):
                continue
            v = _num(lim.get("value"))
            if v is None:
                continue
            name = str(lim.get("name") or "limit")
            if name not in best or v > best[name]["value"]:
                best[name] = {"label": str(lim.get("description") or name), "value": v}
    return list(best.values())


def human_bytes(n: float) -> str:
    for unit, size in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n:.0f} B"


def _node_rpeak(probe: Mapping) -> tuple[float | None, float | None]:
    """(node DP Rpeak, per-core DP Rpeak) in Gflop/s at the nominal clock, from the probe."""
    rp = probe.get("rpeak") or {}
    node = _num((rp.get("node") or {}).get("dp_gflops_nominal"))
    core = _num((rp.get("per_core") or {}).get("dp_gflops_nominal"))
    return node, core


def _cores(probe: Mapping) -> int | None:
    c = (probe.get("topology") or {}).get("cores")
    return c if isinstance(c, int) and c > 0 else None


# -- the plan: which plots, with what data --------------------------------------------------------
def _stream_threads(sources: list[Source]) -> list[PlotSpec]:
    many = sum(1 for s in sources if _of(s.results, "stream", *STREAM_KERNELS)) > 1
    series, limits, unit = [], [], "MB/s"
    for src in sources:
        rs = _of(src.results, "stream", *STREAM_KERNELS)
        rs = [r for r in rs if isinstance(r["params"].get("threads"), int)]
        if not rs:
            continue
        unit = rs[0].get("unit") or unit
        best = _best_by(rs, lambda r: (r["metric"], r["params"].get("variant") or "regular", r["params"]["threads"]))
        for metric in STREAM_KERNELS:
            for variant in sorted({k[1] for k in best if k[0] == metric}):
                pts = sorted((k[2], r["value"]) for k, r in best.items() if k[0] == metric and k[1] == variant)
                label = metric + ("" if variant == "regular" else f" ({variant} stores)")
                series.append({"label": _prefix(src, many, label), "x": [p[0] for p in pts],
                               "y": [p[1] for p in pts], "kernel": metric, "variant": variant})
        limits += [{**lim, "label": _prefix(src, many, lim["label"])} for lim in _limit_lines(rs, ("best_bandwidth",))]
    if not series:
        return []
    return [PlotSpec("stream_threads", "stream-threads", "STREAM bandwidth against threads",
                     "STREAM Copy, Scale, Add and Triad, the best sample at each thread count, per store variant "
                     "(nt: non-temporal stores); the dashed line is the best memory bandwidth measured on this node.",
                     {"series": series, "limits": limits, "unit": unit})]


def _stream_numa(sources: list[Source]) -> list[PlotSpec]:
    out: list[PlotSpec] = []
    for src in sources:
        rs = [r for r in _of(src.results, "stream", "triad_numa")
              if isinstance(r["params"].get("cpu_node"), int) and isinstance(r["params"].get("mem_node"), int)]
        cpu_nodes = sorted({r["params"]["cpu_node"] for r in rs})
        mem_nodes = sorted({r["params"]["mem_node"] for r in rs})
        if len(cpu_nodes) < 2 and len(mem_nodes) < 2:
            continue
        best = _best_by(rs, lambda r: (r["params"]["cpu_node"], r["params"]["mem_node"]))
        matrix = [[best[(c, m)]["value"] if (c, m) in best else None for m in mem_nodes] for c in cpu_nodes]
        out.append(PlotSpec("stream_numa", f"stream-numa-{len(out) + 1}",
                            f"STREAM Triad, CPU node x memory node ({src.label})",
                            "Triad bandwidth with the threads on one NUMA node's cores (rows) and the arrays bound "
                            "to one memory node (columns), as numactl --cpunodebind/--membind.",
                            {"cpu_nodes": cpu_nodes, "mem_nodes": mem_nodes, "matrix": matrix,
                             "unit": rs[0].get("unit") or "MB/s"}))
    return out


def _caches(probe: Mapping) -> list[dict]:
    seen: dict[tuple, dict] = {}
    for c in (probe.get("topology") or {}).get("caches") or []:
        if not isinstance(c, Mapping) or c.get("type") == "instruction" or not _num(c.get("size_bytes")):
            continue
        key = (c.get("level"), c.get("name"))
        seen.setdefault(key, {"name": str(c.get("name") or f"L{c.get('level')}"), "size": float(c["size_bytes"])})
    return sorted(seen.values(), key=lambda c: c["size"])


def _memlat(sources: list[Source]) -> list[PlotSpec]:
    srcs = [s for s in sources if _of(s.results, "memlat", "latency")]
    series: list[dict] = []
    caches: list[dict] = []
    for src in srcs:
        rs = [r for r in _of(src.results, "memlat", "latency") if _num(r["params"].get("size_bytes"))]
        best = _best_by(rs, lambda r: (r["params"].get("pattern") or "random", r["params"].get("hugepages") or "off",
                                       r["params"]["size_bytes"]))
        for pattern, huge in sorted({k[:2] for k in best}):
            pts = sorted((k[2], r["value"]) for k, r in best.items() if k[:2] == (pattern, huge))
            label = f"{pattern} pointer chase" + (f", huge pages {huge}" if huge != "off" else "")
            series.append({"label": _prefix(src, len(srcs) > 1, label), "x": [p[0] for p in pts],
                           "y": [p[1] for p in pts], "unit": rs[0].get("unit") or "ns"})
        if not caches:
            caches = _caches(src.probe)
    if not series:
        return []
    return [PlotSpec("memlat", "memlat", "Memory latency against working-set size",
                     "Load-to-use latency of a dependent pointer chase against the size of the working set; the "
                     "vertical lines are the cache sizes the probe reports, each plateau is one level of the "
                     "hierarchy.", {"series": series, "caches": caches})]


def _fpu(sources: list[Source]) -> list[PlotSpec]:
    srcs = [s for s in sources if _of(s.results, "fpu", "latency_cycles", "throughput_cycles")]
    bars = []
    for src in srcs:
        rs = _of(src.results, "fpu", "latency_cycles", "throughput_cycles")

        def what(r: dict) -> str:
            p = r["params"]
            return " ".join(str(p[k]) for k in ("op", "precision", "vector") if p.get(k) is not None)
        best = _best_by(rs, lambda r: (what(r), r["metric"]))
        for name in dict.fromkeys(k[0] for k in best):
            lat, thr = best.get((name, "latency_cycles")), best.get((name, "throughput_cycles"))
            bars.append({"label": _prefix(src, len(srcs) > 1, name),
                         "latency": lat["value"] if lat else None, "throughput": thr["value"] if thr else None})
    if not bars:
        return []
    return [PlotSpec("fpu", "fpu", "Floating-point latency and throughput",
                     "Cycles per operation: latency of one dependent chain, and reciprocal throughput with "
                     "enough independent chains to fill the pipelines (lower is better).", {"bars": bars})]


def _compute_rpeak(sources: list[Source]) -> list[PlotSpec]:
    srcs = [s for s in sources if _of(s.results, "peak", "gflops")
            or [r for r in _of(s.results, "dgemm", "gflops") if _square(r)]]
    bars, lines = [], []
    for src in srcs:
        many = len(srcs) > 1
        for r in _best_by(_of(src.results, "peak", "gflops"), lambda r: r["params"].get("threads")).values():
            t = r["params"].get("threads")
            bars.append({"label": _prefix(src, many, f"FMA peak, {_plural(t, 'core')}"),
                         "value": r["value"], "kind": "peak"})
        dg = _best_by([r for r in _of(src.results, "dgemm", "gflops") if _square(r)],
                      lambda r: (r["params"].get("mode") or "", r["params"].get("blas") or "",
                                 r["params"].get("threads") or r["params"].get("processes")))
        for (mode, blas, t), r in sorted(dg.items(), key=lambda kv: str(kv[0])):
            bars.append({"label": _prefix(src, many, f"DGEMM {mode} {blas}, {_plural(t, 'core')}"),
                         "value": r["value"], "kind": "dgemm"})
        node, core = _node_rpeak(src.probe)
        cores = _cores(src.probe)
        if node:
            lines.append({"label": f"Rpeak of {src.host or 'the node'}{f' ({cores} cores)' if cores else ''}",
                          "value": node})
        if core and cores and cores > 1:
            lines.append({"label": f"Rpeak of 1 core of {src.host or 'the node'}", "value": core})
    lines = list({(lim["label"], lim["value"]): lim for lim in lines}.values())
    if not bars:
        return []
    return [PlotSpec("compute_rpeak", "compute-rpeak", "FMA peak and DGEMM against Rpeak",
                     "Double-precision Gflop/s of the FMA peak kernel and of DGEMM (single: one core; star: every "
                     "core its own; threaded: one threaded call), against Rpeak (cores x nominal clock x "
                     "FLOPs/cycle, from the probe).", {"bars": bars, "limits": lines})]


def _square(r: dict) -> bool:
    """A DGEMM of square matrices (not the tuner's k = NB sweep)."""
    k, n = r["params"].get("k"), r["params"].get("n")
    return k is None or k == n


def _plural(n: Any, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _dgemm_intensity(p: Mapping) -> float | None:
    n, k = _num(p.get("n")), _num(p.get("k"))
    m = _num(p.get("m")) or n
    if not (n and m):
        return None
    k = k or n
    assert k is not None
    return 2 * m * n * k / (8 * (m * k + k * n + 2 * m * n))


def _roofline(sources: list[Source]) -> list[PlotSpec]:
    """A roof per host: its best measured FMA peak and STREAM bandwidth (at the most threads)."""
    hosts = list(dict.fromkeys(s.host for s in sources))
    out: list[PlotSpec] = []
    for host in hosts:
        srcs = [s for s in sources if s.host == host]
        rs = [r for s in srcs for r in s.results]
        peaks = _of(rs, "peak", "gflops")
        bws = [r for r in _of(rs, "stream", *STREAM_KERNELS) if isinstance(r["params"].get("threads"), int)]
        if not peaks or not bws:
            continue
        tmax = max(r["params"].get("threads") or 0 for r in peaks)
        peak = max(r["value"] for r in peaks if (r["params"].get("threads") or 0) == tmax)
        bmax = max(r["params"]["threads"] for r in bws)
        bw = max(r["value"] for r in bws if r["params"]["threads"] == bmax) / 1e3  # MB/s -> GB/s
        points = []
        for metric, ai in STREAM_INTENSITY.items():
            best = [r for r in bws if r["metric"] == metric and r["params"]["threads"] == bmax]
            if best:
                points.append({"label": f"STREAM {metric}, {_plural(bmax, 'thread')}", "ai": ai,
                               "gflops": max(r["value"] for r in best) / 1e3 * ai})
        square = [r for r in _of(rs, "dgemm", "gflops") if _square(r)]
        for (mode, t), r in _best_by(square, lambda r: (r["params"].get("mode"), r["params"].get("threads")
                                                        or r["params"].get("processes"))).items():
            dai = _dgemm_intensity(r["params"])
            if dai:
                points.append({"label": f"DGEMM {mode}, {_plural(t, 'core')}, n={r['params'].get('n')}", "ai": dai,
                               "gflops": r["value"]})
        local = [r for r in _of(rs, "hpl", "rmax") if r["params"].get("hosts") in (None, [], [host])]
        hpl = _best_by(local, lambda r: r["params"].get("n"))
        for n, r in hpl.items():
            if _num(n):
                points.append({"label": f"HPL N={n}", "ai": float(n) / 24, "gflops": r["value"]})
        out.append(PlotSpec("roofline", f"roofline-{len(out) + 1}", f"Roofline of {host}",
                            f"The roof: min(peak, intensity x bandwidth) with the measured FMA peak ({peak:.1f} "
                            f"Gflop/s, {tmax} cores) and STREAM bandwidth ({bw:.1f} GB/s, {bmax} threads). Points at "
                            "the intensity of each kernel's compulsory memory traffic: STREAM's own byte counts, "
                            "DGEMM 8(mk+kn+2mn) B, HPL 16 N^2 B (so real traffic is higher, intensity lower).",
                            {"peak": peak, "bw": bw, "points": points, "host": host}))
    return out


def _size(r: dict) -> float | None:
    return _num(r["params"].get("size_bytes"))


def _pingpong(sources: list[Source]) -> list[PlotSpec]:
    srcs = [s for s in sources if _of(s.results, "pingpong", "latency", "bandwidth")]
    lat: list[dict] = []
    bw: list[dict] = []
    limits: list[dict] = []
    for src in srcs:
        many = len(srcs) > 1

        def path(r: dict) -> str:
            p = r["params"]
            return f"{p.get('transport_used') or p.get('transport') or '?'}, {p.get('pair') or 'pair'}"
        for metric, series in (("latency", lat), ("bandwidth", bw)):
            rs = [r for r in _of(src.results, "pingpong", metric) if (_size(r) or 0) > 0]
            best = _best_by(rs, lambda r: (path(r), _size(r)))
            for name in dict.fromkeys(k[0] for k in best):
                pts = sorted((k[1], r["value"]) for k, r in best.items() if k[0] == name)
                series.append({"label": _prefix(src, many, f"ping-pong {name}"), "x": [p[0] for p in pts],
                               "y": [p[1] for p in pts], "unit": rs[0].get("unit")})
        rs = [r for r in _of(src.results, "bw", "bw", "bibw") if (_size(r) or 0) > 0]
        best = _best_by(rs, lambda r: (r["metric"], path(r), _size(r)))
        for metric, name in dict.fromkeys(k[:2] for k in best):
            pts = sorted((k[2], r["value"]) for k, r in best.items() if k[:2] == (metric, name))
            label = ("windowed one way" if metric == "bw" else "windowed both ways") + f" ({name})"
            bw.append({"label": _prefix(src, many, label), "x": [p[0] for p in pts], "y": [p[1] for p in pts],
                       "unit": rs[0].get("unit"), "dashed": True})
        limits += _limit_lines(_of(src.results, "pingpong", "bandwidth") + rs)
    if not lat and not bw:
        return []
    return [PlotSpec("pingpong", "pingpong", "MPI ping-pong latency and bandwidth against message size",
                     "Half round-trip latency and bandwidth (1 MB/s = 1e6 B/s) of a blocking ping-pong per transport "
                     "and rank placement, the best of the repeated loops at each size (0 B is left out of the log "
                     "axis); dashed: osu_bw-style windowed streaming (window of 64 messages).",
                     {"latency": lat, "bandwidth": bw, "limits": limits})]


def _multipair(sources: list[Source]) -> list[PlotSpec]:
    srcs = [s for s in sources if _of(s.results, "multipair", "pair_bandwidth", "aggregate_bandwidth")]
    per: list[dict] = []
    agg: list[dict] = []
    for src in srcs:
        for metric, series in (("pair_bandwidth", per), ("aggregate_bandwidth", agg)):
            rs = [r for r in _of(src.results, "multipair", metric) if (_size(r) or 0) > 0
                  and isinstance(r["params"].get("pairs"), int)]
            best = _best_by(rs, lambda r: (r["params"]["pairs"], _size(r)))
            for k in sorted({k[0] for k in best}):
                pts = sorted((key[1], r["value"]) for key, r in best.items() if key[0] == k)
                series.append({"label": _prefix(src, len(srcs) > 1, f"{k} pair{'s' if k != 1 else ''}"),
                               "x": [p[0] for p in pts], "y": [p[1] for p in pts], "unit": rs[0].get("unit")})
    if not per and not agg:
        return []
    return [PlotSpec("multipair", "multipair", "Concurrent pairs: per-pair and aggregate bandwidth",
                     "k pairs of ranks streaming at once between the two sides (rank i with i + k): the bandwidth of "
                     "one pair and the sum over pairs against message size.", {"per_pair": per, "aggregate": agg})]


def _rpeak_lines(srcs: list[Source]) -> list[dict]:
    out: list[dict] = []
    for node in dict.fromkeys(_node_rpeak(s.probe)[0] for s in srcs):
        if node:
            out.append({"label": "Rpeak of the node (nominal clock)", "value": node})
    return out[:1]


def _hpl_series_key(r: dict) -> tuple:
    p = r["params"]
    return (p.get("blas") or "", p.get("topology") or "", p.get("grid") or "", p.get("n"))


def _hpl_nb(sources: list[Source]) -> list[PlotSpec]:
    rs = [r for s in sources for r in _of(s.results, "hpl", "rmax") if _num(r["params"].get("nb"))]
    if len({r["params"]["nb"] for r in rs}) < 2:
        return []
    best = _best_by(rs, lambda r: (_hpl_series_key(r), r["params"]["nb"]))
    series = []
    for key in sorted({k[0] for k in best}, key=str):
        pts = sorted((k[1], r["value"]) for k, r in best.items() if k[0] == key)
        blas, topo, grid, n = key
        series.append({"label": f"{blas} {topo} {grid}, N={n}", "x": [p[0] for p in pts], "y": [p[1] for p in pts]})
    srcs = [s for s in sources if _of(s.results, "hpl", "rmax")]
    return [PlotSpec("hpl_nb", "hpl-nb", "HPL Rmax against the block size NB",
                     "Rmax (HPL's 2/3 N^3 + 3/2 N^2 flops over the wall time) of each configuration tried, the best "
                     "run at each NB; one line per BLAS, topology (pure: a rank per core; hybrid: a rank per node, "
                     "threaded BLAS), P x Q grid and N.", {"series": series, "limits": _rpeak_lines(srcs)})]


def _hpl_grid(sources: list[Source]) -> list[PlotSpec]:
    rs = [r for s in sources for r in _of(s.results, "hpl", "rmax") if r["params"].get("grid")]
    best = _best_by(rs, lambda r: (r["params"]["grid"], r["params"].get("topology") or "", r["params"].get("blas")
                                   or ""))
    if len({k[0] for k in best}) < 2 and len(best) < 2:
        return []
    bars = [{"label": f"{g} {t} {b}", "grid": g, "value": r["value"], "nb": r["params"].get("nb"),
             "n": r["params"].get("n")} for (g, t, b), r in sorted(best.items(), key=lambda kv: -kv[1]["value"])]
    srcs = [s for s in sources if _of(s.results, "hpl", "rmax")]
    return [PlotSpec("hpl_grid", "hpl-grid", "HPL Rmax by process grid",
                     "The best Rmax of each P x Q grid, topology and BLAS (at its best NB, printed on the bar).",
                     {"bars": bars, "limits": _rpeak_lines(srcs)})]


def _hpl_scaling(sources: list[Source]) -> list[PlotSpec]:
    out: list[PlotSpec] = []
    for src in sources:
        rs = [r for r in _of(src.results, "hpl-scaling", "rmax") if isinstance(r["params"].get("nodes"), int)]
        best = _best_by(rs, lambda r: r["params"]["nodes"])
        if not best:
            continue
        nodes = sorted(best)
        grids = [{"nodes": k, "grid": g, "value": v} for k in nodes
                 for g, v in (best[k]["params"].get("rmax_by_grid") or {}).items() if _num(v)]
        rpeak = [{"nodes": k, "value": best[k]["params"]["rpeak_nodes_gflops"]} for k in nodes
                 if _num(best[k]["params"].get("rpeak_nodes_gflops"))]
        out.append(PlotSpec("hpl_scaling", f"hpl-scaling-{len(out) + 1}", f"HPL Rmax against node count ({src.label})",
                            "The best grid's Rmax at each node count (dots: every grid tried), the ideal line (the "
                            "Rmax of the fewest nodes times the node ratio) and Rpeak of that many nodes.",
                            {"nodes": nodes, "rmax": [best[k]["value"] for k in nodes], "grids": grids,
                             "rpeak": rpeak}))
    return out


def _short_params(params: Any, limit: int = 3) -> str:
    if not isinstance(params, Mapping):
        return ""
    items = [(k, v) for k, v in params.items() if isinstance(v, (str, int, float)) and not isinstance(v, bool)]
    return ", ".join(f"{k}={v}" for k, v in items[:limit])


def comparison_rows(comparison: Any, most: int = 40) -> tuple[list[dict], int]:
    """(rows of the comparison chart, how many matches were left out) from ``Comparison.as_dict()``:
    ``{"matches": [{"benchmark", "metric", "params", "comparison": {"ratio", "ci_low", "ci_high",
    "verdict", "change_pct"}}]}``. Matches without a finite ratio are skipped; beyond ``most``
    rows, the largest changes are kept."""
    if not isinstance(comparison, Mapping) or not isinstance(comparison.get("matches"), list):
        return [], 0
    rows: list[dict[str, Any]] = []
    for m in comparison["matches"]:
        if not isinstance(m, Mapping) or not isinstance(m.get("comparison"), Mapping):
            continue
        c = m["comparison"]
        ratio = _num(c.get("ratio"))
        if ratio is None or ratio <= 0:
            continue
        lo, hi = _num(c.get("ci_low")), _num(c.get("ci_high"))
        if lo is None or hi is None or not lo <= ratio <= hi:
            lo = hi = ratio
        label = f"{m.get('benchmark', '?')} {m.get('metric', '?')}"
        extra = _short_params(m.get("params"))
        label = m["label"] if isinstance(m.get("label"), str) and m["label"] else label + (f" ({extra})" if extra else "")
        rows.append({"label": label, "ratio": ratio, "lo": lo, "hi": hi,
                     "verdict": str(c.get("verdict") or ""), "change_pct": _num(c.get("change_pct"))})
    left = max(0, len(rows) - most)
    if left:
        rows = sorted(rows, key=lambda r: -abs(math.log(float(r["ratio"]))))[:most]
    return rows, left


def _comparison(comparison: Any) -> list[PlotSpec]:
    rows, left = comparison_rows(comparison)
    if not rows:
        return []
    sides = [comparison.get(k) for k in ("a", "b")]
    names = [s if isinstance(s, str) else (s.get("label") or s.get("name")) if isinstance(s, Mapping) else None
             for s in sides]
    for i, key in enumerate(("runs_a", "runs_b")):  # Comparison.as_dict() names each side by its runs
        runs = comparison.get(key)
        if names[i] is None and isinstance(runs, list) and runs and all(isinstance(r, str) for r in runs):
            names[i] = ", ".join(r[:8] for r in runs[:3]) + (f" +{len(runs) - 3}" if len(runs) > 3 else "")
    what = f"{names[1]} / {names[0]}" if all(isinstance(n, str) for n in names) else "B / A"
    return [PlotSpec("comparison", "comparison", "Comparison: ratio per metric",
                     f"Ratio {what} of each matched figure with its confidence interval; the line at 1 is no change. "
                     "Colour: the verdict (green better, red worse, grey no significant difference)."
                     + (f" The {left} smallest changes are left out." if left else ""),
                     {"rows": rows, "xlabel": f"ratio {what}"})]


def plan(sources: list[Source], comparison: Any = None) -> list[PlotSpec]:
    """Every plot the data of ``sources`` (and ``comparison``) allows, in :data:`KINDS` order."""
    specs = (_stream_threads(sources) + _stream_numa(sources) + _memlat(sources) + _fpu(sources)
             + _compute_rpeak(sources) + _roofline(sources) + _pingpong(sources) + _multipair(sources)
             + _hpl_nb(sources) + _hpl_grid(sources) + _hpl_scaling(sources) + _comparison(comparison))
    return sorted(specs, key=lambda s: KINDS.index(s.kind))


# -- drawing ----------------------------------------------------------------------------------------
def _hlines(ax, limits: list[dict], colors: tuple[str, ...] = ("#d62728", "#9467bd", "#8c564b", "#7f7f7f")) -> None:
    for i, lim in enumerate(limits):
        ax.axhline(lim["value"], color=colors[i % len(colors)], linestyle="--", linewidth=1.2,
                   label=f"{lim['label']}: {lim['value']:,.1f}")


def _log2_bytes_axis(ax) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=4))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: human_bytes(v)))


def draw_stream_threads(data: dict, fig) -> None:
    ax = fig.subplots()
    colors = {k: f"C{i}" for i, k in enumerate(STREAM_KERNELS)}
    for s in data["series"]:
        ax.plot(s["x"], s["y"], marker="o", label=s["label"], color=colors.get(s.get("kernel"), None),
                linestyle="-" if s.get("variant") in (None, "regular") else "--")
    _hlines(ax, data["limits"], colors=("#7f7f7f", "#d62728"))
    xs = sorted({x for s in data["series"] for x in s["x"]})
    ax.set_xticks(xs)
    ax.set_xlabel("threads")
    ax.set_ylabel(f"bandwidth ({data['unit']})")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def draw_stream_numa(data: dict, fig) -> None:
    import numpy as np

    ax = fig.subplots()
    m = np.array([[np.nan if v is None else v for v in row] for row in data["matrix"]], dtype=float)
    im = ax.imshow(m, cmap="viridis")
    ax.set_xticks(range(len(data["mem_nodes"])), [str(n) for n in data["mem_nodes"]])
    ax.set_yticks(range(len(data["cpu_nodes"])), [str(n) for n in data["cpu_nodes"]])
    ax.set_xlabel("memory node (arrays bound here)")
    ax.set_ylabel("CPU node (threads run here)")
    mid = (np.nanmin(m) + np.nanmax(m)) / 2
    for i, row in enumerate(data["matrix"]):
        for j, v in enumerate(row):
            if v is not None:  # dark text on the bright (high) end of viridis
                ax.text(j, i, f"{v:,.0f}", ha="center", va="center", color="black" if v > mid else "white",
                        fontsize=9)
    fig.colorbar(im, ax=ax, label=f"Triad bandwidth ({data['unit']})")


def draw_memlat(data: dict, fig) -> None:
    ax = fig.subplots()
    unit = "ns"
    for s in data["series"]:
        ax.plot(s["x"], s["y"], marker=".", label=s["label"])
        unit = s.get("unit") or unit
    styles = ("--", "-.", ":", (0, (5, 1)))
    for i, c in enumerate(data["caches"]):
        ax.axvline(c["size"], color="#555555", linestyle=styles[i % len(styles)], linewidth=1.2,
                   label=f"{c['name']} {human_bytes(c['size'])} (probe)")
    _log2_bytes_axis(ax)
    ax.set_yscale("log")
    ax.set_xlabel("working-set size (bytes, log scale)")
    ax.set_ylabel(f"latency per load ({unit}, log scale)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)


def draw_fpu(data: dict, fig) -> None:
    ax = fig.subplots()
    bars = data["bars"]
    xs = list(range(len(bars)))
    w = 0.4
    ax.bar([x - w / 2 for x in xs], [b["latency"] or 0 for b in bars], w, label="latency (dependent chain)")
    ax.bar([x + w / 2 for x in xs], [b["throughput"] or 0 for b in bars], w, label="reciprocal throughput")
    ax.set_xticks(xs, [b["label"] for b in bars], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("cycles per operation")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)


def draw_compute_rpeak(data: dict, fig) -> None:
    ax = fig.subplots()
    bars = data["bars"]
    colors = ["#1f77b4" if b["kind"] == "peak" else "#2ca02c" for b in bars]
    ax.bar(range(len(bars)), [b["value"] for b in bars], color=colors)
    for i, b in enumerate(bars):
        ax.text(i, b["value"], f"{b['value']:.1f}", ha="center", va="bottom", fontsize=8)
    _hlines(ax, data["limits"])
    top = max([b["value"] for b in bars] + [lim["value"] for lim in data["limits"]])
    ax.set_ylim(0, top * 1.25)
    ax.set_xticks(range(len(bars)), [b["label"] for b in bars], rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("double precision (Gflop/s)")
    ax.grid(alpha=0.3, axis="y")
    if data["limits"]:
        ax.legend(fontsize=8)


def draw_roofline(data: dict, fig) -> None:
    import numpy as np

    ax = fig.subplots()
    peak, bw = data["peak"], data["bw"]
    ridge = peak / bw
    ais = [p["ai"] for p in data["points"]] + [ridge]
    lo, hi = min(ais) / 4, max(ais) * 4
    x = np.logspace(math.log10(lo), math.log10(hi), 200)
    ax.plot(x, np.minimum(peak, x * bw), color="black", linewidth=2, label="roof: min(peak, intensity x bandwidth)")
    ax.axhline(peak, color="#d62728", linestyle="--", linewidth=1, label=f"measured FMA peak: {peak:,.1f} Gflop/s")
    ax.axvline(ridge, color="#7f7f7f", linestyle=":", linewidth=1, label=f"ridge point: {ridge:.2f} flop/B")
    markers = "osD^v<>ph*"
    for i, p in enumerate(data["points"]):
        ax.plot([p["ai"]], [p["gflops"]], marker=markers[i % len(markers)], linestyle="none", markersize=7,
                label=f"{p['label']}: {p['gflops']:,.1f} Gflop/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (flop/byte, log scale)")
    ax.set_ylabel("performance (Gflop/s, log scale)")
    ax.text(lo * 1.1, bw * lo * 1.3, f"memory bandwidth {bw:,.1f} GB/s", rotation=0, fontsize=8)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="lower right")


def _size_panel(ax, series: list[dict], ylabel: str, title: str, limits: tuple[dict, ...] = ()) -> None:
    for s in series:
        ax.plot(s["x"], s["y"], marker=".", linestyle="--" if s.get("dashed") else "-", label=s["label"])
    _hlines(ax, list(limits))
    _log2_bytes_axis(ax)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes, log scale)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    if series or limits:
        ax.legend(fontsize=7)


def draw_pingpong(data: dict, fig) -> None:
    a, b = fig.subplots(1, 2)
    lu = next((s["unit"] for s in data["latency"] if s.get("unit")), "us")
    bu = next((s["unit"] for s in data["bandwidth"] if s.get("unit")), "MB/s")
    _size_panel(a, data["latency"], f"half round-trip latency ({lu}, log scale)", "latency")
    _size_panel(b, data["bandwidth"], f"bandwidth ({bu}, log scale)", "bandwidth", tuple(data["limits"]))


def draw_multipair(data: dict, fig) -> None:
    a, b = fig.subplots(1, 2)
    unit = next((s["unit"] for s in data["per_pair"] + data["aggregate"] if s.get("unit")), "MB/s")
    _size_panel(a, data["per_pair"], f"bandwidth per pair ({unit}, log scale)", "per pair")
    _size_panel(b, data["aggregate"], f"aggregate bandwidth ({unit}, log scale)", "aggregate")


def draw_hpl_nb(data: dict, fig) -> None:
    ax = fig.subplots()
    for s in data["series"]:
        ax.plot(s["x"], s["y"], marker="o", label=s["label"])
    _hlines(ax, data["limits"])
    ax.set_xlabel("block size NB")
    ax.set_ylabel("Rmax (Gflop/s)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def draw_hpl_grid(data: dict, fig) -> None:
    ax = fig.subplots()
    bars = data["bars"]
    ax.bar(range(len(bars)), [b["value"] for b in bars], color="#1f77b4")
    for i, b in enumerate(bars):
        ax.text(i, b["value"], f"{b['value']:.1f}\nNB={b['nb']}", ha="center", va="bottom", fontsize=8)
    _hlines(ax, data["limits"])
    ax.set_xticks(range(len(bars)), [b["label"] for b in bars], rotation=25, ha="right", fontsize=8)
    top = max([b["value"] for b in bars] + [lim["value"] for lim in data["limits"]])
    ax.set_ylim(0, top * 1.2)
    ax.set_xlabel("P x Q grid, topology, BLAS")
    ax.set_ylabel("Rmax (Gflop/s)")
    ax.grid(alpha=0.3, axis="y")
    if data["limits"]:
        ax.legend(fontsize=8)


def draw_hpl_scaling(data: dict, fig) -> None:
    ax = fig.subplots()
    nodes, rmax = data["nodes"], data["rmax"]
    ax.plot(nodes, rmax, marker="o", linewidth=2, label="Rmax, best grid")
    if data["grids"]:
        ax.plot([g["nodes"] for g in data["grids"]], [g["value"] for g in data["grids"]], "o", color="#aaaaaa",
                markersize=4, label="every grid tried")
    ax.plot(nodes, [rmax[0] * k / nodes[0] for k in nodes], linestyle="--", color="#2ca02c",
            label="ideal (linear from the fewest nodes)")
    if data["rpeak"]:
        ax.plot([r["nodes"] for r in data["rpeak"]], [r["value"] for r in data["rpeak"]], linestyle="--",
                color="#d62728", label="Rpeak of that many nodes")
    ax.set_xticks(nodes)
    ax.set_xlabel("nodes")
    ax.set_ylabel("Rmax (Gflop/s)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _verdict_color(verdict: str) -> str:
    v = verdict.lower()
    if any(w in v for w in ("worse", "slower", "regress")):
        return "#d62728"
    if any(w in v for w in ("better", "faster", "improv")):
        return "#2ca02c"
    return "#7f7f7f"


def draw_comparison(data: dict, fig) -> None:
    ax = fig.subplots()
    rows = data["rows"]
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows):
        ax.errorbar([r["ratio"]], [y], xerr=[[r["ratio"] - r["lo"]], [r["hi"] - r["ratio"]]], fmt="o",
                    color=_verdict_color(r["verdict"]), capsize=3)
    ax.axvline(1.0, color="black", linewidth=1, label="no change (ratio 1)")
    ax.set_yticks(ys, [f"{r['label']}  [{r['verdict']}]" if r["verdict"] else r["label"] for r in rows], fontsize=8)
    ax.set_xlabel(data.get("xlabel") or "ratio")
    ax.grid(alpha=0.3, axis="x")
    ax.legend(fontsize=8, loc="best")


def figure_size(spec: PlotSpec) -> tuple[float, float]:
    if spec.kind in ("pingpong", "multipair"):
        return 11.0, 4.5
    if spec.kind == "comparison":
        return 9.0, max(2.5, 0.3 * len(spec.data["rows"]) + 1.2)
    if spec.kind == "roofline":
        return 9.0, 5.0
    return 8.0, 4.5


def render(spec: PlotSpec, path: str) -> None:
    """Draw ``spec`` into the PNG file ``path`` (matplotlib's Agg canvas, no pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figure_size(spec), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    globals()[f"draw_{spec.kind}"](spec.data, fig)
    fig.suptitle(spec.title, fontsize=11)
    fig.savefig(path, format="png")


__all__ = ["KINDS", "PlotSpec", "Source", "comparison_rows", "human_bytes", "plan", "render"]
