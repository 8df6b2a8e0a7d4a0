"""A measuring session: probe, validate, open a run, measure, store, close.

This is the Python entry point behind ``clusterbench run``::

    from clusterbench.session import run
    report = run(["stream"], {"stream": {"threads": 2}}, profile="quick")
    print(report.document())

Order matters for the store's guarantees: every parameter is validated and the store is checked
writable *before* the run row exists, so bad input leaves nothing behind; once the run exists,
each result is committed as it is measured and any interruption (Ctrl-C, SIGTERM, a crashing or
hung kernel) closes the run as ``incomplete`` with what was measured so far.
"""
from __future__ import annotations

import os
import signal
import socket
import sys
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from clusterbench import SCHEMA_VERSION, __version__
from clusterbench.probe import clock
from clusterbench.analysis import warnings as warn
from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import Benchmark, Progress, Result, RunContext
from clusterbench.energy import run as energy
from clusterbench.errors import ClusterbenchError, UsageError
# the interruption's machinery lives apart (a command's start imports it without this module); named here as ever
from clusterbench import interrupts
from clusterbench.interrupts import Interrupted, interrupt_status, raise_pending, terminate_as_interrupt  # noqa: F401
from clusterbench.records import Run
from clusterbench.store import Store
from clusterbench.store.db import now_iso
from clusterbench.store.liveness import boot_id, process_start
from clusterbench.telemetry import watch as pi


@dataclass
class RunReport:
    """What a session produced: the run record and its results (also in the store), typed as the
    store hands them back."""

    run: Run
    results: list[Result] = field(default_factory=list)

    def document(self) -> dict:
        """The public ``--json`` document (schema :data:`clusterbench.SCHEMA_VERSION`)."""
        return {"schema": SCHEMA_VERSION, "run": self.run.as_json(), "results": [r.as_json() for r in self.results]}


@contextmanager
def shielded(discard: bool = False) -> Iterator[None]:
    """Hold off Ctrl-C, SIGTERM and SIGHUP while a run is being closed and reported: a second Ctrl-C
    must not leave the run open or swallow the line that says what was kept. With ``discard`` (the
    run is already ending on an error or an interrupt) such signals are ignored meanwhile; without
    it they are postponed and delivered when the block ends."""
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    if discard:
        old = {s: signal.signal(s, signal.SIG_IGN) for s in sigs}
        try:
            yield
        finally:
            for s, h in old.items():
                signal.signal(s, h)
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, set(sigs))
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def plan(names: Sequence[str], given: dict[str, dict], ctx: RunContext) -> list[tuple[Benchmark, dict]]:
    """Resolve and validate every benchmark's parameters; raises before anything is stored."""
    out = []
    for name in names:
        bench = get_benchmark(name)
        out.append((bench, bench.resolve(ctx, dict(given.get(name, {})))))
    return out


#: Seconds before a kernel is killed, unless the caller says otherwise.
DEFAULT_TIMEOUT = 900.0
#: under QEMU user mode (probe ``environment.emulation``) the default timeout is this many times longer: a
#: quick dgemm of order 1200 on ppc64el's emulated VSX took over 900 s on 2 loaded cores
EMULATED_TIMEOUT_FACTOR = 4


def kernel_timeout(probe_data: dict, given: float | None) -> tuple[float, str | None]:
    """A kernel's timeout: the one given, else :data:`DEFAULT_TIMEOUT`, or under QEMU user mode (the
    probe's ``environment.emulation``) :data:`EMULATED_TIMEOUT_FACTOR` times it; and a note saying so."""
    if given is not None:
        return given, None
    emulated = (probe_data.get("environment") or {}).get("emulation")
    if not emulated:
        return DEFAULT_TIMEOUT, None
    t = DEFAULT_TIMEOUT * EMULATED_TIMEOUT_FACTOR
    return t, (f"emulated CPU ({emulated.get('mode') or 'emulator'}): a kernel's default timeout is {t:.0f} s, "
               f"{EMULATED_TIMEOUT_FACTOR} x the native {DEFAULT_TIMEOUT:.0f} s (--timeout sets it)")


