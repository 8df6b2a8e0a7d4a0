"""``intcpu``: 64-bit integer prime-search throughput with the definition of ``sysbench cpu
--cpu-max-prime=N`` (Carver (2014)'s integer test), so the events per second compare directly.

Method and conventions
  * One event (kernels/node/intcpu.c, the work of sysbench 1.0's ``cpu`` test, nothing less):
    every candidate ``c = 3 .. max_prime - 1`` (64-bit unsigned) is tested by trial division,
    ``d = 2, 3, ...`` while ``(double)d <= sqrt((double)c)`` (one double square root per
    candidate, the bound compared in double), with the 64-bit unsigned remainder ``c % d``;
    the candidates with no divisor are counted. At ``max_prime`` 10000 an event counts the 1228
    primes ``3 <= p < 10000`` with 117,526 remainders (``params["divisions_per_event"]``).
  * Run (sysbench's event loop): pinned threads start together; each repeats events until
    ``time`` has passed (checked before each event, so the last one may end after it, as in
    sysbench) or, with ``events``, until the shared budget is spent (both given: whichever comes
    first, as sysbench's ``--time`` and ``--events``). ``events_per_s`` = total events / total
    time, total time from the common start to the end of the last event: sysbench's "events per
    second". Defaults are sysbench's: ``max_prime`` 10000, ``time`` 10 s.
  * Validation: every event's count must equal the number of primes ``3 <= p < max_prime``
    found once by a sieve of Eratosthenes (an independent method); one wrong event fails the run
    before any figure is printed. ``corrupt`` (test hook) makes one event's count wrong.
  * Latency per event (ms), as sysbench prints it: min, avg, max and the 95th percentile (from a
    1 %-bucket logarithmic histogram) in ``params``; the ``latency`` metric's value is the mean.
    Per-thread events and sysbench's fairness figures (events and execution-time stddev) too.
  * Spread: the timed phase is cut into ``samples`` equal slices (sysbench's --report-interval,
    in effect); each slice gives an events/s and a mean-latency sample (fewer slices when there
    would be under 20 events in one). The figure itself is the whole run's, not the best slice.
  * Threads: placed by ``base.resolve_threads`` (physical cores first; ``--cpus``, ``--order``,
    ``--smt``); ``sweep`` runs N, then 1..N-1 (powers of two above 16; 1 and N in ``quick``),
    one fresh process per count.
  * Not in the ``node`` suite: a suite member runs in every profile, and sysbench's definition is
    a time-limited run (10 s per thread count, 1..N), which would add 20 s to ``run node`` on two
    cores and minutes on a large node for a figure that is compared with sysbench, not judged
    against a hardware limit. ``clusterbench run intcpu`` (``--quick``: 2 s per count).
"""
from __future__ import annotations

import math
from typing import Any

from clusterbench.analysis.summary import max_threads, pick
from clusterbench.benchmarks import register
from clusterbench.benchmarks.base import (KernelBenchmark, CPUS, ORDER, SMT, THREADS, Metric, Param, Result, RunContext,
                                          cpulist, resolve_threads)
from clusterbench.benchmarks.node.stream import sweep_counts

MAX_PRIME_LIMIT = 100_000_000
#: seconds per remainder, pessimistic (a slow Arm core), for the ETA and the timeout only
SECONDS_PER_DIVISION = 1e-8


def divisions_estimate(max_prime: int) -> float:
    """Remainders one event computes, roughly: primes need about sqrt(p) each, composites few
    (sum of sqrt(p) over p < N is about (2/3) N^1.5 / ln N; the composites add about 60 % at
    N = 1e4, where the exact count is 117,526). Only for estimates."""
    n = float(max_prime)
    if n < 16:
        return n
    return 1.6 * (2.0 / 3.0) * n ** 1.5 / math.log(n)


