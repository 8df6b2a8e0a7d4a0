"""The headline of a node run: how fast, how close to the limit, and what holds it back.

Works on result dicts (``Result.as_json()`` or rows from the store), so it summarises a fresh
run and a stored one alike. Every line names its figure, unit and the limit it is judged by.
"""
from __future__ import annotations

from collections.abc import Iterable


def _pick(results: list[dict], bench: str, metric: str, **match: object) -> dict | None:
    """The best result of one metric whose params match (max or min by its direction)."""
    cands = [r for r in results if r["benchmark"] == bench and r["metric"] == metric
             and all(r["params"].get(k) == v for k, v in match.items())]
    if not cands:
        return None
    return (max if cands[0]["higher_is_better"] else min)(cands, key=lambda r: r["value"])


def _max_threads(results: list[dict], bench: str, metric: str) -> int | None:
    ts = [r["params"].get("threads") for r in results if r["benchmark"] == bench and r["metric"] == metric]
    ts = [t for t in ts if isinstance(t, int)]
    return max(ts) if ts else None


def _lim(r: dict, name: str | None = None) -> str:
    lims = r.get("limits") or ([r["limit"]] if r.get("limit") else [])
    for lim in lims:
        if name is None or lim["name"] == name:
            return f" = {lim['fraction']:.0%} of {lim['description']} ({lim['value']:,.1f})"
    return ""


def summarize_node(results: Iterable[dict]) -> dict:
    """``{"lines": [...], "findings": [...]}``: headline figures and diagnoses."""
    rs = list(results)
    lines: list[str] = []
    findings: list[str] = []

    n = _max_threads(rs, "peak", "gflops")
    peak_all = _pick(rs, "peak", "gflops", threads=n) if n else None
    peak_one = _pick(rs, "peak", "gflops", threads=1)
    if peak_one:
        lines.append(f"compute  FMA peak, 1 core: {peak_one['value']:.1f} Gflop/s{_lim(peak_one, 'rpeak')}")
    if peak_all and n and n > 1:
        lines.append(f"compute  FMA peak, {n} cores: {peak_all['value']:.1f} Gflop/s{_lim(peak_all, 'rpeak')}")
        if peak_one and peak_all["value"] < 0.8 * n * peak_one["value"]:
            findings.append(f"the FMA peak scales {peak_all['value'] / peak_one['value']:.2f}x on {n} cores, not "
                            f"{n}x: cores share a clock budget (turbo), are SMT siblings, or are shared with other load")
    clock = _pick(rs, "peak", "effective_clock", threads=n) if n else None
    if clock:
        lines.append(f"compute  clock implied by the peak: {clock['value']:.0f} MHz")
    slow_blas: list[str] = []
    for mode in ("single", "star", "threaded"):
        d = _pick(rs, "dgemm", "gflops", mode=mode)
        if d:
            lines.append(f"compute  DGEMM {mode} ({d['params'].get('blas')}, n={d['params'].get('n')}): "
                         f"{d['value']:.1f} Gflop/s{_lim(d, 'measured_peak') or _lim(d)}")
            frac = next((lim["fraction"] for lim in d.get("limits") or [] if lim["name"] == "measured_peak"), None)
            if frac is not None and frac < 0.6:
                slow_blas.append(f"{mode} {frac:.0%}")
    if slow_blas:
        findings.append(f"DGEMM reaches only {', '.join(slow_blas)} of the measured FMA peak (a good BLAS gets 80-95%): "
                        "the BLAS library is the bottleneck (see its warnings; try --blas blis or a newer OpenBLAS)")

    sn = _max_threads(rs, "stream", "triad")
    triad_all = _pick(rs, "stream", "triad", threads=sn) if sn else None
    triad_one = _pick(rs, "stream", "triad", threads=1)
    if triad_all:
        lines.append(f"memory   STREAM triad, {sn} threads: {triad_all['value']:,.0f} MB/s "
                     f"({triad_all['params'].get('variant')} stores)")
    if triad_one and triad_all and sn and sn > 1:
        gain = triad_all["value"] / triad_one["value"]
        lines.append(f"memory   STREAM triad, 1 thread: {triad_one['value']:,.0f} MB/s ({gain:.2f}x from 1 to {sn})")
        if gain < 1.3:
            findings.append(f"memory bandwidth barely grows from 1 to {sn} threads ({gain:.2f}x): one core "
                            "nearly saturates the memory system, so memory-bound codes will not scale on this node")
    read = _pick(rs, "membw", "read", threads=_max_threads(rs, "membw", "read"))
    if read:
        lines.append(f"memory   read bandwidth, {read['params'].get('threads')} threads: {read['value']:,.0f} MB/s")
    lat = [(lvl, _pick(rs, "memlat", f"{lvl}_latency")) for lvl in ("l1", "l2", "l3", "dram")]
    parts = [f"{lvl.upper()} {r['value']:.1f} ns" for lvl, r in lat if r]
    if parts:
        lines.append("latency  " + ", ".join(parts))
    for lvl, r in lat:
        if r and lvl != "dram":
            implied, probe_size = r["params"].get("implied_size_bytes"), r["params"].get("probe_size_bytes")
            if implied and probe_size and not 0.25 <= implied / probe_size <= 4:
                findings.append(f"{lvl.upper()} behaves like {implied / 2**20:.1f} MiB, not the {probe_size / 2**20:.0f} MiB "
                                "the probe reports (a VM or container sees the host's cache, or it is shared)")
    if peak_all and triad_all and n:
        balance = peak_all["value"] * 1e9 / (triad_all["value"] * 1e6)
        lines.append(f"balance  {balance:.1f} flop per byte of memory traffic at peak (machine balance)")
    seen: set[str] = set()
    for r in rs:
        for w in r.get("warnings") or []:
            if w["code"] not in ("unstable",) and w["code"] not in seen:
                seen.add(w["code"])
                findings.append(f"{r['benchmark']}: {w['message']}; {w['remedy']}")
    unstable = sorted({r["benchmark"] for r in rs for w in r.get("warnings") or [] if w["code"] == "unstable"})
    if unstable:
        findings.append(f"unstable figures (CV > 5%) in {', '.join(unstable)}: other load or clock changes; "
                        "rerun on a quiet node or with --full")
    return {"lines": lines, "findings": findings}
