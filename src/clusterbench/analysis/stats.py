"""Statistics in one place: summaries of repeated samples (best, median, min, max, mean, CV, confidence
intervals) and the tests ``compare`` judges with (Mann-Whitney U, Student's t on log run medians, the
bootstrap interval of a ratio of medians). Pure: no I/O."""
from __future__ import annotations

import bisect
import functools
import math
import operator
import random
import statistics
from collections.abc import Sequence
from typing import Any


def summarize(samples: Sequence[float], higher_is_better: bool) -> dict:
    """Best (max when higher is better, else min), median, min, max, mean, stdev and the
    coefficient of variation (stdev / mean, as a fraction). Non-finite samples are rejected."""
    vals = [float(s) for s in samples]
    if not vals:
        raise ValueError("no samples")
    if not all(math.isfinite(v) for v in vals):
        raise ValueError("non-finite sample")
    mean = statistics.fmean(vals)
    stdev = statistics.stdev(vals) if len(vals) > 1 else 0.0
    return {
        "n": len(vals),
        "best": max(vals) if higher_is_better else min(vals),
        "median": statistics.median(vals),
        "min": min(vals),
        "max": max(vals),
        "mean": mean,
        "stdev": stdev,
        "cv": (stdev / abs(mean)) if mean else 0.0,
    }


#: Student's t two-sided quantiles t_{1-(1-c)/2, df} for df 1..30 (c = 0.95, 0.99)
_T_TABLE = {
    0.95: (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
           2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
           2.045, 2.042),
    0.99: (63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169, 3.106, 3.055, 3.012, 2.977,
           2.947, 2.921, 2.898, 2.878, 2.861, 2.845, 2.831, 2.819, 2.807, 2.797, 2.787, 2.779, 2.771, 2.763,
           2.756, 2.750),
}
_Z = {0.95: 1.959964, 0.99: 2.575829}


def t_quantile(df: int, confidence: float = 0.99) -> float:
    """Student's t two-sided critical value (table for df <= 30; beyond, the Cornish-Fisher
    expansion of the normal quantile, within 0.001 of the exact value)."""
    if confidence not in _T_TABLE:
        raise ValueError(f"confidence {confidence}: 0.95 or 0.99")
    if df < 1:
        raise ValueError("df < 1")
    if df <= 30:
        return _T_TABLE[confidence][df - 1]
    z = _Z[confidence]
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


def mean_ci(samples: Sequence[float], confidence: float = 0.99) -> tuple[float, float] | None:
    """The t interval of the mean (None with fewer than two samples)."""
    vals = [float(s) for s in samples]
    if len(vals) < 2:
        return None
    m = statistics.fmean(vals)
    half = t_quantile(len(vals) - 1, confidence) * statistics.stdev(vals) / math.sqrt(len(vals))
    return (m - half, m + half)


