"""A virtual cluster on one machine: network namespaces joined by a bridge (``sim-cluster``).

Layout (prefix ``cbsim-``)::

    cbsim-br     a namespace holding only the bridge ``cbbr0`` and one veth end per member
    cbsim-head   198.18.0.2/24 on ``cb0``: mpirun runs here, so the launcher is inside the cluster too
    cbsim-n1..N  198.18.0.(10+k)/24 on ``cb0``: the nodes (host name = namespace name)

Addresses come from the benchmarking range 198.18.0.0/15 (RFC 2544). Every veth pair is created
inside the bridge namespace with its peer moved straight into the member namespace, so no interface
ever appears in the root namespace and no sysctl outside our namespaces is changed. Deleting a
namespace deletes its veth end (and so the peer), which is how ``down`` cleans up, also after a crash:
it scans ``ip netns list`` for the prefix and kills the processes left inside first.

Open MPI starts its daemons on the nodes through ``plm_rsh_agent`` set to a generated agent script,
which Open MPI calls as ``<agent> <host> "<command>"``; the agent runs the command with
``ip netns exec <host>`` and ``CB_SIM_NODE=<host>`` (every fake node has the same real host name,
so ranks label themselves with that variable). MPICH Hydra uses the same script through
``-launcher-exec``. Two pitfalls (anchors-mpi.md section 6): a host name that resolves to a local
address is started without the agent (``up`` refuses such names), and every daemon binds its ranks
from core 0 unless ranks are placed explicitly (use :func:`rankfile_text` or ``--bind-to none``).

Everything here needs root (``ip netns``); without it a clear :class:`EnvironmentProblem` is raised
and nothing is done.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from clusterbench.errors import EnvironmentProblem, UsageError
from clusterbench.launch import process

DEFAULT_PREFIX = "cbsim-"  # $CLUSTERBENCH_SIM_PREFIX overrides it (see default_prefix)
SUBNET = "198.18.0.0/24"
HEAD_ADDRESS = "198.18.0.2"
NODE_BASE = 10  # node k is 198.18.0.(10+k)
MAX_NODES = 200
IFACE = "cb0"  # the member's interface, in every member namespace
BRIDGE = "cbbr0"  # the bridge, in <prefix>br
SCHEMA = 1
CMD_TIMEOUT = 10.0  # seconds, any single ip/tc command
TBF_LATENCY = "20ms"

_PREFIX_RE = re.compile(r"^[a-z][a-z0-9]{0,7}-$")
_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)?\s*$", re.I)
_DELAY_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|usec|ms|msec|s|sec)?\s*$", re.I)
_RATE_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
               "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9, "tbps": 8e12}


# --------------------------------------------------------------------------- model


@dataclass
class SimNode:
    """One member of the virtual cluster (a node, or the head the launcher runs in)."""

    name: str  # host name given to MPI; equals the namespace name
    namespace: str
    address: str  # without prefix length
    iface: str = IFACE
    peer: str = ""  # the veth end on the bridge, in the bridge namespace

    @property
    def short(self) -> str:
        return self.peer.removeprefix("cbv-")


@dataclass
class SimCluster:
    """The virtual cluster as recorded in the state file."""

    prefix: str
    nodes: list[SimNode]
    head: SimNode
    bridge_namespace: str
    mtu: int = 1500
    rate: str | None = None  # as tc takes it, e.g. "1000000000bit"; None = unlimited
    rate_bps: int | None = None
    delay: str | None = None  # netem delay, e.g. "1ms"
    #: segmentation/receive offloads on the veths: True (Linux's default for veth: 64 KiB GSO/GRO
    #: segments cross the bridge whatever the MTU, so MTU hardly changes bandwidth) or False (every
    #: frame MTU-sized and checksummed in software, as on a wire: per-packet costs make MTU show)
    offload: bool = True
    #: "netns" (nodes are network namespaces sharing this machine's filesystem) or "machines" (each
    #: node also has its own root filesystem, host name, PID namespace and sshd: launch/machines.py)
    mode: str = "netns"
    #: machines mode: what is broken on which node ({node: {kind: value}}, launch/machines.BREAKS)
    breaks: dict = field(default_factory=dict)
    subnet: str = SUBNET
    agent: str = ""  # path of the launch agent script
    state_file: str = ""
    created: str = ""
    bridge: str = BRIDGE
    schema: int = SCHEMA
    notes: list[str] = field(default_factory=list)

    def spec(self) -> dict:
        """What ``up`` was asked for: two clusters with the same spec are the same cluster."""
        return {"prefix": self.prefix, "nodes": len(self.nodes), "mtu": self.mtu,
                "rate_bps": self.rate_bps, "delay": self.delay, "subnet": self.subnet, "offload": self.offload,
                "mode": self.mode, "breaks": self.breaks}

    @property
    def machines(self) -> bool:
        """Nodes are separate machines (own filesystem, host name, sshd), reached by ssh from the head."""
        return self.mode == "machines"

    def namespaces(self) -> list[str]:
        return [self.bridge_namespace, self.head.namespace] + [n.namespace for n in self.nodes]

    def node(self, name: str | SimNode) -> SimNode:
        """A member by name: ``cbsim-n1``, ``n1``, ``head`` or ``cbsim-head``."""
        if isinstance(name, SimNode):
            return name
        for m in [self.head, *self.nodes]:
            if name in (m.name, m.namespace, m.short) or (self.machines and name == m.address):
                return m
        raise UsageError(f"sim-cluster has no node {name!r}",
                         "nodes are " + ", ".join(n.name for n in self.nodes))

    def to_json(self) -> dict:
        d = asdict(self)
        d["spec"] = self.spec()
        return d

    @classmethod
    def from_json(cls, d: dict) -> SimCluster:
        d = dict(d)
        d.pop("spec", None)
        d["nodes"] = [SimNode(**n) for n in d["nodes"]]
        d["head"] = SimNode(**d["head"])
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})


# --------------------------------------------------------------------------- helpers


def _require_root(what: str = "sim-cluster") -> None:
    if os.geteuid() != 0:
        raise EnvironmentProblem(
            f"{what} needs root: it creates network namespaces with `ip netns`",
            "run it as root (e.g. sudo clusterbench sim-cluster ...); nothing was done")
    if shutil.which("ip") is None:
        raise EnvironmentProblem("`ip` (iproute2) not found; sim-cluster needs it",
                                 "install iproute2 (apt-get install iproute2)")


def _check_prefix(prefix: str | None) -> str:
    if prefix is None:
        return default_prefix()
    if not _PREFIX_RE.match(prefix):
        raise UsageError(f"bad sim-cluster prefix {prefix!r}",
                         "use 1-8 lowercase letters/digits starting with a letter, then '-', e.g. cbsim-")
    return prefix


def default_prefix() -> str:
    """The prefix used when none is given: $CLUSTERBENCH_SIM_PREFIX or ``cbsim-``. Lets two test
    suites (or two users) run virtual clusters side by side without touching each other's."""
    return _check_prefix(os.environ.get("CLUSTERBENCH_SIM_PREFIX") or DEFAULT_PREFIX)


