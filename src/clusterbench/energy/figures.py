"""Energy over an interval from power samples or cumulative counters (pure: no I/O).

Two kinds of readings come from the power sources (:mod:`clusterbench.energy.spec` and the kinds' modules):

* **power** (watts at an instant: a meter command, IPMI, a CSV log): the energy over [t0, t1] is the
  trapezoid rule over the samples, the power at t0 and t1 interpolated linearly between the samples
  on either side (:func:`integrate_power`);
* **cumulative counters** (joules since some origin: RAPL's ``energy_uj``, a meter that prints
  joules): the energy is the counter's increase, each step taken modulo the counter's range when it
  wraps (:func:`unwrap`), the counter at t0 and t1 interpolated linearly (:func:`counter_energy`).

Either refuses (:class:`NotCovered`, with the reason) when the samples do not cover the interval:
no sample at or before t0, none at or after t1, or a counter that went backwards without a known
range. A refused interval is an energy marked missing, never a guessed figure.

Average power is joules / (t1 - t0); Gflops/W is Gflop/s over that average (:func:`per_watt`), the
Green500's figure. What the method corresponds to, and what it leaves out, is :data:`METHOD` and
:data:`LEVEL` (stored with every energy figure).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

#: how the energy is obtained (stored with every energy figure)
METHOD = ("energy integrated over exactly the stated interval at each node's meter: trapezoid rule over "
          "power samples (linear interpolation at the interval's ends) or the wrap-aware increase of a "
          "cumulative energy counter; average power = energy / interval; Gflops/W = Gflop/s / average power")
#: the Green500 / EEHPC measurement level it corresponds to, and what it leaves out
LEVEL = ("EEHPC Level 1-like: average power over the core phase (the timed phase) measured at the nodes, every "
         "node of the run metered (not extrapolated from a fraction). Left out: the network switch and anything "
         "else outside the nodes, the power supplies' losses unless the meter sits at the wall (RAPL sees only "
         "the CPU package and DRAM), idle nodes not in the run, cooling. Level 2/3 would need the whole system "
         "(switch included) and revenue-grade meters at the wall")


class NotCovered(ValueError):
    """The samples cannot give the energy over the interval; ``str(exc)`` says why."""


class NotReached(NotCovered):
    """The samples do not reach back to the interval's start or on to its end (the one reason that is
    a log "not covering" the interval; a sample that is not a power is another)."""


#: the power a running node can draw, in W: a Raspberry Pi Zero idles near 0.5 W; a node with eight
#: accelerators peaks near 10 kW. A meter reading outside this range per node it covers measured
#: something else (a disconnected or wrong channel, mW logged as W): its figure is not used.
MIN_NODE_WATTS = 0.1
MAX_NODE_WATTS = 20_000.0


def implausible_power(joules: float, avg_watts: float, nodes: int = 1, peak_watts: float | None = None) -> str | None:
    """Why a source's energy over a phase is not a node's power (None when it is plausible): a
    figure that is not finite (an overflow), or an average (or a sample) outside
    [:data:`MIN_NODE_WATTS`, :data:`MAX_NODE_WATTS`] per node the source covers."""
    n = max(1, int(nodes))
    lo, hi = MIN_NODE_WATTS * n, MAX_NODE_WATTS * n
    per = f" for {n} nodes" if n > 1 else " for a node"
    if not (math.isfinite(joules) and math.isfinite(avg_watts)):
        return f"the energy is not a finite number ({joules!r} J; a reading overflowed)"
    if avg_watts < lo:
        return (f"the meter read {avg_watts:.3g} W on average, below the {lo:g} W any running node draws{per}: "
                "it measured nothing (disconnected meter, wrong channel?)")
    if avg_watts > hi or (peak_watts is not None and peak_watts > hi):
        what = f"a sample of {peak_watts:.3g} W" if peak_watts is not None and peak_watts > hi else \
            f"{avg_watts:.3g} W on average"
        return (f"the meter read {what}, above the {hi:g} W any node can draw{per}: not a node's power "
                "(mW logged as W?)")
    return None


def require_interval(t0: float, t1: float) -> None:
    if not (math.isfinite(t0) and math.isfinite(t1)) or t1 <= t0:
        raise NotCovered(f"the interval [{t0!r}, {t1!r}] is empty or not finite")


def _sorted(times: Sequence[float], values: Sequence[float]) -> tuple[list[float], list[float]]:
    if len(times) != len(values):
        raise ValueError("times and values differ in length")
    pairs = sorted(zip((float(t) for t in times), (float(v) for v in values)), key=lambda p: p[0])
    for t, v in pairs:
        if not (math.isfinite(t) and math.isfinite(v)):
            raise NotCovered(f"a sample is not a finite number ({t!r}, {v!r})")
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _covers(ts: list[float], t0: float, t1: float, what: str) -> None:
    if not ts:
        raise NotReached(f"no {what}")
    if ts[0] > t0:
        raise NotReached(f"the first {what} is {ts[0] - t0:.3g} s after the start of the interval")
    if ts[-1] < t1:
        raise NotReached(f"the last {what} is {t1 - ts[-1]:.3g} s before the end of the interval")


def _at(ts: list[float], vs: list[float], t: float) -> float:
    """The value at ``t`` by linear interpolation (``t`` within the samples)."""
    lo, hi = 0, len(ts) - 1
    while hi - lo > 1:  # the last sample at or before t, the first after it
        mid = (lo + hi) // 2
        if ts[mid] <= t:
            lo = mid
        else:
            hi = mid
    if ts[hi] <= t:
        return vs[hi]
    if ts[lo] >= t or ts[hi] == ts[lo]:
        return vs[lo]
    f = (t - ts[lo]) / (ts[hi] - ts[lo])
    return vs[lo] + f * (vs[hi] - vs[lo])


def integrate_power(times: Sequence[float], watts: Sequence[float], t0: float, t1: float) -> float:
    """Joules over [t0, t1] from power samples (W at each time, any order): the trapezoid rule over
    the samples inside, the power at t0 and t1 interpolated. Raises :class:`NotCovered` when the
    samples do not reach back to t0 and on to t1, or a power is negative."""
    require_interval(t0, t1)
    ts, ws = _sorted(times, watts)
    if any(w < 0 for w in ws):
        raise NotCovered(f"a power sample is negative ({min(ws):g} W)")
    _covers(ts, t0, t1, "power sample")
    pts = [(t0, _at(ts, ws, t0))] + [(t, w) for t, w in zip(ts, ws) if t0 < t < t1] + [(t1, _at(ts, ws, t1))]
    joules = sum((b[0] - a[0]) * (a[1] + b[1]) / 2.0 for a, b in zip(pts, pts[1:]))
    if not math.isfinite(joules):
        raise NotCovered(f"a power sample of {max(ws):.3g} W is not a physical power (above the {MAX_NODE_WATTS:g} W "
                         "any node can draw): the energy over the interval is not a finite number (it overflowed)")
    return joules


def unwrap(values: Sequence[float], wrap: float | None) -> list[float]:
    """A cumulative counter made monotonic: each decrease is a wrap at ``wrap`` (the counter's range,
    e.g. RAPL's ``max_energy_range_uj``), so the step is ``(v1 - v0) mod wrap``. Without a known
    range a decrease cannot be explained (a reset, another meter) and raises :class:`NotCovered`.
    More than one wrap between two samples cannot be seen: sample faster than the range fills."""
    out: list[float] = []
    total = 0.0
    for i, v in enumerate(values):
        if i:
            step = v - values[i - 1]
            if step < 0:
                if not wrap or wrap <= 0:
                    raise NotCovered(f"the energy counter went backwards ({values[i - 1]:g} -> {v:g}) and its "
                                     "range is unknown (reset or restarted meter?)")
                step += wrap
                if step < 0:
                    raise NotCovered(f"the energy counter fell by more than its range {wrap:g}")
            total += step
        out.append(total)
    return out


def counter_energy(times: Sequence[float], values: Sequence[float], t0: float, t1: float,
                   wrap: float | None = None) -> float:
    """Joules over [t0, t1] from a cumulative counter in joules (any order of samples; ``wrap``: the
    counter's range in joules, None when it is not known to wrap)."""
    require_interval(t0, t1)
    ts, vs = _sorted(times, values)
    _covers(ts, t0, t1, "counter reading")
    cum = unwrap(vs, wrap)
    return _at(ts, cum, t1) - _at(ts, cum, t0)


def largest_gap(times: Sequence[float], t0: float, t1: float) -> float:
    """The longest time between consecutive samples that bound or fall inside [t0, t1]."""
    ts = sorted(float(t) for t in times)
    if len(ts) < 2:
        return math.inf
    first = max((i for i, t in enumerate(ts) if t <= t0), default=0)
    last = min((i for i, t in enumerate(ts) if t >= t1), default=len(ts) - 1)
    return max((b - a for a, b in zip(ts[first:last + 1], ts[first + 1:last + 1])), default=0.0)


def average_power(joules: float, t0: float, t1: float) -> float:
    require_interval(t0, t1)
    return joules / (t1 - t0)


def per_watt(rate: float, avg_watts: float) -> float:
    """A rate (Gflop/s) per watt of average power: Gflops/W, the Green500's figure."""
    if not (avg_watts > 0 and math.isfinite(avg_watts)):
        raise ValueError(f"average power {avg_watts!r} W cannot divide a rate")
    return rate / avg_watts


def cluster_total(per_node: Mapping[str, Mapping[str, object]]) -> tuple[float | None, str | None]:
    """(joules of all nodes, None) when every node has a figure, else (None, the first node's reason)."""
    total = 0.0
    for node, e in per_node.items():
        if "missing" in e:
            return None, f"{node}: {e['missing']}"
        total += float(e["joules"])  # type: ignore[arg-type]
    return total, None
