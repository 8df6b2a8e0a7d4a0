"""Outlier nodes and links among peers that should be alike (pure: no I/O).

The statistic is Iglewicz and Hoaglin's modified z-score (NIST/SEMATECH e-Handbook of Statistical
Methods, 1.3.5.17): ``M_i = 0.6745 * (x_i - median) / MAD`` with ``MAD = median(|x_i - median|)``;
a value is an outlier when ``|M_i| > 3.5``. Median and MAD are robust: one slow node among eight
moves neither, where mean and standard deviation would hide it.

Two guards make it usable on a handful of nodes:

* only the bad side counts (``higher_is_better`` says which side that is): a node faster than its
  peers is not a problem to report;
* a relative floor: a value closer to the median than ``min_rel`` (default 10 %) is never flagged,
  however small the MAD (identical nodes have a MAD near zero, and then 1 % would be "infinitely"
  many MADs away). When the MAD is zero the floor alone decides.

At least three values are needed (with two there is no majority to be an outlier from).
"""
from __future__ import annotations

import statistics
from typing import Mapping

Z_THRESHOLD = 3.5      # Iglewicz and Hoaglin's recommended cut-off for |M_i|
MIN_REL = 0.10         # and never closer to the median than 10 %
MIN_PEERS = 3
_K = 0.6745            # the 0.75 quantile of the standard normal: MAD * 1/0.6745 estimates sigma

METHOD = (f"modified z-score 0.6745*(x - median)/MAD (Iglewicz & Hoaglin), flagged when beyond "
          f"{Z_THRESHOLD:g} on the bad side and at least {MIN_REL:.0%} from the median; "
          f"needs {MIN_PEERS} or more peers")


def modified_z(values: Mapping[str, float]) -> dict[str, float | None]:
    """``{name: M_i}`` (None for all when the MAD is zero or there are fewer than two values)."""
    xs = list(values.values())
    if len(xs) < 2:
        return {k: None for k in values}
    med = statistics.median(xs)
    mad = statistics.median(abs(x - med) for x in xs)
    if mad == 0:
        return {k: None for k in values}
    return {k: _K * (x - med) / mad for k, x in values.items()}


def flag(values: Mapping[str, float], higher_is_better: bool, *, z: float = Z_THRESHOLD,
         min_rel: float = MIN_REL) -> dict[str, dict]:
    """The outliers on the bad side: ``{name: {"value", "median", "rel", "z"}}`` (``rel`` is the
    value's relative distance from the median, signed: -0.4 is 40 % below it)."""
    vals = {k: float(v) for k, v in values.items() if v is not None}
    if len(vals) < MIN_PEERS:
        return {}
    med = statistics.median(vals.values())
    if med == 0:
        return {}
    zs = modified_z(vals)
    out: dict[str, dict] = {}
    for k, x in vals.items():
        rel = (x - med) / abs(med)
        worse = rel < 0 if higher_is_better else rel > 0
        if not worse or abs(rel) < min_rel:
            continue
        m = zs[k]
        if m is not None and abs(m) <= z:
            continue
        out[k] = {"value": x, "median": med, "rel": rel, "z": m}
    return out
