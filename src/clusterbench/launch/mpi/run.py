"""A bounded MPI run: start the launcher through the process layer, stream rank 0's JSON lines, hold
them back until the transport is proven, bound the launch and the run in time, end everything."""
from __future__ import annotations

import os
import re
import signal as _signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from clusterbench.errors import EnvironmentProblem, KernelFailed
from clusterbench import process
from clusterbench.launch.mpi.detect import INSTALL_FIX, MpiInstall
from clusterbench.launch.mpi.launchers import build_command
from clusterbench.launch.mpi.spec import LaunchSpec
from clusterbench.launch.mpi.transport import TransportProof, check_transport
from clusterbench.text import seconds

Record = dict

#: seconds the MPI library may take to tear down after the kernel's "done" record
FINALIZE_GRACE = 10.0


@dataclass
class MpiRun:
    records: list[Record]
    proof: TransportProof
    command: list[str]
    elapsed_s: float
    stderr_tail: str = ""
    #: set when the kernel said "done" but the MPI library did not exit within FINALIZE_GRACE
    #: seconds and was killed (the results, all validated before, are kept)
    finalize_hung: bool = False
    #: why an earlier launch of this run was given up and the kernel launched again (see
    #: :class:`LaunchCrashed`), one line each; nothing was measured by those launches
    restarts: tuple[str, ...] = ()

    @property
    def info(self) -> dict:
        return next((r for r in self.records if r.get("type") == "info"), {})


_NOISE_RE = re.compile(r"^\[[^\]]*:\d+\] |^-{10,}$|^\s*$|^\[\d+\.\d+\] \[")

_KNOWN_ERRORS = (
    ("Unable to allocate resources", "Slurm could not allocate the ranks",
     "check the allocation (squeue, sinfo) and ask for fewer ranks or cpus"),
    ("Requested node configuration is not available", "Slurm has no node that fits the request",
     "check the cpus asked for against sinfo -N -l"),
    ("PMIX_ERROR", "srun's PMIx and the MPI library could not talk", "try --mpi=pmi2 (srun --mpi=list)"),
    ("There are not enough slots", "not enough slots for the requested ranks",
     "add slots (--hosts node:N) or add --oversubscribe"),
    ("are not available, please use one or more of", "UCX finds no RDMA transport on this machine",
     "check the RDMA device (ibv_devinfo, ucx_info -d) or use --transport tcp"),
    ("No components were able to be opened in the pml framework", "the requested MPI transport cannot start",
     "check the transport's device and libraries, or use --transport auto"),
    ("ORTE was unable to reliably start one or more daemons", "MPI could not start its daemons on a remote host",
     "check that ssh (or the launch agent) reaches every host without a password"),
    ("Permission denied", "MPI could not log in to a remote host", "set up password-less ssh to every host"),
    ("Could not resolve hostname", "a host name does not resolve", "check the host list"),
    ("Connection refused", "a remote host refused the connection", "check that sshd runs on every host"),
    ("is running as root", "Open MPI refuses to run as root", "add --allow-run-as-root"),
    ("rankfile", "Open MPI rejected the rank placement", "check the hosts and cpus asked for"),
)


#: explain_failure's advice when nothing tells the cause
GENERIC_FIX = "rerun; report it with its output if it persists"
#: what a rank other than 0 says before it aborts the job (cb_mpi_die: "<kernel> rank N: message")
_RANK_SAYS_RE = re.compile(r"^\S+ rank (\d+): (.+)$")
#: how each launcher reports a rank that died of a signal: (rank, node, signal number or description)
_OMPI_DIED_RE = re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)")
_HYDRA_DIED_RE = re.compile(r"KILLED BY SIGNAL: (\d+)")
_SRUN_DIED_RE = re.compile(r"srun: error: (\S+): tasks? ([\d,\-]+): (.+?)\s*$", re.M)
_LOST_DAEMON = ("ORTE has lost communication with a remote daemon",)


#: Open MPI's words when a node's daemon disappears mid-job (the node died, rebooted, dropped off the
#: network): the banner names the node
_LOST_DAEMON_RE = re.compile(r"lost communication with a remote daemon.*?Remote daemon:.*? on node (\S+)", re.S)


