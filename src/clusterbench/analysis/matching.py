"""Which figures of side A and side B are the same figure: matching by benchmark, metric and key
parameters, with the one parameter varied between the sides recorded (the change under test). Pure."""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterbench.analysis.verdict import SampleComparison, compare_samples
from clusterbench.benchmarks.declare import Result
from clusterbench.records import StoredFigure, with_run

def _hashable(v: Any) -> Any:
    if isinstance(v, (dict, list, tuple, set)):
        return json.dumps(v, sort_keys=True, default=str)
    return v


def _scalar_params(params: Mapping[str, Any]) -> tuple[str, ...]:
    """Identifying params of a benchmark whose key_params are unknown: its non-float scalars
    (floats in params are measured values, e.g. a clock, that differ from run to run)."""
    return tuple(sorted(k for k, v in params.items() if isinstance(v, (str, int, bool)) or v is None))


def pool(results_per_run: Mapping[str, Sequence[Result]] | Iterable[tuple[str, Sequence[Result]]]
         ) -> list[StoredFigure]:
    """One side's results from several runs, as one list of figures, each carrying the id of its run
    (results from the store do not). Give ``{run_id: results}`` or ``[(run_id, results), ...]``."""
    items = results_per_run.items() if isinstance(results_per_run, Mapping) else results_per_run
    return [with_run(r, run_id) for run_id, results in items for r in results]


@dataclass(frozen=True)
class Match:
    """One figure found on both sides. ``params`` are its identifying key params (the varied ones
    left out), ``varied`` the key params that changed between the sides, ``{name: (a, b)}``;
    ``samples_a``/``samples_b`` the pooled samples and ``sample_runs_a``/``sample_runs_b`` the run
    id of each; ``runs_a``/``runs_b`` the distinct run ids; ``comparison`` the verdict."""

    benchmark: str
    metric: str
    unit: str | None
    higher_is_better: bool
    params: dict
    varied: dict
    samples_a: tuple[float, ...]
    samples_b: tuple[float, ...]
    sample_runs_a: tuple[str, ...]
    sample_runs_b: tuple[str, ...]
    runs_a: tuple[str, ...]
    runs_b: tuple[str, ...]
    comparison: SampleComparison | None = None

    @property
    def label(self) -> str:
        """``stream triad variant=regular threads=1 (threads 1 -> 2)``"""
        parts = [self.benchmark, self.metric, *(f"{k}={v}" for k, v in self.params.items() if v is not None)]
        if self.varied:
            parts.append("(" + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in self.varied.items()) + ")")
        return " ".join(str(p) for p in parts)

    def as_dict(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "metric": self.metric, "unit": self.unit,
                "higher_is_better": self.higher_is_better, "params": dict(self.params),
                "varied": {k: [a, b] for k, (a, b) in self.varied.items()}, "label": self.label,
                "samples_a": list(self.samples_a), "samples_b": list(self.samples_b),
                "sample_runs_a": list(self.sample_runs_a), "sample_runs_b": list(self.sample_runs_b),
                "runs_a": list(self.runs_a), "runs_b": list(self.runs_b),
                "comparison": self.comparison.as_dict() if self.comparison else None}


@dataclass(frozen=True)
class Unmatched:
    """A figure found on one side only (``side`` "a" or "b")."""

    side: str
    benchmark: str
    metric: str
    params: dict
    runs: tuple[str, ...]

    @property
    def label(self) -> str:
        return " ".join([self.benchmark, self.metric, *(f"{k}={v}" for k, v in self.params.items()
                                                        if v is not None)])

    def as_dict(self) -> dict[str, Any]:
        return {"side": self.side, "benchmark": self.benchmark, "metric": self.metric,
                "params": dict(self.params), "label": self.label, "runs": list(self.runs)}


@dataclass
class _Figure:
    result: Result
    samples: list[float] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)


def _key_params(bench: str, results: Sequence[Result], key_params_by_benchmark: Mapping[str, Sequence[str]]
                ) -> tuple[str, ...]:
    if bench in key_params_by_benchmark:
        return tuple(key_params_by_benchmark[bench])
    names: set[str] = set()
    for r in results:
        names.update(_scalar_params(r.params or {}))
    return tuple(sorted(names))


