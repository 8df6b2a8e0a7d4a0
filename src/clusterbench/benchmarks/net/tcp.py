"""tcp: TCP throughput with 1..n parallel streams and round-trip latency between two hosts,
without MPI (Duffy (2020)'s iperf; iperf3 and qperf, anchors-mpi.md section 5).

Where it runs (``--hosts``):

  * ``local``: both ends on 127.0.0.1 in this host's namespace (no root needed); the default when
    no sim-cluster is up;
  * ``A,B``: two nodes of the virtual cluster (``cbsim-n1,cbsim-n2``, or ``n1,n2``; another
    prefix is taken from the name, e.g. ``cbtcp-n1``). The server runs on A through
    ``ip netns exec`` and listens only on A's cluster address; the client runs on B. The default,
    as root, when a sim-cluster with at least two nodes is up;
  * ``A,B`` on the virtual cluster of machines (``sim-cluster up --machines``: ``node1,node2``):
    each end runs on its machine over ssh from the head, with that machine's own build of the
    kernel, and ends there when the head ends its ssh (:func:`clusterbench.launch.local.job_argv`).
    Real hosts are not supported yet.

How (kernels/tcp.c): the server binds to the one address, on a random port, prints the port in its
first JSON line, accepts exactly the expected connections (those presenting this run's random
token) and exits when done, or after its own alarm. The client then runs every stream count: n
connections, one thread each, sending 128 KiB blocks (iperf3's TCP default) for ``seconds``
after a warm-up phase; every block is framed and checked by the server, which acknowledges the
bytes it received at the end of each phase. Throughput = bytes the server received / time from
the phase's start to the last acknowledgement, in Mbit/s (1e6 bit/s, as iperf3); the server's
count must equal what the client sent. Latency: 1-byte (``message_size``) ping-pong with
TCP_NODELAY, every round trip timed, every echo checked against the payload sent; ``rtt`` and
``latency`` = RTT / 2 (qperf, NetPIPE), in microseconds.

Params recorded with every figure: both ends and their addresses, the interface and its MTU, the
path MTU (IP_MTU of the connected socket), TCP_MAXSEG, SO_SNDBUF/SO_RCVBUF (at connect and after the
transfer), the congestion control, and on the sim-cluster its spec (nodes, MTU, tbf rate, delay).
Throughput is judged against ``link_rate``: the sim-cluster's tbf rate, or the NIC's speed from
the probe when the route's interface is one the probe saw.

Value = best sample (max for throughput, min for latency) as everywhere in clusterbench; the
median, mean and p99 are beside it.
"""
from __future__ import annotations

import json
import os
import queue
import re
import secrets
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Any, ClassVar

from clusterbench.errors import EnvironmentProblem, KernelFailed, UsageError
from clusterbench.kernels.build import Build
from clusterbench import process
from clusterbench.launch import simcluster as sc
from clusterbench.launch.local import KernelJob, job_argv
from clusterbench.text import seconds
from clusterbench.benchmarks import register
from clusterbench.benchmarks.base import Benchmark, Metric, Param, RunContext

LOOPBACK = "127.0.0.1"
KERNEL_FLAGS = ("-pthread",)
#: seconds the server may take to print its port
START_TIMEOUT = 10.0
#: seconds the server may take to exit after the client is done
EXIT_TIMEOUT = 10.0


@dataclass
class Endpoint:
    """One end of the measurement: a node (or this host) and how to run a command there."""

    name: str
    address: str
    prefix: list[str] = field(default_factory=list)
    namespace: str | None = None
    host: str | None = None  # a machine of the virtual cluster: reached by ssh (launch.local.job_argv)


@dataclass
class Pair:
    server: Endpoint
    client: Endpoint
    cluster: sc.SimCluster | None = None

    def sim_spec(self) -> dict | None:
        if self.cluster is None:
            return None
        c = self.cluster
        return {"prefix": c.prefix, "nodes": len(c.nodes), "mtu": c.mtu, "rate_bps": c.rate_bps,
                "delay": c.delay, "subnet": c.subnet}


