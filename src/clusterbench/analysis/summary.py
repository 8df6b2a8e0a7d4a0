"""The headline of a run: how fast, how close to the limit, and what holds it back.

Pure: works on :class:`Result` objects, fresh from a run or read back from the store alike. The
rules themselves are declared by the benchmarks (``Benchmark.headlines`` and ``Benchmark.findings``:
small functions from results to lines, built with the helpers here); :func:`summarize` runs the rules it is given and adds the
findings every run shares (warnings with their remedies, unstable figures). Every line names its
figure, unit and the limit it is judged by.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from clusterbench.benchmarks.declare import Result

#: a summary rule: results -> lines (headline figures, or findings)
Rule = Callable[[list[Result]], list[str]]


def pick(results: list[Result], bench: str, metric: str, **match: object) -> Result | None:
    """The best result of one metric whose params match (max or min by its direction)."""
    cands = [r for r in results if r.benchmark == bench and r.metric == metric
             and all(r.params.get(k) == v for k, v in match.items())]
    if not cands:
        return None
    return (max if cands[0].higher_is_better else min)(cands, key=lambda r: r.value)


def max_threads(results: list[Result], bench: str, metric: str) -> int | None:
    ts = [r.params.get("threads") for r in results if r.benchmark == bench and r.metric == metric]
    ts = [t for t in ts if isinstance(t, int)]
    return max(ts) if ts else None


def limit_text(r: Result, name: str | None = None) -> str:
    """`` = 80% of <limit> (value)`` for the named limit (or the first), else empty."""
    lims = r.limits or ([r.limit] if r.limit else [])
    for lim in lims:
        if name is None or lim["name"] == name:
            return f" = {lim['fraction']:.0%} of {lim['description']} ({lim['value']:,.1f})"
    return ""


def limit_fraction(r: Result, name: str) -> float | None:
    return next((lim["fraction"] for lim in r.limits or [] if lim["name"] == name), None)


def summarize(results: Iterable[Result], headlines: Sequence[Rule] = (), findings: Sequence[Rule] = ()) -> dict:
    """``{"lines": [...], "findings": [...]}``: the rules' headline figures and diagnoses, then
    each warning code once with its remedy, then which benchmarks gave unstable figures."""
    rs = list(results)
    lines = [line for rule in headlines for line in rule(rs)]
    found = [f for rule in findings for f in rule(rs)]
    seen: set[str] = set()
    for r in rs:
        for w in r.warnings or []:
            if w["code"] not in ("unstable",) and w["code"] not in seen:
                seen.add(w["code"])
                found.append(f"{r.benchmark}: {w['message']}; {w['remedy']}")
    unstable = sorted({r.benchmark for r in rs for w in r.warnings or [] if w["code"] == "unstable"})
    if unstable:
        found.append(f"unstable figures (CV > 5%) in {', '.join(unstable)}: other load or clock changes; "
                     "rerun on a quiet node or with --full")
    return {"lines": lines, "findings": found}