def run(
    names: Sequence[str],
    given: dict[str, dict] | None = None,
    *,
    profile: str = "default",
    store: Store | None = None,
    use_store: bool = True,
    argv: Sequence[str] | None = None,
    timeout: float | None = None,
    oversubscribe: bool = False,
    progress: Progress | None = None,
    probe_data: dict | None = None,
    tags: Sequence[str] = (),
    note: str | None = None,
    power: Sequence[str] = (),
    watts: float | None = None,
    power_interval: float | None = None,
) -> RunReport:
    """Run benchmarks by name and return the report; see the module docstring.

    ``power`` (``--power`` specs, e.g. ``["rapl"]``, ``["n1=csv:n1.csv", "n2=watts:7.5"]``), ``watts``
    (``--watts``, a declared constant for every node) and ``power_interval`` (seconds between samples)
    meter the run: see :mod:`clusterbench.energy`. The sources are checked before anything is
    stored; every figure with a timed phase then carries ``params.energy`` and, for HPL's rmax and
    HPCG's rating, a ``gflops_per_watt`` figure; the run record's ``energy`` holds every benchmark's.

    On an exception (bad input, a failed kernel, an interruption) the partial report is
    attached to it as ``exc.report`` when a run had started."""
    with terminate_as_interrupt():  # from the start: a SIGTERM while compiling is handled too
        return _run(names, given or {}, profile, store, use_store, argv, timeout, oversubscribe,
                    progress, probe_data, tags, note, list(power), watts, power_interval)