def _signal_of(text: str) -> int | None:
    """A signal number from a launcher's words: ``9`` or a description such as ``Killed``."""
    if text.isdigit():
        return int(text)
    for sig in _signal.Signals:
        if _signal.strsignal(sig) == text.strip():
            return int(sig)
    return None


#: a kernel's own report of a crash (allpairs.c: "allpairs: rank R of N on NODE (pid P) got SIGSEGV ... in
#: PHASE, round r ...", then "allpairs: rank R frame: ..." lines, the frame that jumped to a null address first)
_CRASH_SAYS_RE = re.compile(r"^\S+: rank (\d+) of \d+ on .* got SIG\w+ .*$", re.M)
_CRASH_FRAME_RE = re.compile(r"^\S+: rank (\d+) frame: (\S+)", re.M)
#: Open MPI's own report of a crash: "[host:pid] Failing at address: 0x0", "[host:pid] [ 1] lib(+0x12)[0x...]"
_OMPI_CRASH_RE = re.compile(r"^\[[^\]]*:\d+\] (Failing at address: \S+|\[ ?\d+\] \S+)", re.M)
#: frames quoted in an error message at most
CRASH_FRAMES = 6


def crash_report(stderr: str, rank: str | None = None) -> str:
    """What the crashed rank said of its crash on stderr, in one line: the kernel's own report (where
    it was, its first frames) or else Open MPI's (address, frames); "" when there is none."""
    says = [m for m in _CRASH_SAYS_RE.finditer(stderr) if rank in (None, "?", m.group(1))]
    if says:
        who = says[0].group(1)
        frames = [m.group(2) for m in _CRASH_FRAME_RE.finditer(stderr) if m.group(1) == who][:CRASH_FRAMES]
        return says[0].group(0).strip() + (f"; frames: {' '.join(frames)}" if frames else "")
    ompi = [m.group(1) for m in _OMPI_CRASH_RE.finditer(stderr)][:CRASH_FRAMES + 1]
    return f"Open MPI's report: {'; '.join(ompi)}" if ompi else ""


def rank_death(stderr: str) -> tuple[str, str | None, int] | None:
    """(rank, node, signal) of a rank the launcher says died of a signal, or None."""
    m = _OMPI_DIED_RE.search(stderr)
    if m:
        return m.group(1), m.group(2), int(m.group(3))
    m = _HYDRA_DIED_RE.search(stderr)
    if m:
        return "?", None, int(m.group(1))
    for m in _SRUN_DIED_RE.finditer(stderr):
        sig = _signal_of(m.group(3))
        if sig is not None:
            return m.group(2), m.group(1), sig
    return None


def death_signal(stderr: str, rc: int | None) -> int | None:
    """The signal a rank died of: as the launcher says it (:func:`rank_death`), else from the launcher's
    exit status 128 + N (mpirun returns it without its banner at times), else None."""
    died = rank_death(stderr)
    if died is not None:
        return died[2]
    return rc - 128 if rc is not None and 128 < rc < 128 + 65 else None


