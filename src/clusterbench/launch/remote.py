"""Run a command or a Python snippet on each host of a cluster and collect its JSON.

How a host is reached (:func:`transport`):

* a node of the recorded sim-cluster (``cbsim-n1`` or ``n1``, also ``head``): ``ip netns exec NS``
  (:func:`simcluster.exec_prefix`), with this Python (``sys.executable``) and ``PYTHONPATH`` set to
  this package's ``src`` directory: the namespaces share this machine's filesystem. Needs root.
* ``localhost`` or this machine's own host name: run here directly, same Python.
* anything else, a real host: ``ssh -o BatchMode=yes -o ConnectTimeout=5 HOST`` (no password
  prompt, ever). clusterbench must be **installed on the remote host** for the Python it runs
  (``python3`` by default; pass ``python=`` or set ``$CLUSTERBENCH_REMOTE_PYTHON``, e.g.
  ``~/cb/bin/python`` for a virtual environment; a shared ``$HOME`` with ``pip install -e`` works).

Every call is bounded (``timeout`` seconds, default :data:`TIMEOUT`) and runs in its own process
session, killed as a group when time runs out, so nothing is left behind. A host that cannot be
reached gives a one-line :class:`EnvironmentProblem` naming it (and, when ssh is not installed,
saying so). Hosts are queried in parallel.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from clusterbench.errors import EnvironmentProblem, UsageError
from clusterbench import process
from clusterbench.launch import simcluster

TIMEOUT = 60.0
SSH_OPTIONS = ("-o", "BatchMode=yes", "-o", "ConnectTimeout=5")
#: one ssh connection per host for all of a command's remote calls (OpenSSH's connection sharing):
#: a remote call after the first costs ~20 ms instead of a key exchange (~0.1-0.4 s of cpu on a
#: small board, the bulk of a sweep's orchestration on 32 nodes). The socket lives in the user's
#: ``~/.ssh`` (private to the head of a virtual cluster of machines); the connection is stopped
#: when clusterbench exits (:func:`stop_shared_connections`) and ends by itself 30 s after its last
#: use should clusterbench be killed; a dead peer is noticed within ~6 s. $CLUSTERBENCH_SSH_SHARE=0
#: turns it off (a fresh connection per call, as before).
SHARE_OPTIONS = ("-o", "ControlMaster=auto", "-o", "ControlPath=~/.ssh/cb-%C", "-o", "ControlPersist=30",
                 "-o", "ServerAliveInterval=2", "-o", "ServerAliveCountMax=3")
#: clusterbench's own ssh puts the classical curve25519 key exchange first where OpenSSH (9.0 and
#: later) starts with the post-quantum sntrup761 hybrid, whose key generation costs the head ~0.12 s
#: of cpu per connection on this AMD EPYC (a fresh connection 0.8 s -> 0.35 s; 32 nodes: 4 s of cpu
#: at every multi-node command). Every other algorithm stays available ('^': put first), so any sshd
#: still connects. $CLUSTERBENCH_SSH_KEX=default keeps OpenSSH's own order.
FAST_KEX = ("-o", "KexAlgorithms=^curve25519-sha256,curve25519-sha256@libssh.org")
#: where ``cluster install`` puts clusterbench on a node, relative to its home directory
NODE_VENV = ".local/share/clusterbench/venv"
#: the Python a remote command runs when none is named: the installed virtual environment's, else
#: ``python3`` (a shared $HOME with ``pip install -e``, a module, a system-wide install)
AUTO_PYTHON = f'p="$HOME/{NODE_VENV}/bin/python"; [ -x "$p" ] || p=python3; exec "$p" "$@"'
#: this package's src directory (PYTHONPATH for the sim-cluster's nodes)
SRC_DIR = str(Path(__file__).resolve().parents[2])
_HOST_RE = re.compile(r"^(?:[A-Za-z0-9_][A-Za-z0-9_.-]*@)?[A-Za-z0-9\[][A-Za-z0-9_.:\[\]-]*$")
_MAX_WORKERS = 16

#: prints {"probe": ..., "network": ...} as one JSON document on stdout
PROBE_SNIPPET = (  # one line: any remote login shell (sh, bash, csh) takes it quoted
    "import json, sys; from clusterbench.probe import probe; "
    "from clusterbench.probe.network import nic_settings; "
    "print(json.dumps({'probe': probe(), 'network': nic_settings()}))"
)


@dataclass
class Transport:
    """How to reach one host: ``kind`` is ``sim``, ``local`` or ``ssh``."""

    host: str
    kind: str
    prefix: list[str] = field(default_factory=list)  # argv prefix (ip netns exec NS / ssh ... HOST)
    env: dict[str, str] = field(default_factory=dict)  # extra environment (sim / local only)
    python: str | None = "python3"  # None: the installed venv's, else python3 (AUTO_PYTHON)

    def python_argv(self, *args: str) -> list[str]:
        """``python ARGS`` on this host, with the Python it has (see :data:`AUTO_PYTHON`)."""
        if self.python is None:
            return ["sh", "-c", AUTO_PYTHON, "cb-python", *args]
        return [self.python, *args]

    @property
    def python_text(self) -> str:
        return self.python or f"~/{NODE_VENV}/bin/python or python3"


def _clean_host(host: str) -> str:
    """``n1:2`` (host:slots, as --hosts elsewhere) -> ``n1``; refuses names a shell would misread."""
    h = str(host).strip()
    h = re.sub(r":\d+$", "", h) if h.count(":") == 1 else h
    if not h or not _HOST_RE.match(h):
        raise UsageError(f"bad host name {host!r}", "give host names such as node01, user@node01 or cbsim-n1")
    return h


def _sim_node(host: str, cluster: simcluster.SimCluster | None) -> simcluster.SimNode | None:
    if cluster is None:
        return None
    try:
        return cluster.node(host)
    except UsageError:
        return None


@functools.lru_cache(maxsize=1)
def _local_names() -> frozenset[str]:
    names = {"localhost", "127.0.0.1", "::1", socket.gethostname()}
    try:
        names.add(socket.getfqdn())  # a DNS lookup: seconds where DNS does not answer, so once
    except OSError:
        pass
    return frozenset(names)


def _is_local(host: str) -> bool:
    return host in _local_names()


def transport(host: str, *, cluster: simcluster.SimCluster | None = None, python: str | None = None,
              state: str | os.PathLike | None = None) -> Transport:
    """How ``host`` is reached (see the module docstring). ``cluster`` defaults to the recorded one."""
    host = _clean_host(host)
    if cluster is None:
        try:
            cluster = simcluster.load(state)
        except EnvironmentProblem:
            cluster = None
    node = _sim_node(host, cluster)
    env_local = {"PYTHONPATH": os.pathsep.join(filter(None, [SRC_DIR, os.environ.get("PYTHONPATH")]))}
    if node is not None and cluster is not None and cluster.machines:
        if os.geteuid() != 0:
            raise EnvironmentProblem(f"cannot reach {host}: the virtual cluster's machines need root (nsenter)",
                                     "run as root")
        head = simcluster.exec_prefix(cluster.head, cluster)  # the head's namespaces: its ssh, keys, /etc/hosts
        if node.namespace == cluster.head.namespace:
            return Transport(host, "local", head, env_local, sys.executable)
        return Transport(host, "ssh", [*head, "ssh", *_ssh_options(), host], {},
                         python or os.environ.get("CLUSTERBENCH_REMOTE_PYTHON") or None)
    if node is not None:
        if os.geteuid() != 0:
            raise EnvironmentProblem(f"cannot reach {host}: sim-cluster nodes need root (ip netns exec)",
                                     "run as root")
        if not os.path.exists(f"/run/netns/{node.namespace}"):
            raise EnvironmentProblem(f"cannot reach {host}: its namespace {node.namespace} is missing",
                                     "check `clusterbench sim-cluster status`, or bring it up again")
        return Transport(host, "sim", simcluster.exec_prefix(node, cluster),
                         {**env_local, "CB_SIM_NODE": node.name}, sys.executable)
    if cluster is not None and host.startswith(cluster.prefix):
        raise EnvironmentProblem(f"cannot reach {host}: the sim-cluster has no such node",
                                 "its nodes are " + ", ".join(n.name for n in cluster.nodes))
    if host.startswith(simcluster.default_prefix()) and cluster is None:
        raise EnvironmentProblem(f"cannot reach {host}: no sim-cluster is up",
                                 "run `clusterbench sim-cluster up --nodes N` first (as root)")
    if _is_local(host):
        return Transport(host, "local", [], env_local, sys.executable)
    ssh = shutil.which("ssh")
    if ssh is None:
        raise EnvironmentProblem(f"cannot reach {host}: ssh is not installed on this machine",
                                 "install the OpenSSH client (apt-get install openssh-client)")
    return Transport(host, "ssh", [ssh, *_ssh_options(), host], {},
                     python or os.environ.get("CLUSTERBENCH_REMOTE_PYTHON") or None)


def _sharing() -> bool:
    return os.environ.get("CLUSTERBENCH_SSH_SHARE", "1") not in ("0", "no", "off")


@functools.lru_cache(maxsize=4)
def _openssh_version(ssh: str | None) -> tuple[int, int] | None:
    """(major, minor) of the OpenSSH client ``ssh`` (``ssh -V``), or None: another ssh, or none."""
    if not ssh:
        return None
    try:
        p = subprocess.run([ssh, "-V"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.match(r"OpenSSH_(\d+)\.(\d+)", (p.stderr or p.stdout or "").strip())
    return (int(m.group(1)), int(m.group(2))) if m and p.returncode == 0 else None


def kex_options() -> tuple[str, ...]:
    """:data:`FAST_KEX` where this machine's OpenSSH would start with the post-quantum hybrid, else
    nothing."""
    if os.environ.get("CLUSTERBENCH_SSH_KEX", "") == "default":
        return ()
    v = _openssh_version(shutil.which("ssh"))
    return FAST_KEX if v is not None and v >= (9, 0) else ()


def _ssh_options() -> tuple[str, ...]:
    if not _sharing():
        return SSH_OPTIONS + kex_options()
    return SSH_OPTIONS + kex_options() + SHARE_OPTIONS


#: the ssh command lines (without the remote command) whose shared connection this process may have
#: started: stopped at exit
_SHARED: dict[tuple[str, ...], None] = {}
_SHARED_LOCK = threading.Lock()


def _note_shared(prefix: Sequence[str]) -> None:
    if "ControlMaster=auto" not in prefix:
        return
    with _SHARED_LOCK:
        if not _SHARED:
            atexit.register(stop_shared_connections)
        _SHARED[tuple(prefix)] = None


def launcher_ssh_options(hosts: Sequence[str]) -> str | None:
    """The ssh options an MPI launcher's own ssh (Open MPI's ``plm_rsh_args``) needs to start its
    daemons over the connections clusterbench shares with ``hosts`` (a launch in ~0.5 s instead of
    ~1.5 s on 8 nodes here), or None: sharing off, no host reached by ssh, or the user set the
    launcher's ssh arguments or agent. The hosts' connections are stopped at exit."""
    if not _sharing() or any(os.environ.get(f"OMPI_MCA_plm_rsh_{k}") for k in ("args", "agent")):
        return None
    ts = [t for t in (transport(h) for h in dict.fromkeys(hosts)) if t.kind == "ssh"]
    if not ts:
        return None
    for t in ts:
        _note_shared(t.prefix)
    return " ".join(kex_options() + SHARE_OPTIONS)


def stop_shared_connections(timeout: float = 5.0) -> int:
    """Tell every shared ssh connection this process used to stop (``ssh -O stop``: no new sessions;
    it ends as soon as the sessions on it do, so another clusterbench still using it is not cut
    off). Run at exit; returns how many were asked."""
    with _SHARED_LOCK:
        prefixes = list(_SHARED)
        _SHARED.clear()

    # all at once, with plain processes: at exit, no new threads can start
    procs = []
    for prefix in prefixes:
        with contextlib.suppress(OSError):
            procs.append(subprocess.Popen([*prefix[:-1], "-O", "stop", prefix[-1]], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True))
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return len(prefixes)


def command_argv(t: Transport, argv: Sequence[str]) -> list[str]:
    """The local argv that runs ``argv`` on ``t``'s host (for ssh, one quoted remote shell command;
    its shared connection is stopped when clusterbench exits)."""
    if t.kind == "ssh":  # ssh joins its arguments into one remote shell command
        _note_shared(t.prefix)
        return [*t.prefix, " ".join(shlex.quote(a) for a in argv)]
    return [*t.prefix, *argv]
#: runs ARGV on a node reached by ssh, tied to the head's end of the connection: ARGV in a session of
#: its own, stdin from /dev/null; when this command's stdin reaches end-of-file (the head ended its
#: ssh, or died and the kernel ended it: see ``process.spawn(hold_stdin=True)``) ARGV's whole session
#: is killed. Without a terminal sshd does not signal what a dropped connection leaves running, and a
#: quiet server would wait there for its own alarm. The exit status is ARGV's (128 + N for signal N);
#: ``os._exit``, as the reader thread still blocks in read(2) (an interpreter shutdown would abort).
TETHER = (
    "import os, signal, subprocess, sys, threading\n"
    "p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, start_new_session=True)\n"
    "def gone():\n"
    "    try:\n"
    "        while os.read(0, 65536):\n"
    "            pass\n"
    "    except OSError:\n"
    "        pass\n"
    "    try:\n"
    "        os.killpg(p.pid, signal.SIGKILL)\n"
    "    except OSError:\n"
    "        pass\n"
    "threading.Thread(target=gone, daemon=True).start()\n"
    "rc = p.wait()\n"
    "os._exit(rc if rc >= 0 else 128 - rc)\n"
)


def tethered_argv(host: str | Transport, argv: Sequence[str], *, cluster: simcluster.SimCluster | None = None
                  ) -> tuple[list[str], bool]:
    """(the local command that runs ``argv`` on ``host``, whether it must be spawned with its stdin
    held open): for a long-running program (a server, a kernel) started with ``process.spawn``, where
    :func:`run_command` is for short questions (:func:`command_argv`). On a node reached by ssh
    ``argv`` runs under :data:`TETHER` with the node's Python (:meth:`Transport.python_argv`), so ending the local ssh
    (a timeout, a failure, kill -9 of clusterbench) ends it there too; elsewhere it is the
    transport's prefix (``ip netns exec NS``, the head's namespaces) and ``argv``, as before."""
    t = host if isinstance(host, Transport) else transport(host, cluster=cluster)
    if t.kind != "ssh":
        return [*t.prefix, *argv], False
    return command_argv(t, t.python_argv("-c", TETHER, *argv)), True


def run_command(host: str | Transport, argv: Sequence[str], *, timeout: float = TIMEOUT,
                cluster: simcluster.SimCluster | None = None, input: bytes | None = None, raw: bool = False
                ) -> subprocess.CompletedProcess:
    """Run ``argv`` on ``host``; returns the completed process (text stdout/stderr).

    ``input``: bytes for the command's standard input (a tar of wheels, a binary to keep);
    ``raw``: stdout as bytes (a binary fetched), stderr as text.
    Raises :class:`EnvironmentProblem` (one line, naming the host and the fix: see
    :func:`ssh_problem`) when the host cannot be reached or the command does not finish within
    ``timeout`` s; a non-zero exit of the command itself is returned, not raised.
    """
    t = host if isinstance(host, Transport) else transport(host, cluster=cluster)
    full = command_argv(t, argv)
    env = None if t.kind == "ssh" else {**os.environ, **t.env}
    try:
        p = process.run(full, env=env, timeout=timeout, input=input, text=input is None and not raw)
    except FileNotFoundError as exc:
        raise EnvironmentProblem(f"cannot reach {t.host}: {exc.filename or full[0]} not found",
                                 "install it (ssh: openssh-client; ip: iproute2)") from exc
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"{t.host} did not answer within {timeout:g} s",
                                 f"check that the host is up and reachable (ssh {t.host} true)") from None
    out, err = p.stdout, p.stderr
    if input is not None or raw:
        err = err.decode(errors="replace")
        out = out if raw else out.decode(errors="replace")
    if t.kind == "ssh" and p.returncode == 255:
        problem, fix = ssh_problem(t.host, err or "")
        raise EnvironmentProblem(problem, fix)
    return subprocess.CompletedProcess(full, p.returncode, out, err)


#: what ssh says -> (what it means, what to do); the first that matches names the problem
SSH_PROBLEMS = (
    # before "Host key verification failed", which ssh prints after this warning too
    ("REMOTE HOST IDENTIFICATION HAS CHANGED", "its host key changed since it was recorded",
     "if the node was reinstalled, ssh-keygen -R {host}, then ssh {host} once to record the new key"),
    ("Host key verification failed", "its host key is not in known_hosts (or changed)",
     "check the key, then add it: ssh {host} once and answer yes, or ssh-keyscan {host} >> ~/.ssh/known_hosts "
     "(a changed key: ssh-keygen -R {host} first)"),
    ("Permission denied", "it asks for a password (the key is not accepted)",
     "set up password-less ssh: ssh-copy-id {host}"),
    ("Connection refused", "nothing answers on the ssh port (sshd is not running)",
     "start sshd on {host} (systemctl start ssh)"),
    ("Could not resolve hostname", "its name does not resolve", "add {host} to /etc/hosts (or DNS) on this machine"),
    ("Name or service not known", "its name does not resolve", "add {host} to /etc/hosts (or DNS) on this machine"),
    # the connection is accepted and sshd never greets: the machine hangs (or its sshd is stopped)
    ("banner exchange", "it accepts the connection and never answers (the machine hangs, or its sshd is stuck)",
     "restart sshd on {host} (systemctl restart ssh), or reboot {host}"),
    ("timed out", "it does not answer (down, or a firewall)", "check that {host} is up: ping {host}"),
    ("No route to host", "there is no route to it", "check its network and address"),
)


def ssh_problem(host: str, stderr: str) -> tuple[str, str]:
    """(problem, fix) for ssh's exit 255 to ``host``, in one line each."""
    for needle, what, fix in SSH_PROBLEMS:
        if needle in stderr:
            return f"cannot reach {host} over ssh: {what}", fix.format(host=host)
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    return (f"cannot reach {host} over ssh: {lines[-1] if lines else 'ssh exit 255'}",
            f"check the host name and that password-less ssh works (ssh -o BatchMode=yes {host} true)")


