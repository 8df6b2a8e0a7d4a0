"""What a benchmark is: parameters, metrics (unit, direction, limits) and a run method.

A benchmark module declares one :class:`Benchmark` subclass with ``@register``. Its metrics,
their units, which direction is better and the limit each is judged against live in one place,
the class body, so results, docs and comparisons all derive from the same declaration.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from clusterbench.analysis import limits as limits_mod
from clusterbench.analysis import warnings as warn
from clusterbench.analysis.stats import summarize
from clusterbench.energy.phase import Ledger, Phase
from clusterbench.errors import KernelFailed, UsageError
from clusterbench.text import seconds
from clusterbench.kernels.build import Build, build_kernel
from clusterbench.benchmarks.declare import HpccKey, Metric, Param, Result  # noqa: F401 (the plug-in API)
from clusterbench.launch.local import KernelJob, Record, run_jobs


class Resolved(dict):
    """A benchmark's parameters after :meth:`Benchmark.check`: reads like the dict the benchmark
    completed (``p["threads"]``, ``p["size_list"]``), and keeps apart what the user asked for
    (:attr:`user`: defaults, profile and given values, before ``check``) from what ``check``
    derived or completed (:attr:`derived`: a thread count from the topology, a size list, the
    rank placement)."""

    def __init__(self, values: dict[str, Any], user: dict[str, Any]) -> None:
        super().__init__(values)
        self.user: dict[str, Any] = dict(user)

    @property
    def derived(self) -> dict[str, Any]:
        return {k: v for k, v in self.items() if k not in self.user or self.user[k] != v}


class Progress:
    """Progress sink; the CLI swaps in a rich progress bar. Silent by default."""

    def start(self, description: str, total: float) -> None:  # noqa: D401
        pass

    def advance(self, amount: float = 1.0) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def overall(self, seconds: float) -> None:
        """Announce the estimated length of the whole run (for an overall ETA)."""

    def overall_done(self, seconds: float) -> None:
        """How much of that estimate is done (absolute, not an increment)."""


@dataclass
class RunContext:
    """Everything a benchmark needs while it runs; usable from Python without the CLI.

    ``sink(result)`` is called for every result as soon as it is measured (the store writes
    it in its own transaction), so an interrupted run keeps what it finished.
    """

    probe: dict
    profile: str = "default"  # "quick" | "default" | "full"
    timeout: float = 600.0
    #: False when ``timeout`` is the default: a benchmark that knows it needs longer (a large
    #: HPL) may raise it, and says so in a note
    timeout_given: bool = True
    oversubscribe: bool = False
    progress: Progress = field(default_factory=Progress)
    sink: Callable[[Result], None] | None = None
    on_build: Callable[[Build], None] | None = None
    history: Callable[[str, str], list[dict]] | None = None  # (benchmark, metric) -> stored results
    results: list[Result] = field(default_factory=list)
    builds: dict[str, dict] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    timer_resolution_s: float | None = None
    #: the run's power meter (:class:`clusterbench.energy.meter.Meter`) when ``--power``/``--watts``
    #: were given: a result emitted with a ``phase`` then waits for its energy (:meth:`settle_energy`)
    meter: Any = None
    #: energy of every benchmark run, whole (:meth:`benchmark_span`), for the run's record
    energy_log: list[dict] = field(default_factory=list)
    _energy: Ledger = field(default_factory=Ledger, repr=False)

    def note(self, text: str) -> None:
        """A finding worth telling the user (e.g. which store variant won); kept with the run."""
        self.notes.append(text)
        self.progress.note(text)

    def fit_timeout(self, what: str, est: float, factor: float = 2.0, how: str = "",
                    smaller: str = "make the run smaller") -> None:
        """A run estimated at ``est`` seconds: above the default timeout, raise it to ``factor`` times
        the estimate (and say so); above a timeout the user gave, refuse (one line, the fix)."""
        if est <= self.timeout:
            return
        if not self.timeout_given:
            self.timeout = float(math.ceil(est * factor))
            self.note(f"{what} should take about {seconds(est)} s{how}: the timeout is {seconds(self.timeout)} s "
                      "for this run (--timeout sets it)")
            return
        raise UsageError(f"{what} would take about {seconds(est)} s{how}, above the {seconds(self.timeout)} s "
                         "timeout",
                         f"pass --timeout {math.ceil(est * factor)} or {smaller}")

    # -- building and running kernels -------------------------------------------------------
    def build(self, name: str, libs: tuple[str, ...] = (), extra_flags: tuple[str, ...] = (),
              openmp: bool = True, cc: str | None = None) -> Build:
        b = build_kernel(name, libs=libs, extra_flags=extra_flags, openmp=openmp, cc=cc)
        self.builds[b.name] = b.info
        if self.on_build:
            self.on_build(b)
        return b

    def run_kernel(self, build: Build, args: Sequence[str], env: dict[str, str] | None = None,
                   on_record: Callable[[Record], None] | None = None,
                   timeout: float | None = None) -> list[Record]:
        return self.run_parallel([KernelJob(build, list(args), env or {})],
                                 (lambda _i, r: on_record(r)) if on_record else None, timeout)[0]

    def run_parallel(self, jobs: Sequence[KernelJob], on_record: Callable[[int, Record], None] | None = None,
                     timeout: float | None = None) -> list[list[Record]]:
        def hook(i: int, rec: Record) -> None:
            if rec.get("type") == "info" and rec.get("timer_resolution_s"):
                self.timer_resolution_s = float(rec["timer_resolution_s"])
            if on_record:
                on_record(i, rec)
        return run_jobs(jobs, timeout or self.timeout, hook)

    # -- recording results ---------------------------------------------------------------------
    def emit(self, bench: "Benchmark", metric: str, samples: Sequence[float], params: dict,
             times_s: Sequence[float] | None = None, extra_warnings: Sequence[warn.Warning_ | None] = (),
             value: float | None = None, kernel: str | None = None, check_cv: bool = True,
             phase: "Phase | tuple[float, float] | None" = None) -> Result:
        """Summarise samples into a Result, judge it against its limits, store it, return it.

        ``value`` defaults to the best sample; pass it for derived figures (e.g. a plateau).
        ``check_cv=False`` when the samples are single iterations whose spread is the quantity
        measured (per-message latencies), not repetitions of one figure.
        ``phase``: the figure's timed phase in wall-clock seconds (a :class:`Phase` or ``(t0, t1)``).
        With a power meter the result is then stored once its energy over exactly that phase is known
        (``params.energy``, at the end of the benchmark: :meth:`settle_energy`); the returned Result
        is the one without it. Without a meter the phase is not used.
        """
        m = bench.metric(metric)
        clean = [float(s) for s in samples]
        if not clean or not all(math.isfinite(s) for s in clean):
            raise KernelFailed(f"benchmark '{bench.name}' produced no valid samples for {metric}",
                               "rerun; report it if it persists")
        summary = summarize(clean, m.higher_is_better)
        best = float(summary["best"] if value is None else value)
        params = dict(params)
        for hk in bench.hpcc_keys:  # HPC Challenge's name for this figure (first that applies)
            if hk.applies(m.name, params):
                params.update(hpcc_key=hk.key, hpcc_value=hk.hpcc_value(best, params))
                break
        res = Result(
            benchmark=bench.name, metric=m.name, value=best,
            unit=m.unit, higher_is_better=m.higher_is_better, params=params, samples=clean,
            summary=summary, kernel=kernel or bench.kernel,
        )
        ws: list[warn.Warning_ | None] = [warn.unstable(summary["cv"]) if check_cv and len(clean) > 1 else None]
        if times_s:
            ws.append(warn.coarse_timer(times_s, self.timer_resolution_s))
        ws.extend(extra_warnings)
        res = replace(res, warnings=warn.as_dicts(ws))
        from clusterbench.benchmarks import PROVIDERS

        judged = limits_mod.judge(self, res, m.limits, PROVIDERS)
        res = replace(res, limits=judged, limit=judged[0] if judged else None)
        self.results.append(res)
        if self._energy.hold(self, bench, len(self.results) - 1, res, phase):
            return res
        if self.sink:
            self.sink(res)
        return res

    # -- energy (clusterbench.energy.phase) --------------------------------------------------------
    def benchmark_span(self, name: str) -> AbstractContextManager[None]:
        """Around one benchmark's run: with a power meter, its whole energy goes to :attr:`energy_log`
        and the figures it emitted with a phase are settled at its end (:meth:`Ledger.span`)."""
        return self._energy.span(self, name)

    def settle_energy(self, wait: bool = True) -> list[Result]:
        """Store every figure emitted with a phase with its energy, and the per-watt figures the
        benchmark declares (:meth:`Ledger.settle`)."""
        return self._energy.settle(self, wait)

    # -- machine facts used by many benchmarks ---------------------------------------------------
    @property
    def n_pus(self) -> int:
        """PUs this process may use (the affinity mask narrows the machine's on a live probe)."""
        return len(allowed_cpus(self))

    @property
    def n_cores(self) -> int:
        topo = self.probe.get("topology") or {}
        return int(topo.get("cores") or self.n_pus)


class Benchmark:
    """Base class. Subclasses set the class attributes and implement :meth:`run`."""

    name: ClassVar[str]
    #: older names that still select it on the command line and in Python
    aliases: ClassVar[tuple[str, ...]] = ()
    help: ClassVar[str]
    kernel: ClassVar[str | None] = None
    #: libraries the kernel links (``-l`` names), used by the default :meth:`prepare`
    kernel_libs: ClassVar[tuple[str, ...]] = ()
    metrics: ClassVar[tuple[Metric, ...]] = ()
    params: ClassVar[tuple[Param, ...]] = ()
    #: parameter overrides applied by ``--quick`` and ``--full``
    profiles: ClassVar[dict[str, dict[str, Any]]] = {}
    #: the suites (composites such as ``node`` and ``mpi``) this benchmark belongs to, each with
    #: its position there: a composite runs its members in that order
    suites: ClassVar[dict[str, int]] = {}
    #: the parameters that tell one figure of this benchmark from another in a table
    #: (e.g. ``threads``, ``size_bytes``); the printer shows these, in this order
    key_params: ClassVar[tuple[str, ...]] = ()
    #: what the summary says about this benchmark's figures: headline lines and findings
    #: ("what holds it back"), as small rules over result dicts (see :mod:`analysis.findings`)
    headlines: ClassVar[tuple[Callable[[list[Result]], list[str]], ...]] = ()
    findings: ClassVar[tuple[Callable[[list[Result]], list[str]], ...]] = ()
    #: HPC Challenge summary keys its figures map to (``params.hpcc_key``; see :class:`HpccKey`)
    hpcc_keys: ClassVar[tuple[HpccKey, ...]] = ()
    #: figures that have a per-watt figure when the run's power is known: {metric: per-watt metric},
    #: e.g. {"rmax": "gflops_per_watt"} (the per-watt metric is declared in ``metrics`` too)
    per_watt: ClassVar[dict[str, str]] = {}

    @classmethod
    def describe(cls) -> str:
        """The one-line help of ``clusterbench run NAME``."""
        return cls.help

    @classmethod
    def declaration(cls) -> dict[str, Any]:
        """What this benchmark declares, as data (``clusterbench list --json``)."""
        return {"help": cls.describe(), "family": cls.__module__.split(".")[-2],
                "aliases": list(cls.aliases), "suites": dict(cls.suites), "key_params": list(cls.key_params),
                "hpcc_keys": [k.key for k in cls.hpcc_keys],
                "metrics": [dict(m.__dict__) for m in cls.metrics],
                "params": [{"name": p.name, "type": getattr(p.type, "__name__", p.type), "default": p.default,
                            "help": p.help, "choices": p.choices, "min": p.min, "max": p.max,
                            "min_open": p.min_open, "why": p.why or None, "excludes": list(p.excludes)}
                           for p in cls.params]}

    def metric(self, name: str) -> Metric:
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(f"{self.name} declares no metric {name!r}")

    def defaults(self, profile: str = "default") -> dict[str, Any]:
        vals = {p.name: p.default for p in self.params}
        vals.update(self.profiles.get(profile, {}))
        return vals

    def resolve(self, ctx: RunContext, given: dict[str, Any]) -> dict[str, Any]:
        """Defaults, then the profile, then the user's values; then :meth:`check`.

        Runs before anything is stored, so bad input leaves nothing half-written."""
        known = {p.name for p in self.params}
        unknown = set(given) - known
        if unknown:
            name = sorted(unknown)[0]
            raise UsageError(f"benchmark '{self.name}' has no parameter '{name}'",
                             f"see 'clusterbench run {self.name} --help'")
        params = self.defaults(ctx.profile)
        params.update({k: v for k, v in given.items() if v is not None})
        for p in self.params:
            p.check(params[p.name], given=given.get(p.name) is not None)
            clash = [o for o in p.excludes if given.get(p.name) is not None and given.get(o) is not None]
            if clash:
                other = "--" + clash[0].replace("_", "-")
                raise UsageError(f"{p.flag} and {other} both given", "give one of them")
        return Resolved(self.check(ctx, dict(params)), user=params)

    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        """Validate and complete parameters (e.g. threads from the topology). Raise UsageError."""
        return params

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        """Rough duration, for the progress bar's ETA."""
        return 10.0

    def prepare(self, ctx: RunContext, params: dict[str, Any]) -> None:
        """Compile what :meth:`run` needs, before the run is opened in the store, so a missing
        compiler or library fails cleanly with nothing stored. Later builds hit the cache."""
        if self.kernel:
            ctx.build(self.kernel, libs=self.kernel_libs)

    def run(self, ctx: RunContext, params: dict[str, Any]) -> list[Result]:
        raise NotImplementedError

    def hosts(self, params: dict[str, Any]) -> list[str]:
        """The hosts a run with these (resolved) parameters spans, from ``hosts``/``hostfile``;
        empty for this node only. The session gathers each one's probe and NIC settings into the
        run's cluster record before measuring."""
        from clusterbench.launch import mpi as mpimod

        spec = params.get("hosts")
        if spec and str(spec).strip() not in ("local", "localhost"):
            return [h.name for h in mpimod.parse_hosts(str(spec))]
        if params.get("hostfile"):
            return [h.name for h in mpimod.parse_hostfile(params["hostfile"])]
        return []


class KernelBenchmark(Benchmark):
    """A benchmark that runs its C kernel on this node. :meth:`prepare` builds it (``kernel``,
    linked with ``kernel_libs``) before the run is opened; :meth:`measure` runs it once with the
    standard record handling: the info record's placement is checked against the cpus asked for
    before any figure is trusted, each result record goes to ``on_result`` (which emits the
    figures), and the progress bar advances per result."""

    def measure(self, ctx: RunContext, args: Sequence[str], cpus: Sequence[int],
                on_result: Callable[[dict], None], on_info: Callable[[dict], None] | None = None,
                build: Build | None = None, env: dict[str, str] | None = None) -> dict:
        """Run the kernel with ``args``; return its info record."""
        b = build or ctx.build(self.kernel or self.name, libs=self.kernel_libs)
        info: dict = {}

        def on(rec: dict) -> None:
            if rec["type"] == "info":
                check_placement(rec, cpus, self.name)
                info.update(rec)
                if on_info:
                    on_info(rec)
            elif rec["type"] == "result":
                on_result(rec)
                ctx.progress.advance(1)

        ctx.run_kernel(b, args, env=env, on_record=on)
        return info


class Composite(Benchmark):
    """A benchmark made of others (``node``, ``mpi``): its members are the benchmarks that
    declare its name in their ``suites``, in the order they give. :meth:`check` resolves each part
    into ``params["parts"]`` ({name: resolved params}); estimating, building, the hosts and
    running then go part by part, in order."""

    @classmethod
    def members(cls) -> tuple[str, ...]:
        from clusterbench.benchmarks import all_benchmarks

        found = [(b.suites[cls.name], name) for name, b in all_benchmarks().items() if cls.name in b.suites]
        return tuple(name for _, name in sorted(found))

    @classmethod
    def describe(cls) -> str:
        return f"{cls.help}: {', '.join(cls.members())}"

    @classmethod
    def skipped(cls, params: dict[str, Any], part: str) -> tuple[str, ...]:
        """The members ``--skip`` leaves out; one that is not a member is refused, naming what a member
        is (``part``: "a node benchmark", "an mpi part") and the members."""
        members = cls.members()
        skip = tuple(params.get("skip") or ())
        bad = [s for s in skip if s not in members]
        if bad:
            raise UsageError(f"--skip {bad[0]} is not {part}", f"choose from {', '.join(members)}")
        return skip

    def _parts(self, params: dict[str, Any]) -> list[tuple["Benchmark", dict[str, Any]]]:
        from clusterbench.benchmarks import get_benchmark

        return [(get_benchmark(n), p) for n, p in params["parts"].items()]

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        return sum(b.estimate_seconds(ctx, p) for b, p in self._parts(params))

    def prepare(self, ctx: RunContext, params: dict[str, Any]) -> None:
        for b, p in self._parts(params):
            b.prepare(ctx, p)

    def hosts(self, params: dict[str, Any]) -> list[str]:
        return list(dict.fromkeys(h for b, p in self._parts(params) for h in b.hosts(p)))

    def run(self, ctx: RunContext, params: dict[str, Any]) -> list[Result]:
        out: list[Result] = []
        done = 0.0
        for b, p in self._parts(params):
            with ctx.benchmark_span(b.name):
                out.extend(b.run(ctx, p) or [])
            done += b.estimate_seconds(ctx, p)
            ctx.progress.overall_done(done)
        return out


# -- shared parameter helpers ------------------------------------------------------------------
THREADS = Param("threads", int, None, "threads (default: one per physical core)", min=1)
ORDER = Param("order", str, "compact", "thread placement order", ("compact", "spread"))
SMT = Param("smt", bool, False, "also use SMT siblings (hyper-threads) after the physical cores")
CPUS = Param("cpus", "intlist", None, "explicit cpu list, e.g. 0,2,4 (overrides --order)", min=0)
CPU = Param("cpu", int, None, "cpu to pin the single thread to (default: the first of the placement)", min=0)


def allowed_cpus(ctx: RunContext) -> list[int]:
    """The cpus this process may run on: the probe's online cpus, narrowed on a live machine to
    the affinity mask (taskset, a Slurm allocation, a container's cpuset)."""
    online = [c["pu"] for c in (ctx.probe.get("topology") or {}).get("cpus", [])]
    if not online:
        online = list(range(os.cpu_count() or 1))
    if ctx.probe.get("root", "/") in ("/", None) and hasattr(os, "sched_getaffinity"):
        mask = os.sched_getaffinity(0)
        narrowed = [c for c in online if c in mask]
        return narrowed or sorted(mask)
    return online


def check_threads(ctx: RunContext, threads: int | None, name: str = "threads") -> int:
    """Default to one thread per physical core; refuse 0 and more than the PUs unless asked."""
    if threads is None:
        return min(ctx.n_cores, ctx.n_pus)
    if threads < 1:
        raise UsageError(f"--{name} {threads} is not allowed", f"use --{name} 1 or more")
    if threads > ctx.n_pus and not ctx.oversubscribe:
        raise UsageError(f"--{name} {threads} exceeds the {ctx.n_pus} PUs this process may use",
                         f"use --{name} {ctx.n_pus} or fewer, or add --oversubscribe")
    return threads


def check_cpu(ctx: RunContext, cpu: int | None) -> int:
    """One cpu for a single-threaded kernel: given (and allowed) or the first of the placement."""
    if cpu is None:
        return placement(ctx, 1)[0]
    if cpu not in allowed_cpus(ctx):
        raise UsageError(f"--cpu {cpu} is not an online cpu this process may use",
                         "see 'clusterbench probe' for the cpu list")
    return cpu


def resolve_threads(ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
    """Settle ``threads`` and ``cpus`` together: ``--cpus`` fixes both (and must agree with
    ``--threads``); otherwise ``threads`` (default: one per core) placed by ``order``/``smt``.
    Two threads on one cpu only with ``--oversubscribe``."""
    cpus = params.get("cpus")
    threads = params.get("threads")
    if cpus is not None:
        cpus = list(cpus)
        if not cpus:
            raise UsageError("--cpus is empty", "give at least one cpu, e.g. --cpus 0")
        if threads is not None and threads != len(cpus):
            raise UsageError(f"--threads {threads} does not match the {len(cpus)} cpus given with --cpus",
                             "give one or the other")
        if len(set(cpus)) != len(cpus) and not ctx.oversubscribe:
            raise UsageError("--cpus lists a cpu twice", "list each cpu once, or add --oversubscribe")
    params["threads"] = check_threads(ctx, len(cpus) if cpus is not None else threads)
    params["cpus"] = placement(ctx, params["threads"], params.get("order", "compact"),
                               bool(params.get("smt")), cpus)
    return params


def placement(ctx: RunContext, threads: int, order: str = "compact", smt: bool = False,
              cpus: Sequence[int] | None = None) -> list[int]:
    """The cpus the threads run on, in thread order: explicit, or from the topology (physical
    cores first, then SMT siblings, then, oversubscribed, around again)."""
    from clusterbench.probe.topology import cpu_order

    allowed = allowed_cpus(ctx)
    if cpus:
        bad = [c for c in cpus if c not in allowed]
        if bad:
            raise UsageError(f"cpu {bad[0]} is not an online cpu this process may use",
                             "see 'clusterbench probe' for the cpu list")
        return list(cpus)
    base = [c for c in cpu_order(ctx.probe, order, smt=smt) if c in allowed] or allowed
    if len(base) < threads:  # more threads than cores: use SMT siblings, then wrap around
        base = [c for c in cpu_order(ctx.probe, order, smt=True) if c in allowed] or allowed
    return [base[i % len(base)] for i in range(threads)]


def check_placement(info: dict, wanted: Sequence[int], bench: str) -> None:
    """Refuse figures from threads that did not run where they were asked to (cgroups, a
    failed pin): the kernel reports ``cpus_actual`` from sched_getcpu in its info record."""
    got = info.get("cpus_actual")
    if got is None:
        raise KernelFailed(f"kernel '{bench}' did not report where its threads ran", "report this as a bug")
    if len(got) != len(wanted):
        raise KernelFailed(f"{bench}: kernel ran {len(got)} threads, {len(wanted)} requested", "report this as a bug")
    for t, (w, g) in enumerate(zip(wanted, got)):
        if w != g:
            raise KernelFailed(f"{bench}: thread {t} ran on cpu {g}, not on the requested cpu {w}",
                               "check cgroup/cpuset restrictions (taskset, Slurm --cpu-bind) or choose --cpus")


def available_memory(probe: dict) -> int | None:
    """MemAvailable in bytes: the probe's, else /proc/meminfo's."""
    val = (probe.get("memory") or {}).get("available_bytes")
    if val:
        return int(val)
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def cpulist(cpus: Sequence[int]) -> str:
    return ",".join(str(c) for c in cpus)
