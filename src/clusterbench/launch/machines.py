"""The virtual cluster's *machines* mode: every node a machine as far as software can tell.

``sim-cluster up --machines`` gives every node, on top of its network namespace (see
:mod:`clusterbench.launch.simcluster`):

* its own **mount namespace and root filesystem**: an overlay of this machine's ``/`` (read-only
  below, the node's writes in a tmpfs of its own), with fresh tmpfs on ``/root`` (mode 700, as
  sshd's StrictModes wants), ``/home``, ``/tmp``, ``/var/tmp``, ``/run`` and over the head's
  checkout and virtual environment: nothing of the head's clusterbench, kernel cache or results
  store is visible; ``/etc`` and ``/var`` are the node's own copies (copy on write);
* its own **UTS namespace** (host name ``node1`` ... ``nodeN``) and ``/etc/hosts`` naming the head
  and every node;
* this machine's **cgroup filesystems** under ``/sys/fs/cgroup``, read-only (a fresh sysfs has
  none, and ``slurmd`` stops without them: "No filesystem mounted on /sys/fs/cgroup", even with
  ``proctrack/linuxproc``; a node must not change the host's groups);
* its own **boot id** (``/proc/sys/kernel/random/boot_id``: UCX tells machines apart by it) and
  ``/dev/shm``;
* its own **PID namespace**, whose init (pid 1, a few lines of Python) reaps orphans, starts
  ``sshd`` and ends everything in the node when it is told to;
* an **sshd** on its address with host keys of its own (ed25519, made at ``up``), accepting the
  head's key only (no passwords).

The head is a namespace too (network, mount and UTS, not PID: clusterbench must see the processes
it starts there): host name ``head``, this machine's filesystem (so clusterbench, its store and its
temporary folders are there), with its own ``/etc/hosts`` and its own ``/root/.ssh`` (key pair,
``known_hosts`` with every node's host key, read from the node itself, never trusted on first use).
Launchers run there (:func:`head_prefix`) and reach the nodes through real ``ssh``: Open MPI's
default ``plm_rsh_agent``, MPICH Hydra's ssh bootstrap, clusterbench's own remote commands.

For tests, a node can be made to differ or break at ``up`` (:data:`BREAKS`): no sshd, a password
instead of the key, a host key the head does not know, another host name, an ``/etc/hosts``
without some node, an ``/etc/hosts`` naming a node's address by another name, no compiler, no MPI,
a small disk, another clusterbench installed, a host key in the head's known_hosts that is not the
node's, a node that hangs (sshd stopped: connections accepted, never answered).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from clusterbench.errors import EnvironmentProblem, UsageError
from clusterbench import process

if TYPE_CHECKING:
    from clusterbench.launch.simcluster import SimCluster, SimNode

HEAD_NAME = "head"
#: what ``--break NODE:KIND[=VALUE]`` can do to a node (for tests of preflight and install)
BREAKS = {
    "no-sshd": "no sshd runs on the node (connection refused)",
    "password": "sshd asks for a password: the head's key is not authorised",
    "unknown-key": "the head's known_hosts lacks the node's host key",
    "hostname": "the node calls itself VALUE instead of its name",
    "hosts-missing": "the node's /etc/hosts lacks node VALUE",
    "no-compiler": "no C compiler on the node (cc, gcc, mpicc removed)",
    "no-mpi": "no MPI on the node (mpirun, mpiexec, orted, mpicc removed)",
    "disk": "the node's home is a tmpfs of VALUE (e.g. 8m): installs run out of space",
    "version": "another clusterbench is installed on the node (version 0.0.0, another digest)",
    "hang": "the node hangs: its sshd is stopped (SIGSTOP) once up, so connections are accepted, never answered",
    "changed-key": "the head's known_hosts holds another host key for the node (as after a reinstall)",
    "reverse": "the node's /etc/hosts names node VALUE's address by another name first (reverse lookup mismatch)",
}
#: the kinds that need =VALUE
_VALUED = ("hostname", "hosts-missing", "disk", "reverse")
#: what the ``version`` break writes as the node's installed.json
OTHER_VERSION = json.dumps({"version": "0.0.0", "digest": "0000000000000000", "installed": "2000-01-01T00:00:00+0000"})
_BREAK_RE = re.compile(r"^([a-z0-9]+):([a-z-]+)(?:=([A-Za-z0-9._-]+))?$")
#: seconds a node may take from its start to answering on port 22
READY_S = 20.0
#: the node's root overlay: its writes live in this much memory at most
NODE_TMPFS = "4g"
#: directories hidden on every node behind an empty tmpfs (the head's own, per machine)
HIDDEN = ("root", "home", "tmp", "var/tmp", "run", "work", "srv", "mnt", "media")

_NODE_SCRIPT = r"""
set -eu
BASE=/run/cb-machine-$CB_NS
mkdir -p "$BASE"
mount -t tmpfs -o size=@TMPFS@,mode=755 cb-machine "$BASE"
mkdir -p "$BASE/upper" "$BASE/work" "$BASE/root"
mount -t overlay cb-root -o lowerdir=/,upperdir="$BASE/upper",workdir="$BASE/work" "$BASE/root"
R="$BASE/root"
mount -t proc proc "$R/proc"
# a boot of its own: UCX (MPICH, Open MPI's UCX) takes the boot id for the machine's identity and
# would try shared memory between two nodes that report the same one
cat /proc/sys/kernel/random/uuid > "$BASE/boot_id"
mount --bind "$BASE/boot_id" "$R/proc/sys/kernel/random/boot_id"
mount -t sysfs sysfs "$R/sys"
# the cgroup filesystems every Linux machine has (slurmd stops without them, even with no cgroup
# plugin configured): this machine's, read-only, so that nothing in a node changes the host's groups
if mountpoint -q /sys/fs/cgroup; then
    mount --rbind /sys/fs/cgroup "$R/sys/fs/cgroup"
    for m in $(awk -v r="$R/sys/fs/cgroup" '$5 == r || index($5, r "/") == 1 {print $5}' /proc/self/mountinfo); do
        mount -o remount,bind,ro "$m"
    done
