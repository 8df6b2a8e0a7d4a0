"""Summary statistics for repeated samples: best, median, min, max, mean, CV."""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


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