def explain_failure(stderr: str, rc: int | None, what: str, *, local: bool = False,
             before: dict | None = None) -> tuple[str, str]:
    """(problem, fix) for a launch that failed, from the launcher's stderr and exit code. The fix fits
    the cause: a rank that crashed, one the out-of-memory killer took, one killed from outside
    (:func:`process.death_cause`; ``local``: the ranks ran on this machine, so its memory state bears
    on a SIGKILL), a node lost; never "choose a smaller size" when the size is not the cause."""
    lost = _LOST_DAEMON_RE.search(stderr)
    if lost:  # the banner names the node whose daemon went away
        node = lost.group(1).rstrip(".,;")
        return (f"{what} stopped: MPI lost node {node} in the middle of the run (it died, rebooted or dropped off "
                "the network)", f"check {node} (clusterbench cluster preflight --hosts {node}), then run again")
    said = [m for m in (_RANK_SAYS_RE.match(ln.strip()) for ln in stderr.splitlines()) if m]
    if said:  # the kernel's own words on why it stopped, not MPI's abort banner
        return f"{what} failed on rank {said[0].group(1)}: {said[0].group(2)}", "check the parameters (see --help)"
    for needle, problem, fix in _KNOWN_ERRORS:
        if needle in stderr:
            return f"{what}: {problem}", fix
    died = rank_death(stderr)
    if died is not None:
        rank, node, sig = died
        kind, how, fix = process.death_cause(sig, before, local=local)
        where = f"rank {rank}" + (f" on {node}" if node else "")
        said = crash_report(stderr, rank) if kind == "crash" else ""
        return f"{what}: {where} {how}" + (f" ({said})" if said else ""), fix
    if any(n in stderr for n in _LOST_DAEMON):
        return (f"{what}: the launcher lost contact with a node (it went down, became unreachable, or its daemon "
                "was killed)", "check the nodes (ping, ssh) and rerun; leave out a node that stays unreachable")
    lines = [ln.strip() for ln in stderr.splitlines() if not _NOISE_RE.search(ln) and not process.LAUNCHER_FRAME.match(ln)]
    last = lines[-1] if lines else ""
    if rc is not None and rc < 0:  # the launcher itself was killed
        _, how, fix = process.death_cause(-rc, before, local=True)
        return f"{what}: the launcher {how}" + (f" ({last})" if last else ""), fix
    code = f"status {rc}" if rc is not None else "no status"
    sig = death_signal("", rc)
    if sig is not None:  # the shell's convention, as mpirun and srun follow it
        code += f" (128 + {process.signal_name(sig)}: a process died of that signal)"
    return f"{what} exited with {code}" + (f": {last}" if last else ""), GENERIC_FIX


GONE_FIX = "bring it up again (clusterbench sim-cluster up --nodes N) and rerun"


def cluster_gone(sim: object) -> str | None:
    """Why a failed launch on the virtual cluster ``sim`` failed when the cluster itself went away
    (``sim-cluster down`` during the run), else None (also for real hosts: ``sim`` None)."""
    if sim is None:
        return None
    from clusterbench.launch import simcluster

    return simcluster.taken_down(sim)  # type: ignore[arg-type]


def _ranks_may_share_node(spec: LaunchSpec) -> bool:
    if spec.nranks < 2:
        return False
    if spec.places and all(p.host for p in spec.places):
        return len({p.host for p in spec.places}) < len(spec.places)
    if not spec.hosts or spec.places:
        return True
    return spec.nranks > len(spec.hosts) or any(h.slots > 1 for h in spec.hosts)


class LaunchHung(KernelFailed):
    """The launcher started no rank (or, for per-node agents, not every node's) within the launch
    timeout (nothing was measured or passed on)."""


class LaunchCrashed(KernelFailed):
    """A rank crashed (SIGSEGV, SIGBUS) before the kernel's first record, which it prints right after
    MPI_Init and its first collective: inside the MPI library's start, before anything was measured.
    Open MPI 4.1 under srun with PMIx does so now and then: a rank that leaves MPI_Init's fence early
    sends to one whose receive callback is not yet registered (open-mpi/ompi#12495; seen here as
    allpairs' rank 0 dying in btl/tcp while gathering the host names); :func:`run_mpi` launches once
    more."""


#: launches of one run when a rank crashes inside MPI_Init (:class:`LaunchCrashed`), and the signals
#: that count (not SIGILL, SIGABRT: a binary built for another cpu, an assertion, fail again the same way)
START_CRASH_ATTEMPTS = 2
START_CRASH_SIGNALS = frozenset({int(_signal.SIGSEGV), int(_signal.SIGBUS)})


#: seconds a launch may take to start the ranks on real hosts unless the caller says otherwise
LAUNCH_TIMEOUT = 60.0


#: Launch timeout on the virtual cluster, where a launch normally takes well under a second: the
#: first attempt waits SIM_LAUNCH_FIRST + SIM_LAUNCH_PER_HOST per host, the second twice that, the
#: last at least SIM_LAUNCH_TIMEOUT (a hung launch costs seconds, a slow one still gets its time).
SIM_LAUNCH_TIMEOUT = 15.0
SIM_LAUNCH_FIRST = 6.0
SIM_LAUNCH_PER_HOST = 0.5
SIM_LAUNCH_ATTEMPTS = 3