def _headlines(rs: list[Result]) -> list[str]:
    n = max_threads(rs, "intcpu", "events_per_s")
    every = pick(rs, "intcpu", "events_per_s", threads=n) if n else None
    one = pick(rs, "intcpu", "events_per_s", threads=1)
    out = []
    if every:
        out.append(f"integer  prime search (sysbench cpu, max-prime {every.params.get('max_prime')}), {n} "
                   f"thread{'s' if n != 1 else ''}: {every.value:,.1f} events/s")
    if one and every and n and n > 1:
        out.append(f"integer  prime search, 1 thread: {one.value:,.1f} events/s "
                   f"({every.value / one.value:.2f}x from 1 to {n})")
    return out


@register
class IntCpu(KernelBenchmark):
    name = "intcpu"
    suites: dict[str, int] = {}  # see the module docstring: run on its own, not in `run node`
    key_params = ('max_prime', 'threads')
    headlines = (_headlines,)
    help = "64-bit integer prime search, sysbench cpu's definition (events/s, threads 1..N), validated"
    kernel = "intcpu"
    metrics = (
        Metric("events_per_s", "events/s", True,
               "sysbench cpu events per second: total events / total time (one event = trial division of "
               "3..max_prime-1)", value_is="whole run"),
        Metric("latency", "ms", False, "mean time per event; min, max and 95th percentile in params",
               value_is="mean of the run"),
    )
    params = (
        Param("max_prime", int, 10000, "sysbench --cpu-max-prime: each event tests the candidates 3..max_prime-1",
              min=3, max=MAX_PRIME_LIMIT, why="one event near 1e8 takes about a minute"),
        THREADS, ORDER, SMT, CPUS,
        Param("time", float, 10.0, "seconds per thread count (sysbench --time; the last event may end after it)",
              min=0, max=86400, min_open=True),
        Param("events", int, None, "stop after this many events in all (sysbench --events; the time limit "
                                   "still applies)", min=1),
        Param("samples", int, 10, "slices of the timed phase, one events/s sample each (the spread)",
              min=1, max=1000),
        Param("sweep", bool, True, "also run fewer threads (1..N; quick: 1 and N)"),
        Param("corrupt", bool, False, "test hook: one event's prime count is made wrong (validation must fail)"),
    )
    profiles = {"quick": {"time": 2.0}, "full": {"time": 30.0}}

    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = resolve_threads(ctx, dict(params))
        longest = max(self._seconds(p, t) for t in self._counts(ctx, p))
        ctx.fit_timeout("intcpu", longest + 5, how=f" at max-prime {p['max_prime']}",
                        smaller="lower --max-prime or --time")
        return p

    @staticmethod
    def _counts(ctx: RunContext, params: dict[str, Any]) -> list[int]:
        return sweep_counts(params["threads"], ctx.profile, params["sweep"])

    @staticmethod
    def _seconds(params: dict[str, Any], threads: int) -> float:
        """One kernel run: the time limit (or the event budget), plus one event of overrun."""
        event = divisions_estimate(params["max_prime"]) * SECONDS_PER_DIVISION
        run = params["time"]
        if params.get("events"):
            run = min(run, math.ceil(params["events"] / threads) * event)
        return run + event + 0.2

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        return sum(self._seconds(params, t) for t in self._counts(ctx, params)) + 0.5

    def run(self, ctx: RunContext, params: dict[str, Any]) -> list[Result]:
        b = ctx.build(self.kernel)
        counts = self._counts(ctx, params)
        ctx.progress.start("intcpu", total=2 * len(counts))
        out: list[Result] = []
        for t in counts:
            cpus = list(params["cpus"][:t])
            base = {"threads": t, "cpus": cpus, "order": params["order"], "smt": bool(params["smt"]),
                    "max_prime": params["max_prime"], "time": params["time"], "events": params.get("events")}

            def on_result(rec: dict, base: dict = base) -> None:
                prm = {**base, **rec.get("params", {})}
                out.append(ctx.emit(self, rec["metric"], rec["samples"], prm, times_s=rec.get("times_s"),
                                    value=rec.get("value")))

            args = [f"--cpus={cpulist(cpus)}", f"--max_prime={params['max_prime']}", f"--time={params['time']}",
                    f"--events={params.get('events') or 0}", f"--samples={params['samples']}"]
            if params.get("corrupt"):
                args.append("--corrupt=1")
            self.measure(ctx, args, cpus, on_result, build=b)
        return out
