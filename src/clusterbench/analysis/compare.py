"""Did my change help? The pure analysis behind ``clusterbench compare A B`` (issue 10).

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

import bisect
import json
import math
import random
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from clusterbench.errors import UsageError

#: version of the ``Comparison.as_dict()`` document, under the key ``compare_schema``
COMPARE_SCHEMA = 1

BETTER, WORSE, SAME, UNKNOWN = "better", "worse", "no significant difference", "cannot judge"
VERDICTS = (BETTER, WORSE, SAME, UNKNOWN)

DEFAULT_ALPHA = 0.05
DEFAULT_CONFIDENCE = 0.95
#: smallest change (fraction) that counts as a change at all
DEFAULT_MIN_EFFECT = 0.01
#: a side whose samples vary more than this (stdev / mean) is too noisy to judge (pyperf: 10%)
DEFAULT_MAX_CV = 0.10
DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20261123
#: the exact Mann-Whitney distribution is used (without ties) up to this many (a, b) pairs
EXACT_MAX_CELLS = 2500
#: above this many samples on a side (after thinning) the bootstrap distribution of each side's median
#: is computed (:func:`median_distribution`), not simulated: simulating costs resamples x samples
#: draws per figure (1500 runs of 5 samples a side: 30 million, minutes per figure in Python)
BOOTSTRAP_SIMULATE_MAX = 500

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


# --------------------------------------------------------------------------- statistics


def _ranks(values: Sequence[float]) -> tuple[list[float], list[int]]:
    """Average ranks (1-based) of ``values`` and the sizes of their tie groups."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    ties: list[int] = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        avg = (i + j) / 2.0 + 1.0
        for k in range(i, j + 1):
            ranks[order[k]] = avg
        ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


def _u_distribution(m: int, n: int) -> list[int]:
    """Number of arrangements giving each U = 0..m*n for samples of sizes m and n without ties:
    the coefficients of the Gaussian binomial [m+n choose m], built one factor
    (1 - q^(n+i)) / (1 - q^i) at a time (each intermediate is itself a polynomial)."""
    coef = [1] + [0] * (m * n)
    for i in range(1, m + 1):
        for k in range(m * n, n + i - 1, -1):  # multiply by (1 - q^(n+i))
            coef[k] -= coef[k - n - i]
        for k in range(i, m * n + 1):  # divide by (1 - q^i)
            coef[k] += coef[k - i]
    return coef


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, str]:
    """Two-sided Mann-Whitney U test: ``(U of a, p, method)``. U counts the pairs in which the a
    value is larger (a tie counts 1/2). ``method`` is "exact" (no ties and ``len(a) * len(b) <=
    EXACT_MAX_CELLS``) or "normal" (normal approximation with tie and continuity correction)."""
    m, n = len(a), len(b)
    if m == 0 or n == 0:
        raise ValueError("Mann-Whitney needs samples on both sides")
    ranks, ties = _ranks([*a, *b])
    u = sum(ranks[:m]) - m * (m + 1) / 2.0
    if all(t == 1 for t in ties) and m * n <= EXACT_MAX_CELLS:
        dist = _u_distribution(m, n)
        total = sum(dist)
        k = round(u)
        low = sum(dist[: k + 1]) / total  # P(U <= u)
        high = sum(dist[k:]) / total  # P(U >= u)
        return u, min(1.0, 2.0 * min(low, high)), "exact"
    big = m + n
    tie_term = sum(t ** 3 - t for t in ties) / (big * (big - 1))
    var = m * n / 12.0 * ((big + 1) - tie_term)
    if var <= 0:  # every value equal
        return u, 1.0, "normal"
    z = max(0.0, abs(u - m * n / 2.0) - 0.5) / math.sqrt(var)
    return u, min(1.0, math.erfc(z / math.sqrt(2.0))), "normal"


