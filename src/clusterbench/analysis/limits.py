"""The limits a figure is judged against: theoretical (Rpeak) and measured (best seen).

Each entry of :data:`LIMITS` takes the run context and a result and returns
``(value, description)`` or ``None`` when the limit is unknown here. Benchmarks name the limits
a metric is judged against in its declaration (``Metric.limits``), and the measured limits a
metric feeds (``Metric.provides``: peak's gflops feeds ``measured_peak``, every memory-bandwidth
metric feeds ``best_bandwidth``); the registry hands those providers to :func:`judge`, so this
module names no benchmark. A figure flagged as running from cache (``params.in_cache``, or a
``small-arrays`` warning on a stored one) never feeds a memory limit.

A limit's ``fraction`` is how close the figure comes to it, 1 at the limit: value / limit for a
higher-is-better figure, limit / value for a lower-is-better one (a time against the least time
the limit allows, e.g. a collective's latency against its network model: the model efficiency).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Optional

from clusterbench.analysis import collmodel

if TYPE_CHECKING:
    from clusterbench.benchmarks.base import Result, RunContext

#: limit name -> the (benchmark, metric) pairs whose figures feed it, from the declarations
Providers = dict[str, set[tuple[str, str]]]
LimitFn = Callable[["RunContext", "Result", Providers], Optional[tuple[float, str]]]
LIMITS: dict[str, LimitFn] = {}


def limit(name: str) -> Callable[[LimitFn], LimitFn]:
    def deco(fn: LimitFn) -> LimitFn:
        LIMITS[name] = fn
        return fn
    return deco


def _ncores(res: "Result") -> int:
    p = res.params
    for key in ("threads", "processes", "cores"):
        if isinstance(p.get(key), int) and p[key] > 0:
            return p[key]
    return 1


def _rpeak_of_cpus(ctx: "RunContext", cpus: Sequence[int] | None, n: int, key: str) -> float | None:
    """Rpeak (``key`` e.g. ``dp_gflops_nominal``) of the cpus used: summed per core kind where
    the cores differ (a kind's figure covers all its cores, so it is divided by their count),
    else per_core x n."""
    rp = ctx.probe.get("rpeak") or {}
    kinds = rp.get("per_kind") or []
    topo_cpus = {c["pu"]: c for c in (ctx.probe.get("topology") or {}).get("cpus", [])}
    if cpus and len(kinds) > 1:
        by_kind = {k.get("kind"): (k[key] / k["cores"] if k.get(key) and k.get("cores") else None) for k in kinds}
        vals = [by_kind.get((topo_cpus.get(c) or {}).get("kind")) for c in cpus]
        if all(v is not None for v in vals):
            return float(sum(vals))  # type: ignore[arg-type]
    per_core = (rp.get("per_core") or {}).get(key)
    return float(per_core) * n if per_core else None


def _rpeak_limit(key: str, label: str) -> LimitFn:
    def fn(ctx: "RunContext", res: "Result", providers: Providers) -> tuple[float, str] | None:
        n = _ncores(res)
        val = _rpeak_of_cpus(ctx, res.params.get("cpus"), n, key)
        if val is None:
            return None
        return val, f"Rpeak, {label}, {n} core{'s' if n > 1 else ''}"
    fn.__doc__ = f"Theoretical peak ({label}) of the cores used."
    return fn


LIMITS["rpeak"] = _rpeak_limit("dp_gflops_nominal", "DP, nominal clock")
LIMITS["rpeak_max"] = _rpeak_limit("dp_gflops_max", "DP, maximum clock")
LIMITS["rpeak_sp"] = _rpeak_limit("sp_gflops_nominal", "SP, nominal clock")


def in_cache(params: dict, warnings: Sequence[dict] = ()) -> bool:
    """A memory figure that ran (partly) from cache: flagged by its benchmark, or, stored by an
    older version, carrying the small-arrays warning."""
    return bool(params.get("in_cache")) or any(w.get("code") == "small-arrays" for w in warnings or ())


def _best(ctx: "RunContext", pairs: set[tuple[str, str]], match: Callable[[dict], bool],
          memory: bool = False) -> float | None:
    best: float | None = None
    for r in ctx.results:
        if (r.benchmark, r.metric) in pairs and match(r.params) and not (memory and in_cache(r.params, r.warnings)):
            best = r.value if best is None else max(best, r.value)
    if ctx.history:
        for bench, metric in pairs:
            for h in ctx.history(bench, metric):
                if memory and in_cache(h.params or {}, h.warnings or ()):
                    continue
                if match(h.params or {}):
                    v = float(h.value)
                    best = v if best is None else max(best, v)
    return best


@limit("measured_peak")
def measured_peak(ctx: "RunContext", res: "Result", providers: Providers) -> tuple[float, str] | None:
    """Best FMA-peak measured on this host with as many cores (this run, then the store)."""
    n = _ncores(res)
    best = _best(ctx, providers.get("measured_peak", set()), lambda p: p.get("threads") == n)
    if best is None:
        return None
    return best, f"measured peak (FMA kernel), {n} core{'s' if n > 1 else ''}"


@limit("best_bandwidth")
def best_bandwidth(ctx: "RunContext", res: "Result", providers: Providers) -> tuple[float, str] | None:
    """Best memory bandwidth measured on this host with the same thread count; none for a
    figure that ran from cache (it is not a memory figure)."""
    if in_cache(res.params, res.warnings):
        return None
    n = _ncores(res)
    pairs = providers.get("best_bandwidth", set()) | {(res.benchmark, res.metric)}
    best = _best(ctx, pairs, lambda p: p.get("threads") == n, memory=True)
    best = max(best or 0.0, res.value)
    return best, f"best memory bandwidth measured here, {n} thread{'s' if n > 1 else ''}"


@limit("stream_bound")
def stream_bound(ctx: "RunContext", res: "Result", providers: Providers) -> tuple[float, str] | None:
    """A bandwidth-bound figure's ceiling (HPCG): the best STREAM triad measured here with as many
    threads as the figure's processes (MB/s) times the flops per byte it records
    (``params.credited_flops_per_set / params.bytes_per_set``), in GFLOP/s."""
    p = res.params
    if not p.get("credited_flops_per_set") or not p.get("bytes_per_set"):
        return None
    n = _ncores(res)
    triads = {pair for pair in providers.get("best_bandwidth", set()) if pair[1] == "triad"}
    best = _best(ctx, triads, lambda q: q.get("threads") == n, memory=True)
    if best is None:
        return None
    return (best * 1e6 * p["credited_flops_per_set"] / p["bytes_per_set"] / 1e9,
            f"STREAM triad measured here ({n} thread{'s' if n > 1 else ''}) x flops per byte")


@limit("dram_theoretical")
def dram_theoretical(ctx: "RunContext", res: "Result", providers: Providers) -> tuple[float, str] | None:
    """Channels x transfer rate x 8 B, where the probe could read the DIMMs."""
    mem = ctx.probe.get("memory") or {}
    val = mem.get("theoretical_bandwidth_mbs")
    if not val:
        return None
    return float(val), "theoretical DRAM bandwidth (channels x MT/s x 8 B)"


@limit("collective_model")
def collective_model(ctx: "RunContext", res: "Result", providers: Providers) -> tuple[float, str] | None:
    """An MPI collective figure (the collective's record: ``params.op``, ``size_bytes``, ``processes`` and
    the ``p2p`` ping-pong sweep of the same run) against the network model fitted on that sweep
    (:mod:`clusterbench.analysis.collmodel`): for ``latency`` the least time of the standard
    algorithms (us), for ``algbw``/``busbw`` the bandwidth that time gives (``params.algbw_bytes`` /
    time, x ``params.busbw_factor`` for busbw). Either way the fraction is the model efficiency,
    model time / measured time. None for a non-blocking figure or without a usable sweep."""
    got = collmodel.model_time(res.params)
    if got is None:
        return None
    name, us, model = got
    desc = f"network model, {name} on {res.params['processes']} ranks: {model.describe()}"
    if res.metric == "latency":
        return us, desc
    nbytes = res.params.get("algbw_bytes")
    if res.metric in ("algbw", "busbw") and isinstance(nbytes, (int, float)) and nbytes > 0:
        factor = res.params.get("busbw_factor", 1.0) if res.metric == "busbw" else 1.0
        if isinstance(factor, (int, float)) and factor > 0:
            return nbytes / us * factor, desc
    return None


@limit("link_rate")
def link_rate(ctx: "RunContext", res: "Result", providers: Providers) -> tuple[float, str] | None:
    """The rate of the link a network figure crossed, in Mbit/s, as the benchmark recorded it in
    ``params["link_rate_mbits"]`` (a sim-cluster's tc tbf rate, or the NIC speed from the probe)."""
    val = res.params.get("link_rate_mbits")
    if not val:
        return None
    return float(val), str(res.params.get("link_rate_source") or "link rate")


def judge(ctx: "RunContext", res: "Result", names: Sequence[str], providers: Providers | None = None) -> list[dict]:
    """Evaluate the named limits; unknown ones are skipped (never guessed). ``providers``: for
    each measured limit, the (benchmark, metric) pairs that feed it."""
    out = []
    for name in names:
        got = LIMITS[name](ctx, res, providers or {})
        if got is None:
            continue
        value, desc = got
        if value and value > 0:
            frac = res.value / value if res.higher_is_better or not res.value else value / res.value
            out.append({"name": name, "description": desc, "value": value, "fraction": frac})
    return out