def state_dir(path: str | os.PathLike | None = None) -> Path:
    """Where the state file and agent live: ``path``, $CLUSTERBENCH_SIM_STATE, /run/clusterbench,
    $XDG_RUNTIME_DIR/clusterbench or /tmp/clusterbench-UID (first usable)."""
    if path is not None:
        return Path(path)
    env = os.environ.get("CLUSTERBENCH_SIM_STATE")
    if env:
        return Path(env)
    candidates = [Path("/run/clusterbench")]
    if os.environ.get("XDG_RUNTIME_DIR"):
        candidates.append(Path(os.environ["XDG_RUNTIME_DIR"]) / "clusterbench")
    candidates.append(Path(tempfile.gettempdir()) / f"clusterbench-{os.geteuid()}")
    for c in candidates:
        if c.is_dir() and os.access(c, os.W_OK):
            return c
        if os.access(c.parent, os.W_OK):
            return c
    return candidates[-1]


def _run(cmd: Sequence[str], *, timeout: float = CMD_TIMEOUT, check: bool = True,
         what: str | None = None) -> subprocess.CompletedProcess:
    try:
        p = process.run(list(cmd), timeout=timeout)
    except FileNotFoundError as e:
        raise EnvironmentProblem(f"{cmd[0]} not found", "install iproute2") from e
    except subprocess.TimeoutExpired as e:
        raise EnvironmentProblem(f"`{' '.join(cmd)}` did not finish within {timeout:g} s",
                                 "check the machine's network namespaces (ip netns list)") from e
    if check and p.returncode != 0:
        err = (p.stderr or p.stdout).strip().splitlines()
        raise EnvironmentProblem(
            f"{what or 'sim-cluster'}: `{' '.join(cmd)}` failed: {err[-1] if err else f'exit {p.returncode}'}",
            "run `clusterbench sim-cluster down` and try again; ip netns needs root with CAP_SYS_ADMIN")
    return p


def _ip_json(args: Sequence[str]) -> list:
    p = _run(["ip", "-j", *args], check=False)
    if p.returncode != 0 or not p.stdout.strip():
        return []
    try:
        return json.loads(p.stdout)
    except ValueError:
        return []


def list_namespaces(prefix: str | None = None) -> list[str]:
    """Namespaces whose name starts with ``prefix`` (``ip netns list``; does not need root)."""
    prefix = _check_prefix(prefix)
    p = _run(["ip", "netns", "list"], check=False)
    out = []
    for line in p.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(prefix):
            out.append(name)
    if p.returncode != 0:  # fall back on the mount points
        with contextlib.suppress(OSError):
            out = sorted(n for n in os.listdir("/run/netns") if n.startswith(prefix))
    return out


def parse_rate(rate: str | int | None) -> int | None:
    """``1gbit``, ``100mbit``, ``125mbps`` (bytes/s, tc's convention), or bits/s as a number -> bit/s."""
    if rate is None or rate == "" or rate == 0:
        return None
    m = _RATE_RE.match(str(rate))
    if not m:
        raise UsageError(f"bad rate {rate!r}", "give a tc rate such as 1gbit, 100mbit or 500kbit")
    bps = int(float(m.group(1)) * _RATE_UNITS[(m.group(2) or "bit").lower()])
    if bps < 8000:
        raise UsageError(f"rate {rate!r} is below 8 kbit/s", "give a tc rate such as 1gbit or 100mbit")
    return bps