def smallest_p(m: int, n: int) -> float:
    """The smallest two-sided Mann-Whitney p that samples of sizes m and n can give (no ties):
    2 / C(m + n, m). 3 vs 3 gives 0.1: no difference can be significant at 0.05."""
    if m < 1 or n < 1:
        return 1.0
    log_comb = math.lgamma(m + n + 1) - math.lgamma(m + 1) - math.lgamma(n + 1)
    return min(1.0, 2.0 * math.exp(-log_comb)) if log_comb < 700 else 0.0  # (C(m+n, m) overflows a float)


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_test(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Two-sided Student t-test with pooled variance (equal variances: the same machine's
    run-to-run noise on both sides). Works for 1 vs k values (k >= 2). None when it cannot be
    computed (fewer than 3 values in all)."""
    m, n = len(a), len(b)
    df = m + n - 2
    if m < 1 or n < 1 or df < 1:
        return None
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    ss = sum((x - ma) ** 2 for x in a) + sum((x - mb) ** 2 for x in b)
    se = math.sqrt(ss / df * (1.0 / m + 1.0 / n))
    if se == 0.0:
        return 1.0 if ma == mb else 0.0
    t = (mb - ma) / se
    return min(1.0, _betainc(df / 2.0, 0.5, df / (df + t * t)))


def _quantile(sorted_vals: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    pos = q * (len(sorted_vals) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def _ratio(num: float, den: float) -> float:
    if den == 0.0:
        return 1.0 if num == 0.0 else math.inf
    return num / den


#: a run with more samples than this enters the bootstrap as that many evenly spaced quantiles of its
#: samples (a ping-pong run stores ~1000 timings per size): the same distribution, a wider (conservative)
#: interval, and a bounded cost (resamples x runs x this many draws per figure)
BOOTSTRAP_MAX_PER_RUN = 100


def _thin(g: Sequence[float]) -> list[float]:
    n = len(g)
    if n <= BOOTSTRAP_MAX_PER_RUN:
        return list(g)
    srt = sorted(g)
    k = BOOTSTRAP_MAX_PER_RUN
    return [srt[min(n - 1, int((j + 0.5) * n / k))] for j in range(k)]


def median_distribution(groups: Sequence[Sequence[float]]) -> tuple[list[float], list[float]]:
    """The distribution of the median of a within-run resample of ``groups`` (each run's samples
    drawn with replacement, its size kept), computed instead of simulated: ``(values, cdf)``, the
    sorted distinct pooled values and P(resampled median <= value).

    The resampled median is <= t exactly when at least half of the N resampled values are <= t. Run i
    contributes Binomial(n_i, c_i(t) / n_i) of them (c_i(t): its samples <= t), independently of the
    other runs, so their sum has mean C(t) (the pooled samples <= t) and variance
    sum c_i (n_i - c_i) / n_i; with N above :data:`BOOTSTRAP_SIMULATE_MAX` the sum is taken as normal
    (continuity-corrected): P(median <= t) = Phi((C(t) - N/2) / sd(t)). One sweep over the sorted
    values keeps C and the variance up to date: O(N log N), where simulating is O(resamples x N)."""
    pooled = sorted((float(x), i) for i, g in enumerate(groups) for x in g)
    sizes = [len(g) for g in groups]
    n = len(pooled)
    below = [0] * len(groups)
    var = 0.0
    values: list[float] = []
    cdf: list[float] = []
    k = 0
    while k < n:
        v = pooled[k][0]
        while k < n and pooled[k][0] == v:  # every sample equal to v counts at once (ties)
            i = pooled[k][1]
            c, m = below[i], sizes[i]
            var += ((c + 1) * (m - c - 1) - c * (m - c)) / m
            below[i] = c + 1
            k += 1
        sd = math.sqrt(max(var, 0.0))
        gap = k - n / 2.0
        p = (1.0 if gap > 0 else 0.0) if sd < 1e-12 else 0.5 * math.erfc(-gap / (sd * math.sqrt(2.0)))
        values.append(v)
        cdf.append(max(p, cdf[-1]) if cdf else p)
    return values, cdf


def _draw(values: Sequence[float], cdf: Sequence[float], u: float) -> float:
    """The value at which ``cdf`` first reaches ``u`` (inverse-CDF sampling)."""
    return values[min(bisect.bisect_left(cdf, u), len(values) - 1)]


def bootstrap_ratio(groups_a: Sequence[Sequence[float]], groups_b: Sequence[Sequence[float]], *,
                    confidence: float = DEFAULT_CONFIDENCE, resamples: int = DEFAULT_RESAMPLES,
                    seed: int = DEFAULT_SEED) -> tuple[float, float]:
    """Percentile bootstrap interval of median(B) / median(A). Each run's samples are resampled
    with replacement within that run (its size kept), so a side keeps its mix of runs; a run of more
    than :data:`BOOTSTRAP_MAX_PER_RUN` samples is resampled from that many of its quantiles. When a
    side holds more than :data:`BOOTSTRAP_SIMULATE_MAX` samples, each side's resampled median is drawn
    from its computed distribution (:func:`median_distribution`) instead of resampling every sample:
    the same interval within the noise of the resampling, in milliseconds."""
    rng = random.Random(seed)
    groups_a, groups_b = [_thin(g) for g in groups_a], [_thin(g) for g in groups_b]
    ratios = []
    if max(sum(map(len, groups_a)), sum(map(len, groups_b))) > BOOTSTRAP_SIMULATE_MAX:
        va, fa = median_distribution(groups_a)
        vb, fb = median_distribution(groups_b)
        for _ in range(resamples):
            ma = _draw(va, fa, rng.random())
            ratios.append(_ratio(_draw(vb, fb, rng.random()), ma))
    else:
        for _ in range(resamples):
            sa = [x for g in groups_a for x in rng.choices(g, k=len(g))]
            sb = [x for g in groups_b for x in rng.choices(g, k=len(g))]
            ratios.append(_ratio(statistics.median(sb), statistics.median(sa)))
    ratios.sort()
    tail = (1.0 - confidence) / 2.0
    return _quantile(ratios, tail), _quantile(ratios, 1.0 - tail)


def _cv(values: Sequence[float]) -> float:
    """stdev / mean in floating point (statistics.stdev is exact, with fractions: 1500 runs' CVs took
    seconds)."""
    if len(values) < 2:
        return 0.0
    mean = math.fsum(values) / len(values)
    if not mean:
        return math.inf
    return math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (len(values) - 1)) / abs(mean)


# --------------------------------------------------------------------------- one figure


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
        per_run = [_cv(g) for g in groups if len(g) > 1]
        if per_run:
            return statistics.median(per_run)
    return _cv(pooled)


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
    ratio = _ratio(med_b, med_a) if med_a > 0 else math.inf
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


# --------------------------------------------------------------------------- matching figures


def _hashable(v: Any) -> Any:
    if isinstance(v, (dict, list, tuple, set)):
        return json.dumps(v, sort_keys=True, default=str)
    return v


def _scalar_params(params: Mapping[str, Any]) -> tuple[str, ...]:
    """Identifying params of a benchmark whose key_params are unknown: its non-float scalars
    (floats in params are measured values, e.g. a clock, that differ from run to run)."""
    return tuple(sorted(k for k, v in params.items() if isinstance(v, (str, int, bool)) or v is None))


def pool(results_per_run: Mapping[str, Sequence[dict]] | Iterable[tuple[str, Sequence[dict]]]) -> list[dict]:
    """One side's results from several runs, as one list: each result dict is copied with the id
    of its run under ``run_id`` (results from the store do not carry it). Give ``{run_id:
    results}`` or ``[(run_id, results), ...]``."""
    items = results_per_run.items() if isinstance(results_per_run, Mapping) else results_per_run
    return [{**r, "run_id": run_id} for run_id, results in items for r in results]


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
    result: dict
    samples: list[float] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)


def _key_params(bench: str, results: Sequence[dict], key_params_by_benchmark: Mapping[str, Sequence[str]]
                ) -> tuple[str, ...]:
    if bench in key_params_by_benchmark:
        return tuple(key_params_by_benchmark[bench])
    names: set[str] = set()
    for r in results:
        names.update(_scalar_params(r.get("params") or {}))
    return tuple(sorted(names))


def _varied(bench: str, keys: Sequence[str], side_a: Sequence[dict], side_b: Sequence[dict]) -> dict:
    """Key params with one value on side A and a different single value on side B."""
    out = {}
    for k in keys:
        va = {_hashable((r.get("params") or {}).get(k)) for r in side_a if r["benchmark"] == bench}
        vb = {_hashable((r.get("params") or {}).get(k)) for r in side_b if r["benchmark"] == bench}
        if len(va) == 1 and len(vb) == 1 and va != vb:
            ra = next(r for r in side_a if r["benchmark"] == bench)
            rb = next(r for r in side_b if r["benchmark"] == bench)
            out[k] = ((ra.get("params") or {}).get(k), (rb.get("params") or {}).get(k))
    return out


def _collect(side: Sequence[dict], keys_by_bench: Mapping[str, tuple[str, ...]], varied: Mapping[str, dict],
             tag: str) -> dict[tuple, _Figure]:
    figures: dict[tuple, _Figure] = {}
    for i, r in enumerate(side):
        bench = r["benchmark"]
        params = r.get("params") or {}
        ident = tuple((k, _hashable(params.get(k))) for k in keys_by_bench[bench] if k not in varied.get(bench, {}))
        fig = figures.setdefault((bench, r["metric"], ident), _Figure(r))
        samples = [float(s) for s in (r.get("samples") or [])]
        if not samples and r.get("value") is not None:
            samples = [float(r["value"])]  # no samples stored: the value is a single sample
        run = str(r.get("run_id") or f"{tag}{i}")  # an untagged result counts as its own run
        fig.samples.extend(samples)
        fig.runs.extend([run] * len(samples))
    return figures


def _ident_params(keys: Sequence[str], varied: Mapping[str, Any], params: Mapping[str, Any]) -> dict:
    return {k: params.get(k) for k in keys if k not in varied}


def match_figures(side_a_results: Sequence[dict], side_b_results: Sequence[dict],
                  key_params_by_benchmark: Mapping[str, Sequence[str]], **opts: Any
                  ) -> tuple[list[Match], list[Unmatched], list[Unmatched]]:
    """Match the figures of two sides by (benchmark, metric, key params) and compare each.

    Each side is a list of result dicts (:func:`pool` several runs first so each carries its
    ``run_id``). A key param with one value on A and another single value on B is the change under
    test: it is left out of the match and recorded in ``Match.varied``. A result without samples
    contributes its value as one sample. ``opts`` go to :func:`compare_samples`. Returns
    ``(matches, only_a, only_b)``; each match's comparison is for that figure alone (see
    :func:`compare` for the adjustment across figures)."""
    benches = {r["benchmark"] for r in side_a_results} | {r["benchmark"] for r in side_b_results}
    keys = {b: _key_params(b, [r for r in (*side_a_results, *side_b_results) if r["benchmark"] == b],
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
        hib = bool(fa.result.get("higher_is_better", True))
        comparison = compare_samples(fa.samples, fb.samples, hib, runs_a=fa.runs, runs_b=fb.runs, **opts)
        matches.append(Match(
            benchmark=bench, metric=metric, unit=fa.result.get("unit"), higher_is_better=hib,
            params=_ident_params(keys[bench], varied[bench], fa.result.get("params") or {}),
            varied=dict(varied[bench]), samples_a=tuple(fa.samples), samples_b=tuple(fb.samples),
            sample_runs_a=tuple(fa.runs), sample_runs_b=tuple(fb.runs),
            runs_a=tuple(dict.fromkeys(fa.runs)), runs_b=tuple(dict.fromkeys(fb.runs)), comparison=comparison))

    def unmatched(figs: dict, other: dict, side: str) -> list[Unmatched]:
        return [Unmatched(side, ident[0], ident[1],
                          _ident_params(keys[ident[0]], varied[ident[0]], f.result.get("params") or {}),
                          tuple(dict.fromkeys(f.runs)))
                for ident, f in figs.items() if ident not in other or not f.samples or not other[ident].samples]

    return matches, unmatched(figs_a, figs_b, "a"), unmatched(figs_b, figs_a, "b")


# --------------------------------------------------------------------------- what else changed


@dataclass(frozen=True)
class EnvChange:
    """A setting whose value differs between the sides. ``a``/``b`` are the sides' values as text
    (several runs with different values: joined by " | "), ``values_a``/``values_b`` the sorted
    distinct values, ``label`` one line for a person ("MTU of eth0: 1500 -> 9000")."""

    what: str
    a: str
    b: str
    values_a: tuple[str, ...]
    values_b: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.what}: {self.a} -> {self.b}"

    def as_dict(self) -> dict[str, Any]:
        return {"what": self.what, "a": self.a, "b": self.b, "values_a": list(self.values_a),
                "values_b": list(self.values_b), "label": self.label}


def _get(d: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(d, dict):
            return None
        d = d.get(part)
    return d


def _text(v: Any) -> str:
    if v is None:
        return "unknown"
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, (list, tuple)):
        return ", ".join(_text(x) for x in v) if v else "none"
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True, default=str)
    return str(v)


def _names(items: Any, fmt: Any) -> list[str] | None:
    if not isinstance(items, list):
        return None
    return sorted({fmt(i) for i in items if isinstance(i, dict)})


def _blas_name(b: dict) -> str:
    path = str(b.get("path") or "")
    return path.rsplit("/", 1)[-1] if path else str(b.get("name"))


def _hosts(run: dict) -> list[str]:
    hosts = (run.get("cluster") or {}).get("hosts")
    return list(hosts) if hosts else [str(run.get("host"))]


#: (what, getter(run)) for the run-wide settings, in report order. Noise (free memory, timestamps,
#: pids) is left out on purpose.
RUN_SETTINGS: list[tuple[str, Any]] = [
    ("node count", lambda r: len(_hosts(r))),
    ("hosts", _hosts),
    ("CPU model", lambda r: _get(r, "probe.cpu.model_name")),
    ("CPU microarchitecture", lambda r: _get(r, "probe.cpu.microarchitecture")),
    ("kernel", lambda r: _get(r, "probe.environment.kernel")),
    ("preemption model", lambda r: _get(r, "probe.environment.preemption")),
    ("CPU frequency governor", lambda r: _get(r, "probe.environment.governor")),
    ("turbo", lambda r: _get(r, "probe.environment.turbo")),
    ("SMT", lambda r: _get(r, "probe.environment.smt_active")),
    ("transparent huge pages", lambda r: _get(r, "probe.environment.thp")),
    ("NUMA balancing", lambda r: _get(r, "probe.environment.numa_balancing")),
    ("hypervisor", lambda r: _get(r, "probe.environment.hypervisor")),
    ("MPI", lambda r: _names(_get(r, "probe.environment.mpi"), lambda m: f"{m.get('name')} {m.get('version')}")),
    ("BLAS libraries", lambda r: _names(_get(r, "probe.environment.blas"), _blas_name)),
    ("compilers", lambda r: _names(_get(r, "probe.environment.compilers"),
                                   lambda c: f"{c.get('name')} {c.get('version')}")),
]

#: figure params that name how a figure was produced
RESULT_PARAMS = ("transport", "transport_used", "mpi", "launcher", "blas", "openblas_coretype", "threads", "ranks")


def _nic_settings(run: dict) -> dict[str, Any]:
    out: dict[str, Any] = {}
    nics = _get(run, "probe.environment.nics") or []
    for nic in nics:
        if not isinstance(nic, dict) or nic.get("name") in (None, "lo"):
            continue
        for k, label in (("mtu", "MTU"), ("speed_mbps", "speed (Mb/s)"), ("driver", "driver")):
            out[f"{label} of {nic['name']}"] = nic.get(k)
    # a run across hosts: every node's NICs (runs.cluster), by interface name over the nodes (host
    # names may differ between the sides; a value that differs between nodes shows as a list)
    per_nic: dict[str, set] = {}
    for node in ((run.get("cluster") or {}).get("nodes") or {}).values():
        for nic in _get(node, "network.nics") or []:
            if not isinstance(nic, dict) or nic.get("name") in (None, "lo"):
                continue
            for k, label in (("mtu", "MTU"), ("speed_mbps", "speed (Mb/s)"), ("driver", "driver")):
                per_nic.setdefault(f"{label} of {nic['name']} on the nodes", set()).add(_text(nic.get(k)))
    for key, values in per_nic.items():
        out[key] = ", ".join(sorted(values))
    sim = (run.get("cluster") or {}).get("sim_cluster")
    if isinstance(sim, dict):
        out["virtual cluster MTU"] = sim.get("mtu")
        out["virtual cluster offloads"] = sim.get("offload")
    return out


def _build_settings(run: dict) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kernel, info in sorted((run.get("builds") or {}).items()):
        if isinstance(info, dict):
            out[f"compiler of {kernel}"] = info.get("compiler_version") or info.get("compiler")
            out[f"build flags of {kernel}"] = " ".join(info.get("flags") or [])
    return out


def _param_settings(results: Sequence[dict]) -> dict[str, set]:
    out: dict[str, set] = {}
    for r in results:
        params = r.get("params") or {}
        for k in RESULT_PARAMS:
            if k in params:
                out.setdefault(f"{k} ({r['benchmark']})", set()).add(_text(params[k]))
    return out


def _change(what: str, va: set[str], vb: set[str]) -> EnvChange | None:
    if va == vb:
        return None
    sa, sb = tuple(sorted(va)), tuple(sorted(vb))
    return EnvChange(what, " | ".join(sa) or "none", " | ".join(sb) or "none", sa, sb)


def env_diff(runs_a: Sequence[dict], runs_b: Sequence[dict], results_a: Sequence[dict] = (),
             results_b: Sequence[dict] = ()) -> list[EnvChange]:
    """What else changed between the sides, besides the change under test.

    Run-wide settings (:data:`RUN_SETTINGS`: node count and hosts, CPU, kernel, preemption,
    governor, turbo, SMT, THP, NUMA balancing, hypervisor, MPI, BLAS, compilers), each NIC's MTU,
    speed and driver (``lo`` ignored; a NIC on one side only shows as "absent"), the compiler and
    flags of each kernel built on both sides, and, from the figures' params when ``results_*`` are
    given, :data:`RESULT_PARAMS` per benchmark present on both sides. A side's value is the set of
    its runs' values; a change is listed when the sets differ."""
    changes: list[EnvChange] = []
    for what, get in RUN_SETTINGS:
        c = _change(what, {_text(get(r)) for r in runs_a}, {_text(get(r)) for r in runs_b})
        if c:
            changes.append(c)
    for per_run in (_nic_settings, _build_settings):
        sa = [per_run(r) for r in runs_a]
        sb = [per_run(r) for r in runs_b]
        keys = sorted({k for s in sa + sb for k in s})
        if per_run is _build_settings:  # a kernel built on one side only is another benchmark, not a change
            keys = [k for k in keys if any(k in s for s in sa) and any(k in s for s in sb)]
        for k in keys:
            c = _change(k, {_text(s[k]) if k in s else "absent" for s in sa},
                        {_text(s[k]) if k in s else "absent" for s in sb})
            if c:
                changes.append(c)
    pa, pb = _param_settings(results_a), _param_settings(results_b)
    for k in sorted(set(pa) & set(pb)):
        c = _change(k, pa[k], pb[k])
        if c:
            changes.append(c)
    return changes


