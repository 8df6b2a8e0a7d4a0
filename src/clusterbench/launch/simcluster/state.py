"""The virtual cluster's model and state: its members, addresses, prefix, state files and lock."""
from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from clusterbench.errors import EnvironmentProblem, UsageError
from clusterbench import process

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


def check_names_do_not_resolve_locally(names: Sequence[str]) -> None:
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


def _tmp_dir(sdir: Path, prefix: str) -> Path:
    """The folder under which the agent gives each node its own Open MPI session folder."""
    return _files(sdir, prefix)[1].with_name(_files(sdir, prefix)[1].name.replace("-agent.sh", "-tmp"))


def scratch_dir(c: SimCluster) -> Path:
    """A folder of ``c``'s own for what a command keeps about it between runs (removed by ``down``)."""
    return _tmp_dir(Path(c.state_file).parent, c.prefix)


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
