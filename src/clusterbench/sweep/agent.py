"""The process ``sweep node`` starts on every node (one per node, by mpirun or srun): it runs the node
benchmarks in-process (:func:`clusterbench.session.run`, no store) and prints what it measured as
short JSON lines tagged with its node name, for the caller to gather (:mod:`clusterbench.sweep.node`).

``python -m clusterbench.sweep.agent SPEC`` where SPEC is the base64url of a JSON object::

    {"v": 1, "benchmark": "node", "given": {...}, "profile": "quick", "timeout": 900,
     "hosts": ["n1", "n2"], "node_cpus": {"n1": [0]}, "sync_dir": "/shared/tmp/..." | null}

The node's name is ``$CB_SIM_NODE`` on the virtual cluster (its launch agent sets it), else
``$SLURMD_NODENAME`` under Slurm, else the host name; the first of these that is one of ``hosts``
(also by short name) wins, else the host the launcher's rank number points at.

CPUs: with ``node_cpus[node]`` the agent pins itself there (the virtual cluster's nodes share this
machine's cpus, so each is given its own); under Slurm it keeps what srun gave it; otherwise it
widens its affinity to every cpu the kernel lets it have (a launcher that bound the process to one
core must not make a node benchmark a one-core benchmark; a cpuset still limits it).

With ``sync_dir`` (the virtual cluster: a shared filesystem and shared cpus) the agent waits, once its
benchmarks are resolved and built, until the caller creates ``sync_dir/go`` (every node is ready), so
that all nodes measure at the same time; after its last figure it keeps its cpus busy (one spinning
process per cpu, each in a session of its own like a kernel) until ``sync_dir/release`` appears, so a
node that finishes early does not hand its cpu-mates a cpu of their own for their last samples.

Supervisor and worker: the process the launcher starts prints ``hello`` and forks a worker that does
everything else; it relays the worker's lines whole, prints a ``beat`` line every :data:`BEAT_S` seconds
(no ``seq``: the caller's sign of life from the node), and if the worker dies before ``done`` or
``error`` it prints the ``error`` itself, naming the signal and its likely cause, and ends what the
worker left (it is the worker tree's subreaper). So one killed agent fails its node only.

Output protocol (stdout, one ``os.write`` per line, every line under 1 KB so that no launcher splits
one): ``{"cbsweep": 1, "node", "rank", "seq", "kind", ...}`` with ``kind`` ``hello`` (at once: names,
pid, cpus), ``probe`` (the node's probe and NIC settings), ``ready``, ``result`` (one figure, as
``Result.as_json()``), ``done`` (benchmark seconds, notes, warnings, builds, the number of results)
or ``error`` (message, exit code). A record longer than a line is sent as ``part`` lines (``msg``,
``i``, ``n``, ``data``: consecutive pieces of its JSON text). ``seq`` counts this agent's lines from 0,
so the caller can tell a lost or garbled line from a complete report. The agent exits 0 after an
``error`` record too: a launcher would otherwise end every other node's run.
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import signal
import socket
import sys
import time
from typing import Any

PROTOCOL = 1
#: characters of a record's JSON text per ``part`` line (escaped inside the part it grows by ~20 %)
PIECE = 480
LINE_MAX = 900
POLL_S = 0.01


def encode_spec(spec: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(spec, separators=(",", ":")).encode()).decode()


def decode_spec(text: str) -> dict:
    return json.loads(base64.urlsafe_b64decode(text.encode()).decode())


def rank_of(env: dict[str, str]) -> int:
    """This process's rank in the launch (Open MPI, MPICH/PMI, Slurm), 0 when none says."""
    for var in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"):
        v = env.get(var, "")
        if v.isdigit():
            return int(v)
    return 0


def name_candidates(env: dict[str, str]) -> list[str]:
    out = [env.get("CB_SIM_NODE", ""), env.get("SLURMD_NODENAME", ""), socket.gethostname()]
    try:
        out.append(socket.getfqdn())
    except OSError:
        pass
    return [n for n in dict.fromkeys(out) if n]


def node_name(candidates: list[str], hosts: list[str], rank: int) -> str:
    """The first candidate that is one of ``hosts`` (exactly, then by short name), else
    ``hosts[rank]``, else the first candidate."""
    for c in candidates:
        if c in hosts:
            return c
    short = {h.split(".")[0]: h for h in hosts}
    for c in candidates:
        if c.split(".")[0] in short:
            return short[c.split(".")[0]]
    if 0 <= rank < len(hosts):
        return hosts[rank]
    return candidates[0] if candidates else f"rank{rank}"


