"""One figure, side B against side A: the verdict (better, worse, no significant difference, cannot
judge) from the samples, with the rule in :mod:`clusterbench.analysis.compare`'s docstring, and the
adjustment of p-values over many figures (Benjamini-Hochberg, Holm). Pure."""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from clusterbench.analysis.stats import (DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED, bootstrap_ratio, cv_of,
                                         mann_whitney, ratio_of, smallest_p, t_test)

BETTER, WORSE, SAME, UNKNOWN = "better", "worse", "no significant difference", "cannot judge"
VERDICTS = (BETTER, WORSE, SAME, UNKNOWN)

DEFAULT_ALPHA = 0.05
#: smallest change (fraction) that counts as a change at all
DEFAULT_MIN_EFFECT = 0.01
#: a side whose samples vary more than this (stdev / mean) is too noisy to judge (pyperf: 10%)
DEFAULT_MAX_CV = 0.10


@dataclass(frozen=True)
class SampleComparison:
    """B against A for one figure.

    ``ratio`` = median_b / median_a with its bootstrap interval ``[ci_low, ci_high]``;
    ``p_value`` the two-sided Mann-Whitney p on the pooled samples (``test`` "exact" or "normal");
    ``p_runs`` the run-level t-test p (None when the samples were not labelled with runs, or a side
    has a single run); ``p_adjusted`` the adjusted p that decided the verdict when
    :func:`compare` judged many figures together (None for a lone figure); ``change_pct`` is
    positive when B is better; ``effect_ok`` whether the interval excludes 1 and the change reaches
    ``min_effect``; ``verdict`` one of :data:`VERDICTS`; ``warnings`` dicts with code, message,
    remedy."""

    n_a: int
    n_b: int
    runs_a: int | None
    runs_b: int | None
    median_a: float
    median_b: float
    cv_a: float
    cv_b: float
    ratio: float
    ci_low: float
    ci_high: float
    confidence: float
    p_value: float
    test: str
    p_runs: float | None
    change_pct: float
    min_effect_pct: float
    alpha: float
    judgeable: bool
    effect_ok: bool
    verdict: str
    warnings: tuple[dict, ...] = ()
    p_adjusted: float | None = None

    @property
    def significant(self) -> bool:
        return self.verdict in (BETTER, WORSE)

    @property
    def p_decisive(self) -> float:
        """The p the verdict rests on: the larger of the sample test's and the run test's."""
        return self.p_value if self.p_runs is None else max(self.p_value, self.p_runs)

    def as_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["warnings"] = [dict(w) for w in self.warnings]
        for k in ("ratio", "ci_low", "ci_high", "change_pct"):  # inf is not JSON
            if isinstance(d[k], float) and not math.isfinite(d[k]):
                d[k] = None
        return d


def _warning(code: str, message: str, remedy: str) -> dict:
    return {"code": code, "message": message, "remedy": remedy}


def _verdict(judgeable: bool, effect_ok: bool, p: float, alpha: float, change: float) -> str:
    if not judgeable:
        return UNKNOWN
    if effect_ok and p < alpha:
        return BETTER if change > 0 else WORSE
    return SAME


def _groups(values: Sequence[float], labels: Sequence[Any] | None) -> list[list[float]]:
    if labels is None:
        return [list(values)]
    if len(labels) != len(values):
        raise ValueError("one run label per sample")
    groups: dict[Any, list[float]] = {}
    for v, lab in zip(values, labels):
        groups.setdefault(lab, []).append(v)
    return list(groups.values())


def _within_cv(groups: list[list[float]], pooled: list[float], labelled: bool) -> float:
    """The CV the noise gate judges: with run labels, the median of the runs' own CVs (runs of
    one sample do not count); without, the pooled samples' CV."""
    if labelled:
        per_run = [cv_of(g) for g in groups if len(g) > 1]
        if per_run:
            return statistics.median(per_run)
    return cv_of(pooled)


