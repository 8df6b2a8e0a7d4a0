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
import json
import os
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


def _spinners(cpus: list[int], seconds: float) -> list:
    """One busy process per cpu, each in a session of its own (as a kernel runs), ended with the agent."""
    import subprocess

    from clusterbench.launch.process import die_with_parent

    procs = []
    targets: list[int | None] = list(cpus) or [None]
    code = f"import time\nend = time.monotonic() + {seconds:.1f}\nwhile time.monotonic() < end:\n    pass\n"
    for cpu in targets:
        death = die_with_parent(9)

        def pre(cpu: int | None = cpu, death: Any = death) -> None:
            if death:
                death()
            if cpu is not None:
                os.sched_setaffinity(0, {cpu})

        procs.append(subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True, preexec_fn=pre))
    return procs


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
    return _run(spec, out, node, env, sync_dir, deadline, t0)


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
        name = spec["benchmark"]
        report = session.run([name], {name: dict(spec.get("given") or {})}, profile=spec.get("profile") or "quick",
                             use_store=False, timeout=spec.get("kernel_timeout"), progress=Barrier(),
                             probe_data=probe_data, argv=["clusterbench", "sweep", "node"])
        bench_s = time.monotonic() - marks.get("go", t0)
        for r in report.results:
            out.emit("result", result=r.as_json())
        out.emit("done", bench_s=bench_s, results=len(report.results), notes=report.run.get("notes") or [],
                 warnings=report.run.get("warnings") or [], builds=report.run.get("builds") or {},
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
            p.kill()
            p.wait()


if __name__ == "__main__":
    raise SystemExit(main())