def _run(names: Sequence[str], given: dict[str, dict], profile: str, store: Store | None, use_store: bool,
         argv: Sequence[str] | None, timeout: float | None, oversubscribe: bool, progress: Progress | None,
         probe_data: dict | None, tags: Sequence[str] = (), note: str | None = None,
         power: Sequence[str] = (), watts: float | None = None, power_interval: float | None = None) -> RunReport:
    from clusterbench.probe import probe as do_probe
    from clusterbench.store.names import check_note, check_tag

    tags = list(dict.fromkeys(check_tag(t) for t in tags))  # bad tags refused before anything runs
    check_note(note)  # so is an over-long note
    energy.check_options(power, watts, power_interval)  # so are bad power options

    timeout_given = timeout is not None
    if timeout_given and not timeout > 0:
        raise UsageError(f"--timeout {timeout:g} is not allowed", "give a number of seconds above 0")
    probe_data = probe_data if probe_data is not None else do_probe()
    timeout, why = kernel_timeout(probe_data, timeout)  # the given one, else the default (longer when emulated)
    ctx = RunContext(probe=probe_data, profile=profile, timeout=timeout, timeout_given=timeout_given,
                     oversubscribe=oversubscribe,
                     progress=progress or Progress())
    if why:
        ctx.note(why)
    steps = plan(names, given, ctx)
    for bench, params in steps:
        bench.prepare(ctx, params)
    argv = list(argv if argv is not None else sys.argv)
    record = new_run_record(argv, probe_data, profile)
    record["tags"], record["note"] = tags, note
    hosts = list(dict.fromkeys(h for bench, params in steps for h in bench.hosts(params)))
    if hosts:  # separate machines: reachable, named right, the same clusterbench (cached a while after a pass)
        from clusterbench.cluster.preflight import quick

        quick(hosts, rdma=any(params.get("transport") == "rdma" or "rdma" in (params.get("transports") or ())
                              for _, params in steps))
    meter = energy.meter_for_run(power, watts, power_interval, hosts)  # bad power input: refused before anything is stored
    if meter is not None:
        ctx.meter = meter
        record["energy"] = energy.run_record(meter, ctx.energy_log)
    if hosts:  # a run across hosts: every node's probe and NIC settings, before anything is stored
        from clusterbench.cluster.check import provenance
        record["cluster"] = provenance(hosts, timeout=min(60.0, timeout))
        n = len(record["cluster"]["differences"])
        if n:
            ctx.note(f"cluster: {n} setting(s) differ between the nodes "
                     f"({', '.join(d['key'] for d in record['cluster']['differences'][:3])}"
                     f"{', ...' if n > 3 else ''}); see `clusterbench cluster check`")
    record["builds"] = ctx.builds  # filled as kernels are built
    if use_store and store is None:
        store = Store()
    if not use_store:
        store = None
    if store is not None:
        store.check_writable()
        store.begin_run(record)
        ctx.sink = lambda res: store.add_result(record["id"], res)  # type: ignore[union-attr]
        ctx.on_build = lambda b: store.add_build(record["id"], b.name, b.info)  # type: ignore[union-attr]
        ctx.history = lambda bench, metric: store.history(bench, metric)  # type: ignore[union-attr]

    status, error = "complete", None
    before: dict = {}
    board = pi.Watch(hosts)  # a Raspberry Pi's get_throttled before and after, temperature and clock during
    from clusterbench.launch import nodes as nodes_mod

    def node_build(host: str, doc: dict) -> None:
        """A separate machine runs its own build: recorded with the head's, under ``nodes``."""
        info = doc.get("info") or {}
        name = str(info.get("kernel") or "")
        if not name:
            return
        entry = dict(ctx.builds.get(name) or {})
        entry["nodes"] = {**(entry.get("nodes") or {}), host: {
            "binary": doc.get("binary"), "launch": doc.get("launch"), "cache_key": info.get("cache_key"),
            "compiler": info.get("compiler"), "compiler_version": info.get("compiler_version")}}
        ctx.builds[name] = entry
        if store is not None:
            store.add_build(record["id"], name, entry)

    try:
        if store is not None:
            for name, info in ctx.builds.items():
                store.add_build(record["id"], name, info)
        before = clock.snapshot()
        board.start()
        estimates = [bench.estimate_seconds(ctx, params) for bench, params in steps]
        ctx.progress.overall(sum(estimates))
        if meter is not None:
            meter.start()  # sampling from before the first benchmark starts
        with nodes_mod.recording(node_build):
            for i, (bench, params) in enumerate(steps):
                with ctx.benchmark_span(bench.name):
                    bench.run(ctx, params)
                raise_pending()  # a signal whose exception a finaliser swallowed still ends the run here
                ctx.progress.overall_done(sum(estimates[: i + 1]))
    except KeyboardInterrupt as exc:
        interrupts.seen()
        status, error = "incomplete", f"interrupted ({str(exc) or 'Ctrl-C'})"
        raise
    except ClusterbenchError as exc:
        status, error = "incomplete", str(exc)
        raise
    except BaseException as exc:
        status, error = "incomplete", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        exc_now = sys.exc_info()[1]
        with shielded(discard=exc_now is not None):  # a second Ctrl-C cannot leave the run open
            if meter is not None:
                meter.stop()
            warnings = warn.as_dicts(warn.clock_changed(before, clock.snapshot())) if before else []
            pi_warnings, pi_notes = board.stop(interrupted=isinstance(exc_now, KeyboardInterrupt))
            warnings += warn.as_dicts(pi_warnings)
            ctx.notes.extend(pi_notes)
            ctx.results[:] = pi.flag(ctx.results, pi_warnings)  # the figures measured while a node throttled
            record.update(status=status, error=error, ended=now_iso(), warnings=warnings, notes=ctx.notes)
            if store is not None:
                store.finish_run(record["id"], status, error, warnings, ctx.notes, ended=record["ended"],
                                 energy=record.get("energy"))
            report = RunReport(Run.from_json(record), list(ctx.results))
            if exc_now is not None:
                try:
                    exc_now.report = report  # type: ignore[attr-defined]
                except AttributeError:
                    pass
    return report


def new_run_record(argv: Sequence[str], probe_data: dict, profile: str) -> dict:
    """The run's provenance, the same with or without a store (the ``run`` of ``--json``). Its
    ``command`` is the argv shell-quoted (:func:`clusterbench.text.command_line`): copied into a shell
    it runs this command, and a ``$(...)`` in a note or an option stays text."""
    from clusterbench.text import command_line

    command = command_line(argv)
    return {
        "id": str(uuid.uuid4()), "started": now_iso(), "ended": None, "status": "running", "error": None,
        "command": command, "argv": list(argv), "host": socket.gethostname(), "pid": os.getpid(),
        # with the pid, what tells this process from a later one that reuses the pid (store schema 3)
        "pid_start": process_start(os.getpid()), "boot_id": boot_id(),
        "clusterbench_version": __version__, "profile": profile, "probe": probe_data, "builds": {},
        "cluster": {}, "warnings": [], "notes": [], "tags": [], "note": None, "energy": None,
    }