def sim_launch_steps(nhosts: int) -> list[float]:
    """The launch timeout of each attempt on the virtual cluster."""
    first = SIM_LAUNCH_FIRST + SIM_LAUNCH_PER_HOST * nhosts
    return [first, 2 * first, max(SIM_LAUNCH_TIMEOUT, 2 * first)][:SIM_LAUNCH_ATTEMPTS]


def run_mpi(mpi: MpiInstall, spec: LaunchSpec, program: Sequence[str], timeout: float,
            launch_timeout: float = LAUNCH_TIMEOUT, on_record: Callable[[Record], None] | None = None,
            name: str = "mpi kernel", proof_ranks: Sequence[int] = (0, 1),
            proof_out: TransportProof | None = None) -> MpiRun:
    """Run ``program`` under MPI (see :func:`_run_mpi_once`).

    On the virtual cluster (``spec.prefix`` set: launched from its head namespace) a launch that
    starts no rank is given up after a few seconds (:func:`sim_launch_steps`, longer at each attempt)
    and tried again, up to :data:`SIM_LAUNCH_ATTEMPTS` times; nothing was measured before a retry.
    The hang once seen there one launch in eight (two nodes' daemons racing on one Open MPI session
    folder, one dying) is prevented by the launch agent; this stays as a safety net.

    When some hosts are machines of their own (reached by ssh), a clusterbench kernel in
    ``program`` is first built on each of them for itself and launched by the path they share
    (:func:`clusterbench.launch.nodes.stage_program`)."""
    hosts = [h.name for h in spec.hosts or []] + [p.host for p in spec.places or [] if p.host]
    if hosts:
        from clusterbench.launch import nodes

        program = nodes.stage_program(hosts, program)
    restarts: list[str] = []
    for attempt in range(START_CRASH_ATTEMPTS):
        try:
            run = _run_mpi_hung_again(mpi, spec, program, timeout, launch_timeout, on_record, name, proof_ranks,
                                      proof_out)
            run.restarts = tuple(restarts)
            return run
        except LaunchCrashed as exc:
            if attempt + 1 == START_CRASH_ATTEMPTS:
                raise
            restarts.append(f"{name}: launched again after a rank crashed while MPI started, before the kernel's "
                            f"first record, so before any measurement ({exc.problem})")
    raise AssertionError("unreachable")


def _run_mpi_hung_again(mpi: MpiInstall, spec: LaunchSpec, program: Sequence[str], timeout: float,
                        launch_timeout: float, on_record: Callable[[Record], None] | None, name: str,
                        proof_ranks: Sequence[int], proof_out: TransportProof | None) -> MpiRun:
    """:func:`_run_mpi_once`, tried again on the virtual cluster when the launch hung."""
    if not spec.prefix:
        return _run_mpi_once(mpi, spec, program, timeout, launch_timeout, on_record, name, proof_ranks, proof_out)
    steps = sim_launch_steps(len(spec.hosts or []))
    for attempt, step in enumerate(steps):
        try:
            return _run_mpi_once(mpi, spec, program, timeout, min(launch_timeout, step), on_record, name,
                                 proof_ranks, proof_out)
        except LaunchHung:
            if attempt + 1 == len(steps):
                raise
    raise AssertionError("unreachable")


