"""The one process-and-records layer: how clusterbench starts, reads, bounds and ends a process.

Every process that measures or serves a measurement (a local kernel, ``mpirun``/``mpiexec``/``srun``,
an HPL engine, a command on a remote host, a TCP server in a namespace) goes through :func:`spawn`
(short queries such as ``ompi_info``, ``ip`` or a compiler's ``--version`` are ``subprocess.run`` calls
with a timeout):

* it runs in a **session of its own** (its pid is the session id), so ending it means ending the
  session: :func:`kill_session` signals every live process of the session, which also reaches MPI
  ranks that put themselves in process groups of their own;
* a **launcher** (``launcher=True``) also gets a parent-death signal (:func:`die_with_parent`) and a
  :class:`Watchdog` that outlives clusterbench, so ``kill -9`` of clusterbench still ends the
  launcher, its ranks on every node, and removes its temporary folders;
* its output is read by :func:`read_lines` (both streams, one selector, bounded waits) and a
  kernel's stdout is interpreted by :class:`Records`: the JSON-lines protocol (a record is a line
  starting with ``{``, everything else is a library's chatter kept as evidence; a result is only
  accepted after the kernel validated what it computed; an ``error`` record or a failed validation
  raises :class:`KernelFailed`).
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from clusterbench.errors import KernelFailed
from clusterbench.interrupts import raise_pending

Record = dict

_PR_SET_PDEATHSIG = 1
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before any fork
except (OSError, AttributeError):  # not Linux
    _prctl = None


# ---------------------------------------------------------------------------------------------
# Starting and ending
# ---------------------------------------------------------------------------------------------
#: the signals that end clusterbench, held while a child is forked with a ``preexec_fn``
HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """Hold Ctrl-C, SIGTERM and SIGHUP while a child is forked, and deliver them after: with a
    ``preexec_fn`` Python runs its at-fork hooks in the parent, and an exception a signal handler
    raises there is ignored ("Exception ignored in _releaseLock"), so a Ctrl-C landing in that instant
    was lost and the run went on to the end. Held at Python's level (a handler that only notes the
    signal), so it works whichever thread the kernel hands the signal to."""
    import threading

    if threading.current_thread() is not threading.main_thread():  # handlers run in the main thread
        yield
        return
    caught: list[int] = []
    old = {s: signal.getsignal(s) for s in HELD_SIGNALS}
    kept = {s: h for s, h in old.items() if h is not None}  # None: set outside Python, left alone
    for s in kept:
        signal.signal(s, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        for s, h in kept.items():
            signal.signal(s, h)
        for s in dict.fromkeys(caught):
            signal.raise_signal(s)  # now through the handler that was there


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn`` that makes the child receive ``sig`` when this process dies, however it
    dies (kill -9 included), where the C library offers ``prctl``. SIGTERM for a launcher (mpirun,
    mpiexec, srun) so that it tears down its daemons and ranks on every node. Call from the thread that
    lives as long as the child (the kernel sends the signal when the spawning *thread* exits)."""
    parent = os.getpid()
    prctl = _prctl

    def preexec() -> None:
        if prctl is None:
            return
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


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
        if self._w < 0:
            return
        self.proc.kill()
        self.proc.wait()
        os.close(self._w)
        self._w = -1