def _default_hosts() -> str:
    """The first two nodes of the default sim-cluster when one is up (and we are root), else local."""
    if os.geteuid() != 0:
        return "local"
    try:
        c = sc.load()
    except EnvironmentProblem:
        return "local"
    if c is None or len(c.nodes) < 2:
        return "local"
    existing = set(sc.list_namespaces(c.prefix))
    if not all(n.namespace in existing for n in c.nodes[:2]):
        return "local"
    return f"{c.nodes[0].name},{c.nodes[1].name}"


_NAME_RE = re.compile(r"^(?:([a-z][a-z0-9]{0,7}-))?(n\d+|head)$")


def resolve_hosts(hosts: str) -> Pair:
    """``local`` or two sim-cluster node names -> the server and client ends."""
    text = str(hosts).strip()
    if text == "local":
        return Pair(Endpoint("local", LOOPBACK), Endpoint("local", LOOPBACK))
    names = [h.strip() for h in text.split(",") if h.strip()]
    if len(names) != 2:
        raise UsageError(f"--hosts {hosts!r}: give two nodes (server,client), e.g. cbsim-n1,cbsim-n2, or 'local'",
                         "see 'clusterbench sim-cluster hosts' for the node names")
    if names[0] == names[1]:
        raise UsageError(f"--hosts {hosts!r} names the same node twice",
                         "give two different nodes, or 'local' to measure this host's loopback")
    machines = _machine_pair(names)
    if machines is not None:
        return machines
    prefixes = set()
    for n in names:
        m = _NAME_RE.match(n)
        if not m:
            raise UsageError(f"--hosts: {n!r} is not a sim-cluster node",
                             "tcp runs on 'local' (loopback) or between two sim-cluster nodes "
                             "(e.g. cbsim-n1,cbsim-n2); real hosts are not supported yet")
        prefixes.add(m.group(1) or sc.default_prefix())
    if len(prefixes) != 1:
        raise UsageError(f"--hosts {hosts!r} mixes two sim-clusters", "give two nodes of one sim-cluster")
    prefix = prefixes.pop()
    if os.geteuid() != 0:
        raise EnvironmentProblem("tcp between sim-cluster nodes needs root (ip netns exec)",
                                 "run it as root, or use --hosts local")
    c = sc.load(prefix=prefix)
    if c is None:
        raise UsageError(f"no sim-cluster with prefix {prefix!r} is up",
                         "run `clusterbench sim-cluster up --nodes 2` first, or use --hosts local")
    existing = set(sc.list_namespaces(prefix))
    ends = []
    for n in names:
        node = c.node(n if n.startswith(prefix) else prefix + n)
        if node.namespace not in existing:
            raise EnvironmentProblem(f"sim-cluster node {node.name} has no namespace (the cluster is broken)",
                                     "run `clusterbench sim-cluster down` and `up` again")
        ends.append(Endpoint(node.name, node.address, sc.exec_prefix(node), node.namespace))
    return Pair(ends[0], ends[1], c)


def _machine_pair(names: list[str]) -> Pair | None:
    """Two nodes of the virtual cluster of machines (``sim-cluster up --machines``: ``node1``...),
    or None. Each end runs on its machine, reached from the head by ssh like any launch there, with
    that machine's own build of the kernel (see :func:`clusterbench.launch.local.job_argv`)."""
    if os.geteuid() != 0:
        return None
    try:
        c = sc.load()
    except EnvironmentProblem:
        return None
    if c is None or not c.machines:
        return None
    ends = []
    for n in names:
        try:
            node = c.node(n)
        except UsageError:
            return None
        if node.namespace == c.head.namespace:
            raise UsageError(f"--hosts: {n} is the virtual cluster's head, not one of its machines",
                             "give two of its nodes, e.g. " + ",".join(m.name for m in c.nodes[:2]))
        ends.append(Endpoint(node.name, node.address, [], node.namespace, host=node.name))
    return Pair(ends[0], ends[1], c)


