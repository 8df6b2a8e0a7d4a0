"""Run kernels as local processes: stream their JSON lines, bound them in time, leave no orphans.

Each kernel runs in its own session (process group) so that a timeout, a Ctrl-C or a failure of
a sibling kills it and every thread or child it made.
"""
from __future__ import annotations

import ctypes
import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from clusterbench.errors import KernelFailed
from clusterbench.kernels.build import Build

Record = dict

_PR_SET_PDEATHSIG = 1
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before any fork
except (OSError, AttributeError):  # not Linux
    _prctl = None


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child receive ``sig`` when this process dies, however it
    dies (kill -9 included). SIGTERM for a launcher (mpirun, mpiexec, srun) so that it tears down
    its daemons and ranks on every node. Call from the thread that lives as long as the child
    (the kernel sends the signal when the spawning *thread* exits)."""
    if _prctl is None:
        return None
    parent = os.getpid()
    prctl = _prctl

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec
OnRecord = Callable[[int, Record], None]


class Watchdog:
    """A tiny shell in a session of its own that outlives clusterbench: it waits on a pipe whose
    write end only clusterbench holds; when that closes without :meth:`disarm` (clusterbench died,
    even by kill -9) it sends SIGTERM, then SIGKILL, to the launched process group and removes the
    temporary folders. A parent-death signal covers the launcher; this also covers what it leaves
    behind (its folders, a launcher that ignores SIGTERM)."""

    _SCRIPT = ('read _ ; kill -TERM -"$1" 2>/dev/null; sleep 2; kill -KILL -"$1" 2>/dev/null; shift; '
               'rm -rf -- "$@"')

    def __init__(self, pgid: int, paths: Sequence[str] = ()) -> None:
        r, self._w = os.pipe()
        try:
            self.proc = subprocess.Popen(["sh", "-c", self._SCRIPT, "cb-watchdog", str(pgid), *paths], stdin=r,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         start_new_session=True)
        finally:
            os.close(r)

    def disarm(self) -> None:
        """The launched group ended normally: stop the watchdog without it acting."""
        self.proc.kill()
        self.proc.wait()
        os.close(self._w)


@dataclass
class KernelJob:
    """One kernel process to start: the binary, its ``--key=value`` arguments, extra env, and an
    optional command prefix (e.g. ``ip netns exec NS`` to run it on a sim-cluster node)."""

    build: Build
    args: Sequence[str]
    env: dict[str, str] = field(default_factory=dict)
    prefix: Sequence[str] = ()


@dataclass
class _Running:
    job: KernelJob
    proc: subprocess.Popen
    buf: bytes = b""
    stderr: bytes = b""
    records: list[Record] = field(default_factory=list)
    validated: bool = False


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def run_jobs(jobs: Sequence[KernelJob], timeout: float, on_record: OnRecord | None = None) -> list[list[Record]]:
    """Run jobs concurrently; return each job's records. Raises KernelFailed on any failure.

    ``on_record(job_index, record)`` is called as each line arrives, so callers can store
    results as they are measured and show progress.
    """
    running: list[_Running] = []
    sel = selectors.DefaultSelector()
    try:
        for idx, job in enumerate(jobs):
            env = {**os.environ, **job.env}
            try:
                proc = subprocess.Popen(
                    [*job.prefix, str(job.build.path), *job.args],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                )
            except OSError as exc:
                raise KernelFailed(f"cannot start kernel '{job.build.name}' ({exc.strerror})",
                                   "if the cache is on a noexec filesystem, set CLUSTERBENCH_CACHE elsewhere") from exc
            r = _Running(job, proc)
            running.append(r)
            assert proc.stdout and proc.stderr
            sel.register(proc.stdout, selectors.EVENT_READ, (idx, "out"))
            sel.register(proc.stderr, selectors.EVENT_READ, (idx, "err"))
        deadline = time.monotonic() + timeout
        open_streams = 2 * len(running)
        while open_streams:
            left = deadline - time.monotonic()
            if left <= 0:
                name = jobs[0].build.name
                raise KernelFailed(
                    f"kernel '{name}' timed out after {timeout:g} s",
                    "raise --timeout or choose a smaller size",
                )
            for key, _ in sel.select(timeout=min(left, 1.0)):
                idx, kind = key.data
                r = running[idx]
                chunk = os.read(key.fileobj.fileno(), 65536)  # type: ignore[union-attr]
                if not chunk:
                    sel.unregister(key.fileobj)
                    open_streams -= 1
                    continue
                if kind == "err":
                    r.stderr = (r.stderr + chunk)[-8192:]
                    continue
                r.buf += chunk
                while b"\n" in r.buf:
                    line, r.buf = r.buf.split(b"\n", 1)
                    if line.strip() and not is_record_line(line):
                        r.stderr = (r.stderr + b"[stdout] " + line + b"\n")[-8192:]
                    elif line.strip():
                        rec = _parse_line(r.job.build.name, line)
                        r.records.append(rec)
                        _check_record(r.job.build.name, rec, r)
                        if on_record:
                            on_record(idx, rec)
        for r in running:
            try:
                r.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired as exc:
                raise KernelFailed(f"kernel '{r.job.build.name}' did not exit", "raise --timeout") from exc
            _check_exit(r)
        return [r.records for r in running]
    finally:
        for r in running:
            _kill(r.proc)
            for stream in (r.proc.stdout, r.proc.stderr):
                if stream:
                    stream.close()
        sel.close()


def run_kernel(build: Build, args: Sequence[str], timeout: float, env: dict[str, str] | None = None,
               on_record: Callable[[Record], None] | None = None) -> list[Record]:
    """Run one kernel; see :func:`run_jobs`."""
    cb = (lambda _i, rec: on_record(rec)) if on_record else None
    return run_jobs([KernelJob(build, list(args), env or {})], timeout, cb)[0]


def is_record_line(line: bytes | str) -> bool:
    """The record protocol: a record is a line that starts with ``{``. Anything else a kernel's
    stdout carries (UCX or Open MPI warnings printed by the library, not by the kernel) is
    chatter: kept as evidence beside stderr, never a protocol error."""
    text = line.lstrip()
    return text.startswith(b"{" if isinstance(text, bytes) else "{")


def _parse_line(name: str, line: bytes) -> Record:
    """Parse a record line (see :func:`is_record_line`); one that starts with ``{`` but is not a
    JSON object with a type is a protocol error."""
    try:
        rec = json.loads(line)
    except ValueError as exc:
        raise KernelFailed(f"kernel '{name}' printed a line that is not JSON: {line[:120]!r}",
                           "report this as a bug with the kernel's build info") from exc
    if not isinstance(rec, dict) or "type" not in rec:
        raise KernelFailed(f"kernel '{name}' printed a JSON line without a type: {line[:120]!r}",
                           "report this as a bug")
    return rec


def _check_record(name: str, rec: Record, r: _Running) -> None:
    """Enforce the protocol: errors and failed validations raise; a result is accepted only
    after the kernel has validated what it computed ("validate, then print the results")."""
    if rec["type"] == "validation" and rec.get("ok", False):
        r.validated = True
    if rec["type"] == "result":
        if not r.validated:
            raise KernelFailed(f"kernel '{name}' printed a result before validating it",
                               "report this as a bug: results are only trusted after validation")
        if not isinstance(rec.get("samples"), list) or not rec.get("metric"):
            raise KernelFailed(f"kernel '{name}' printed a malformed result record", "report this as a bug")
    if rec["type"] == "error":
        raise KernelFailed(f"kernel '{name}' failed: {rec.get('message', 'no message')}",
                           "check the parameters (see --help)")
    if rec["type"] == "validation" and not rec.get("ok", False):
        raise KernelFailed(f"kernel '{name}' computed a wrong result: {rec.get('detail', '')}",
                           "the results are not trustworthy; check the hardware (memory errors?) and the compiler")


def _check_exit(r: _Running) -> None:
    rc = r.proc.returncode
    if rc == 0:
        return
    name = r.job.build.name
    tail = r.stderr.decode(errors="replace").strip().splitlines()
    last = tail[-1] if tail else ""
    if rc < 0:
        sig = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        raise KernelFailed(f"kernel '{name}' was killed by {sig}" + (f": {last}" if last else ""),
                           "if memory ran out, choose a smaller size; otherwise rerun and report it")
    raise KernelFailed(f"kernel '{name}' exited with status {rc}" + (f": {last}" if last else ""),
                       "rerun with a smaller size or report it")