class Emitter:
    """Writes the protocol's lines (see the module docstring)."""

    def __init__(self, node: str, rank: int, fd: int = 1) -> None:
        self.node, self.rank, self.fd = node, rank, fd
        self.seq = 0
        self.msg = 0

    def _line(self, rec: dict) -> None:
        body = {"cbsweep": PROTOCOL, "node": self.node, "rank": self.rank, "seq": self.seq, **rec}
        data = (json.dumps(body, separators=(",", ":"), default=str) + "\n").encode()
        self.seq += 1
        while data:
            n = os.write(self.fd, data)
            data = data[n:]

    def emit(self, kind: str, **fields: Any) -> None:
        rec = {"kind": kind, **fields}
        text = json.dumps(rec, separators=(",", ":"), default=str)
        if len(text) + 120 <= LINE_MAX:
            self._line(rec)
            return
        pieces = [text[i:i + PIECE] for i in range(0, len(text), PIECE)]
        for i, piece in enumerate(pieces):
            self._line({"kind": "part", "msg": self.msg, "i": i, "n": len(pieces), "data": piece})
        self.msg += 1


def _online_cpus() -> list[int]:
    try:
        from clusterbench.probe.sysfs import parse_cpulist

        with open("/sys/devices/system/cpu/online") as fh:
            return sorted(parse_cpulist(fh.read().strip()) or ())
    except Exception:
        return list(range(os.cpu_count() or 1))


def place(node: str, node_cpus: dict[str, list[int]], env: dict[str, str]) -> list[int]:
    """Set this process's cpus (see the module docstring); returns them."""
    if not hasattr(os, "sched_setaffinity"):
        return []
    want = node_cpus.get(node)
    if want:
        os.sched_setaffinity(0, set(want))
    elif not env.get("SLURM_JOB_ID"):
        try:
            os.sched_setaffinity(0, set(_online_cpus()))
        except OSError:
            pass
    return sorted(os.sched_getaffinity(0))


def _wait_for(path: str, deadline: float) -> bool:
    while not os.path.exists(path):
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


_SPIN = """import os, sys, time
cpus = [int(c) for c in sys.argv[2].split(",") if c]
end, leader = time.monotonic() + float(sys.argv[1]), os.getpid()
mine = cpus[0] if cpus else None
for c in cpus[1:]:
    if os.fork() == 0:
        mine = c
        break
if mine is not None:
    os.sched_setaffinity(0, {mine})
while time.monotonic() < end and (os.getpid() == leader or os.getppid() == leader):
    pass
"""


def _spinners(cpus: list[int], seconds: float) -> list:
    """Busy loops on the node's cpus, one per cpu, in ONE session of their own, as the node's kernel
    ran (one session, one thread per cpu): with autogroups the scheduler shares a cpu between
    sessions, so a finished node holds the same share its kernel held, not one per cpu. The forked
    loops end with their leader; the leader ends with the agent (parent-death signal)."""
    import subprocess

    from clusterbench.process import die_with_parent

    death = die_with_parent(9)
    proc = subprocess.Popen([sys.executable, "-c", _SPIN, f"{seconds:.1f}", ",".join(map(str, cpus))],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, preexec_fn=death)
    return [proc]


def main(argv: list[str] | None = None) -> int:
    t0 = time.monotonic()
    argv = sys.argv[1:] if argv is None else argv
    env = dict(os.environ)
    rank = rank_of(env)
    try:
        spec = decode_spec(argv[0])
    except (IndexError, ValueError) as exc:
        sys.stderr.write(f"clusterbench sweep agent: bad spec ({exc})\n")
        return 2
    hosts = list(spec.get("hosts") or [])
    names = name_candidates(env)
    node = node_name(names, hosts, rank)
    out = Emitter(node, rank)
    sync_dir = spec.get("sync_dir")
    timeout = float(spec.get("timeout") or 900.0)
    deadline = t0 + timeout
    out.emit("hello", names=names, pid=os.getpid(), python=sys.executable, host=socket.gethostname())
    return _supervise(spec, out, node, env, sync_dir, deadline, t0)