def parse_delay(delay: str | float | None) -> str | None:
    """``1ms``, ``250us``, or a number of milliseconds -> a tc time string."""
    if delay is None or delay == "" or delay == 0:
        return None
    m = _DELAY_RE.match(str(delay))
    if not m:
        raise UsageError(f"bad delay {delay!r}", "give a delay such as 1ms or 200us")
    unit = (m.group(2) or "ms").lower().replace("sec", "s").replace("usec", "us")
    return f"{m.group(1)}{unit}"


def _local_addresses() -> set[str]:
    addrs = set()
    for link in _ip_json(["addr", "show"]):  # read-only look at this namespace
        for a in link.get("addr_info", []):
            if a.get("local"):
                addrs.add(a["local"])
    return addrs


def _check_names_do_not_resolve_locally(names: Sequence[str]) -> None:
    """Open MPI starts a host without the agent when its name resolves to a local address."""
    if shutil.which("getent") is None:
        return
    try:
        p = process.run(["getent", "ahosts", *names], timeout=10)
    except subprocess.TimeoutExpired:
        return
    local = _local_addresses()
    for line in p.stdout.splitlines():
        parts = line.split()
        if not parts:
            continue
        try:
            ip = ipaddress.ip_address(parts[0])
        except ValueError:
            continue
        if ip.is_loopback or str(ip) in local:
            raise EnvironmentProblem(
                f"sim-cluster host names ({', '.join(names)}) resolve to a local address ({ip}); "
                "Open MPI would start them without the namespace agent",
                "remove those names from /etc/hosts (or DNS), or use another --prefix")


@contextlib.contextmanager
def _locked(sdir: Path) -> Iterator[None]:
    sdir.mkdir(parents=True, exist_ok=True, mode=0o755)
    with open(sdir / "simcluster.lock", "w") as f:
        deadline = time.monotonic() + 30
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise EnvironmentProblem("another sim-cluster up/down is running",
                                             "wait for it to finish") from None
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _files(sdir: Path, prefix: str) -> tuple[Path, Path]:
    """(state file, agent) for ``prefix``: simcluster.json for the default prefix."""
    tag = "" if prefix == DEFAULT_PREFIX else "-" + prefix.rstrip("-")
    return sdir / f"simcluster{tag}.json", sdir / f"simcluster{tag}-agent.sh"


def load(state: str | os.PathLike | None = None, *, prefix: str | None = None) -> SimCluster | None:
    """The recorded cluster, or None when there is no state file (does not need root)."""
    prefix = _check_prefix(prefix)
    path = _files(state_dir(state), prefix)[0]
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise EnvironmentProblem(f"sim-cluster state file {path} is unreadable: {e}",
                                 "run `clusterbench sim-cluster down` (it removes it)") from e
    try:
        return SimCluster.from_json(data)
    except (TypeError, KeyError) as e:
        raise EnvironmentProblem(f"sim-cluster state file {path} is malformed: {e}",
                                 "run `clusterbench sim-cluster down` (it removes it)") from e


# --------------------------------------------------------------------------- agent


AGENT_TEMPLATE = r"""#!/bin/sh
# clusterbench sim-cluster launch agent (generated by clusterbench; do not edit).
#   Open MPI (plm_rsh_agent):  <agent> <host> "<command>"
#   MPICH Hydra (-launcher-exec): <agent> [-x ...] <host> <command...>
# Runs the command inside the node's network namespace, with CB_SIM_NODE set to the node name.
PREFIX='@PREFIX@'
IP='@IP@'
while [ $# -gt 0 ]; do
    case "$1" in
        -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;  # ssh options that take a value
        -*) shift ;;
        *) break ;;
    esac
done
if [ $# -lt 2 ]; then
    echo "clusterbench sim-cluster agent: usage: $0 HOST COMMAND..." >&2
    exit 255
fi
host=${1#*@}
shift
case "$host" in
    *[!A-Za-z0-9._-]*|'') echo "clusterbench sim-cluster agent: bad host name '$host'" >&2; exit 255 ;;
    "$PREFIX"*) ns=$host ;;
    *) ns=$PREFIX$host ;;
esac
if [ ! -e "/run/netns/$ns" ]; then
    echo "clusterbench sim-cluster agent: no namespace $ns (is the sim-cluster up?)" >&2
    exit 255
fi
CB_SIM_NODE=$ns
export CB_SIM_NODE
exec "$IP" netns exec "$ns" /bin/sh -c "$*"
"""


def agent_script(prefix: str | None = None) -> str:
    """The text of the launch agent for ``prefix``."""
    ip = shutil.which("ip") or "/usr/sbin/ip"
    return AGENT_TEMPLATE.replace("@PREFIX@", _check_prefix(prefix)).replace("@IP@", ip)


# --------------------------------------------------------------------------- up / down


def _members(prefix: str, nodes: int, machines: bool = False) -> tuple[SimNode, list[SimNode]]:
    """The head and the nodes. Host names are the namespaces' (``cbsim-n1``), or on machines the
    names a cluster's nodes have (``head``, ``node1``...; each machine resolves them itself)."""
    head = SimNode(name="head" if machines else f"{prefix}head", namespace=f"{prefix}head", address=HEAD_ADDRESS,
                   peer="cbv-head")
    net = ipaddress.ip_network(SUBNET)
    members = []
    for k in range(1, nodes + 1):
        ns = f"{prefix}n{k}"
        members.append(SimNode(name=f"node{k}" if machines else ns, namespace=ns,
                               address=str(net.network_address + NODE_BASE + k), peer=f"cbv-n{k}"))
    return head, members