def _varied(bench: str, keys: Sequence[str], side_a: Sequence[Result], side_b: Sequence[Result]) -> dict:
    """Key params with one value on side A and a different single value on side B."""
    out = {}
    for k in keys:
        va = {_hashable((r.params or {}).get(k)) for r in side_a if r.benchmark == bench}
        vb = {_hashable((r.params or {}).get(k)) for r in side_b if r.benchmark == bench}
        if len(va) == 1 and len(vb) == 1 and va != vb:
            ra = next(r for r in side_a if r.benchmark == bench)
            rb = next(r for r in side_b if r.benchmark == bench)
            out[k] = ((ra.params or {}).get(k), (rb.params or {}).get(k))
    return out


def _collect(side: Sequence[Result], keys_by_bench: Mapping[str, tuple[str, ...]], varied: Mapping[str, dict],
             tag: str) -> dict[tuple, _Figure]:
    figures: dict[tuple, _Figure] = {}
    for i, r in enumerate(side):
        bench = r.benchmark
        params = r.params or {}
        ident = tuple((k, _hashable(params.get(k))) for k in keys_by_bench[bench] if k not in varied.get(bench, {}))
        fig = figures.setdefault((bench, r.metric, ident), _Figure(r))
        samples = [float(s) for s in (r.samples or [])]
        if not samples and r.value is not None:
            samples = [float(r.value)]  # no samples stored: the value is a single sample
        run = str(getattr(r, "run_id", "") or f"{tag}{i}")  # a result of no run counts as its own run
        fig.samples.extend(samples)
        fig.runs.extend([run] * len(samples))
    return figures


def _ident_params(keys: Sequence[str], varied: Mapping[str, Any], params: Mapping[str, Any]) -> dict:
    return {k: params.get(k) for k in keys if k not in varied}


def match_figures(side_a_results: Sequence[Result], side_b_results: Sequence[Result],
                  key_params_by_benchmark: Mapping[str, Sequence[str]], **opts: Any
                  ) -> tuple[list[Match], list[Unmatched], list[Unmatched]]:
    """Match the figures of two sides by (benchmark, metric, key params) and compare each.

    Each side is a list of results (:func:`pool` several runs first so each carries its
    ``run_id``). A key param with one value on A and another single value on B is the change under
    test: it is left out of the match and recorded in ``Match.varied``. A result without samples
    contributes its value as one sample. ``opts`` go to :func:`compare_samples`. Returns
    ``(matches, only_a, only_b)``; each match's comparison is for that figure alone (see
    :func:`compare` for the adjustment across figures)."""
    benches = {r.benchmark for r in side_a_results} | {r.benchmark for r in side_b_results}
    keys = {b: _key_params(b, [r for r in (*side_a_results, *side_b_results) if r.benchmark == b],
                           key_params_by_benchmark) for b in benches}
    varied = {b: _varied(b, keys[b], side_a_results, side_b_results) for b in benches}
    figs_a = _collect(side_a_results, keys, varied, "a")
    figs_b = _collect(side_b_results, keys, varied, "b")
    matches: list[Match] = []
    for ident, fa in figs_a.items():
        fb = figs_b.get(ident)
        if fb is None or not fa.samples or not fb.samples:
            continue
        bench, metric = ident[0], ident[1]
        hib = bool(fa.result.higher_is_better)
        comparison = compare_samples(fa.samples, fb.samples, hib, runs_a=fa.runs, runs_b=fb.runs, **opts)
        matches.append(Match(
            benchmark=bench, metric=metric, unit=fa.result.unit, higher_is_better=hib,
            params=_ident_params(keys[bench], varied[bench], fa.result.params or {}),
            varied=dict(varied[bench]), samples_a=tuple(fa.samples), samples_b=tuple(fb.samples),
            sample_runs_a=tuple(fa.runs), sample_runs_b=tuple(fb.runs),
            runs_a=tuple(dict.fromkeys(fa.runs)), runs_b=tuple(dict.fromkeys(fb.runs)), comparison=comparison))

    def unmatched(figs: dict, other: dict, side: str) -> list[Unmatched]:
        return [Unmatched(side, ident[0], ident[1],
                          _ident_params(keys[ident[0]], varied[ident[0]], f.result.params or {}),
                          tuple(dict.fromkeys(f.runs)))
                for ident, f in figs.items() if ident not in other or not f.samples or not other[ident].samples]

    return matches, unmatched(figs_a, figs_b, "a"), unmatched(figs_b, figs_a, "b")
