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

A third guard, when the values come with their own samples (``spreads``: each node's samples'
range relative to their median): a node is not flagged closer to the median than the measurements'
own noise, the larger of its own spread and the peers' typical (median) spread. Nodes that share
cpus (a virtual cluster on a small host) measure 10-30 % apart from run to run whatever their
health, and a 12 % "slow node" among three of them is noise; a node at half speed among quiet
peers is still found.

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
          f"{Z_THRESHOLD:g} on the bad side and at least {MIN_REL:.0%} from the median, and farther from it "
          f"than the samples' own spread (the node's, or its peers' median spread if larger); "
          f"needs {MIN_PEERS} or more peers")


def spread(samples: "list[float] | tuple[float, ...] | None") -> float | None:
    """The range of a node's samples relative to their median (None with fewer than two)."""
    xs = [float(x) for x in (samples or []) if x is not None]
    if len(xs) < 2:
        return None
    med = statistics.median(xs)
    return (max(xs) - min(xs)) / abs(med) if med else None


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
         min_rel: float = MIN_REL, spreads: Mapping[str, float | None] | None = None) -> dict[str, dict]:
    """The outliers on the bad side: ``{name: {"value", "median", "rel", "z", "floor"}}`` (``rel`` is
    the value's relative distance from the median, signed: -0.4 is 40 % below it; ``floor`` the
    distance it had to pass: ``min_rel`` or the samples' spread, see the module docstring)."""
    vals = {k: float(v) for k, v in values.items() if v is not None}
    if len(vals) < MIN_PEERS:
        return {}
    med = statistics.median(vals.values())
    if med == 0:
        return {}
    zs = modified_z(vals)
    known = [float(v) for k, v in (spreads or {}).items() if v is not None and k in vals]
    typical = statistics.median(known) if known else 0.0
    out: dict[str, dict] = {}
    for k, x in vals.items():
        rel = (x - med) / abs(med)
        worse = rel < 0 if higher_is_better else rel > 0
        own = (spreads or {}).get(k)
        floor = max(min_rel, typical, float(own) if own is not None else 0.0)
        if not worse or abs(rel) < floor:
            continue
        m = zs[k]
        if m is not None and abs(m) <= z:
            continue
        out[k] = {"value": x, "median": med, "rel": rel, "z": m, "floor": floor}
    return out