fi
mount --rbind /dev "$R/dev"
mount -t tmpfs -o mode=1777 cb-shm "$R/dev/shm"
for d in @HIDDEN@; do
    if [ -d "$R/$d" ]; then mount -t tmpfs -o mode=755 cb-hidden "$R/$d"; fi
done
chmod 1777 "$R/tmp" "$R/var/tmp"
if [ -n "${CB_DISK:-}" ]; then mount -t tmpfs -o size="$CB_DISK",mode=700 cb-home "$R/root"; fi
chmod 700 "$R/root"
mkdir -p "$R/root/.ssh" "$R/run/sshd"
chmod 700 "$R/root/.ssh"
if [ -z "${CB_PASSWORD:-}" ]; then
    cp "$CB_STATE/id_ed25519.pub" "$R/root/.ssh/authorized_keys"
    chmod 600 "$R/root/.ssh/authorized_keys"
fi
if [ -n "${CB_VERSION:-}" ]; then
    mkdir -p "$R/root/.local/share/clusterbench"
    printf '%s\n' "$CB_VERSION" > "$R/root/.local/share/clusterbench/installed.json"
fi
cp "$CB_STATE/hosts-$CB_NS" "$R/etc/hosts"
echo "$CB_HOSTNAME" > "$R/etc/hostname"
rm -f "$R"/etc/ssh/ssh_host_*
ssh-keygen -q -t ed25519 -N '' -C "$CB_HOSTNAME" -f "$R/etc/ssh/ssh_host_ed25519_key"
for f in $CB_REMOVE; do rm -f "$R$f"; done
cd "$R"
mkdir -p .cb-oldroot
pivot_root . .cb-oldroot
cd /
umount -l /.cb-oldroot
rmdir /.cb-oldroot
hostname "$CB_HOSTNAME"
exec python3 -c "$CB_INIT"
"""

#: pid 1 of a node: starts sshd (unless broken), reaps every orphan, ends the node on SIGTERM
_INIT = r"""
import os, signal, subprocess, sys, time
def stop(*_):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(-1, sig)
        except ProcessLookupError:
            pass
        time.sleep(0.3)
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
if os.environ.get("CB_SSHD") == "1":
    args = ["/usr/sbin/sshd", "-D", "-e", "-o", "ListenAddress=" + os.environ["CB_ADDRESS"],
            "-o", "HostKey=/etc/ssh/ssh_host_ed25519_key", "-o", "UseDNS=no", "-o", "MaxStartups=200",
            "-o", "PasswordAuthentication=" + ("yes" if os.environ.get("CB_PASSWORD") else "no"),
            "-o", "PermitRootLogin=" + ("yes" if os.environ.get("CB_PASSWORD") else "prohibit-password")]
    subprocess.Popen(args, stdin=subprocess.DEVNULL, close_fds=True)
