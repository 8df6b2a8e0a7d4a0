"""Find the flat regions (plateaus) of a latency-vs-working-set curve and name them L1/L2/L3/DRAM.

Pure Python, no numpy. The method:

1. Work on log(latency) against the points in size order.
2. For each number of segments K, find the optimal split into K contiguous segments of at least
   ``min_points`` points that minimises the squared deviation from each segment's mean
   (piecewise-constant fit, dynamic programming, O(K n^2); n is ~40-100 points).
3. Trim each segment to its *core*: the points within ``tol`` (ratio) of the segment median. This
   drops transition points (a working set straddling two levels) and noise spikes.
4. A segmentation is *valid* when every core has >= ``min_points`` points and neighbouring cores
   differ by at least ``min_step`` (ratio): levels must really be distinct.
5. K is chosen from the data by BIC over the valid segmentations; when the caller passes the
   number it expects (cache levels + 1 from the probe) and that K is valid, it is preferred.
6. Labels: with ``levels`` cache sizes from the probe, K == levels+1 gives L1..Ln, DRAM in order;
   otherwise a monotone alignment of each plateau's implied size (its largest working set) to the
   probe's sizes picks the labels, so a missing plateau does not shift every name.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass
class Plateau:
    label: str                       # "L1", "L2", "L3", ... or "DRAM"
    latency: float                   # median latency of the core points
    sizes: list[int]                 # working sets on the plateau (core points)
    latencies: list[float]           # their latencies
    implied_size_bytes: int          # largest working set on the plateau
    first_size_bytes: int            # smallest working set on the plateau
    last: bool = False               # the plateau runs to the end of the measured curve
    probe_size_bytes: int | None = None
    extra: dict = field(default_factory=dict)


def _segment(y: Sequence[float], k: int, min_len: int) -> tuple[float, list[tuple[int, int]]] | None:
    """Optimal split of y into k contiguous segments (each >= min_len) minimising the SSE."""
    n = len(y)
    if k * min_len > n:
        return None
    pre = [0.0]
    pre2 = [0.0]
    for v in y:
        pre.append(pre[-1] + v)
        pre2.append(pre2[-1] + v * v)

    def sse(i: int, j: int) -> float:  # points i..j-1
        m = j - i
        s = pre[j] - pre[i]
        return max(0.0, (pre2[j] - pre2[i]) - s * s / m)

    inf = float("inf")
    cost = [[inf] * (n + 1) for _ in range(k + 1)]
    back = [[0] * (n + 1) for _ in range(k + 1)]
    cost[0][0] = 0.0
    for seg in range(1, k + 1):
        for j in range(seg * min_len, n + 1):
            best, arg = inf, 0
            for i in range((seg - 1) * min_len, j - min_len + 1):
                if cost[seg - 1][i] == inf:
                    continue
                c = cost[seg - 1][i] + sse(i, j)
                if c < best:
                    best, arg = c, i
            cost[seg][j] = best
            back[seg][j] = arg
    if cost[k][n] == inf:
        return None
    bounds = []
    j = n
    for seg in range(k, 0, -1):
        i = back[seg][j]
        bounds.append((i, j))
        j = i
    return cost[k][n], bounds[::-1]


def _cores(lat: Sequence[float], bounds: Sequence[tuple[int, int]], tol: float) -> list[list[int]]:
    out = []
    for i, j in bounds:
        med = statistics.median(lat[i:j])
        out.append([t for t in range(i, j) if abs(math.log(lat[t] / med)) <= math.log1p(tol)])
    return out


def find_plateaus(
    sizes: Sequence[int],
    latencies: Sequence[float],
    expected: int | None = None,
    probe_sizes: Mapping[int, int] | None = None,
    tol: float = 0.2,
    min_points: int = 2,
    min_step: float = 1.4,
    max_plateaus: int = 6,
) -> list[Plateau]:
    """Plateaus of latency vs size, smallest first, labelled (see the module docstring).

    ``expected``: plateaus the caller expects (cache levels + 1), preferred when the data allow.
    ``probe_sizes``: {level: bytes} of the data/unified caches the probe reports.
    """
    pts = sorted((int(s), float(v)) for s, v in zip(sizes, latencies) if v and v > 0 and math.isfinite(v))
    if len(pts) < min_points:
        return []
    xs = [p[0] for p in pts]
    lat = [p[1] for p in pts]
    y = [math.log(v) for v in lat]
    n = len(y)
    floor = math.log1p(0.02) ** 2  # 2 % noise floor, so perfectly flat synthetic data behaves
    candidates: dict[int, tuple[float, list[list[int]]]] = {}
    for k in range(1, min(max_plateaus, n // min_points) + 1):
        seg = _segment(y, k, min_points)
        if seg is None:
            break
        cost, bounds = seg
        cores = _cores(lat, bounds, tol)
        if any(len(c) < min_points for c in cores):
            continue
        meds = [statistics.median(lat[t] for t in c) for c in cores]
        if any(b / a < min_step for a, b in zip(meds, meds[1:])):
            continue
        bic = n * math.log(cost / n + floor) + 2 * k * math.log(n)
        candidates[k] = (bic, cores)
    if not candidates:
        return []
    if expected and expected in candidates:
        k = expected
    else:
        k = min(candidates, key=lambda kk: candidates[kk][0])
    cores = candidates[k][1]
    plats = []
    for idx, c in enumerate(cores):
        plats.append(Plateau(
            label="",
            latency=statistics.median(lat[t] for t in c),
            sizes=[xs[t] for t in c],
            latencies=[lat[t] for t in c],
            implied_size_bytes=max(xs[t] for t in c),
            first_size_bytes=min(xs[t] for t in c),
            last=(idx == len(cores) - 1),
        ))
    label_plateaus(plats, probe_sizes or {})
    return plats


def label_plateaus(plats: list[Plateau], probe_sizes: Mapping[int, int]) -> None:
    """Name plateaus L1..Ln/DRAM, aligned to the probe's cache levels where possible."""
    levels = sorted(probe_sizes)
    n = len(plats)
    if not levels:
        for i, p in enumerate(plats):
            p.label = "DRAM" if (n >= 2 and i == n - 1) else f"L{i + 1}"
        return
    names = [f"L{lv}" for lv in levels] + ["DRAM"]
    if n >= len(names):
        for i, p in enumerate(plats):
            p.label = names[i] if i < len(names) else f"extra{i - len(names) + 1}"
    else:
        llc = probe_sizes[levels[-1]]

        def cost(p: Plateau, j: int) -> float:
            if j == len(levels):  # DRAM: only the last plateau, starting beyond the LLC
                if not p.last:
                    return 1e9
                return max(0.0, math.log2(llc / max(p.first_size_bytes, 1)))
            ratio = math.log2(p.implied_size_bytes / probe_sizes[levels[j]])
            return max(0.0, ratio) if p.last else abs(ratio)

        # monotone assignment of n plateaus to len(names) labels, minimum total cost
        inf = float("inf")
        m = len(names)
        best = [[inf] * (m + 1) for _ in range(n + 1)]
        choice = [[-1] * (m + 1) for _ in range(n + 1)]
        for j in range(m + 1):
            best[0][j] = 0.0
        for i in range(1, n + 1):
            for j in range(1, m + 1):
                # plateau i-1 takes label j-1, or label j-1 is skipped
                take = best[i - 1][j - 1] + cost(plats[i - 1], j - 1)
                skip = best[i][j - 1]
                if take <= skip:
                    best[i][j], choice[i][j] = take, 1
                else:
                    best[i][j], choice[i][j] = skip, 0
        i, j = n, m
        while i > 0:
            if choice[i][j] == 1:
                plats[i - 1].label = names[j - 1]
                i -= 1
            j -= 1
    for p in plats:
        if p.label.startswith("L") and p.label[1:].isdigit():
            p.probe_size_bytes = probe_sizes.get(int(p.label[1:]))