def session_pids(sid: int) -> list[int]:
    """Live (not zombie) processes of session ``sid``. mpirun puts each rank in a process group of
    its own, so killing mpirun's group alone would miss them; the session holds mpirun, its ranks
    and the local ends of its launch agents (ssh, ip netns exec)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # after the command: state ppid pgrp session ...
        if len(fields) > 3 and fields[0] != b"Z" and int(fields[3]) == sid:
            out.append(int(entry))
    return out


def signal_session(sid: int, sig: int) -> int:
    """Send ``sig`` to every live process of session ``sid``; how many there were."""
    pids = session_pids(sid)
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    return len(pids)


def kill_session(proc: subprocess.Popen, grace: float = 0.0) -> None:
    """End ``proc``'s whole session (``proc`` was started with :func:`spawn`). With ``grace`` > 0,
    SIGTERM first (mpirun forwards it and tears down its remote daemons), SIGKILL to whatever is
    left after ``grace`` seconds; with 0, SIGKILL at once (a kernel has nothing to tear down)."""
    sid = proc.pid  # start_new_session: the session id is the leader's pid
    if grace > 0 and (proc.poll() is None or session_pids(sid)):
        signal_session(sid, signal.SIGTERM)
        end = time.monotonic() + grace
        while time.monotonic() < end and session_pids(sid):
            try:
                proc.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                pass
    for _ in range(50):
        if not signal_session(sid, signal.SIGKILL):
            break
        time.sleep(0.02)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


@dataclass
class Spawned:
    """A process started by :func:`spawn`; :meth:`end` kills its session and tidies up. A launcher
    is ended with SIGTERM first and ``grace`` seconds to tear down its daemons."""

    proc: subprocess.Popen
    watchdog: Watchdog | None = None
    grace: float = 0.0

    @property
    def pid(self) -> int:
        return self.proc.pid

    def end(self) -> None:
        kill_session(self.proc, self.grace)
        if self.watchdog is not None:
            self.watchdog.disarm()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream:
                try:
                    stream.close()
                except OSError:  # a pipe to a process that is gone
                    pass

    def __enter__(self) -> Spawned:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()


#: seconds a launcher gets between SIGTERM and SIGKILL to tear down its daemons and ranks
LAUNCHER_GRACE = 2.0


def spawn(cmd: Sequence[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
          launcher: bool = False, cleanup: Sequence[str] = (), text: bool = False,
          hold_stdin: bool = False) -> Spawned:
    """Start ``cmd`` in a session of its own with stdout and stderr piped, stdin closed. It dies
    with clusterbench however clusterbench dies: a kernel or a query gets SIGKILL from the kernel
    when this process ends (a parent-death signal; it has nothing to tear down).

    ``launcher``: an MPI launcher, a child clusterbench, or anything that starts processes
    clusterbench does not see (ranks, daemons on other nodes, its own kernels): it receives SIGTERM
    instead (so it can tear those down and close what it stores as incomplete), a watchdog ends its
    session and removes the ``cleanup`` folders if clusterbench is killed before
    :meth:`Spawned.end`, and :meth:`Spawned.end` gives it :data:`LAUNCHER_GRACE` seconds after
    SIGTERM.

    ``hold_stdin``: stdin is a pipe nothing is written to, held open until the process is ended (or
    clusterbench dies): an ``ssh`` to another machine whose remote command is tethered to it
    (:func:`clusterbench.launch.remote.tethered_argv`) ends there when it reads end-of-file.
    Raises OSError when ``cmd`` cannot be started (callers name the fix)."""
    with held_signals():
        proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.PIPE if hold_stdin else subprocess.DEVNULL,
                                env=env, cwd=cwd, text=text, start_new_session=True,
                                preexec_fn=die_with_parent(signal.SIGTERM if launcher else signal.SIGKILL))
    if not launcher:
        return Spawned(proc)
    try:
        return Spawned(proc, Watchdog(proc.pid, list(cleanup)), LAUNCHER_GRACE)
    except BaseException:
        kill_session(proc, LAUNCHER_GRACE)
        raise


def run(cmd: Sequence[str], *, timeout: float, input: str | bytes | None = None, env: dict[str, str] | None = None,
        cwd: str | None = None, text: bool = True, check: bool = False) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, timeout=...)`` for the short commands clusterbench
    asks things of (a compiler, ``ip``, ``ethtool``, ``ompi_info``, ``scontrol``): the same result
    and exceptions (OSError when it cannot start, :class:`subprocess.TimeoutExpired` after
    ``timeout``, :class:`subprocess.CalledProcessError` with ``check``), but the command runs in a
    session of its own that dies with clusterbench (a parent-death signal) and is killed whole on
    timeout (a compiler's ``cc1``, a shell's children), so nothing it started outlives it."""
    with held_signals():
        proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                env=env, cwd=cwd, text=text, start_new_session=True,
                                preexec_fn=die_with_parent(signal.SIGKILL))
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        kill_session(proc)
        raise subprocess.TimeoutExpired(exc.cmd, timeout) from None
    except BaseException:
        kill_session(proc)
        raise
    if check and proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, list(cmd), out, err)
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------
def read_lines(procs: Sequence[subprocess.Popen], tick: Callable[[], float | None]
               ) -> Iterator[tuple[int, str, bytes]]:
    """Yield ``(index, "out" | "err", line)`` for each complete line the processes print, without
    the newline, until every stream has closed.

    Before each wait ``tick()`` is called: it returns the longest wait in seconds (it is capped at
    1 s), ``None`` to stop reading now, or raises (a timeout). The last unterminated stderr line is
    yielded when the stream closes; an unterminated stdout line is dropped (a record is a whole line).
    """
    sel = selectors.DefaultSelector()
    bufs: dict[tuple[int, str], bytes] = {}
    try:
        for idx, p in enumerate(procs):
            assert p.stdout is not None and p.stderr is not None
            for kind, stream in (("out", p.stdout), ("err", p.stderr)):
                sel.register(stream, selectors.EVENT_READ, (idx, kind))
                bufs[(idx, kind)] = b""
        open_streams = len(bufs)
        while open_streams:
            raise_pending()  # a SIGTERM whose exception a finaliser swallowed stops the reading all the same
            wait = tick()
            if wait is None:
                return
            for key, _ in sel.select(timeout=max(0.01, min(wait, 1.0))):
                idx, kind = key.data
                chunk = os.read(key.fileobj.fileno(), 65536)  # type: ignore[union-attr]
                if not chunk:
                    sel.unregister(key.fileobj)
                    open_streams -= 1
                    rest = bufs.pop((idx, kind))
                    if kind == "err" and rest:
                        yield idx, kind, rest
                    continue
                buf = bufs[(idx, kind)] + chunk
                *lines, bufs[(idx, kind)] = buf.split(b"\n")
                for line in lines:
                    yield idx, kind, line
    finally:
        sel.close()