def _run_mpi_once(mpi: MpiInstall, spec: LaunchSpec, program: Sequence[str], timeout: float,
            launch_timeout: float = LAUNCH_TIMEOUT, on_record: Callable[[Record], None] | None = None,
            name: str = "mpi kernel", proof_ranks: Sequence[int] = (0, 1),
            proof_out: TransportProof | None = None) -> MpiRun:
    """Run ``program`` under MPI; return its records (rank 0's JSON lines) and the transport proof.

    * ``launch_timeout``: the first record (the placement report, printed right after
      MPI_Init) must arrive within it, else KernelFailed ("MPI did not start").
    * ``timeout``: the whole run. On expiry, failure or KeyboardInterrupt the whole process
      group is killed (SIGTERM, then SIGKILL) before the exception propagates.
    * Records are parsed and checked like a local kernel's (error and failed-validation records
      raise; results only after validation) and passed to ``on_record`` only once the
      transport between ``proof_ranks`` is proven and agrees with ``spec.transport`` (or at the
      end of the run), so no figure is stored from a run on the wrong transport.
    * ``proof_out``: a TransportProof to fill (so ``on_record`` can read it as records arrive).
    """
    started = time.monotonic()
    memory = process.memory_state()  # a rank's SIGKILL: the out-of-memory killer or someone (explain_failure)
    with tempfile.TemporaryDirectory(prefix="cb-mpi-") as wd:
        cmd, env_add = build_command(mpi, spec, program, wd)
        cmd = [*spec.prefix, *cmd]
        try:  # kill -9 of clusterbench: the launcher, its ranks and wd go too
            run = process.spawn(cmd, env={**os.environ, **env_add}, launcher=True, cleanup=[wd])
        except OSError as exc:
            raise EnvironmentProblem(f"cannot start {cmd[0]} ({exc.strerror})", INSTALL_FIX) from exc
        proof = proof_out if proof_out is not None else TransportProof()
        out = process.Records(name, tail_bytes=16384)
        pending: list[Record] = []
        need_proof = spec.prove_transport and (mpi.name == "openmpi" or mpi.device == "ch4:ucx")
        proof.local_shm = (mpi.name == "mpich" and env_add.get("MPIR_CVAR_NOLOCAL") != "1"
                           and _ranks_may_share_node(spec))
        released = not need_proof
        deadline = started + timeout
        launch_deadline = started + launch_timeout
        done_at: float | None = None

        def release() -> None:
            nonlocal released
            if need_proof:
                check_transport(spec.transport, proof)
            released = True
            for rec in pending:
                if on_record:
                    on_record(rec)
            pending.clear()

        def tick() -> float | None:
            now = time.monotonic()
            if done_at is not None and now >= done_at + FINALIZE_GRACE:
                return None  # finished and validated: a teardown that hangs is killed, not waited for
            if not out.records and now >= launch_deadline:
                msg, fix = explain_failure(out.tail_text, None, name)
                raise LaunchHung(f"MPI did not start '{name}' within {seconds(launch_timeout)} s",
                                 "check the hosts and the launch agent" if "exited" in msg else fix)
            if now >= deadline:
                raise KernelFailed(f"kernel '{name}' timed out after {timeout:g} s (all its MPI processes "
                                   "were killed)", "raise --timeout or choose a smaller size")
            return min(deadline, launch_deadline if not out.records else deadline) - now

        try:
            for _, kind, line in process.read_lines([run.proc], tick):
                if kind == "err":
                    out.feed_err(line)
                    proof.feed(line.decode(errors="replace"))
                    if need_proof and (proof.pml is not None or proof.ucx):
                        check_transport(spec.transport, proof)  # fail fast on a contradiction
                    if not released and proof.covers(proof_ranks):
                        release()
                    continue
                rec = out.feed_out(line)  # the MPI library's chatter is kept as evidence
                if rec is None:
                    continue
                if rec["type"] == "done" and done_at is None:
                    done_at = time.monotonic()
                if released:
                    if on_record:
                        on_record(rec)
                else:
                    pending.append(rec)
            finalize_hung = False
            proc = run.proc
            try:
                wait_until = deadline if done_at is None else min(deadline, done_at + FINALIZE_GRACE)
                proc.wait(timeout=max(1.0, wait_until - time.monotonic()))
            except subprocess.TimeoutExpired as exc:
                if done_at is None:
                    raise KernelFailed(f"kernel '{name}' did not exit", "raise --timeout") from exc
                finalize_hung = True
                process.kill_session(proc, process.LAUNCHER_GRACE)
            err_text = out.tail_text
            if proc.returncode != 0 and not finalize_hung:
                gone = cluster_gone(spec.sim)
                if gone:
                    raise KernelFailed(f"MPI kernel '{name}' stopped: {gone}", GONE_FIX)
                msg, fix = explain_failure(err_text, proc.returncode, f"MPI kernel '{name}'",
                                    local=not spec.hosts or spec.sim is not None, before=memory)
                if not out.records and death_signal(err_text, proc.returncode) in START_CRASH_SIGNALS:
                    raise LaunchCrashed(msg, fix)
                raise KernelFailed(msg, fix)
            if not released:
                release()
            return MpiRun(out.records, proof, cmd, time.monotonic() - started, err_text[-4096:], finalize_hung)
        finally:
            run.end()
