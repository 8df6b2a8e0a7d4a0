"""What several plot kinds share: picking results out of a source, and drawing limits and size axes.

The data half is pure; the drawing half takes a matplotlib axis and imports matplotlib inside.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from clusterbench.analysis.collmodel import OPS as COLL_OPS
from clusterbench.benchmarks.declare import Result
from clusterbench.report.plots.base import Source
from clusterbench.units import human_bytes

#: STREAM's flops per byte it counts: scale 1 flop / 16 B, add 1 / 24, triad 2 / 24 (copy has none)
STREAM_INTENSITY = {"scale": 1 / 16, "add": 1 / 24, "triad": 2 / 24}
STREAM_KERNELS = ("copy", "scale", "add", "triad")


# -- picking the data ---------------------------------------------------------------------------
def number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def of(results: Iterable[Result], bench: str, *metrics: str) -> list[Result]:
    return [r for r in results if r.benchmark == bench and r.metric in metrics and number(r.value) is not None]


def better(a: Result, b: Result) -> Result:
    """The better of two results of one metric (by its direction)."""
    if a.higher_is_better:
        return a if a.value >= b.value else b
    return a if a.value <= b.value else b


def best_by(results: Iterable[Result], key: Callable[[Result], Any]) -> dict[Any, Result]:
    out: dict[Any, Result] = {}
    for r in results:
        k = key(r)
        if k is None:
            continue
        out[k] = better(out[k], r) if k in out else r
    return out


def prefix(src: Source, many: bool, text: str) -> str:
    return f"{src.label}: {text}" if many else text


def limit_lines(results: Iterable[Result], names: tuple[str, ...] = ()) -> list[dict]:
    """Distinct limits of these results (by description), the largest of each name."""
    best: dict[str, dict] = {}
    for r in results:
        for lim in r.limits or ([r.limit] if r.limit else []):
            if not isinstance(lim, Mapping) or (names and lim.get("name") not in names):
                continue
            v = number(lim.get("value"))
            if v is None:
                continue
            name = str(lim.get("name") or "limit")
            if name not in best or v > best[name]["value"]:
                best[name] = {"label": str(lim.get("description") or name), "value": v}
    return list(best.values())


def node_rpeak(probe: Mapping) -> tuple[float | None, float | None]:
    """(node DP Rpeak, per-core DP Rpeak) in Gflop/s at the nominal clock, from the probe."""
    rp = probe.get("rpeak") or {}
    node = number((rp.get("node") or {}).get("dp_gflops_nominal"))
    core = number((rp.get("per_core") or {}).get("dp_gflops_nominal"))
    return node, core


def core_count(probe: Mapping) -> int | None:
    c = (probe.get("topology") or {}).get("cores")
    return c if isinstance(c, int) and c > 0 else None


def is_square(r: Result) -> bool:
    """A DGEMM of square matrices (not the tuner's k = NB sweep)."""
    k, n = r.params.get("k"), r.params.get("n")
    return k is None or k == n


def plural(n: Any, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def size_of(r: Result) -> float | None:
    return number(r.params.get("size_bytes"))


def coll_results(results: Iterable[Result], metric: str) -> list[Result]:
    """The collective figures of one metric (the contract's params: ``op`` is the benchmark's name)
    with a size on a log axis (barrier, 0 B, has none)."""
    return [r for r in results if r.metric == metric and r.params.get("op") == r.benchmark
            and r.benchmark in COLL_OPS and number(r.value) is not None and (size_of(r) or 0) > 0]


def coll_series_label(r: Result) -> str:
    """What tells one series of an op from another: ranks, non-blocking, a forced algorithm."""
    p = r.params
    label = f"{p.get('processes', '?')} ranks"
    if p.get("nonblocking"):
        label += ", non-blocking"
    alg = p.get("algorithm")
    if isinstance(alg, dict):
        label += f", algorithm {alg.get('value')}"
    return label


def rpeak_lines(srcs: list[Source]) -> list[dict]:
    out: list[dict] = []
    for node in dict.fromkeys(node_rpeak(s.probe)[0] for s in srcs):
        if node:
            out.append({"label": "Rpeak of the node (nominal clock)", "value": node})
    return out[:1]


# -- drawing --------------------------------------------------------------------------------------
def hlines(ax, limits: list[dict], colors: tuple[str, ...] = ("#d62728", "#9467bd", "#8c564b", "#7f7f7f")) -> None:
    for i, lim in enumerate(limits):
        ax.axhline(lim["value"], color=colors[i % len(colors)], linestyle="--", linewidth=1.2,
                   label=f"{lim['label']}: {lim['value']:,.1f}")


def log2_bytes_axis(ax) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=4))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: human_bytes(v)))


def size_panel(ax, series: list[dict], ylabel: str, title: str, limits: tuple[dict, ...] = ()) -> None:
    for s in series:
        ax.plot(s["x"], s["y"], marker=".", linestyle="--" if s.get("dashed") else "-", label=s["label"])
    hlines(ax, list(limits))
    log2_bytes_axis(ax)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes, log scale)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    if series or limits:
        ax.legend(fontsize=7)


__all__ = ["STREAM_INTENSITY", "STREAM_KERNELS", "best_by", "better", "coll_results", "coll_series_label", "core_count", "hlines", "human_bytes",
           "is_square", "limit_lines", "log2_bytes_axis", "node_rpeak", "number", "of", "plural", "prefix",
           "rpeak_lines", "size_of", "size_panel"]
