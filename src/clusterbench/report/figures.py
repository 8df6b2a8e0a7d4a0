"""The headline figures of a report's source: per (benchmark, metric) the best figure with its
identifying parameters, unit and fraction of its limit (and, for pooled runs, the median of the runs'
best). Figures as text go through :func:`clusterbench.units.format_value`, so a figure reads the same
here as after ``run``, ``compare`` and ``sweep``."""
from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping

from clusterbench.benchmarks.declare import Result
from clusterbench.units import format_value


def _key_params() -> dict[str, tuple[str, ...]]:
    try:
        from clusterbench.benchmarks import all_benchmarks

        return {name: tuple(b.key_params) for name, b in all_benchmarks().items()}
    except Exception:  # noqa: BLE001 - a benchmark module that fails to import must not cost the report
        return {}


def _params_text(r: Result, keys: Mapping[str, tuple[str, ...]]) -> str:
    p = r.params or {}
    names = keys.get(r.benchmark or "") or ("threads", "size_bytes", "n", "nb", "grid")
    return ", ".join(f"{k}={p[k]}" for k in names if k in p and p[k] is not None and not isinstance(p[k], (dict, list)))


def _limit_text(r: Result) -> str:
    lim = r.limit or next(iter(r.limits or []), None)
    if not isinstance(lim, Mapping) or not isinstance(lim.get("fraction"), (int, float)):
        return ""
    value = lim.get("value")
    return (f"{lim['fraction']:.0%} of {lim.get('description') or lim.get('name') or 'its limit'}"
            + (f" ({format_value(value)})" if isinstance(value, (int, float)) else ""))


def headline_figures(results: Iterable[Result]) -> list[dict]:
    """One row per (benchmark, metric), in the order they were measured: the best figure (by the
    metric's direction) with its identifying parameters, unit and fraction of its limit. Results of
    several pooled runs (each with its ``run_id``) also give ``runs`` (how many) and ``median``: the
    median over the runs of each run's best figure (the best of many repeats flatters)."""
    best: dict[tuple[str, str], Result] = {}
    per_run: dict[tuple[str, str], dict[str, float]] = {}
    for r in results:
        if not isinstance(r.value, (int, float)) or isinstance(r.value, bool):
            continue
        k = (str(r.benchmark), str(r.metric))
        hib = bool(r.higher_is_better)
        old = best.get(k)
        if old is None or (r.value != old.value and (r.value > old.value) == hib):
            best[k] = r
        run_id = getattr(r, "run_id", None)  # a StoredFigure's (pooled runs)
        if run_id is not None:
            runs = per_run.setdefault(k, {})
            prev = runs.get(run_id)
            runs[run_id] = r.value if prev is None else (max if hib else min)(prev, r.value)
    keys = _key_params()
    out = []
    for k, r in best.items():
        row = {"benchmark": r.benchmark, "metric": r.metric, "params": _params_text(r, keys),
               "value": format_value(r.value), "unit": r.unit or "", "limit": _limit_text(r),
               "direction": "higher is better" if r.higher_is_better else "lower is better"}
        values = sorted((per_run.get(k) or {}).values())
        if len(values) > 1:
            row["runs"] = len(values)
            row["median"] = format_value(statistics.median(values))
        out.append(row)
    return out


__all__ = ["format_value", "headline_figures"]
