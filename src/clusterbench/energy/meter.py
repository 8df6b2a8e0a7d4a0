"""The run's meter: its power sources, the live ones sampled in threads of their own.

:class:`Meter` samples the live sources (rapl, ipmi, cmd) in threads of their own from before the
first benchmark starts until after the last one ends, each sample stamped with ``time.time()``
(wall clock, to match the kernels' phases and CSV logs) and ``time.monotonic()``;
:meth:`Meter.energy` gives the energy over any interval (see :mod:`clusterbench.energy.figures`).
:func:`clusterbench.energy.build.build_meter` makes it from the ``--power`` specs.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Sequence

from clusterbench.energy import figures as E
from clusterbench.energy.ipmi import IPMI_TIMEOUT
from clusterbench.energy.source import LiveSource, Source


class Meter:
    """The run's power sources, sampled from :meth:`start` to :meth:`stop`."""

    def __init__(self, sources: Sequence[Source], nodes: Sequence[str]) -> None:
        self.sources = list(sources)
        self.nodes = list(nodes)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.started: float | None = None

    @property
    def live(self) -> list[LiveSource]:
        return [s for s in self.sources if isinstance(s, LiveSource)]

    def check(self) -> None:
        """Every source readable now (a meter command run once, bounded); UsageError otherwise."""
        for s in self.sources:
            s.check()

    def describe(self) -> dict[str, Any]:
        return {s.label: s.describe() for s in self.sources}

    @property
    def declared(self) -> bool:
        return any(s.declared for s in self.sources)

    def start(self) -> None:
        """Sample every live source in a thread of its own; returns once each has its first sample
        (so there is one from before the benchmark starts)."""
        self.started = time.time()
        for src in self.live:
            t = threading.Thread(target=self._loop, args=(src,), name=f"cb-power-{src.label}", daemon=True)
            t.start()
            self._threads.append(t)
        limit = time.monotonic() + max([s.timeout + 1.0 for s in self.live] or [0])
        while any(not s.samples for s in self.live) and time.monotonic() < limit:
            time.sleep(0.005)

    def _loop(self, src: LiveSource) -> None:
        due = time.monotonic()
        while not self._stop.is_set():
            src.samples.append(src.take())
            due += src.interval or 1.0
            now = time.monotonic()
            if due < now:  # a slow reading: the next one now, not a burst to catch up
                due = now
            self._stop.wait(due - now)

    def wait_past(self, t_wall: float) -> None:
        """Wait (bounded: two intervals and a reading's time limit) until every live source has a
        reading stamped after ``t_wall``, so an interval ending there is bracketed."""
        limit = time.monotonic() + max([2 * (s.interval or 1.0) + s.timeout + 0.5 for s in self.live] or [0])
        while time.monotonic() < limit:
            if all(s.samples and s.samples[-1].wall >= t_wall for s in self.live):
                return
            if self._stop.is_set():
                return
            time.sleep(0.01)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=IPMI_TIMEOUT + 1.0)
        self._threads = []

    def energy(self, t0: float, t1: float, wait: bool = True) -> dict[str, Any]:
        """The energy over [t0, t1] (wall clock): per node (source), the cluster's total, the
        average power; ``{"missing": reason, ...}`` when any node's figure is missing. ``wait``:
        first let the live sources sample past t1 and a CSV log catch up (bounded)."""
        if wait and self.live and self.started is not None and not self._stop.is_set():
            self.wait_past(t1)
        per: dict[str, dict[str, Any]] = {}
        for s in self.sources:
            grace = s.grace_s if wait and time.time() - t1 < s.grace_s else 0.0
            deadline = time.monotonic() + grace
            while True:
                try:
                    fig = s.energy(t0, t1)
                    why = E.implausible_power(fig["joules"], fig["avg_watts"], len(s.covers), fig.pop("peak_watts", None))
                    per[s.label] = {"missing": why} if why else fig
                    break
                except E.NotCovered as exc:
                    if time.monotonic() < deadline and "before the end" in str(exc):
                        time.sleep(0.25)  # a logger that writes once a second may not be there yet
                        continue
                    per[s.label] = {"missing": str(exc)}
                    break
        total, why = E.cluster_total(per)
        out: dict[str, Any] = {"phase_s": t1 - t0, "phase_unix": [t0, t1]}
        if total is None:
            out["missing"] = why
        else:
            out.update(joules=total, avg_watts=E.average_power(total, t0, t1))
        out.update(per_node=per, sources=self.describe(), declared=self.declared,
                   basis=basis(self.sources), nodes=list(self.nodes))
        return out


def basis(sources: Sequence[Source]) -> str:
    """'measured', 'declared (not measured)' or 'measured and declared' (which nodes: see sources)."""
    d = {s.declared for s in sources}
    return "declared (not measured)" if d == {True} else "measured and declared" if d == {True, False} else "measured"