def compare_samples(a: Sequence[float], b: Sequence[float], higher_is_better: bool, *,
                    runs_a: Sequence[Any] | None = None, runs_b: Sequence[Any] | None = None,
                    alpha: float = DEFAULT_ALPHA, confidence: float = DEFAULT_CONFIDENCE,
                    min_effect: float = DEFAULT_MIN_EFFECT, max_cv: float = DEFAULT_MAX_CV,
                    resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> SampleComparison:
    """Compare the samples of one figure, A (before) against B (after).

    ``runs_a`` / ``runs_b`` label each sample with the run it came from (run ids, one per sample).
    Without labels the samples are taken as independent replicates (each from its own process, as
    pyperf's values are): do not pass one run's samples unlabelled, they share that run's clock and
    placement. With labels, the run is the unit of replication: each side needs at least 2 runs
    (else "cannot judge"), and the two-sided t-test on the log run medians must give p < alpha.
    The rest of the rule is in the module docstring and :data:`METHOD`."""
    ga = [[float(x) for x in g] for g in _groups(a, runs_a) if g]
    gb = [[float(x) for x in g] for g in _groups(b, runs_b) if g]
    fa = [x for g in ga for x in g]
    fb = [x for g in gb for x in g]
    if not fa or not fb:
        raise ValueError("compare_samples needs at least one sample on each side")
    if not all(math.isfinite(x) for x in (*fa, *fb)):
        raise ValueError("non-finite sample")
    med_a, med_b = statistics.median(fa), statistics.median(fb)
    # the noise gate looks at the spread within runs: the spread between runs is what the run-level
    # t-test weighs (pooling it here made clear run-to-run differences "too noisy to judge")
    cv_a, cv_b = _within_cv(ga, fa, runs_a is not None), _within_cv(gb, fb, runs_b is not None)
    warnings: list[dict] = []
    judgeable = True
    for side, vals in (("A", fa), ("B", fb)):
        if len(vals) == 1:
            judgeable = False
            warnings.append(_warning(
                "one-sample", f"side {side} has a single sample: its spread is unknown",
                "repeat the run, or take several samples per run"))
    low_p = smallest_p(len(fa), len(fb))
    if low_p >= alpha:
        judgeable = False
        warnings.append(_warning(
            "too-few-samples",
            f"{len(fa)} vs {len(fb)} samples: the smallest possible two-sided p is {low_p:.3g}, not below "
            f"alpha {alpha:g}, so no difference can be significant",
            "take more samples per run, or repeat the runs (--repeat; several runs per side are pooled)"))
    labelled = runs_a is not None or runs_b is not None
    for side, cv in (("A", cv_a), ("B", cv_b)):
        if cv > max_cv and not labelled:
            judgeable = False
            warnings.append(_warning(
                "high-cv", f"side {side} varies by {cv:.1%} (CV above {max_cv:.0%}): too noisy to judge",
                "close other programs, set the governor to performance, pin threads, take more samples"))
        elif cv > max_cv:  # the run t-test sees this noise in the run medians: judged, but said
            warnings.append(_warning(
                "noisy-runs", f"side {side} varies by {cv:.1%} within its runs (CV above {max_cv:.0%}): "
                "the verdict rests on the run medians, and small changes will not show",
                "close other programs, set the governor to performance, pin threads, or repeat the runs"))
    positive = med_a > 0 and med_b > 0
    if not positive:
        judgeable = False
        warnings.append(_warning("non-positive", "a median is zero or negative: a ratio means nothing",
                                 "compare the values directly"))
    p_runs = None
    if runs_a is not None or runs_b is not None:
        for side, groups in (("A", ga), ("B", gb)):
            if len(groups) < 2:
                judgeable = False
                warnings.append(_warning(
                    "unreplicated",
                    f"side {side} has one run: run-to-run variation (clock, placement, other programs) is not "
                    "measured, and identical runs differ by more than their samples' spread",
                    "run each side at least twice, 3 or more is better, alternating A and B; tag the runs "
                    "and compare the tags"))
        if positive and len(ga) >= 2 and len(gb) >= 2 and all(statistics.median(g) > 0 for g in ga + gb):
            p_runs = t_test([math.log(statistics.median(g)) for g in ga],
                            [math.log(statistics.median(g)) for g in gb])
    ratio = ratio_of(med_b, med_a) if med_a > 0 else math.inf
    _u, p, test = mann_whitney(fa, fb)
    ci_low, ci_high = bootstrap_ratio(ga, gb, confidence=confidence, resamples=resamples, seed=seed)
    change = (ratio - 1.0) * 100.0 if higher_is_better else (1.0 - ratio) * 100.0
    effect_ok = (ci_low > 1.0 or ci_high < 1.0) and abs(ratio - 1.0) >= min_effect
    sc = SampleComparison(
        n_a=len(fa), n_b=len(fb), runs_a=len(ga) if runs_a is not None else None,
        runs_b=len(gb) if runs_b is not None else None, median_a=med_a, median_b=med_b,
        cv_a=cv_a, cv_b=cv_b, ratio=ratio, ci_low=ci_low, ci_high=ci_high, confidence=confidence,
        p_value=p, test=test, p_runs=p_runs, change_pct=change, min_effect_pct=min_effect * 100.0,
        alpha=alpha, judgeable=judgeable, effect_ok=effect_ok, verdict=UNKNOWN, warnings=tuple(warnings))
    return replace(sc, verdict=_verdict(judgeable, effect_ok, sc.p_decisive, alpha, change))


def compare_runs(runs_a: Sequence[Sequence[float]], runs_b: Sequence[Sequence[float]],
                 higher_is_better: bool, **opts: Any) -> SampleComparison:
    """:func:`compare_samples` with each side given as one list of samples per run."""
    la = [i for i, g in enumerate(runs_a) for _ in g]
    lb = [i for i, g in enumerate(runs_b) for _ in g]
    return compare_samples([x for g in runs_a for x in g], [x for g in runs_b for x in g],
                           higher_is_better, runs_a=la, runs_b=lb, **opts)


def benjamini_hochberg(comparisons: Sequence[SampleComparison]) -> list[SampleComparison]:
    """Benjamini-Hochberg step-up adjustment over the judgeable figures of one comparison (the
    default). When the two sides are identical every "better"/"worse" is false, and then BH's false
    discovery rate is the chance of calling ANY figure different: it stays below alpha, as with
    Holm, for independent figures and for positively correlated ones (figures of the same runs;
    Benjamini and Yekutieli 2001). When a change is real and moves many figures (a thread count, a
    BLAS) BH keeps their power where Holm divided alpha by their number: on the p-values of a STREAM
    1 vs 2 threads comparison, 4 runs a side (run t-test p 0.0018 to 0.03, one outlying run), Holm
    called 3 of 8 figures, BH all 8. Returns the comparisons with
    ``p_adjusted`` set and the verdict re-decided on it."""
    idx = sorted((i for i, c in enumerate(comparisons) if c.judgeable), key=lambda i: comparisons[i].p_decisive)
    m = len(idx)
    out = list(comparisons)
    running = 1.0
    for rank in range(m - 1, -1, -1):  # from the largest p down: adjusted = min over k >= rank of m p_k / k
        i = idx[rank]
        c = comparisons[i]
        running = min(running, m * c.p_decisive / (rank + 1))
        out[i] = replace(c, p_adjusted=running,
                         verdict=_verdict(c.judgeable, c.effect_ok, running, c.alpha, c.change_pct))
    return out


#: how the p-values of one comparison's figures are adjusted together
ADJUSTMENTS = {"bh": benjamini_hochberg}


def holm(comparisons: Sequence[SampleComparison]) -> list[SampleComparison]:
    """Holm's step-down adjustment over the judgeable figures of one comparison, so that the
    chance of calling ANY figure of two identical configurations different stays below alpha
    (a node profile has ~100 figures: at 5% each, ~5 would differ by chance). Returns the
    comparisons with ``p_adjusted`` set and the verdict re-decided on it."""
    idx = sorted((i for i, c in enumerate(comparisons) if c.judgeable), key=lambda i: comparisons[i].p_decisive)
    m = len(idx)
    out = list(comparisons)
    running = 0.0
    for rank, i in enumerate(idx):
        c = comparisons[i]
        running = max(running, min(1.0, (m - rank) * c.p_decisive))
        out[i] = replace(c, p_adjusted=running,
                         verdict=_verdict(c.judgeable, c.effect_ok, running, c.alpha, c.change_pct))
    return out


ADJUSTMENTS["holm"] = holm