# --------------------------------------------------------------------------- the supervisor
#: seconds between the supervisor's ``beat`` lines (the caller's sign of life from this node)
BEAT_S = 1.0
_PR_SET_CHILD_SUBREAPER = 36
#: signals that stop the supervisor (a user, the launcher's teardown): it ends the worker first
_STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _become_subreaper() -> None:
    """Orphans of the worker's tree (a kernel whose worker was killed) become this process's
    children, so it can end them: nothing is left running on the node."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if len(fields) > 1 and int(fields[1]) == pid and fields[0] != b"Z":
                out.append(int(entry))
    return out


def _end_tree(worker: int | None) -> None:
    """SIGKILL the worker and whatever its tree left behind (reparented here), each with its process
    group (a kernel leads a session of its own), and reap them; bounded to a few seconds."""
    me = os.getpid()
    end = time.monotonic() + 5.0
    victims = [worker] if worker else []
    while time.monotonic() < end:
        victims = list(dict.fromkeys(victims + _children(me)))
        if not victims:
            break
        for pid in victims:
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill(pid, signal.SIGKILL)
        victims = []
        time.sleep(0.02)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _supervise(spec: dict, out: Emitter, node: str, env: dict[str, str], sync_dir: str | None, deadline: float,
               t0: float) -> int:
    """Run the benchmarks in a forked worker and relay its lines; beat every :data:`BEAT_S` seconds;
    if the worker dies before its ``done`` or ``error`` record, say how (the signal, and for SIGKILL
    whether the out-of-memory killer struck: :func:`clusterbench.process.death_cause`), end
    what it left, and exit 0, so that the launcher (in recovery mode) keeps the other nodes running.

    Killing one node's agent must lose that node only (once: it lost the whole sweep)."""
    import select

    from clusterbench.process import death_cause, die_with_parent, memory_state

    memory = memory_state()
    _become_subreaper()
    stopped: list[int] = []
    r, w = os.pipe()
    death = die_with_parent(signal.SIGKILL)  # the worker dies with this supervisor, however it dies
    pid = os.fork()
    if pid == 0:  # the worker
        rc = 1
        try:
            os.close(r)
            if death:
                death()
            os.dup2(w, 1)  # anything it prints goes through the relay
            os.close(w)
            out.fd = 1
            rc = _run(spec, out, node, env, sync_dir, deadline, t0)
        finally:
            os._exit(rc)
    os.close(w)

    def stop(signum: int, _frame: Any) -> None:
        stopped.append(signum)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    for sig in _STOPS:
        signal.signal(sig, stop)
    last_seq, last_kind = out.seq - 1, "hello"
    part_kind = "part"
    buf = b""
    deaf = False  # the launcher stopped reading (it was killed): nobody hears this node any more
    beat = json.dumps({"cbsweep": PROTOCOL, "node": node, "rank": out.rank, "kind": "beat"},
                      separators=(",", ":")).encode() + b"\n"
    next_beat = time.monotonic()
    while True:
        now = time.monotonic()
        if now >= next_beat and not deaf:
            deaf = not _write_all(out.fd, beat)
            next_beat = now + BEAT_S
        if deaf and not stopped:  # no one to report to: end the worker, the node's share of the job
            stop(signal.SIGPIPE, None)
        try:
            ready, _, _ = select.select([r], [], [], max(0.0, next_beat - time.monotonic()))
        except InterruptedError:
            continue
        if not ready:
            continue
        chunk = os.read(r, 65536)
        if not chunk:
            break
        *lines, buf = (buf + chunk).split(b"\n")
        for line in lines:
            deaf = deaf or not _write_all(out.fd, line + b"\n")  # whole lines: a beat never lands inside one
            if line.startswith(b'{"cbsweep"'):
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    rec = json.loads(line)
                    kind = str(rec["kind"])
                    if kind == "part":  # a long record (a done with many builds) comes in parts: its kind
                        if rec["i"] == 0:  # is the one its first part's text starts with, once all are sent
                            m = re.match(r'\{"kind":"(\w+)"', str(rec["data"]))
                            part_kind = m.group(1) if m else "part"
                        kind = part_kind if rec["i"] == rec["n"] - 1 else "part"
                    last_seq, last_kind = int(rec["seq"]), kind
    os.close(r)
    _, status = os.waitpid(pid, 0)
    _end_tree(None)
    if last_kind in ("done", "error") or deaf:
        return 0
    out.seq = last_seq + 1
    if stopped:
        _, how, fix = death_cause(stopped[0], memory)
        message = f"its agent {how.replace('was killed by', 'was stopped by', 1)}"
        sig = stopped[0]
    elif os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        _, how, fix = death_cause(sig, memory)
        message = f"its agent (pid {pid}) {how}"
    else:
        sig = None
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
        message = f"its agent (pid {pid}) exited with status {code} before it reported"
        fix = "rerun; report it with CLUSTERBENCH_DEBUG=1 if it persists"
    with contextlib.suppress(OSError):
        out.emit("error", message=message, fix=fix, exit_code=4, signal=sig)
    return 0