sys.stdout.flush()
while True:
    try:
        os.waitpid(-1, 0)
    except ChildProcessError:
        time.sleep(1)
    except InterruptedError:
        pass
"""

_COMPILERS = ("/usr/bin/cc", "/usr/bin/gcc", "/usr/bin/c99", "/usr/bin/c89", "/usr/bin/mpicc",
              "/usr/bin/mpicc.openmpi", "/usr/bin/mpicc.mpich", "/etc/alternatives/cc", "/etc/alternatives/mpi")
_MPI = ("/usr/bin/mpirun", "/usr/bin/mpiexec", "/usr/bin/orted", "/usr/bin/mpirun.openmpi", "/usr/bin/mpiexec.openmpi",
        "/usr/bin/mpiexec.hydra", "/usr/bin/mpirun.mpich", "/usr/bin/mpiexec.mpich", "/usr/bin/mpicc",
        "/usr/bin/mpicc.openmpi", "/usr/bin/mpicc.mpich", "/etc/alternatives/mpirun", "/etc/alternatives/mpi")


# --------------------------------------------------------------------------- breaks
def parse_breaks(items: Sequence[str], node_names: Sequence[str]) -> dict[str, dict[str, str]]:
    """``["node2:no-sshd", "node3:hostname=nodeX"]`` -> ``{"node2": {"no-sshd": ""}, ...}``;
    a bad item is a one-line UsageError naming it."""
    out: dict[str, dict[str, str]] = {}
    for item in items:
        m = _BREAK_RE.match(item.strip())
        if not m or m[2] not in BREAKS:
            raise UsageError(f"--break {item!r} is not NODE:KIND[=VALUE]",
                             "KIND is one of " + ", ".join(BREAKS) + ", e.g. --break node2:no-sshd")
        node, kind, value = m[1], m[2], m[3] or ""
        if node not in node_names:
            raise UsageError(f"--break {item!r}: no node {node}", f"the nodes are {', '.join(node_names)}")
        needs = kind in _VALUED
        if needs != bool(value):
            raise UsageError(f"--break {item!r}: {kind} {'needs' if needs else 'takes no'} =VALUE",
                             f"e.g. --break {node}:{kind}" + ("=node1" if needs else ""))
        if kind in ("hosts-missing", "reverse") and value not in node_names and value != HEAD_NAME:
            raise UsageError(f"--break {item!r}: no node {value}", f"the nodes are {', '.join(node_names)}")
        out.setdefault(node, {})[kind] = value
    return out


# --------------------------------------------------------------------------- files on the head
def ssh_dir(c: "SimCluster") -> Path:
    """The head's ``/root/.ssh`` (bind-mounted there in the head's namespaces): key, known_hosts, config."""
    return Path(c.state_file).parent / f"{c.prefix}machines"


def _hosts_text(c: "SimCluster", missing: Sequence[str] = (), reverse: str = "") -> str:
    """``/etc/hosts`` naming the head and every node, but those in ``missing``; ``reverse``'s address
    named ``<reverse>-alias`` first (so it resolves forward, and back to another name)."""
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    for m in [c.head, *c.nodes]:
        if m.name not in missing:
            lines.append(f"{m.address}\t{m.name}-alias {m.name}" if m.name == reverse else f"{m.address}\t{m.name}")
    return "\n".join(lines) + "\n"


def _prepare_files(c: "SimCluster") -> Path:
    d = ssh_dir(c)
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(mode=0o700, parents=True)
    keygen = shutil.which("ssh-keygen")
    if keygen is None or shutil.which("sshd") is None and not os.path.exists("/usr/sbin/sshd"):
        raise EnvironmentProblem("sim-cluster --machines needs OpenSSH (ssh-keygen and sshd)",
                                 "apt-get install openssh-server openssh-client")
    p = process.run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", "clusterbench-head", "-f",
                     str(d / "id_ed25519")], timeout=30)
    if p.returncode != 0:
        raise EnvironmentProblem(f"ssh-keygen failed: {p.stderr.strip()}", "check OpenSSH's installation")
    (d / "hosts-head").write_text(_hosts_text(c))
    for m in c.nodes:
        br = c.breaks.get(m.name, {})
        (d / f"hosts-{m.namespace}").write_text(_hosts_text(c, [br.get("hosts-missing", "")], br.get("reverse", "")))
    # the client's defaults for the cluster, as a user would write them: no prompt, ever
    (d / "config").write_text("Host *\n    BatchMode yes\n    ConnectTimeout 5\n    StrictHostKeyChecking yes\n"
                              "    UserKnownHostsFile ~/.ssh/known_hosts\n    LogLevel ERROR\n")
    (d / "known_hosts").write_text("")
    for f in d.iterdir():
        f.chmod(0o600)
    return d


# --------------------------------------------------------------------------- start
def _hidden_dirs() -> list[str]:
    """The standard hidden directories plus the head's checkout and virtual environment wherever
    they are (a CI clone outside /work, a venv outside the clone)."""
    out = list(HIDDEN)
    for p in (Path(sys.prefix), Path(__file__).resolve().parents[3]):
        top = p.relative_to("/").parts
        if top and not any(p.is_relative_to("/" + h) for h in HIDDEN) and top[0] not in ("usr", "etc", "var", "opt"):
            out.append(str(p.relative_to("/")))
    return out


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """Start a node's or the head's holder detached: it must outlive the ``up`` command."""
    with open(log, "wb") as fh:
        return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)


def start_node(c: "SimCluster", m: "SimNode") -> None:
    br = c.breaks.get(m.name, {})
    remove = []
    if "no-compiler" in br:
        remove += _COMPILERS
    if "no-mpi" in br:
        remove += _MPI
    script = (_NODE_SCRIPT.replace("@TMPFS@", NODE_TMPFS)
              .replace("@HIDDEN@", " ".join(shlex.quote(h) for h in _hidden_dirs())))
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "CB_NS": m.namespace,
           "CB_STATE": str(ssh_dir(c)), "CB_HOSTNAME": br.get("hostname") or m.name, "CB_ADDRESS": m.address,
           "CB_INIT": _INIT, "CB_SSHD": "0" if "no-sshd" in br else "1", "CB_REMOVE": " ".join(remove),
           "CB_PASSWORD": "1" if "password" in br else "", "CB_DISK": br.get("disk", ""), "LANG": "C.UTF-8",
           "CB_VERSION": OTHER_VERSION if "version" in br else ""}
    nsenter = shutil.which("nsenter") or "/usr/bin/nsenter"
    unshare = shutil.which("unshare") or "/usr/bin/unshare"
    # nsenter --net, not `ip netns exec`: that mounts a fresh /sys without this machine's cgroup
    # filesystems, which the node's /sys/fs/cgroup is bound from (its own sysfs is mounted in the script)
    _start([nsenter, f"--net=/run/netns/{m.namespace}", unshare, "--mount", "--uts", "--pid", "--fork",
            "--propagation", "private", "/bin/sh", "-c", script], env, ssh_dir(c) / f"{m.namespace}.log")


_HEAD_SCRIPT = r"""
set -eu
mount --bind "$CB_STATE/hosts-head" /etc/hosts
mkdir -p /root/.ssh
mount --bind "$CB_STATE" /root/.ssh
hostname head
exec sleep infinity
"""


def start_head(c: "SimCluster") -> None:
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "CB_STATE": str(ssh_dir(c))}
    ip = shutil.which("ip") or "/usr/sbin/ip"
    unshare = shutil.which("unshare") or "/usr/bin/unshare"
    _start([ip, "netns", "exec", c.head.namespace, unshare, "--mount", "--uts", "--propagation", "private",
            "/bin/sh", "-c", _HEAD_SCRIPT], env, ssh_dir(c) / "head.log")


def _netns_inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


#: namespace -> the holder :func:`holder_pid` found last (checked again at every use, never trusted)
_HOLDERS: dict[tuple[str, bool], int] = {}


def holder_pid(namespace: str, *, pid_ns: bool) -> int | None:
    """The process that holds a machine's namespaces: a node's init (pid 1 of its PID namespace)
    or the head's ``sleep``; None when there is none. The one found last is checked first (its
    namespaces and name read from /proc): every remote command on the virtual cluster asks for the
    head's, and ``ip netns pids`` is a process of its own."""
    mine = os.readlink("/proc/self/ns/mnt")
    # a process in this one's mount namespace is not a holder, unless this one runs inside that
    # machine itself (clusterbench on the head: a job's command under salloc there)
    ns_inode = _netns_inode(f"/run/netns/{namespace}")
    inside = _netns_inode("/proc/self/ns/net") == ns_inode
    known = _HOLDERS.get((namespace, pid_ns))
    if known is not None and ns_inode is not None and _netns_inode(f"/proc/{known}/ns/net") == ns_inode \
            and _is_holder(known, pid_ns, mine, inside):
        return known
    p = process.run(["ip", "netns", "pids", namespace], timeout=10)
    for pid in (int(x) for x in p.stdout.split() if x.isdigit()):
        if _is_holder(pid, pid_ns, mine, inside):
            _HOLDERS[(namespace, pid_ns)] = pid
            return pid
    _HOLDERS.pop((namespace, pid_ns), None)
    return None


