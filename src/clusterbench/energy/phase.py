"""A benchmark's timed phase, and the figures that wait for its energy.

A benchmark emits a figure with its timed phase (``RunContext.emit(..., phase=...)``); with a power
meter the figure is held (:meth:`Ledger.hold`) until its benchmark ends, then stored with the energy
over exactly that phase (``params.energy``) and, for the figures the benchmark declares in
``Benchmark.per_watt``, a per-watt figure (Gflops/W) (:meth:`Ledger.settle`). Around each benchmark
(:meth:`Ledger.span`) the whole benchmark's energy goes to the run's energy record. An energy that cannot
be had is ``params.energy = {"missing": reason}`` with a warning; the figure itself is kept.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from clusterbench.analysis import warnings as warn
from clusterbench.energy.figures import LEVEL, METHOD

if TYPE_CHECKING:
    from clusterbench.benchmarks.base import Benchmark, Result, RunContext


@dataclass(frozen=True)
class Phase:
    """A benchmark's timed phase in wall-clock seconds (unix time, ``CLOCK_REALTIME`` in a kernel,
    ``time.time()`` in Python): the interval whose energy goes with its figures. ``resolution_s``: how
    coarse the ends are when known to less than a millisecond or so (xhpl prints whole seconds);
    ``source``: where the ends come from. ``missing``: the phase is not known, and why (the figures
    then carry ``params.energy = {"missing": ...}``)."""

    t0: float = 0.0
    t1: float = 0.0
    resolution_s: float | None = None
    source: str = "the kernel's wall clock (CLOCK_REALTIME)"
    missing: str | None = None
    #: what would give the phase (shown with the warning when it is missing)
    fix: str | None = None

    @classmethod
    def unknown(cls, why: str, fix: str | None = None) -> "Phase":
        return cls(missing=why, fix=fix)


#: the scope of an energy figure: a benchmark's timed phase, or the whole benchmark as Python sees it
TIMED_PHASE = "timed phase"
WHOLE_BENCHMARK = "whole benchmark (from when clusterbench starts it until it returns)"


def declared_warning(e: dict) -> warn.Warning_:
    who = [n for n, s in (e.get("sources") or {}).items() if s.get("declared")]
    return warn.Warning_("energy-declared", f"the power of {', '.join(who) or 'the nodes'} is declared (--watts / "
                         "watts:W), not measured: the energy and any per-watt figure are arithmetic on that figure",
                         "measure it: --power rapl, ipmi, cmd:COMMAND or csv:FILE")


@dataclass
class Ledger:
    """A run context's figures waiting for their phase's energy, and the benchmarks in progress."""

    pending: list = field(default_factory=list)
    spans: list[str] = field(default_factory=list)

    def hold(self, ctx: "RunContext", bench: "Benchmark", idx: int, res: "Result",
             phase: "Phase | tuple[float, float] | None") -> bool:
        """With a meter and a phase, keep ``ctx.results[idx]`` (``res``) until its benchmark ends, and
        say so (True: the caller does not store it now); otherwise False."""
        if phase is None or ctx.meter is None:
            return False
        ph = phase if isinstance(phase, Phase) else Phase(float(phase[0]), float(phase[1]))
        self.pending.append((bench, idx, res, ph))
        return True

    @contextmanager
    def span(self, ctx: "RunContext", name: str) -> Iterator[None]:
        """Around one benchmark's run: with a power meter, its whole energy (start to end as Python
        sees it) goes to ``ctx.energy_log``, and the figures it emitted with a phase are settled at
        its end. Without a meter, nothing."""
        if ctx.meter is None:
            yield
            return
        t0 = time.time()
        self.spans.append(name)
        ok = False
        try:
            yield
            ok = True
        finally:
            self.spans.pop()
            t1 = time.time()
            try:
                ctx.settle_energy(wait=ok)
                entry: dict[str, Any] = {"benchmark": name, "scope": WHOLE_BENCHMARK,
                                         **ctx.meter.energy(t0, t1, wait=ok)}
                if self.spans:
                    entry["within"] = self.spans[-1]
                if not ok:
                    entry["interrupted"] = True
                ctx.energy_log.append(entry)
            except Exception:
                if ok:
                    raise  # a store error while settling: the run fails as it would on any other write
                # already failing: the original error is what the user must see

    def settle(self, ctx: "RunContext", wait: bool = True) -> list["Result"]:
        """Attach the energy over its phase to every figure held, store them (``ctx.sink``), and emit
        the per-watt figures the benchmark declares (``Benchmark.per_watt``)."""
        pending, self.pending = self.pending, []
        out: list[Result] = []
        later: list[Callable[[], Result]] = []  # the per-watt figures, stored after the figures they derive from
        for bench, idx, res, ph in pending:
            if ph.missing:
                e: dict[str, Any] = {"scope": TIMED_PHASE, "missing": ph.missing}
            else:
                e = {"scope": TIMED_PHASE, **ctx.meter.energy(ph.t0, ph.t1, wait=wait), "phase_from": ph.source}
                if ph.resolution_s:
                    e["phase_resolution_s"] = ph.resolution_s
            e.update(method=METHOD, level=LEVEL)
            ws = list(res.warnings)
            if "missing" in e:
                fix = ph.fix or "fix the power source (--power, see the README's Energy section) and rerun for Gflops/W"
                ws.append(warn.Warning_("energy-missing", f"no energy for this figure: {e['missing']}",
                                        f"the performance figure is kept; {fix}").as_dict())
            elif e.get("declared"):
                ws.append(declared_warning(e).as_dict())
            done = replace(res, params={**res.params, "energy": e}, warnings=ws)
            ctx.results[idx] = done
            if ctx.sink:
                ctx.sink(done)
            out.append(done)
            per = bench.per_watt.get(res.metric)
            if per and "missing" not in e and e.get("avg_watts"):
                avg = float(e["avg_watts"])
                prm = {k: v for k, v in res.params.items() if k not in ("hpcc_key", "hpcc_value")}
                later.append(lambda bench=bench, per=per, res=res, avg=avg, prm=prm, e=e: ctx.emit(
                    bench, per, [s / avg for s in res.samples], {**prm, "energy": e}, value=res.value / avg,
                    kernel=res.kernel, check_cv=False,
                    extra_warnings=[declared_warning(e) if e.get("declared") else None]))
        return out + [make() for make in later]
