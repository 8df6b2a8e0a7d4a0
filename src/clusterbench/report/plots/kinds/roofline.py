"""A roofline per host: its FMA peak and STREAM bandwidth, with STREAM, DGEMM and HPL at their intensity."""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from clusterbench.report.plots.base import PlotKind, PlotSpec, Source, register
from clusterbench.report.plots.common import STREAM_INTENSITY, STREAM_KERNELS, best_by, is_square, number, of, plural


def _dgemm_intensity(p: Mapping) -> float | None:
    n, k = number(p.get("n")), number(p.get("k"))
    m = number(p.get("m")) or n
    if not (n and m):
        return None
    k = k or n
    assert k is not None
    return 2 * m * n * k / (8 * (m * k + k * n + 2 * m * n))


@register
class Roofline(PlotKind):
    kind = "roofline"
    order = 60
    size = (9.0, 5.0)

    def plan(self, sources: list[Source], comparison: Any = None) -> list[PlotSpec]:
        """A roof per host: its best measured FMA peak and STREAM bandwidth (at the most threads)."""
        hosts = list(dict.fromkeys(s.host for s in sources))
        out: list[PlotSpec] = []
        for host in hosts:
            srcs = [s for s in sources if s.host == host]
            rs = [r for s in srcs for r in s.results]
            peaks = of(rs, "peak", "gflops")
            bws = [r for r in of(rs, "stream", *STREAM_KERNELS) if isinstance(r.params.get("threads"), int)]
            if not peaks or not bws:
                continue
            tmax = max(r.params.get("threads") or 0 for r in peaks)
            peak = max(r.value for r in peaks if (r.params.get("threads") or 0) == tmax)
            bmax = max(r.params["threads"] for r in bws)
            bw = max(r.value for r in bws if r.params["threads"] == bmax) / 1e3  # MB/s -> GB/s
            points = []
            for metric, ai in STREAM_INTENSITY.items():
                best = [r for r in bws if r.metric == metric and r.params["threads"] == bmax]
                if best:
                    points.append({"label": f"STREAM {metric}, {plural(bmax, 'thread')}", "ai": ai,
                                   "gflops": max(r.value for r in best) / 1e3 * ai})
            square = [r for r in of(rs, "dgemm", "gflops") if is_square(r)]
            for (mode, t), r in best_by(square, lambda r: (r.params.get("mode"), r.params.get("threads")
                                                            or r.params.get("processes"))).items():
                dai = _dgemm_intensity(r.params)
                if dai:
                    points.append({"label": f"DGEMM {mode}, {plural(t, 'core')}, n={r.params.get('n')}", "ai": dai,
                                   "gflops": r.value})
            local = [r for r in of(rs, "hpl", "rmax") if r.params.get("hosts") in (None, [], [host])]
            hpl = best_by(local, lambda r: r.params.get("n"))
            for n, r in hpl.items():
                if number(n):
                    points.append({"label": f"HPL N={n}", "ai": float(n) / 24, "gflops": r.value})
            out.append(PlotSpec("roofline", f"roofline-{len(out) + 1}", f"Roofline of {host}",
                                f"The roof: min(peak, intensity x bandwidth) with the measured FMA peak ({peak:.1f} "
                                f"Gflop/s, {tmax} cores) and STREAM bandwidth ({bw:.1f} GB/s, {bmax} threads). Points at "
                                "the intensity of each kernel's compulsory memory traffic: STREAM's own byte counts, "
                                "DGEMM 8(mk+kn+2mn) B, HPL 16 N^2 B (so real traffic is higher, intensity lower).",
                                {"peak": peak, "bw": bw, "points": points, "host": host}))
        return out

    def draw(self, data: dict, fig: Any) -> None:
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