def _is_holder(pid: int, pid_ns: bool, mine: str, inside: bool) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        mnt = os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return False
    nspid = next((ln.split()[1:] for ln in status.splitlines() if ln.startswith("NSpid:")), [])
    if mnt == mine and not inside:
        return False
    if pid_ns and len(nspid) >= 2 and nspid[-1] == "1":
        return True
    return not pid_ns and len(nspid) == 1 and process_comm(pid) == "sleep"


def process_comm(pid: int) -> str:
    """A process's name, or "" when it is gone (the head's namespace has short-lived processes, its
    ssh clients among them, which end between the listing and the read)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _read_host_key(pid: int) -> str:
    p = process.run(["nsenter", "-t", str(pid), "-m", "cat", "/etc/ssh/ssh_host_ed25519_key.pub"], timeout=10)
    if p.returncode != 0 or not p.stdout.startswith("ssh-ed25519 "):
        raise EnvironmentProblem(f"cannot read the host key of a node ({p.stderr.strip() or 'no key'})",
                                 "run `clusterbench sim-cluster down` and up again")
    return " ".join(p.stdout.split()[:2])


def _port_open(address: str, namespace: str) -> bool:
    code = ("import socket, sys\ns = socket.socket(); s.settimeout(0.5)\n"
            "try:\n    s.connect((sys.argv[1], 22)); sys.exit(0)\nexcept OSError:\n    sys.exit(1)\n")
    return process.run(["ip", "netns", "exec", namespace, sys.executable, "-c", code, address], timeout=5).returncode == 0


def bring_up(c: "SimCluster") -> None:
    """Start the head and every node (in parallel), wait for them, write the head's known_hosts.
    Raises EnvironmentProblem naming the node that did not come up."""
    d = _prepare_files(c)
    start_head(c)
    for m in c.nodes:
        start_node(c, m)
    deadline = time.monotonic() + READY_S + 0.2 * len(c.nodes)
    pending = {m.name: m for m in c.nodes}
    pids: dict[str, int] = {}
    while pending:
        for name, m in list(pending.items()):
            pid = pids.get(name) or holder_pid(m.namespace, pid_ns=True)
            if pid:
                pids[name] = pid
                sshd = "no-sshd" not in c.breaks.get(name, {})
                if not sshd or _port_open(m.address, c.head.namespace):
                    del pending[name]
        if not pending:
            break
        if time.monotonic() > deadline:
            name = next(iter(pending))
            log = ssh_dir(c) / f"{pending[name].namespace}.log"
            last = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
            raise EnvironmentProblem(f"sim-cluster: machine {name} did not come up within "
                                     f"{READY_S + 0.2 * len(c.nodes):.0f} s" + (f": {last[0]}" if last else ""),
                                     "run `clusterbench sim-cluster down`; check that overlayfs and unshare work here")
        time.sleep(0.05)
    if holder_pid(c.head.namespace, pid_ns=False) is None:
        raise EnvironmentProblem("sim-cluster: the head's namespaces did not come up",
                                 "run `clusterbench sim-cluster down` and check unshare")
    lines = []
    for m in c.nodes:
        br = c.breaks.get(m.name, {})
        if "unknown-key" in br:
            continue
        key = _other_host_key(d) if "changed-key" in br else _read_host_key(pids[m.name])
        lines.append(f"{m.name},{m.address} {key}\n")
    (d / "known_hosts").write_text("".join(lines))
    for m in c.nodes:
        if "hang" in c.breaks.get(m.name, {}):
            hang_node(c, m)


def _other_host_key(d: Path) -> str:
    """A host key no node has (the ``changed-key`` break): made once per cluster, in its ssh folder."""
    f = d / "other_host_key"
    if not f.exists():
        p = process.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "other", "-f", str(f)], timeout=30)
        if p.returncode != 0:
            raise EnvironmentProblem(f"ssh-keygen failed: {p.stderr.strip()}", "check OpenSSH's installation")
    return " ".join(Path(str(f) + ".pub").read_text().split()[:2])


def node_sshd(m: "SimNode") -> int | None:
    """The pid of a node's listening sshd (a child of its init), or None."""
    init = holder_pid(m.namespace, pid_ns=True)
    if init is None:
        return None
    return next((int(e) for e in os.listdir("/proc")
                 if e.isdigit() and _ppid(int(e)) == init and process_comm(int(e)) == "sshd"), None)