def _last_json(text: str) -> Any:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON document on stdout")


def run_python(host: str | Transport, code: str, *, timeout: float = TIMEOUT,
               cluster: simcluster.SimCluster | None = None, python: str | None = None) -> Any:
    """Run the Python snippet ``code`` on ``host`` and parse the JSON document it prints (last
    line starting with ``{``). A missing clusterbench on the host is named as such."""
    t = host if isinstance(host, Transport) else transport(host, cluster=cluster, python=python)
    p = run_command(t, t.python_argv("-c", code), timeout=timeout)
    err_lines = [ln for ln in (p.stderr or "").strip().splitlines() if ln.strip()]
    last = err_lines[-1].strip() if err_lines else ""
    if p.returncode != 0:
        if "No module named 'clusterbench" in last or "No module named clusterbench" in last:
            raise EnvironmentProblem(
                f"clusterbench is not installed on {t.host} (for {t.python_text})",
                f"run `clusterbench cluster install --hosts {t.host}` (or pip install -e on a shared $HOME, or set "
                "CLUSTERBENCH_REMOTE_PYTHON to the Python of its virtual environment)")
        if p.returncode == 127 or "not found" in last and (t.python or "python3") in last:
            raise EnvironmentProblem(f"{t.python_text} not found on {t.host}",
                                     "install Python 3.10+ there or set CLUSTERBENCH_REMOTE_PYTHON")
        raise EnvironmentProblem(f"the probe failed on {t.host} (exit {p.returncode}): {last or 'no message'}",
                                 "run `clusterbench probe --json` on that host to see the full error")
    try:
        return _last_json(p.stdout or "")
    except ValueError as exc:
        raise EnvironmentProblem(f"{t.host} printed no valid JSON ({exc})",
                                 "run `clusterbench probe --json` on that host to see what it prints") from None


