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

import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from . import SCHEMA_VERSION
from .analysis import clock
from .analysis import warnings as warn
from .benchmarks import get_benchmark
from .benchmarks.base import Benchmark, Progress, Result, RunContext
from .errors import ClusterbenchError
from .store import Store


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, handled like Ctrl-C."""


@dataclass
class RunReport:
    """What a session produced: the run record and its results (also in the store)."""

    run: dict
    results: list[Result] = field(default_factory=list)

    def document(self) -> dict:
        """The public ``--json`` document (schema :data:`clusterbench.SCHEMA_VERSION`)."""
        return {"schema": SCHEMA_VERSION, "run": self.run, "results": [r.as_json() for r in self.results]}


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM/SIGHUP into an exception so the run is closed, not abandoned."""
    def handler(signum: int, _frame: Any) -> None:
        raise Interrupted(f"signal {signal.Signals(signum).name}")

    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def plan(names: Sequence[str], given: dict[str, dict], ctx: RunContext) -> list[tuple[Benchmark, dict]]:
    """Resolve and validate every benchmark's parameters; raises before anything is stored."""
    out = []
    for name in names:
        bench = get_benchmark(name)
        out.append((bench, bench.resolve(ctx, dict(given.get(name, {})))))
    return out


def run(
    names: Sequence[str],
    given: dict[str, dict] | None = None,
    *,
    profile: str = "default",
    store: Store | None = None,
    use_store: bool = True,
    argv: Sequence[str] | None = None,
    timeout: float = 600.0,
    oversubscribe: bool = False,
    progress: Progress | None = None,
    probe_data: dict | None = None,
) -> RunReport:
    """Run benchmarks by name and return the report; see the module docstring."""
    from .probe import probe as do_probe

    given = given or {}
    probe_data = probe_data if probe_data is not None else do_probe()
    ctx = RunContext(probe=probe_data, profile=profile, timeout=timeout, oversubscribe=oversubscribe,
                     progress=progress or Progress())
    steps = plan(names, given, ctx)
    for bench, params in steps:
        bench.prepare(ctx, params)
    argv = list(argv if argv is not None else sys.argv)
    command = " ".join(["clusterbench", *argv[1:]]) if argv and argv[0].endswith("clusterbench") else " ".join(argv)

    if use_store and store is None:
        store = Store()
    run_id = None
    if use_store and store is not None:
        store.check_writable()
        run_id = store.begin_run(command, argv, probe_data, profile)
        ctx.sink = lambda res: store.add_result(run_id, res)  # type: ignore[union-attr]
        ctx.on_build = lambda b: store.add_build(run_id, b.name, b.info)  # type: ignore[union-attr]
        ctx.history = lambda bench, metric: store.history(bench, metric)  # type: ignore[union-attr]
        for name, info in ctx.builds.items():
            store.add_build(run_id, name, info)

    before = clock.snapshot()
    status, error = "complete", None
    estimates = [bench.estimate_seconds(ctx, params) for bench, params in steps]
    ctx.progress.overall(sum(estimates))
    try:
        with _terminate_as_interrupt():
            for i, (bench, params) in enumerate(steps):
                bench.run(ctx, params)
                ctx.progress.overall_done(sum(estimates[: i + 1]))
    except KeyboardInterrupt as exc:
        status, error = "incomplete", f"interrupted ({exc or 'Ctrl-C'})"
        raise
    except ClusterbenchError as exc:
        status, error = "incomplete", str(exc)
        raise
    except BaseException as exc:
        status, error = "incomplete", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        run_warnings = warn.as_dicts(warn.clock_changed(before, clock.snapshot()))
        if use_store and store is not None and run_id is not None:
            store.finish_run(run_id, status, error, run_warnings)
        record = (store.get_run(run_id) if (store is not None and run_id is not None) else
                  {"id": None, "status": status, "error": error, "command": command, "profile": profile,
                   "probe": probe_data, "builds": ctx.builds, "warnings": run_warnings})
        _last_report.clear()
        _last_report.append(RunReport(record, list(ctx.results)))
    return _last_report[0]


#: The report of the most recent session, also when it ended by an exception (for the CLI).
_last_report: list[RunReport] = []


def last_report() -> RunReport | None:
    return _last_report[0] if _last_report else None