def _evidence() -> dict:
    """doctor's evidence of this node (:func:`clusterbench.doctor.evidence.gather`), or what stopped it."""
    from clusterbench.doctor import evidence as ev

    try:
        return ev.gather("/")
    except Exception as exc:  # the figures do not depend on it
        return {"error": f"{type(exc).__name__}: {exc}"}


def _write_all(fd: int, data: bytes) -> bool:
    """Write all of ``data``; False when the reader is gone (EPIPE: Python ignores SIGPIPE)."""
    try:
        while data:
            data = data[os.write(fd, data):]
    except OSError:
        return False
    return True


def _run(spec: dict, out: Emitter, node: str, env: dict[str, str], sync_dir: str | None, deadline: float,
         t0: float) -> int:
    from clusterbench import session
    from clusterbench.benchmarks.base import Progress
    from clusterbench.errors import ClusterbenchError

    marks: dict[str, float] = {}
    cpus: list[int] = []

    class Barrier(Progress):
        """session.run calls ``overall`` once every benchmark is resolved and built, right before
        the first one measures: the start barrier."""

        def overall(self, seconds: float) -> None:
            if "go" in marks:
                return
            out.emit("ready", estimate_s=seconds, since_start_s=time.monotonic() - t0)
            if sync_dir and not _wait_for(os.path.join(sync_dir, "go"), deadline):
                raise TimeoutError("the other nodes did not get ready in time")
            marks["go"] = time.monotonic()

    try:
        from clusterbench.probe import probe
        from clusterbench.probe.network import nic_settings

        probe_data = probe()  # the machine, not this process: probed before pinning (faster on shared cpus)
        try:
            network = nic_settings()
        except Exception as exc:  # the figures do not depend on it
            network = {"error": f"{type(exc).__name__}: {exc}"}
        node_cpus = {k: list(v) for k, v in (spec.get("node_cpus") or {}).items()}
        try:
            cpus = place(node, node_cpus, env)
        except OSError as exc:
            raise ClusterbenchError(f"{node}: cannot run on cpus {node_cpus.get(node)} ({exc.strerror})",
                                    "give cpus this node has (see clusterbench probe)") from exc
        out.emit("probe", probe=probe_data, network=network, cpus=cpus)
        if spec.get("evidence"):  # doctor's evidence of this node, read here before the barrier
            out.emit("evidence", evidence=_evidence())
        name = spec["benchmark"]
        report = session.run([name], {name: dict(spec.get("given") or {})}, profile=spec.get("profile") or "quick",
                             use_store=False, timeout=spec.get("kernel_timeout"), progress=Barrier(),
                             probe_data=probe_data, argv=["clusterbench", "sweep", "node"])
        bench_s = time.monotonic() - marks.get("go", t0)
        for r in report.results:
            out.emit("result", result=r.as_json())
        out.emit("done", bench_s=bench_s, results=len(report.results), notes=report.run.notes or [],
                 warnings=report.run.warnings or [], builds=report.run.builds or {},
                 since_start_s=time.monotonic() - t0)
    except ClusterbenchError as exc:
        out.emit("error", message=exc.problem, fix=exc.fix, exit_code=exc.exit_code)
        _hold(sync_dir, cpus, deadline, "go" in marks)
        return 0
    except (KeyboardInterrupt, TimeoutError) as exc:
        out.emit("error", message=f"interrupted ({exc or 'signal'})", fix=None, exit_code=130)
        return 0
    except Exception as exc:  # a bug: still a report, with its type
        out.emit("error", message=f"internal error: {type(exc).__name__}: {exc}",
                 fix="rerun with CLUSTERBENCH_DEBUG=1 and report it", exit_code=1)
        return 0
    _hold(sync_dir, cpus, deadline, True)
    return 0


def _hold(sync_dir: str | None, cpus: list[int], deadline: float, started: bool) -> None:
    """Keep this node's cpus busy until the caller releases every node (``sync_dir`` only)."""
    if not sync_dir or not started:
        return
    procs = _spinners(cpus, max(1.0, deadline - time.monotonic()))
    try:
        _wait_for(os.path.join(sync_dir, "release"), deadline)
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)  # the leader and the loops it forked
            p.wait()


if __name__ == "__main__":
    raise SystemExit(main())