def gather(hosts: Sequence[str], code: str, *, timeout: float = TIMEOUT, keep_going: bool = False,
           cluster: simcluster.SimCluster | None = None, python: str | None = None) -> dict[str, Any]:
    """``run_python(host, code)`` on every host in parallel -> ``{host: document}``.

    With ``keep_going`` a failed host maps to ``{"error": "<one line>"}``; otherwise the first
    failure (in host order) is raised, naming every host that failed.
    """
    names = []
    for h in hosts:
        c = _clean_host(h)
        if c not in names:
            names.append(c)
    if not names:
        raise UsageError("no hosts given", "give --hosts A,B[,...]")
    if cluster is None:
        try:
            cluster = simcluster.load()
        except EnvironmentProblem:
            cluster = None

    def one(h: str) -> tuple[str, Any, EnvironmentProblem | None]:
        try:
            return h, run_python(h, code, timeout=timeout, cluster=cluster, python=python), None
        except EnvironmentProblem as exc:
            return h, None, exc

    with ThreadPoolExecutor(max_workers=min(_MAX_WORKERS, len(names))) as pool:
        rows = list(pool.map(one, names))
    failed = [(h, e) for h, _, e in rows if e is not None]
    if failed and not keep_going:
        h, e = failed[0]
        others = [x for x, _ in failed[1:]]
        problem = e.problem + (f" (also failed: {', '.join(others)})" if others else "")
        raise EnvironmentProblem(problem, e.fix)
    return {h: ({"error": str(e)} if e is not None else d) for h, d, e in rows}


def gather_probes(hosts: Sequence[str], *, timeout: float = TIMEOUT, keep_going: bool = False,
                  cluster: simcluster.SimCluster | None = None, python: str | None = None) -> dict[str, Any]:
    """``{host: {"probe": probe(), "network": nic_settings()}}`` from every host (see the module
    docstring for how hosts are reached and what a remote host needs)."""
    return gather(hosts, PROBE_SNIPPET, timeout=timeout, keep_going=keep_going, cluster=cluster, python=python)