def _kill_namespace_processes(ns: str) -> list[int]:
    """SIGKILL every process left in one of our namespaces (orted, ranks): a namespace with a
    process in it outlives ``ip netns del``, and they would be orphans."""
    p = _run(["ip", "netns", "pids", ns], check=False)
    pids = [int(x) for x in p.stdout.split() if x.isdigit() and int(x) != os.getpid()]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while pids and time.monotonic() < deadline:
        pids = [pid for pid in pids if _alive(pid)]
        if pids:
            time.sleep(0.05)
    return pids


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _argv_of(pid: int) -> list[str]:
    """A process's argv (its first 4 KiB), printable characters only; ``[]`` when it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(4096).decode(errors="replace")
    except OSError:
        return []
    return ["".join(ch if ch.isprintable() else "?" for ch in w) for w in raw.split("\0") if w]


def _command_of(argv: Sequence[str]) -> str:
    """A process's command line for a message: its program's file name (not the whole path, which can
    fill the line alone) and its arguments, at most 60 characters."""
    text = " ".join([os.path.basename(argv[0]) or argv[0], *argv[1:]]) if argv else "?"
    return text if len(text) <= 60 else text[:57] + "..."


def processes(*, prefix: str | None = None) -> list[dict]:
    """The processes running inside the virtual cluster's namespaces (``ip netns pids``), as
    ``{"namespace", "pid", "command"}``. The cluster runs no daemon of its own (namespaces, a bridge,
    qdiscs: no process), so every one of them belongs to a job using it (mpirun, orted, ranks, sweep
    agents, a slurmd) or was left by one."""
    _require_root()
    prefix = _check_prefix(prefix)
    own: set[int] = set()
    with contextlib.suppress(EnvironmentProblem):
        c = load(prefix=prefix)
        if c is not None and c.machines:  # machines do run processes of their own: init, sshd, the head's holder
            from clusterbench.launch import machines as M

            own = M.own_processes(c)
    out = []
    for ns in list_namespaces(prefix):
        p = _run(["ip", "netns", "pids", ns], check=False)
        for x in p.stdout.split():
            if x.isdigit() and int(x) != os.getpid() and int(x) not in own and _alive(int(x)):
                argv = _argv_of(int(x))
                out.append({"namespace": ns, "pid": int(x), "command": _command_of(argv), "program": _program(argv)})
    return out


def _program(words: Sequence[str]) -> str:
    """The program of an argv for a summary: ``mpirun``, ``orted``, or for ``python -m M``, M. From the
    whole argv, never the shortened command line (a long path to python cut before its ``-m``)."""
    if not words:
        return "?"
    if "-m" in words[:-1] and os.path.basename(words[0]).startswith("python"):
        return words[words.index("-m") + 1]
    return os.path.basename(words[0])


def describe_processes(procs: Sequence[dict]) -> str:
    """``1 mpirun, 4 orted, 8 clusterbench.sweep.agent in t1-head, t1-n1, ...`` for a one-line message."""
    count: dict[str, int] = {}
    for p in procs:
        name = p.get("program") or _program(p["command"].split())
        count[name] = count.get(name, 0) + 1
    spaces = list(dict.fromkeys(p["namespace"] for p in procs))
    return (", ".join(f"{k} {name}" for name, k in count.items()) + " in " + ", ".join(spaces[:6])
            + (" ..." if len(spaces) > 6 else ""))


def taken_down(c: SimCluster) -> str | None:
    """Why a job on ``c`` failed when the cluster itself went away (``sim-cluster down`` during it:
    its namespaces or its state file are gone), else None. Reads ``/run/netns``: no process, no root."""
    try:
        existing = set(os.listdir("/run/netns"))
    except OSError:
        existing = set()
    missing = [ns for ns in c.namespaces() if ns not in existing]
    if missing:
        return (f"the virtual cluster was taken down while it ran (namespace{'s' if len(missing) > 1 else ''} "
                f"{', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} gone: sim-cluster down?)")
    if c.state_file and not Path(c.state_file).exists():
        return "the virtual cluster was taken down while it ran (its state file is gone: sim-cluster down?)"
    return None


def _teardown(prefix: str) -> list[str]:
    """Delete every namespace with our prefix, nodes before the bridge; return their names."""
    names = list_namespaces(prefix)
    bridge = f"{prefix}br"
    names.sort(key=lambda n: (n == bridge, n))
    removed = []
    for ns in names:
        _kill_namespace_processes(ns)
        p = _run(["ip", "netns", "del", ns], check=False)
        if p.returncode == 0 or ns not in list_namespaces(prefix):
            removed.append(ns)
    left = list_namespaces(prefix)
    if left:
        raise EnvironmentProblem(f"sim-cluster down could not remove {', '.join(left)}",
                                 "check `ip netns pids NAME` for processes holding them and retry")
    return removed


def down(*, prefix: str | None = None, state: str | os.PathLike | None = None) -> list[str]:
    """Remove everything ``up`` made: every namespace named ``<prefix>*`` (processes inside are
    killed first; their veth ends go with them), the state file and the agent. Works without a
    state file (after a crash). Returns the namespaces removed. Nothing else is touched.
    ``clusterbench sim-cluster down`` refuses first, without ``--force``, when a job runs inside
    (:func:`processes`); this function kills them (it is also the cleanup after a crash)."""
    _require_root()
    prefix = _check_prefix(prefix)
    sdir = state_dir(state)
    with _locked(sdir):
        state_file, agent = _files(sdir, prefix)
        # the state file goes first: a job that fails while its processes are killed below then finds
        # it gone and says the cluster was taken down (taken_down), not that its launcher was killed
        with contextlib.suppress(FileNotFoundError):
            state_file.unlink()
        removed = _teardown(prefix)
        _remove_files(sdir, prefix)
    return removed


def up(nodes: int = 2, *, mtu: int = 1500, rate: str | int | None = None, delay: str | float | None = None,
       offload: bool = True, prefix: str | None = None, state: str | os.PathLike | None = None,
       machines: bool = False, breaks: Sequence[str] = ()) -> SimCluster:
    """Bring up a virtual cluster of ``nodes`` nodes (plus head and bridge namespaces); with
    ``machines`` every node is a machine of its own reached by ssh (:mod:`clusterbench.launch.machines`),
    ``breaks`` (``NODE:KIND[=VALUE]``) making some differ or fail for tests.

    Idempotent: the same spec again is a no-op (returns the recorded cluster, with a note); a
    different spec raises :class:`UsageError` telling to ``down`` first; a recorded cluster that is
    broken, or namespaces left by a crash without a state file, are removed and rebuilt.
    """
    _require_root()
    prefix = _check_prefix(prefix)
    if not isinstance(nodes, int) or isinstance(nodes, bool) or not 1 <= nodes <= MAX_NODES:
        raise UsageError(f"bad node count {nodes!r}", f"give --nodes between 1 and {MAX_NODES}")
    if not isinstance(mtu, int) or isinstance(mtu, bool) or not 576 <= mtu <= 65535:
        raise UsageError(f"bad MTU {mtu!r}", "give --mtu between 576 and 65535 (e.g. 1500 or 9000)")
    rate_bps = parse_rate(rate)
    delay_s = parse_delay(delay)
    if not offload and shutil.which("ethtool") is None:
        raise EnvironmentProblem("--offload off needs ethtool, which is not installed",
                                 "apt-get install ethtool (or leave offloads on)")
    sdir = state_dir(state)
    head, members = _members(prefix, nodes, machines)
    broken = {}
    if breaks:
        if not machines:
            raise UsageError("--break is for --machines", "add --machines")
        from clusterbench.launch import machines as M

        broken = M.parse_breaks(breaks, [m.name for m in members])
    cluster = SimCluster(prefix=prefix, nodes=members, head=head, bridge_namespace=f"{prefix}br", mtu=mtu,
                         rate=f"{rate_bps}bit" if rate_bps else None, rate_bps=rate_bps, delay=delay_s,
                         offload=bool(offload), mode="machines" if machines else "netns", breaks=broken,
                         agent=str(_files(sdir, prefix)[1]), state_file=str(_files(sdir, prefix)[0]))
    with _locked(sdir):
        old = None
        with contextlib.suppress(EnvironmentProblem):
            old = load(sdir, prefix=prefix)
        if old is not None:
            if old.spec() != cluster.spec():
                raise UsageError(
                    f"a sim-cluster is already up with a different spec ({_describe(old)})",
                    "run `clusterbench sim-cluster down` first, then `up` again")
            st = _status(old)
            if st["up"]:
                old.notes = ["already up with this spec: nothing done"]
                return old
            cluster.notes.append("the recorded sim-cluster was broken ("
                                 + "; ".join(st["problems"]) + "): rebuilt")
        leftovers = list_namespaces(prefix)
        if leftovers:
            if old is None:
                cluster.notes.append(f"removed leftovers of an earlier sim-cluster: {', '.join(leftovers)}")
            _teardown(prefix)
        if not machines:  # machines resolve their names themselves (the head's own /etc/hosts)
            _check_names_do_not_resolve_locally([n.name for n in members])
        try:
            _build(cluster)
            if machines:
                from clusterbench.launch import machines as M

                M.bring_up(cluster)
            _write_atomic(Path(cluster.agent), agent_script(prefix), mode=0o755)
            cluster.created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
            _write_atomic(Path(cluster.state_file), json.dumps(cluster.to_json(), indent=1) + "\n")
            st = _status(cluster)
            if not st["up"]:
                raise EnvironmentProblem("sim-cluster did not come up: " + "; ".join(st["problems"]),
                                         "run `clusterbench sim-cluster down` and check `ip netns list`")
        except BaseException:
            with contextlib.suppress(Exception):
                _teardown(prefix)
            _remove_files(sdir, prefix)
            raise
    return cluster


def _remove_files(sdir: Path, prefix: str) -> None:
    """The state file, the agent and the machines' ssh folder of ``prefix``."""
    for path in _files(sdir, prefix):
        with contextlib.suppress(OSError):
            path.unlink()
    shutil.rmtree(sdir / f"{prefix}machines", ignore_errors=True)