def hang_node(c: "SimCluster", m: "SimNode") -> None:
    """Make a node hang as a machine does (the ``hang`` break): its sshd stopped, so the kernel still
    accepts connections on port 22 and nothing ever answers. ``down`` ends it as any node (SIGKILL)."""
    pid = node_sshd(m)
    if pid is None:
        raise EnvironmentProblem(f"sim-cluster: machine {m.name} has no sshd to stop",
                                 "run `clusterbench sim-cluster down` and up again")
    os.kill(pid, signal.SIGSTOP)


# --------------------------------------------------------------------------- running things there
def head_prefix(c: "SimCluster") -> list[str]:
    """Prefix a command with this to run it on the head (its network, mount and UTS namespaces)."""
    pid = holder_pid(c.head.namespace, pid_ns=False)
    if pid is None:
        raise EnvironmentProblem(f"the virtual cluster's head ({c.head.namespace}) is not running",
                                 "check `clusterbench sim-cluster status`, or bring it up again")
    return ["nsenter", "-t", str(pid), "-n", "-m", "-u", "--"]


def node_prefix(c: "SimCluster", m: "SimNode") -> list[str]:
    """Prefix a command with this to run it *inside* a node as root (all its namespaces), bypassing
    ssh: for setting the machine up and for tests, never for clusterbench's own launches."""
    pid = holder_pid(m.namespace, pid_ns=True)
    if pid is None:
        raise EnvironmentProblem(f"machine {m.name} is not running (its init is gone)",
                                 "check `clusterbench sim-cluster status`, or bring the cluster up again")
    return ["nsenter", "-t", str(pid), "-m", "-u", "-n", "-p", "--"]


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def own_processes(c: "SimCluster") -> set[int]:
    """The processes that are the machines themselves, not a job on them: each node's init, the
    ``unshare`` that started it and its listening sshd; the head's holder and its ``unshare``."""
    return own_processes_in(c.head.namespace, [m.namespace for m in c.nodes])


