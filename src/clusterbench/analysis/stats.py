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