def _describe(c: SimCluster) -> str:
    s = f"{len(c.nodes)} {'machines' if c.machines else 'nodes'}, MTU {c.mtu}"
    s += f", rate {c.rate_bps / 1e6:g} Mbit/s" if c.rate_bps else ", no rate limit"
    if c.delay:
        s += f", delay {c.delay}"
    if not c.offload:
        s += ", offloads off"
    return s


def _tbf_args(rate_bps: int, mtu: int) -> list[str]:
    # burst >= 2 ms at the rate and >= a 64 KiB GSO packet, so the rate holds without drops
    burst = max(rate_bps // 8 // 500, 65536 + mtu)
    return ["tbf", "rate", f"{rate_bps}bit", "burst", str(burst), "latency", TBF_LATENCY]


def _build(c: SimCluster) -> None:
    br = c.bridge_namespace
    prefix_len = ipaddress.ip_network(c.subnet).prefixlen
    what = "sim-cluster up"
    first = _run(["ip", "netns", "add", br], check=False)
    if first.returncode != 0:
        raise EnvironmentProblem(
            f"cannot create a network namespace: {first.stderr.strip() or 'ip netns add failed'}",
            "sim-cluster needs root with CAP_SYS_ADMIN and CAP_NET_ADMIN (not an unprivileged container)")
    _run(["ip", "-n", br, "link", "set", "lo", "up"], what=what)
    _run(["ip", "-n", br, "link", "add", c.bridge, "type", "bridge", "stp_state", "0", "forward_delay", "0"],
         what=what)
    _run(["ip", "-n", br, "link", "set", c.bridge, "mtu", str(c.mtu), "up"], what=what)
    for m in [c.head, *c.nodes]:
        _run(["ip", "netns", "add", m.namespace], what=what)
        _run(["ip", "-n", m.namespace, "link", "set", "lo", "up"], what=what)
        # created inside the bridge namespace, peer moved straight into the member: never in the root ns
        _run(["ip", "-n", br, "link", "add", m.peer, "mtu", str(c.mtu), "type", "veth",
              "peer", "name", m.iface, "mtu", str(c.mtu), "netns", m.namespace], what=what)
        _run(["ip", "-n", br, "link", "set", m.peer, "master", c.bridge, "up"], what=what)
        _run(["ip", "-n", m.namespace, "addr", "add", f"{m.address}/{prefix_len}", "dev", m.iface], what=what)
        _run(["ip", "-n", m.namespace, "link", "set", m.iface, "up"], what=what)
    _run(["ip", "-n", br, "link", "set", c.bridge, "mtu", str(c.mtu)], what=what)
    if not c.offload:  # both ends of every veth: MTU-sized frames, software checksums, no GRO
        for ns, dev in [(m.namespace, m.iface) for m in [c.head, *c.nodes]] + [(br, m.peer) for m in [c.head, *c.nodes]]:
            _run(["ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off",
                  "tx", "off"], what=what)
    for m in c.nodes:
        tc = ["tc", "-n", m.namespace, "qdisc", "replace", "dev", m.iface, "root"]
        if c.delay:
            p = _run([*tc, "handle", "1:", "netem", "delay", c.delay], check=False)
            if p.returncode != 0:
                raise EnvironmentProblem(
                    f"cannot add a {c.delay} delay: this kernel lacks the netem qdisc (sch_netem)"
                    f" ({p.stderr.strip() or 'tc qdisc add netem failed'})",
                    "load it (modprobe sch_netem) or leave out --delay; a rate limit (tbf) works without it")
            if c.rate_bps:
                _run(["tc", "-n", m.namespace, "qdisc", "add", "dev", m.iface, "parent", "1:1", "handle", "10:",
                      *_tbf_args(c.rate_bps, c.mtu)], what=what)
        elif c.rate_bps:
            p = _run([*tc, *_tbf_args(c.rate_bps, c.mtu)], check=False)
            if p.returncode != 0:
                raise EnvironmentProblem(
                    f"cannot add a rate limit: this kernel lacks the tbf qdisc (sch_tbf) ({p.stderr.strip()})",
                    "load it (modprobe sch_tbf) or leave out --rate")
    _wait_ready(c)


_REACH = ("import socket, sys\n"
          "s = socket.socket(); s.settimeout(0.5)\n"
          "try:\n    s.connect((sys.argv[1], 9))\n"
          "except ConnectionRefusedError:\n    sys.exit(0)\n"   # a RST came back: the path works
          "except OSError:\n    sys.exit(1)\n")


def _wait_ready(c: SimCluster, deadline_s: float = 10.0) -> None:
    """Return once every node and the head reach each other through the bridge.

    Links that were just set up may not pass traffic yet (carrier, bridge port state); an MPI
    daemon started in that window never calls back and the launch hangs. A TCP connect to the
    discard port of the peer is answered by a reset as soon as the path works."""
    pairs = [(m, c.head) for m in c.nodes] + [(c.head, m) for m in c.nodes]
    end = time.monotonic() + deadline_s
    for src, dst in pairs:
        while True:
            p = _run(["ip", "netns", "exec", src.namespace, sys.executable, "-c", _REACH, dst.address],
                     check=False, timeout=5)
            if p.returncode == 0:
                break
            if time.monotonic() > end:
                raise EnvironmentProblem(f"sim-cluster: {src.name} cannot reach {dst.name} ({dst.address})",
                                         "run 'clusterbench sim-cluster down' and up again; check bridge filtering")
            time.sleep(0.05)


# --------------------------------------------------------------------------- status


def _qdisc_rate(ns: str, iface: str) -> tuple[int | None, str | None]:
    """(tbf rate in bit/s, netem delay) on ``iface`` in ``ns``, read from tc."""
    p = _run(["tc", "-n", ns, "-j", "qdisc", "show", "dev", iface], check=False)
    rate = delay = None
    try:
        qdiscs = json.loads(p.stdout) if p.returncode == 0 and p.stdout.strip() else []
    except ValueError:
        qdiscs = []
    for q in qdiscs:
        opts = q.get("options", {})
        if q.get("kind") == "tbf" and "rate" in opts:
            rate = int(opts["rate"]) * 8  # tc -j reports bytes/s
        if q.get("kind") == "netem" and opts.get("delay"):
            d = opts["delay"]
            delay = str(d.get("delay") if isinstance(d, dict) else d)
    return rate, delay


def _member_status(c: SimCluster, m: SimNode, existing: set[str], role: str) -> dict:
    row = {"name": m.name, "role": role, "namespace": m.namespace, "address": m.address, "iface": m.iface,
           "mtu": None, "mtu_expected": c.mtu, "rate_bps": None, "rate_expected_bps": c.rate_bps if role == "node"
           else None, "delay": None, "state": "down", "problems": []}
    probs = row["problems"]
    if m.namespace not in existing:
        probs.append(f"{m.namespace}: namespace missing")
        return row
    links = {ln.get("ifname"): ln for ln in _ip_json(["-n", m.namespace, "addr", "show"])}
    lo, link = links.get("lo"), links.get(m.iface)
    if lo is None or "UP" not in lo.get("flags", []):
        probs.append(f"{m.namespace}: loopback down")
    if link is None:
        probs.append(f"{m.namespace}: {m.iface} missing")
        return row
    row["mtu"] = link.get("mtu")
    if "UP" not in link.get("flags", []) or "LOWER_UP" not in link.get("flags", []):
        probs.append(f"{m.namespace}: {m.iface} is not up ({link.get('operstate')})")
    if row["mtu"] != c.mtu:
        probs.append(f"{m.namespace}: MTU {row['mtu']}, recorded {c.mtu}")
    if m.address not in [a.get("local") for a in link.get("addr_info", [])]:
        probs.append(f"{m.namespace}: address {m.address} missing on {m.iface}")
    if role == "node":
        row["rate_bps"], row["delay"] = _qdisc_rate(m.namespace, m.iface)
        if c.rate_bps and (row["rate_bps"] is None or abs(row["rate_bps"] - c.rate_bps) > 0.01 * c.rate_bps):
            probs.append(f"{m.namespace}: rate limit {row['rate_bps']} bit/s, recorded {c.rate_bps}")
        if not c.rate_bps and row["rate_bps"]:
            probs.append(f"{m.namespace}: unexpected rate limit {row['rate_bps']} bit/s")
        if c.delay and not row["delay"]:
            probs.append(f"{m.namespace}: netem delay missing")
    if not probs:
        row["state"] = "up"
    return row


def _status(c: SimCluster) -> dict:
    existing = set(list_namespaces(c.prefix))
    problems: list[str] = []
    bridge = {"namespace": c.bridge_namespace, "device": c.bridge, "mtu": None, "state": "down", "ports": []}
    if c.bridge_namespace not in existing:
        problems.append(f"{c.bridge_namespace}: namespace missing")
    else:
        links = {ln.get("ifname"): ln for ln in _ip_json(["-n", c.bridge_namespace, "link", "show"])}
        b = links.get(c.bridge)
        if b is None:
            problems.append(f"{c.bridge_namespace}: bridge {c.bridge} missing")
        else:
            bridge["mtu"] = b.get("mtu")
            if "UP" in b.get("flags", []):
                bridge["state"] = "up"
            else:
                problems.append(f"{c.bridge_namespace}: bridge {c.bridge} down")
            if b.get("mtu") != c.mtu:
                problems.append(f"{c.bridge_namespace}: bridge MTU {b.get('mtu')}, recorded {c.mtu}")
        for m in [c.head, *c.nodes]:
            port = links.get(m.peer)
            if port is None:
                problems.append(f"{c.bridge_namespace}: port {m.peer} missing")
                continue
            bridge["ports"].append(m.peer)
            if port.get("master") != c.bridge or "UP" not in port.get("flags", []):
                problems.append(f"{c.bridge_namespace}: port {m.peer} not up on {c.bridge}")
            if port.get("mtu") != c.mtu:
                problems.append(f"{c.bridge_namespace}: port {m.peer} MTU {port.get('mtu')}, recorded {c.mtu}")
    head = _member_status(c, c.head, existing, "head")
    nodes = [_member_status(c, m, existing, "node") for m in c.nodes]
    if c.machines:
        from clusterbench.launch import machines as M

        for row, m, pid_ns in [(head, c.head, False), *((r, m, True) for r, m in zip(nodes, c.nodes))]:
            if m.namespace in existing and M.holder_pid(m.namespace, pid_ns=pid_ns) is None:
                row["problems"].append(f"{m.name}: the machine is not running (its {'init' if pid_ns else 'holder'} "
                                       "is gone)")
                row["state"] = "down"
    for row in [head, *nodes]:
        problems += row["problems"]
    expected = set(c.namespaces())
    extra = sorted(existing - expected)
    if extra:
        problems.append("namespaces not in the state file: " + ", ".join(extra))
    if not c.machines and (not Path(c.agent).is_file() or not os.access(c.agent, os.X_OK)):
        problems.append(f"launch agent {c.agent} missing")
    return {"up": not problems, "spec": c.spec(), "subnet": c.subnet, "mtu": c.mtu, "rate_bps": c.rate_bps,
            "delay": c.delay, "agent": c.agent, "state_file": c.state_file, "created": c.created,
            "bridge": bridge, "head": head, "nodes": nodes, "problems": problems}


def status(*, prefix: str | None = None, state: str | os.PathLike | None = None) -> dict:
    """Check the recorded cluster against reality (namespaces, links up, MTU, addresses, qdiscs).

    Returns ``{"up": bool, "nodes": [{name, namespace, address, mtu, rate_bps, state: "up"|"down",
    problems}], "head": {...}, "bridge": {...}, "problems": [...], ...}``. With no state file,
    ``up`` is False, ``nodes`` is empty and ``leftovers`` lists namespaces with the prefix.
    """
    _require_root()
    prefix = _check_prefix(prefix)
    c = load(state, prefix=prefix)
    if c is None:
        left = list_namespaces(prefix)
        probs = [f"no sim-cluster recorded; leftovers: {', '.join(left)} (remove them with down)"] if left else []
        return {"up": False, "recorded": False, "nodes": [], "head": None, "bridge": None,
                "leftovers": left, "problems": probs}
    st = _status(c)
    st["recorded"] = True
    st["leftovers"] = []
    return st


# --------------------------------------------------------------------------- launching


def _cluster(cluster: SimCluster | None, state: str | os.PathLike | None = None) -> SimCluster:
    if cluster is not None:
        return cluster
    c = load(state)
    if c is None:
        raise UsageError("no sim-cluster is up", "run `clusterbench sim-cluster up --nodes N` first (as root)")
    return c


def hosts(cluster: SimCluster | None = None, *, slots: int = 1,
          state: str | os.PathLike | None = None) -> list[dict]:
    """The nodes as ``[{"name", "address", "namespace", "slots"}]`` (the head is not a node)."""
    c = _cluster(cluster, state)
    return [{"name": n.name, "address": n.address, "namespace": n.namespace, "slots": slots} for n in c.nodes]


def hostfile_text(cluster: SimCluster | None = None, *, slots: int = 1,
                  state: str | os.PathLike | None = None) -> str:
    """An Open MPI hostfile: one ``name slots=N`` line per node."""
    return "".join(f"{h['name']} slots={h['slots']}\n" for h in hosts(cluster, slots=slots, state=state))


def host_arg(cluster: SimCluster | None = None, *, slots: int = 1, state: str | os.PathLike | None = None) -> str:
    """``cbsim-n1:1,cbsim-n2:1`` for ``--host`` / ``--hosts``."""
    return ",".join(f"{h['name']}:{h['slots']}" for h in hosts(cluster, slots=slots, state=state))


def rankfile_text(assignments: Sequence[tuple[str, int | str]]) -> str:
    """An Open MPI rankfile placing rank i on ``(host, core)`` = ``assignments[i]`` (logical core,
    or a range such as ``"0-1"``). Needed on a sim-cluster: every daemon binds from core 0."""
    return "".join(f"rank {i}={host} slot={core}\n" for i, (host, core) in enumerate(assignments))


def exec_prefix(node: str | SimNode, cluster: SimCluster | None = None, *,
                state: str | os.PathLike | None = None) -> list[str]:
    """``["ip", "netns", "exec", NS]``: prefix a command with this to run it on a node (or ``head``).
    On machines, the namespaces of the head, or of the node itself (as root, bypassing ssh: for
    setting it up and for tests; clusterbench reaches nodes through ssh from the head)."""
    c = cluster if cluster is not None else (load(state) if not isinstance(node, SimNode) else None)
    m = node if isinstance(node, SimNode) else (c.node(node) if c is not None else None)
    if c is not None and c.machines and m is not None:
        from clusterbench.launch import machines as M

        return M.head_prefix(c) if m.namespace == c.head.namespace else M.node_prefix(c, m)
    return ["ip", "netns", "exec", m.namespace if m is not None else str(node)]


def mpirun_args(cluster: SimCluster | None = None, *, allow_root: bool = False,
                state: str | os.PathLike | None = None) -> list[str]:
    """Open MPI 4 options to start daemons on the sim-cluster's nodes (run mpirun in the head,
    ``exec_prefix("head") + ["mpirun", *mpirun_args(c), ...]``). ``--allow-run-as-root`` only
    when ``allow_root``. Do not export CB_SIM_NODE with ``-x``: the agent sets it per node."""
    c = _cluster(cluster, state)
    if c.machines:  # real ssh from the head (Open MPI's default agent); nodes do not ssh to each other
        args = ["--mca", "plm_rsh_no_tree_spawn", "1",
                "--mca", "oob_tcp_if_include", c.subnet, "--mca", "btl_tcp_if_include", c.subnet]
        return args + (["--allow-run-as-root"] if allow_root else [])
    args = ["--mca", "plm_rsh_agent", c.agent, "--mca", "plm_rsh_no_tree_spawn", "1",
            "--mca", "oob_tcp_if_include", c.subnet, "--mca", "btl_tcp_if_include", c.subnet]
    if allow_root:
        args.append("--allow-run-as-root")
    return args


def mpiexec_args(cluster: SimCluster | None = None, *, state: str | os.PathLike | None = None) -> list[str]:
    """MPICH Hydra options for the same: the agent as the ssh launcher, the cluster interface."""
    c = _cluster(cluster, state)
    if c.machines:  # Hydra's own ssh bootstrap, from the head
        return ["-launcher", "ssh", "-iface", c.head.iface]
    return ["-launcher", "ssh", "-launcher-exec", c.agent, "-iface", c.head.iface]