def is_record_line(line: bytes | str) -> bool:
    """The record protocol: a record is a line that starts with ``{``. Anything else a kernel's
    stdout carries (UCX or Open MPI warnings printed by the library, not by the kernel) is
    chatter: kept as evidence beside stderr, never a protocol error."""
    text = line.lstrip()
    return text.startswith(b"{" if isinstance(text, bytes) else "{")


def parse_record(name: str, line: bytes | str) -> Record:
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


@dataclass
class Records:
    """One kernel's output as it arrives: its records, checked against the protocol, and a tail of
    its stderr and stdout chatter (the evidence an error message quotes)."""

    name: str
    tail_bytes: int = 8192
    records: list[Record] = field(default_factory=list)
    validated: bool = False
    tail: bytes = b""

    def feed_err(self, line: bytes) -> None:
        self.tail = (self.tail + line + b"\n")[-self.tail_bytes:]

    def feed_out(self, line: bytes) -> Record | None:
        """The record ``line`` carries (checked and kept), or None for a blank line or chatter."""
        if not line.strip():
            return None
        if not is_record_line(line):
            self.feed_err(b"[stdout] " + line)
            return None
        rec = parse_record(self.name, line)
        self.records.append(rec)
        self.check(rec)
        return rec

    def check(self, rec: Record) -> None:
        """Enforce the protocol: errors and failed validations raise; a result is accepted only
        after the kernel has validated what it computed ("validate, then print the results")."""
        name = self.name
        if rec["type"] == "validation" and rec.get("ok", False):
            self.validated = True
        if rec["type"] == "result":
            if not self.validated:
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

    @property
    def tail_text(self) -> str:
        return self.tail.decode(errors="replace")

    def last_line(self) -> str:
        """The line an error message quotes: the last one that says something, past the frames an MPI
        launcher prints around any failing rank (they say that it failed, never why; its stdout and the
        rank's stderr interleave in whatever order they arrive)."""
        return telling_line(self.tail_text)


# What Hydra (MPICH) and mpirun (Open MPI) print around a failed rank: banners, rules and the FAQ pointer.
LAUNCHER_FRAME = re.compile(
    r"^(?:\[stdout\] )?\s*(?:$|[=-]{5}|=\s|YOUR APPLICATION TERMINATED|This typically refers to a problem"
    r"|Please see the FAQ page|Primary job\s+terminated|a non-zero exit code\. Per user-direction"
    r"|mpirun detected that one or more|the job to be terminated\. The first process|Process name:|Exit code:)")


def telling_line(text: str) -> str:
    """The last line of ``text`` that is not a launcher's frame (:data:`LAUNCHER_FRAME`), else its last line."""
    lines = text.strip().splitlines()
    for line in reversed(lines):
        if not LAUNCHER_FRAME.match(line):
            return line
    return lines[-1] if lines else ""


# ---------------------------------------------------------------------------------------------
# Why a process died: the advice fits the cause (once: "choose a smaller size" was given for a
# rank killed from outside and for a virtual cluster taken down, where the size had nothing to do with it)
# ---------------------------------------------------------------------------------------------
def memory_state() -> dict:
    """This machine's out-of-memory kill count (``/proc/vmstat`` ``oom_kill``, Linux >= 4.13) and
    MemAvailable/MemTotal in bytes; None where unreadable. Taken before a process starts, it tells
    after its SIGKILL whether the kernel's out-of-memory killer struck meanwhile (the victim's memory
    is free again by then, so MemAvailable alone after the fact cannot tell)."""
    out: dict = {"oom_kills": None, "available_bytes": None, "total_bytes": None}
    try:
        with open("/proc/vmstat", "rb") as fh:
            for line in fh.read(1 << 16).split(b"\n"):
                if line.startswith(b"oom_kill "):
                    out["oom_kills"] = int(line.split()[1])
        with open("/proc/meminfo", "rb") as fh:
            for line in fh.read(1 << 16).split(b"\n"):
                key, _, rest = line.partition(b":")
                if key in (b"MemAvailable", b"MemTotal") and rest.split():
                    out["available_bytes" if key == b"MemAvailable" else "total_bytes"] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return out


