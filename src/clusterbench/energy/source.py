"""A power source and its samples: what every meter kind shares.

A :class:`Source` names one meter (``label``) and the run's nodes it measures (``covers``); a
:class:`LiveSource` is sampled by the meter's threads (:mod:`clusterbench.energy.meter`), each
:class:`Sample` stamped with the wall clock and the monotonic clock, and gives the energy over an
interval from the samples that bracket it (:mod:`clusterbench.energy.figures` does the arithmetic).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

from clusterbench.energy import figures as E
from clusterbench.energy.spec import Spec

#: the wall clock moving against the monotonic clock by more than this inside a phase voids it
CLOCK_STEP_S = 0.5


@dataclass
class Sample:
    wall: float
    mono: float
    watts: float | None = None
    #: cumulative joules per counter (RAPL domains, a joule meter)
    joules: dict[str, float] | None = None
    error: str | None = None


class SampleFailed(Exception):
    """One reading failed; ``str(exc)`` says why."""


class Source:
    """One meter: ``label`` names it in the figures, ``covers`` the run's nodes it measures."""

    kind = ""
    live = False
    declared = False
    #: how long the meter waits for a reading to reach the end of an interval that just ended
    #: (a log written after the fact), before calling it not covered
    grace_s = 0.0

    def __init__(self, label: str, covers: Sequence[str], spec: Spec) -> None:
        self.label = label
        self.covers = list(covers)
        self.spec = spec
        self.interval: float | None = None
        self.timeout = 0.0
        self.samples: list[Sample] = []

    def check(self) -> None:
        """Raise a one-line UsageError when the source cannot be read now (bounded in time)."""

    def read(self) -> Sample:
        raise NotImplementedError

    def take(self) -> Sample:
        """One reading, stamped at its middle (a meter command takes a while); a failure is a
        sample with ``error`` set."""
        w0, m0 = time.time(), time.monotonic()
        try:
            s = self.read()
            err = None
        except SampleFailed as exc:
            s, err = Sample(0.0, 0.0), str(exc)
        w1, m1 = time.time(), time.monotonic()
        s.wall, s.mono, s.error = (w0 + w1) / 2, (m0 + m1) / 2, err
        return s

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "spec": self.spec.source_text if self.kind != "cmd" else
                             f"cmd:{self.command_text}", "declared": self.declared,
                             "rate_hz": round(1.0 / self.interval, 6) if self.interval else None}
        if self.covers != [self.label]:
            d["covers"] = list(self.covers)
        return d

    @property
    def command_text(self) -> str:
        return self.spec.arg

    def energy(self, t0: float, t1: float) -> dict[str, Any]:
        """{"joules", "avg_watts", ...} over [t0, t1]; raises NotCovered with the reason."""
        raise NotImplementedError


class LiveSource(Source):
    """A source sampled by the meter's thread; energy from its samples."""

    live = True
    counter = False  # cumulative joules (True) or watts

    def _window(self, t0: float, t1: float) -> list[Sample]:
        """The samples between the last good one at or before t0 and the first good one at or
        after t1; a failure among them, or a wall clock step, voids the interval."""
        ss = sorted(list(self.samples), key=lambda s: s.wall)
        good = [i for i, s in enumerate(ss) if s.error is None]
        if not ss:
            raise E.NotCovered("the meter has no samples")
        lo = max((i for i in good if ss[i].wall <= t0), default=None)
        hi = min((i for i in good if ss[i].wall >= t1), default=None)
        first, last = (lo if lo is not None else 0), (hi if hi is not None else len(ss) - 1)
        for s in ss[first:last + 1]:
            if s.error is not None:
                at = s.wall - t0
                when = f"{at:.1f} s into the interval" if at >= 0 else f"{-at:.1f} s before it"
                raise E.NotCovered(f"the meter failed {when}: {s.error}")
        if lo is None:
            raise E.NotCovered("no good sample at or before the start of the interval"
                               + (f" (the first is {ss[good[0]].wall - t0:.2f} s after it)" if good else ""))
        if hi is None:
            raise E.NotCovered("no good sample at or after the end of the interval"
                               + (f" (the last is {t1 - ss[good[-1]].wall:.2f} s before it)" if good else ""))
        win = ss[lo:hi + 1]
        offsets = [s.wall - s.mono for s in win]
        if max(offsets) - min(offsets) > CLOCK_STEP_S:
            raise E.NotCovered(f"the wall clock was stepped by {max(offsets) - min(offsets):.2f} s during the "
                               "interval (NTP?)")
        gap = E.largest_gap([s.wall for s in win], t0, t1)
        limit = 5 * (self.interval or 1.0) + self.timeout
        if gap > limit:
            raise E.NotCovered(f"no sample for {gap:.1f} s (more than {limit:.1f} s) inside the interval")
        return win

    def energy(self, t0: float, t1: float) -> dict[str, Any]:
        win = self._window(t0, t1)
        times = [s.wall for s in win]
        if self.counter:
            keys = list(win[0].joules or {})
            if any(set(s.joules or {}) != set(keys) for s in win):
                raise E.NotCovered("the counters read changed during the interval")
            wraps = self.wraps()
            j = sum(E.counter_energy(times, [s.joules[k] for s in win], t0, t1, wraps.get(k))  # type: ignore[index]
                    for k in keys)
            return {"joules": j, "avg_watts": E.average_power(j, t0, t1), "samples": len(win)}
        watts = [s.watts for s in win]
        j = E.integrate_power(times, watts, t0, t1)  # type: ignore[arg-type]
        return {"joules": j, "avg_watts": E.average_power(j, t0, t1), "samples": len(win),
                "peak_watts": max(watts)}  # type: ignore[type-var]

    def wraps(self) -> dict[str, float | None]:
        return {}