# --------------------------------------------------------------------------- which runs may be pooled


#: the only status whose runs are pooled into a side without --include-incomplete
POOLED_STATUS = "complete"


def left_out_reason(run: Mapping[str, Any], figures: int | None = None) -> str:
    """Why a run is not pooled, in a few words: still running, or incomplete with its stored reason
    (interrupted, a kernel that failed, its process killed)."""
    so_far = "" if figures is None else f", {figures} figure(s) so far" if run.get("status") == "running" \
        else f", {figures} figure(s) stored"
    if run.get("status") == "running":
        return f"still running (pid {run.get('pid')} on {run.get('host')}{so_far})"
    why = str(run.get("error") or "").strip()
    return f"{run.get('status') or 'unknown status'}{so_far}" + (f": {why}" if why else "")


def poolable(runs: Sequence[Mapping[str, Any]], figures: Mapping[str, int] | None = None, *,
             include_incomplete: bool = False) -> tuple[list[Mapping[str, Any]], list[dict[str, Any]]]:
    """Which runs of a selector may be pooled into one side (``compare``, and the sources and the
    comparison of ``report``): the complete ones. A run still running, or left incomplete (Ctrl-C, a
    kernel that failed, its process killed), holds only part of its figures, measured under
    conditions nobody chose: pooled silently it weighs a side with what it happened to finish. With
    ``include_incomplete`` every run is pooled. ``figures`` (run id -> figures stored) goes into
    the reason. Returns ``(pooled, left_out)``; each left-out entry is ``{id, status, error,
    figures, reason}``, in the order given."""
    pooled: list[Mapping[str, Any]] = []
    left: list[dict[str, Any]] = []
    for run in runs:
        if include_incomplete or run.get("status") == POOLED_STATUS:
            pooled.append(run)
            continue
        n = None if figures is None else figures.get(str(run.get("id")))
        left.append({"id": run.get("id"), "status": run.get("status"), "error": run.get("error"), "figures": n,
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


def _side_results(runs: Sequence[dict], results: Any) -> list[dict]:
    """Results of a side, each tagged with its ``run_id``: ``results`` is ``{run_id: [result, ...]}``,
    a list parallel to ``runs`` (one list of results per run), or a flat list already pooled."""
    if isinstance(results, Mapping):
        return pool(results)
    results = list(results)
    if results and all(isinstance(r, Mapping) and "benchmark" in r for r in results):
        return [dict(r) for r in results]
    if len(results) != len(runs):
        raise ValueError("results: one list per run, in the order of the runs")
    return pool([(str(run.get("id")), res) for run, res in zip(runs, results)])


def _benchmarks(results: Sequence[dict]) -> str:
    names = sorted({r["benchmark"] for r in results})
    return ", ".join(names) if names else "no results"


def compare(runs_a: Sequence[dict], results_a: Any, runs_b: Sequence[dict], results_b: Any,
            key_params_by_benchmark: Mapping[str, Sequence[str]], **opts: Any) -> Comparison:
    """Compare side A (before) with side B (after). ``runs_*`` are run dicts (``Store.get_run``),
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
        runs_a=tuple(str(r.get("id")) for r in runs_a), runs_b=tuple(str(r.get("id")) for r in runs_b),
        matches=tuple(matches), only_a=tuple(only_a), only_b=tuple(only_b),
        env=tuple(env_diff(runs_a, runs_b, side_a, side_b)), options=options)