#: the state when clusterbench started: the baseline when a caller took none before its process
START_MEMORY = memory_state()
#: below this fraction of MemTotal available, memory counts as (nearly) exhausted
LOW_MEMORY = 0.05

#: signals by what sends them (a registry: the cause, then the advice, follow from the kind)
SIGNAL_KINDS: dict[int, str] = {
    **{int(s): "crash" for s in (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT,
                                 signal.SIGSYS, signal.SIGTRAP)},
    **{int(s): "outside" for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
                                   signal.SIGUSR2, signal.SIGALRM, signal.SIGPIPE)},
    **{int(s): "limit" for s in (signal.SIGXCPU, signal.SIGXFSZ)},
    int(signal.SIGKILL): "kill",  # the out-of-memory killer, or someone: told apart by memory_state
}


def signal_name(sig: int) -> str:
    return signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"


def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / 2**30:.1f} GiB"


def death_cause(sig: int, before: dict | None = None, *, local: bool = True) -> tuple[str, str, str]:
    """(kind, what happened as a predicate ("was killed by ...", "crashed with ..."), fix) for a
    process killed by ``sig``. ``local``: it ran on this machine
    (this machine's memory state bears on it; a virtual-cluster node is this machine). ``before``:
    :func:`memory_state` taken before it started (default: when clusterbench started). ``kind`` is
    ``oom``, ``outside``, ``crash``, ``limit`` or ``unknown`` (SIGKILL on another machine)."""
    name = signal_name(sig)
    kind = SIGNAL_KINDS.get(sig, "outside")
    if kind == "kill":
        if not local:
            return ("unknown", f"was killed by {name} (the out-of-memory killer or a signal from outside)",
                    "look in that node's kernel log (dmesg | grep -i 'out of memory'): if memory ran out choose a "
                    "smaller size, otherwise rerun and find what sent it")
        now = memory_state()
        was = before or START_MEMORY
        rose = (now["oom_kills"] is not None and was["oom_kills"] is not None and now["oom_kills"] > was["oom_kills"])
        low = (now["available_bytes"] is not None and now["total_bytes"]
               and now["available_bytes"] < LOW_MEMORY * now["total_bytes"])
        mem = f"MemAvailable {_gib(now['available_bytes'])} of {_gib(now['total_bytes'])}"
        if rose or low:
            why = (f"the kernel's out-of-memory killer struck during the run (/proc/vmstat oom_kill "
                   f"{was['oom_kills']} -> {now['oom_kills']}; {mem})" if rose
                   else f"memory is nearly exhausted ({mem})")
            return "oom", f"was killed by {name}: {why}", "choose a smaller size, or free memory on the node"
        seen = "no out-of-memory kill on this machine during the run" if now["oom_kills"] is not None else \
            "memory was not exhausted"
        return ("outside", f"was killed by {name} from outside ({seen}, {mem})",
                "rerun; find what sent it (a user or script, the job scheduler's limits, a watchdog): the size is not "
                "the cause")
    if kind == "crash":
        detail = {int(signal.SIGILL): "an instruction this CPU lacks", int(signal.SIGABRT): "it aborted",
                  int(signal.SIGBUS): "a bad memory access; huge pages running out can cause it"}.get(sig)
        fix = ("remove the kernel cache ($CLUSTERBENCH_CACHE) if it holds builds from another CPU, and rerun; "
               "report it if it persists") if sig == signal.SIGILL else \
            "rerun; if it crashes again, report it with the command line and `clusterbench probe --json`"
        return "crash", f"crashed with {name}" + (f" ({detail})" if detail else ""), fix
    if kind == "limit":
        return ("limit", f"was stopped by a resource limit ({name}: ulimit or the job scheduler's)",
                "raise the limit (ulimit -t / -f, the job's time) or choose a shorter run")
    return ("outside", f"was killed by {name}, a signal from outside (a user, the job scheduler, a shutdown)",
            "rerun; find what sent it: the size is not the cause")


def exit_problem(name: str, returncode: int, last: str, before: dict | None = None) -> KernelFailed | None:
    """The error for a kernel that exited with ``returncode`` (None when it succeeded); the advice
    follows the cause (:func:`death_cause`). ``before``: :func:`memory_state` before it started."""
    if returncode == 0:
        return None
    tail = f": {last}" if last else ""
    if returncode < 0:
        _, what, fix = death_cause(-returncode, before, local=True)
        return KernelFailed(f"kernel '{name}' {what}{tail}", fix)
    return KernelFailed(f"kernel '{name}' exited with status {returncode}{tail}",
                        "rerun; report it with its output if it persists")
