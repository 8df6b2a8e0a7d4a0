"""Did my change help? The pure analysis behind ``clusterbench compare A B``.

Everything here works on the store's dicts (``Store.get_run`` and ``Store.results``): no I/O, no
processes, no store access. The caller passes each benchmark's ``key_params`` as a mapping
(``{name: cls.key_params for name, cls in all_benchmarks().items()}``) so the module stays pure.

Method (also in :data:`METHOD`, which the CLI and the report print):

* A figure is identified by (benchmark, metric, the benchmark's key parameters). The samples of
  every run on a side are pooled. A key parameter that takes one value on side A and another single
  value on side B (``--threads 1`` against ``--threads 2``) is the change under test: figures are
  matched ignoring it and the match records it (``threads 1 -> 2``).
* Ratio = median(B) / median(A), with a 95% percentile bootstrap interval of that ratio of medians
  (each side resampled with replacement within each of its runs; pure-Python ``random`` with a fixed
  seed, so the same inputs always give the same report). Past :data:`BOOTSTRAP_SIMULATE_MAX` samples a
  side the resampled medians are drawn from their computed distribution (:func:`median_distribution`)
  rather than by resampling every sample, which cost minutes per figure for 1500 runs a side.
* Only complete runs are pooled into a side (:func:`poolable`): the caller leaves out runs still
  running or left incomplete, and names them, unless asked to include them.
* Two-sided Mann-Whitney U test on the pooled samples: the exact distribution when there are no
  ties and the samples are small (``n_a * n_b <= EXACT_MAX_CELLS``), else the normal approximation
  with tie and continuity correction.
* Samples taken within one run share that run's clock, placement, page colouring and the other
  programs running beside it, so two runs of the same configuration differ by more than their
  within-run spread. Measured on a shared 2-vCPU VM (20 identical ``run fpu`` runs): medians of
  identical runs differed by up to 70% under other people's load, with within-run CVs of 1-5%;
  a rule on within-run samples alone (p < alpha, interval excluding 1, CV at most 10%) with a
  minimum effect of 1% to 30% called 30% to 98% of pairs of identical single runs different.
  The run is therefore the unit of replication: when the samples are labelled with their runs
  (as :func:`match_figures` does), each side needs at least 2 runs, and a two-sided Student
  t-test (pooled variance) on the logarithms of the run medians must be significant too.
  Unlabelled samples are taken as independent replicates (pyperf's values from separate processes).
* Many figures are judged at once (a node profile has ~100): :func:`compare` adjusts the p-values
  over all judged figures with the Benjamini-Hochberg step-up method (``adjust="holm"`` for Holm's),
  so the chance that identical configurations show ANY "better"/"worse" stays at most alpha, not
  alpha per figure, while a change that moves many figures keeps its power.
* ``change_pct`` is signed in the metric's own direction: positive is better (a bandwidth up, a
  latency down). For a lower-is-better metric it is ``(1 - ratio) * 100``.

Verdict rule. "cannot judge" when a side has a single sample; when the sample sizes cannot reach
``p < alpha`` at all (smallest possible two-sided p = 2 / C(n_a + n_b, n_a), e.g. 0.1 for 3 vs 3);
when the CV (stdev / mean) of unlabelled samples on a side exceeds ``max_cv`` (10%, pyperf's
threshold; with run labels the median of the runs' own CVs above it is only a warning, "noisy-runs":
the run t-test sees that noise in the run medians); when a median is not positive; or when run-labelled samples have one run on a side.
Otherwise "better"/"worse" only if ALL of: the bootstrap interval of the ratio excludes 1;
``|ratio - 1| >= min_effect`` (1%); and the decisive p, the larger of the Mann-Whitney p and the
run t-test p (adjusted across the figures in :func:`compare`, Benjamini-Hochberg), is below alpha (0.05). Else
"no significant difference".
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from clusterbench.analysis.envdiff import EnvChange, env_diff
from clusterbench.analysis.matching import Match, Unmatched, match_figures, pool
from clusterbench.analysis.stats import BOOTSTRAP_SIMULATE_MAX, DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED
from clusterbench.analysis.verdict import (ADJUSTMENTS, BETTER, DEFAULT_ALPHA, DEFAULT_MAX_CV, DEFAULT_MIN_EFFECT, SAME,
                                           UNKNOWN, VERDICTS, WORSE)
from clusterbench.benchmarks.declare import Result
from clusterbench.errors import UsageError
from clusterbench.records import Run

#: the verdicts (from :mod:`.verdict`) are part of this module's public face: callers read them here
__all__ = ["BETTER", "WORSE", "SAME", "UNKNOWN", "VERDICTS", "COMPARE_SCHEMA", "METHOD", "Comparison", "compare",
           "poolable", "left_out_reason", "left_out_text", "POOLED_STATUS"]

#: version of the ``Comparison.as_dict()`` document, under the key ``compare_schema``
COMPARE_SCHEMA = 1

METHOD = (
    "ratio = median(B)/median(A) with a 95% percentile bootstrap interval of the ratio of medians "
    f"({DEFAULT_RESAMPLES} resamples within each run, fixed seed; past {BOOTSTRAP_SIMULATE_MAX} samples a side, each "
    "side's resampled "
    "median drawn from its computed distribution); two-sided Mann-Whitney U on the pooled samples "
    "(exact without ties for small samples, else normal approximation with tie correction); the run is the "
    "unit of replication: each side needs 2 or more runs, and a two-sided t-test on the log run medians must "
    "agree; p-values adjusted over all figures compared (Benjamini-Hochberg). Better/worse only if the larger of the two "
    f"p-values, adjusted, is below alpha (0.05), the interval excludes 1 and the change is at least "
    f"{DEFAULT_MIN_EFFECT:.0%}. Cannot judge: one run or one sample on a side, sample sizes that cannot reach "
    f"p < alpha (3 vs 3: smallest p 0.1), or, for samples not labelled with runs, a side's CV above {DEFAULT_MAX_CV:.0%} (with runs: a warning). change_pct is positive "
    "when B is better (higher for higher-is-better metrics, lower otherwise)."
)


# --------------------------------------------------------------------------- which runs may be pooled


#: the only status whose runs are pooled into a side without --include-incomplete
POOLED_STATUS = "complete"


def left_out_reason(run: Run, figures: int | None = None) -> str:
    """Why a run is not pooled, in a few words: still running, or incomplete with its stored reason
    (interrupted, a kernel that failed, its process killed)."""
    so_far = "" if figures is None else f", {figures} figure(s) so far" if run.status == "running" \
        else f", {figures} figure(s) stored"
    if run.status == "running":
        return f"still running (pid {run.pid} on {run.host}{so_far})"
    why = str(run.error or "").strip()
    return f"{run.status or 'unknown status'}{so_far}" + (f": {why}" if why else "")


def poolable(runs: Sequence[Run], figures: Mapping[str, int] | None = None, *,
             include_incomplete: bool = False) -> tuple[list[Run], list[dict[str, Any]]]:
    """Which runs of a selector may be pooled into one side (``compare``, and the sources and the
    comparison of ``report``): the complete ones. A run still running, or left incomplete (Ctrl-C, a
    kernel that failed, its process killed), holds only part of its figures, measured under
    conditions nobody chose: pooled silently it weighs a side with what it happened to finish. With
    ``include_incomplete`` every run is pooled. ``figures`` (run id -> figures stored) goes into
    the reason. Returns ``(pooled, left_out)``; each left-out entry is ``{id, status, error,
    figures, reason}``, in the order given."""
    pooled: list[Run] = []
    left: list[dict[str, Any]] = []
    for run in runs:
        if include_incomplete or run.status == POOLED_STATUS:
            pooled.append(run)
            continue
        n = None if figures is None else figures.get(str(run.id))
        left.append({"id": run.id, "status": run.status, "error": run.error, "figures": n,
                     "reason": left_out_reason(run, n)})
    return pooled, left


def left_out_text(left: Sequence[Mapping[str, Any]], most: int = 3) -> str:
    """``2 run(s) not complete: 8c3a1d2e still running (...); 1d2e3f4a incomplete: ...``"""
    shown = "; ".join(f"{str(x.get('id'))[:8]} {x.get('reason')}" for x in left[:most])
    return f"{len(left)} run(s) not complete: {shown}" + (f"; and {len(left) - most} more" if len(left) > most else "")


# --------------------------------------------------------------------------- the whole comparison


@dataclass(frozen=True)
class Comparison:
    """``compare A B``: the sides' runs, the figures matched and compared (verdicts adjusted over
    all figures, Benjamini-Hochberg by default), the figures on one side only, what else changed, a count per
    verdict and ``worst_change_pct``: the most negative change among figures judged "worse" (None
    when nothing got significantly worse), for ``--fail-if-worse PCT``."""

    runs_a: tuple[str, ...]
    runs_b: tuple[str, ...]
    matches: tuple[Match, ...]
    only_a: tuple[Unmatched, ...]
    only_b: tuple[Unmatched, ...]
    env: tuple[EnvChange, ...]
    options: dict

    @property
    def summary(self) -> dict[str, int]:
        counts = {v: 0 for v in VERDICTS}
        for m in self.matches:
            if m.comparison is not None:
                counts[m.comparison.verdict] += 1
        return counts

    @property
    def worst_change_pct(self) -> float | None:
        worse = [m.comparison.change_pct for m in self.matches if m.comparison and m.comparison.verdict == WORSE]
        return min(worse) if worse else None

    def worse_than(self, pct: float) -> list[Match]:
        """Figures significantly worse by at least ``pct`` percent (``--fail-if-worse PCT``)."""
        return [m for m in self.matches
                if m.comparison and m.comparison.verdict == WORSE and m.comparison.change_pct <= -abs(pct)]

    def as_dict(self) -> dict[str, Any]:
        return {"compare_schema": COMPARE_SCHEMA, "method": METHOD, "options": dict(self.options),
                "runs_a": list(self.runs_a), "runs_b": list(self.runs_b), "summary": self.summary,
                "worst_change_pct": self.worst_change_pct, "env": [e.as_dict() for e in self.env],
                "matches": [m.as_dict() for m in self.matches], "only_a": [u.as_dict() for u in self.only_a],
                "only_b": [u.as_dict() for u in self.only_b]}


def _side_results(runs: Sequence[Run], results: Any) -> list[Result]:
    """Results of a side, each tagged with its ``run_id``: ``results`` is ``{run_id: [result, ...]}``,
    a list parallel to ``runs`` (one list of results per run), or a flat list already pooled."""
    if isinstance(results, Mapping):
        return pool(results)
    results = list(results)
    if results and all(isinstance(r, Result) for r in results):
        return results
    if len(results) != len(runs):
        raise ValueError("results: one list per run, in the order of the runs")
    return pool([(str(run.id), res) for run, res in zip(runs, results)])


def _benchmarks(results: Sequence[Result]) -> str:
    names = sorted({r.benchmark for r in results})
    return ", ".join(names) if names else "no results"


def compare(runs_a: Sequence[Run], results_a: Any, runs_b: Sequence[Run], results_b: Any,
            key_params_by_benchmark: Mapping[str, Sequence[str]], **opts: Any) -> Comparison:
    """Compare side A (before) with side B (after). ``runs_*`` are runs (``Store.get_run``),
    ``results_*`` their results (``Store.results``) as ``{run_id: results}`` or one list per run.
    ``opts`` (alpha, confidence, min_effect, max_cv, resamples, seed) go to
    :func:`compare_samples`; the figures' verdicts are then adjusted together (``adjust``: "bh", :func:`benjamini_hochberg`, or "holm").
    Raises :class:`UsageError` when the sides have no figure in common."""
    side_a, side_b = _side_results(runs_a, results_a), _side_results(runs_b, results_b)
    adjust = opts.pop("adjust", "bh")
    if adjust not in ADJUSTMENTS:
        raise UsageError(f"unknown p-value adjustment {adjust!r}", f"use one of {', '.join(ADJUSTMENTS)}")
    matches, only_a, only_b = match_figures(side_a, side_b, key_params_by_benchmark, **opts)
    if not matches:
        raise UsageError(
            f"nothing to compare: side A has {_benchmarks(side_a)}, side B has {_benchmarks(side_b)}",
            "compare runs of the same benchmark (`clusterbench results list` shows each run's command)")
    adjusted = ADJUSTMENTS[adjust]([m.comparison for m in matches if m.comparison is not None])
    matches = [replace(m, comparison=c) for m, c in zip(matches, adjusted)]
    options = {"alpha": DEFAULT_ALPHA, "confidence": DEFAULT_CONFIDENCE, "min_effect": DEFAULT_MIN_EFFECT,
               "max_cv": DEFAULT_MAX_CV, "resamples": DEFAULT_RESAMPLES, "seed": DEFAULT_SEED,
               "multiple_comparisons": adjust, **opts}
    return Comparison(
        runs_a=tuple(str(r.id) for r in runs_a), runs_b=tuple(str(r.id) for r in runs_b),
        matches=tuple(matches), only_a=tuple(only_a), only_b=tuple(only_b),
        env=tuple(env_diff(runs_a, runs_b, side_a, side_b)), options=options)
