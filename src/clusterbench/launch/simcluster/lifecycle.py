"""Bringing a virtual cluster up and down: namespaces, bridge, links, shaping, readiness."""
from __future__ import annotations

import contextlib
import datetime as _dt
import ipaddress
import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from clusterbench.errors import EnvironmentProblem, UsageError
from clusterbench.launch.simcluster.launching import agent_script
from clusterbench.launch.simcluster.running import _kill_namespace_processes
from clusterbench.launch.simcluster.state import HEAD_ADDRESS, MAX_NODES, NODE_BASE, SUBNET, SimCluster, SimNode, TBF_LATENCY, check_names_do_not_resolve_locally, _check_prefix, _files, _locked, _require_root, _tmp_dir, _run, _write_atomic, list_namespaces, load, parse_delay, parse_rate, state_dir
from clusterbench.launch.simcluster.describe import _status


# --------------------------------------------------------------------------- up / down


def plan_members(prefix: str, nodes: int, machines: bool = False) -> tuple[SimNode, list[SimNode]]:
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
    head, members = plan_members(prefix, nodes, machines)
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
                # the agent of this clusterbench (one made by an older one may lack a fix)
                _write_atomic(Path(old.agent), agent_script(prefix, _tmp_dir(sdir, prefix)), mode=0o755)
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
            check_names_do_not_resolve_locally([n.name for n in members])
        try:
            _build(cluster)
            if machines:
                from clusterbench.launch import machines as M

                M.bring_up(cluster)
            _write_atomic(Path(cluster.agent), agent_script(prefix, _tmp_dir(sdir, prefix)), mode=0o755)
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
    """The state file, the agent, the nodes' session folders and the machines' ssh folder of ``prefix``."""
    for path in _files(sdir, prefix):
        with contextlib.suppress(OSError):
            path.unlink()
    shutil.rmtree(_tmp_dir(sdir, prefix), ignore_errors=True)
    shutil.rmtree(sdir / f"{prefix}machines", ignore_errors=True)


def _describe(c: SimCluster) -> str:
    s = f"{len(c.nodes)} {'machines' if c.machines else 'nodes'}, MTU {c.mtu}"
    s += f", rate {c.rate_bps / 1e6:g} Mbit/s" if c.rate_bps else ", no rate limit"
    if c.delay:
        s += f", delay {c.delay}"
    if not c.offload:
        s += ", offloads off"
    return s


def tbf_args(rate_bps: int, mtu: int) -> list[str]:
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
                      *tbf_args(c.rate_bps, c.mtu)], what=what)
        elif c.rate_bps:
            p = _run([*tc, *tbf_args(c.rate_bps, c.mtu)], check=False)
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
