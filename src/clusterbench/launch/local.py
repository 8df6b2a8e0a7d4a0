"""Run kernels as local processes: stream their JSON lines, bound them in time, leave no orphans.

Processes are started, read and ended by the process-and-records layer
(:mod:`clusterbench.process`): each kernel runs in its own session so that a timeout, a
Ctrl-C or a failure of a sibling kills it and every thread or child it made.
"""
from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from clusterbench.errors import KernelFailed
from clusterbench.kernels.build import Build
from clusterbench import process
from clusterbench.process import Record, Watchdog, die_with_parent, is_record_line  # noqa: F401 (re-exported)

OnRecord = Callable[[int, Record], None]


@dataclass
class KernelJob:
    """One kernel process to start: the binary, its ``--key=value`` arguments, extra env, and where:
    an optional command prefix (e.g. ``ip netns exec NS`` to run it on a sim-cluster node), or a
    ``host`` reached the way :func:`clusterbench.launch.remote.transport` says (see :func:`job_argv`)."""

    build: Build
    args: Sequence[str]
    env: dict[str, str] = field(default_factory=dict)
    prefix: Sequence[str] = ()
    host: str | None = None


def job_argv(job: KernelJob) -> tuple[list[str], bool]:
    """(the local command that starts ``job``, whether its stdin is to be held open: see
    ``process.spawn(hold_stdin=...)``). With a ``host`` that is a machine of its own (reached by
    ssh) the kernel is that machine's own build, staged there like an MPI launch's
    (:func:`clusterbench.launch.nodes.stage_program`): the head's path means nothing there. The
    command is tethered to the head's ssh (:func:`clusterbench.launch.remote.tethered_argv`); ``env``
    stays here (ssh does not carry it)."""
    argv = [str(job.build.path), *job.args]
    if job.host is None:
        return [*job.prefix, *argv], False
    from clusterbench.launch import nodes, remote

    return remote.tethered_argv(job.host, nodes.stage_program([job.host], argv))


def run_jobs(jobs: Sequence[KernelJob], timeout: float, on_record: OnRecord | None = None) -> list[list[Record]]:
    """Run jobs concurrently; return each job's records. Raises KernelFailed on any failure.

    ``on_record(job_index, record)`` is called as each line arrives, so callers can store
    results as they are measured and show progress.
    """
    started: list[process.Spawned] = []
    outputs = [process.Records(job.build.name) for job in jobs]
    memory = process.memory_state()  # a SIGKILL's cause: the out-of-memory killer or someone (exit_problem)
    try:
        for job in jobs:
            try:
                argv, hold = job_argv(job)
                started.append(process.spawn(argv, env={**os.environ, **job.env}, hold_stdin=hold))
            except OSError as exc:
                raise KernelFailed(f"cannot start kernel '{job.build.name}' ({exc.strerror})",
                                   "if the cache is on a noexec filesystem, set CLUSTERBENCH_CACHE elsewhere") from exc
        deadline = time.monotonic() + timeout

        def tick() -> float:
            left = deadline - time.monotonic()
            if left <= 0:
                raise KernelFailed(f"kernel '{jobs[0].build.name}' timed out after {timeout:g} s",
                                   "raise --timeout or choose a smaller size")
            return left

        for idx, kind, line in process.read_lines([s.proc for s in started], tick):
            if kind == "err":
                outputs[idx].feed_err(line)
                continue
            rec = outputs[idx].feed_out(line)
            if rec is not None and on_record:
                on_record(idx, rec)
        for s, out in zip(started, outputs):
            try:
                s.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired as exc:
                raise KernelFailed(f"kernel '{out.name}' did not exit", "raise --timeout") from exc
            problem = process.exit_problem(out.name, s.proc.returncode, out.last_line(), memory)
            if problem:
                raise problem
        return [out.records for out in outputs]
    finally:
        for s in started:
            s.end()


def run_kernel(build: Build, args: Sequence[str], timeout: float, env: dict[str, str] | None = None,
               on_record: Callable[[Record], None] | None = None) -> list[Record]:
    """Run one kernel; see :func:`run_jobs`."""
    cb = (lambda _i, rec: on_record(rec)) if on_record else None
    return run_jobs([KernelJob(build, list(args), env or {})], timeout, cb)[0]