def own_processes_in(head: str, nodes: Sequence[str]) -> set[int]:
    """:func:`own_processes` from the namespaces' names alone (after a crash that lost the state file,
    ``down`` still tells the machines' own processes from a job's)."""
    own: set[int] = set()
    for ns, pid_ns in [(head, False), *((n, True) for n in nodes)]:
        pid = holder_pid(ns, pid_ns=pid_ns)
        if pid is None:
            continue
        own.add(pid)
        parent = _ppid(pid)
        if parent:
            own.add(parent)
        if pid_ns:
            for entry in os.listdir("/proc"):
                if entry.isdigit() and _ppid(int(entry)) == pid:
                    if process_comm(int(entry)) == "sshd":
                        own.add(int(entry))
    return own


def node_alive(m: "SimNode") -> bool:
    with contextlib.suppress(EnvironmentProblem, OSError, subprocess.SubprocessError):
        return holder_pid(m.namespace, pid_ns=True) is not None
    return False


def stop_node(c: "SimCluster", m: "SimNode") -> None:
    """Kill a node (its init, and with it everything in its PID namespace): as a node dies."""
    pid = holder_pid(m.namespace, pid_ns=True)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def remove_files(c: "SimCluster") -> None:
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(ssh_dir(c))


def local_name() -> str:
    return socket.gethostname()