def _link_rate(ctx: RunContext, pair: Pair, iface: str | None) -> tuple[float | None, str | None]:
    """(Mbit/s, source): the sim-cluster's tbf rate, or the probed NIC speed of the route's interface."""
    if pair.cluster is not None:
        if pair.cluster.rate_bps:
            return pair.cluster.rate_bps / 1e6, f"sim-cluster tc tbf rate ({pair.cluster.rate_bps / 1e6:g} Mbit/s)"
        return None, None  # veth: no speed
    for nic in (ctx.probe.get("environment") or {}).get("nics") or []:
        if iface and nic.get("name") == iface and nic.get("speed_mbps"):
            return float(nic["speed_mbps"]), f"{iface} link speed ({nic['speed_mbps']} Mbit/s, probe)"
    return None, None


def _percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 1)) - 1))  # nearest rank
    return s[k]


class _Server:
    """The server kernel, started in the server's namespace in a session of its own. A reader
    thread drains its stdout (so it never blocks on a full pipe) and hands the records over."""

    def __init__(self, build: Build, ep: Endpoint, args: list[str]) -> None:
        self.build = build
        self.cmd, hold = job_argv(KernelJob(build, args, prefix=ep.prefix, host=ep.host))
        try:
            self.run = process.spawn(self.cmd, hold_stdin=hold)
        except OSError as exc:
            raise KernelFailed(f"cannot start the tcp server ({exc.strerror})",
                               "check that iproute2 is installed and the kernel cache is executable") from exc
        self.proc = self.run.proc
        self.records: queue.Queue[dict | None] = queue.Queue()
        self.stderr = b""
        self._threads = [threading.Thread(target=self._read_out, daemon=True),
                         threading.Thread(target=self._read_err, daemon=True)]
        for t in self._threads:
            t.start()

    def _read_out(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            if line.strip() and process.is_record_line(line):  # other lines are a library's chatter
                try:
                    rec = json.loads(line)
                except ValueError:
                    rec = {"type": "error", "message": f"server printed a line that is not JSON: {line[:120]!r}"}
                self.records.put(rec if isinstance(rec, dict) else {"type": "error", "message": "bad record"})
        self.records.put(None)

    def _read_err(self) -> None:
        assert self.proc.stderr
        for line in self.proc.stderr:
            self.stderr = (self.stderr + line)[-8192:]

    def _why(self) -> str:
        tail = self.stderr.decode(errors="replace").strip().splitlines()
        return tail[-1] if tail else f"exit status {self.proc.poll()}"

    def next_record(self, timeout: float) -> dict | None:
        try:
            rec = self.records.get(timeout=timeout)
        except queue.Empty:
            raise KernelFailed(f"the tcp server did not answer within {seconds(timeout)} s",
                               "check the node (ip netns exec NODE true) and rerun") from None
        if rec is not None and rec.get("type") == "error":
            raise KernelFailed(f"the tcp server failed: {rec.get('message')}", "check --hosts and rerun")
        if rec is not None and rec.get("type") == "validation" and not rec.get("ok"):
            raise KernelFailed(f"the tcp server saw a broken stream: {rec.get('detail')}",
                               "the transfer is not trustworthy; rerun and check the network")
        return rec

    def first(self) -> dict:
        rec = self.next_record(START_TIMEOUT)
        if rec is None:
            for t in self._threads:
                t.join(timeout=1)
            raise KernelFailed(f"the tcp server exited before listening: {self._why()}",
                               "check --hosts (is the sim-cluster up?) and rerun")
        if rec.get("type") != "info" or not isinstance(rec.get("port"), int):
            raise KernelFailed("the tcp server did not print its port first", "report this as a bug")
        return rec

    def finish(self) -> list[dict]:
        """Wait for the server to exit by itself; check what it said."""
        out = []
        try:
            rc = self.proc.wait(timeout=EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise KernelFailed(f"the tcp server did not exit within {seconds(EXIT_TIMEOUT)} s of the client",
                               "report this as a bug") from None
        while True:
            rec = self.next_record(EXIT_TIMEOUT)
            if rec is None:
                break
            out.append(rec)
        if rc != 0:
            raise KernelFailed(f"the tcp server exited with status {rc}: {self._why()}", "rerun; report it if it persists")
        if not any(r.get("type") == "validation" and r.get("ok") for r in out):
            raise KernelFailed("the tcp server did not validate the transfer", "report this as a bug")
        return out

    def kill(self) -> None:
        process.kill_session(self.proc)  # the whole session: nothing is left behind
        for t in self._threads:  # the readers see end-of-file once every process is gone
            t.join(timeout=2)
        self.run.end()


@register
class Tcp(Benchmark):
    name = "tcp"
    suites = {"mpi": 60}
    key_params = ('direction', 'streams', 'message_bytes')
    help = "TCP throughput (1..n streams) and round-trip latency between two nodes, without MPI (iperf3, qperf)"
    kernel = "tcp"
    metrics = (
        Metric("throughput", "Mbit/s", True,
               "TCP throughput, all streams together (params streams): bytes the server received / time; "
               "Mbit/s = 1e6 bit/s", ("link_rate",)),
        Metric("latency", "us", False, "half round-trip time of a small message with TCP_NODELAY (qperf tcp_lat)"),
        Metric("rtt", "us", False, "round-trip time of a small message with TCP_NODELAY"),
    )
    params = (
        Param("hosts", str, None, "'local' (loopback) or two sim-cluster nodes SERVER,CLIENT, e.g. cbsim-n1,cbsim-n2 "
              "(default: the sim-cluster's first two nodes when one is up, else local)"),
        Param("streams", "intlist", [1, 2, 4], "parallel TCP streams, one thread and connection each, e.g. 1,2,4",
              min=1, max=256),
        Param("seconds", float, 2.0, "seconds per timed phase", min=0, max=3600, min_open=True),
        Param("repeats", int, 3, "timed phases per stream count (a warm-up phase comes first, not reported)",
              min=1, max=1000),
        Param("block", int, 131072, "bytes per send (iperf3's TCP default: 128 KiB)", min=64, max=64 << 20,
              why="64 B to 64 MiB"),
        Param("latency_iterations", int, 5000, "timed round trips (0: no latency test)", min=0, max=10_000_000),
        Param("message_size", int, 1, "bytes per latency message (qperf tcp_lat: 1)", min=1, max=64 << 20,
              why="1 B to 64 MiB"),
    )
    profiles = {
        "quick": {"streams": [1, 2], "seconds": 1.0, "repeats": 2, "latency_iterations": 2000},
        "full": {"streams": [1, 2, 4, 8], "seconds": 5.0, "repeats": 5, "latency_iterations": 20000},
    }
    #: extra client arguments, for tests only (``--crash=1``)
    test_client_args: ClassVar[tuple[str, ...]] = ()
    WARMUP = 0.2
    LAT_WARMUP = 100

    def check(self, ctx: RunContext, params: dict[str, Any]) -> dict[str, Any]:
        p = dict(params)
        if p["hosts"] is None:
            p["hosts"] = _default_hosts()
        p["hosts"] = ",".join(h.strip() for h in str(p["hosts"]).split(","))
        resolve_hosts(p["hosts"])  # names, root and cluster checked before anything is stored
        streams = list(p["streams"])
        if len(streams) > 64:
            raise UsageError("--streams: at most 64 stream counts", "give fewer")
        p["streams"] = streams
        return p

    def _client_seconds(self, params: dict[str, Any]) -> float:
        bw = len(params["streams"]) * (self.WARMUP + params["seconds"] * params["repeats"] + 0.05)
        lat = (params["latency_iterations"] + self.LAT_WARMUP) * (50e-6 + params["message_size"] * 1e-8)
        return bw + lat

    def estimate_seconds(self, ctx: RunContext, params: dict[str, Any]) -> float:
        return self._client_seconds(params) + 0.5

    def prepare(self, ctx: RunContext, params: dict[str, Any]) -> None:
        ctx.build(self.kernel, extra_flags=KERNEL_FLAGS, openmp=False)

    def run(self, ctx: RunContext, params: dict[str, Any]) -> list:
        b = ctx.build(self.kernel, extra_flags=KERNEL_FLAGS, openmp=False)
        pair = resolve_hosts(params["hosts"])
        streams, iters = params["streams"], params["latency_iterations"]
        token = secrets.token_hex(8)
        # bounded in time: the client's alarm, then Python's, then the server's own alarm
        client_alarm = min(ctx.timeout, 2 * self._client_seconds(params) + 10)
        server_alarm = client_alarm + 5
        nconn = sum(streams) + (1 if iters else 0)
        base: dict[str, Any] = {
            "hosts": params["hosts"], "server": pair.server.name, "client": pair.client.name,
            "server_address": pair.server.address, "client_address": pair.client.address,
            "direction": "client -> server", "transport": "tcp (IPv4)",
            "loopback": pair.cluster is None, "sim_cluster": pair.sim_spec(),
        }
        out: list = []
        ctx.progress.start("tcp", total=len(streams) + (1 if iters else 0))
        server = _Server(b, pair.server, ["--mode=server", f"--bind={pair.server.address}",
                                          f"--connections={nconn}", f"--token={token}",
                                          f"--timeout={server_alarm:.0f}"])
        try:
            info = server.first()
            if info.get("bind") != pair.server.address:
                raise KernelFailed(f"the tcp server listens on {info.get('bind')}, not {pair.server.address}",
                                   "report this as a bug")
            port = info["port"]
            base["server_port"] = port

            def on(_i: int, rec: dict) -> None:
                if rec["type"] == "validation":
                    ctx.progress.advance(1)
                if rec["type"] != "result":
                    return
                prm = {**base, **rec.get("params", {})}
                prm["mtu"] = prm.get("iface_mtu")
                if prm.get("local_address") != pair.client.address or prm.get("peer_address") != pair.server.address:
                    raise KernelFailed(
                        f"tcp: the connection ran {prm.get('local_address')} -> {prm.get('peer_address')}, "
                        f"not {pair.client.address} -> {pair.server.address}", "report this as a bug")
                rate, source = _link_rate(ctx, pair, prm.get("iface"))
                prm["link_rate_mbits"], prm["link_rate_source"] = rate, source
                if rec["metric"] != "throughput":
                    prm["p99_us"] = _percentile(rec["samples"], 0.99)
                    prm["mean_us"] = sum(rec["samples"]) / len(rec["samples"])
                out.append(ctx.emit(self, rec["metric"], rec["samples"], prm, times_s=rec.get("times_s")))

            client_args = ["--mode=client", f"--connect={pair.server.address}:{port}", f"--token={token}",
                           f"--streams={','.join(map(str, streams))}", f"--seconds={params['seconds']}",
                           f"--repeats={params['repeats']}", f"--warmup={self.WARMUP}", f"--block={params['block']}",
                           f"--lat_iterations={iters}", f"--lat_warmup={self.LAT_WARMUP}",
                           f"--msg={params['message_size']}", f"--timeout={client_alarm:.0f}",
                           *self.test_client_args]
            ctx.run_parallel([KernelJob(b, client_args, prefix=pair.client.prefix, host=pair.client.host)], on, timeout=client_alarm + 2)
            done = server.finish()
            served = [r for r in done if r.get("type") == "conn"]
            if len(served) != nconn or not all(r.get("ok") for r in served):
                raise KernelFailed(f"the tcp server served {len(served)} of {nconn} connections", "rerun")
        finally:
            server.kill()
        ctx.note(f"tcp: server {pair.server.name} ({pair.server.address}:{base.get('server_port')}) exited by itself "
                 f"after {nconn} connection(s); client {pair.client.name}")
        return out