def median_ci(samples: Sequence[float], confidence: float = 0.99) -> tuple[float, float] | None:
    """The distribution-free interval of the median from order statistics: [x_(k), x_(n+1-k)]
    with the largest k whose binomial(n, 1/2) coverage is at least ``confidence``; None when n
    is too small for any (n < 8 at 99%, n < 6 at 95%)."""
    vals = sorted(float(s) for s in samples)
    n = len(vals)
    best = None
    for k in range(1, n // 2 + 1):
        # coverage of [x_(k), x_(n+1-k)] = 1 - 2 P(Binom(n, 1/2) <= k - 1)
        tail = sum(math.comb(n, i) for i in range(k)) / 2 ** n
        if 1 - 2 * tail >= confidence:
            best = k
        else:
            break
    return None if best is None else (vals[best - 1], vals[n - best])

DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20261123
#: the exact Mann-Whitney distribution is used (without ties) up to this many (a, b) pairs
EXACT_MAX_CELLS = 2500
#: above this many samples on a side (after thinning) the bootstrap distribution of each side's median
#: is computed (:func:`median_distribution`), not simulated: simulating costs resamples x samples
#: draws per figure (1500 runs of 5 samples a side: 30 million, minutes per figure in Python)
BOOTSTRAP_SIMULATE_MAX = 500


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


@functools.lru_cache(maxsize=64)
def u_distribution(m: int, n: int) -> tuple[int, ...]:
    """Number of arrangements giving each U = 0..m*n for samples of sizes m and n without ties:
    the coefficients of the Gaussian binomial [m+n choose m], built one factor
    (1 - q^(n+i)) / (1 - q^i) at a time (each intermediate is itself a polynomial). Kept per (m, n):
    a comparison tests every figure of a run with the same sample sizes, and building it is O(m^2 n)."""
    coef = [1] + [0] * (m * n)
    for i in range(1, m + 1):
        for k in range(m * n, n + i - 1, -1):  # multiply by (1 - q^(n+i))
            coef[k] -= coef[k - n - i]
        for k in range(i, m * n + 1):  # divide by (1 - q^i)
            coef[k] += coef[k - i]
    return tuple(coef)


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
        dist = u_distribution(m, n)
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


def ratio_of(num: float, den: float) -> float:
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


def _median_in_place(values: list[float]) -> float:
    """statistics.median of ``values`` (sorting them in place)."""
    values.sort()
    n = len(values)
    if not n:
        raise statistics.StatisticsError("no median for empty data")
    i = n // 2
    return values[i] if n % 2 else (values[i - 1] + values[i]) / 2


def _picker(positions: list[int]) -> Any:
    """A function of a list giving the list of its items at ``positions`` (itemgetter, in C)."""
    if not positions:
        return lambda values: []
    if len(positions) == 1:
        i = positions[0]
        return lambda values: [values[i]]
    get = operator.itemgetter(*positions)
    return lambda values: list(get(values))


@functools.lru_cache(maxsize=16)
def _resample_picks(seed: int, resamples: int, sizes_a: tuple[int, ...], sizes_b: tuple[int, ...]) -> tuple:
    """Per resample, the pickers of side A's and side B's resampled samples from each side's samples laid
    end to end. rng.choices(g, k=len(g)) of each run, inlined: the same draws, g[floor(random() * len(g))]
    each, A's runs then B's, one resample after the other, as the bootstrap always drew them."""
    draw = random.Random(seed).random
    slots = []
    for sizes in (sizes_a, sizes_b):
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        slots.append([(start, float(n)) for start, n in zip(starts, sizes) for _ in range(n)])
    picks = []
    for _ in range(resamples):
        picks.append(tuple(_picker([start + int(draw() * n) for start, n in side]) for side in slots))
    return tuple(picks)


@functools.lru_cache(maxsize=16)
def _resample_positions(seed: int, resamples: int, sizes_a: tuple[int, ...], sizes_b: tuple[int, ...]) -> tuple:
    """:func:`_resample_picks`'s draws as two arrays of positions (resamples x side A's samples, resamples
    x side B's): the same uniforms in the same order (numpy's Mersenne Twister started from the state of
    Python's random.Random(seed), whose random() it computes the same way), each times its run's size and
    truncated as int() does, so the same positions."""
    import numpy as np

    state = random.Random(seed).getstate()[1]
    twister = np.random.RandomState()
    twister.set_state(("MT19937", np.array(state[:624], dtype=np.uint32), state[624]))
    slots = [(start, n) for sizes in (sizes_a, sizes_b)
             for start, n in zip([sum(sizes[:i]) for i in range(len(sizes))], sizes) for _ in range(n)]
    u = twister.random_sample((resamples, len(slots)))
    scale = np.array([float(n) for _, n in slots])
    start = np.array([st for st, _ in slots], dtype=np.int64)
    pos = ((u * scale).astype(np.int64) + start).astype(np.int32)
    na = sum(sizes_a)
    return pos[:, :na], pos[:, na:]


def _vectorised_ratios(flat_a: list[float], flat_b: list[float], seed: int, resamples: int,
                       sizes_a: tuple[int, ...], sizes_b: tuple[int, ...]) -> list[float] | None:
    """The resampled ratios of medians with numpy (a hundred times fewer Python steps), the same numbers as
    the loop in :func:`bootstrap_ratio`: the same positions, the same sort, the median's same arithmetic,
    :func:`ratio_of`'s rule. None where numpy is missing (a node's install has no numpy) or a value is
    not finite (numpy and Python order a NaN differently)."""
    try:
        import numpy as np
    except ImportError:
        return None
    a, b = np.asarray(flat_a, dtype=np.float64), np.asarray(flat_b, dtype=np.float64)
    if not (a.size and b.size and np.isfinite(a).all() and np.isfinite(b).all()):
        return None
    pos_a, pos_b = _resample_positions(seed, resamples, sizes_a, sizes_b)

    def medians(values, pos):
        x = np.sort(values[pos], axis=1)
        i = x.shape[1] // 2
        return x[:, i] if x.shape[1] % 2 else (x[:, i - 1] + x[:, i]) / 2

    ma, mb = medians(a, pos_a), medians(b, pos_b)
    zero = ma == 0.0
    ratios = np.where(zero, np.where(mb == 0.0, 1.0, math.inf), mb / np.where(zero, 1.0, ma))
    return ratios.tolist()


def bootstrap_ratio(groups_a: Sequence[Sequence[float]], groups_b: Sequence[Sequence[float]], *,
                    confidence: float = DEFAULT_CONFIDENCE, resamples: int = DEFAULT_RESAMPLES,
                    seed: int = DEFAULT_SEED, vectorised: bool = True) -> tuple[float, float]:
    """Percentile bootstrap interval of median(B) / median(A). Each run's samples are resampled
    with replacement within that run (its size kept), so a side keeps its mix of runs; a run of more
    than :data:`BOOTSTRAP_MAX_PER_RUN` samples is resampled from that many of its quantiles. When a
    side holds more than :data:`BOOTSTRAP_SIMULATE_MAX` samples, each side's resampled median is drawn
    from its computed distribution (:func:`median_distribution`) instead of resampling every sample:
    the same interval within the noise of the resampling, in milliseconds. ``vectorised``: the resampling
    done with numpy where it is installed (the same interval to the last bit; False: the Python loop)."""
    rng = random.Random(seed)
    groups_a, groups_b = [_thin(g) for g in groups_a], [_thin(g) for g in groups_b]
    ratios = []
    if max(sum(map(len, groups_a)), sum(map(len, groups_b))) > BOOTSTRAP_SIMULATE_MAX:
        va, fa = median_distribution(groups_a)
        vb, fb = median_distribution(groups_b)
        for _ in range(resamples):
            ma = _draw(va, fa, rng.random())
            ratios.append(ratio_of(_draw(vb, fb, rng.random()), ma))
    else:
        # The draws depend on the seed and the runs' sizes only, not on the values: drawn once per shape
        # (the figures of one comparison share it, :func:`_resample_picks`) as positions in each side's
        # samples laid end to end; statistics.median's arithmetic on a list sorted in place
        flat_a = [x for g in groups_a for x in g]
        flat_b = [x for g in groups_b for x in g]
        shape = (seed, resamples, tuple(map(len, groups_a)), tuple(map(len, groups_b)))
        fast = _vectorised_ratios(flat_a, flat_b, *shape) if vectorised else None
        if fast is not None:
            ratios = fast
        else:
            for pick_a, pick_b in _resample_picks(*shape):
                ratios.append(ratio_of(_median_in_place(pick_b(flat_b)), _median_in_place(pick_a(flat_a))))
    ratios.sort()
    tail = (1.0 - confidence) / 2.0
    return _quantile(ratios, tail), _quantile(ratios, 1.0 - tail)


def cv_of(values: Sequence[float]) -> float:
    """stdev / mean in floating point (statistics.stdev is exact, with fractions: 1500 runs' CVs took
    seconds)."""
    if len(values) < 2:
        return 0.0
    mean = math.fsum(values) / len(values)
    if not mean:
        return math.inf
    return math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (len(values) - 1)) / abs(mean)
