"""The tcp benchmark: real kernel, real sockets; loopback without root, a 2-node sim-cluster as root.

The sim-cluster tests use their own prefix (``cbtcp-``) and state directory, so neither a user's
``cbsim-`` cluster nor the simcluster tests' ``cbtst-`` clusters are touched, and take their
cluster down in a finally.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from clusterbench.benchmarks import get_benchmark
from clusterbench.benchmarks.base import RunContext
from clusterbench.benchmarks.net.tcp import KERNEL_FLAGS, Tcp
from clusterbench.errors import KernelFailed
from clusterbench.kernels.build import build_kernel
from clusterbench.launch import simcluster as sc

PREFIX = "cbtcp-"
N1, N2 = f"{PREFIX}n1", f"{PREFIX}n2"


def _run(ctx: RunContext, **given):
    bench = get_benchmark("tcp")
    params = bench.resolve(ctx, given)
    bench.prepare(ctx, params)
    return bench.run(ctx, params), params


def _by(results, metric):
    return [r for r in results if r.metric == metric]


def _kernel_pids(binary: Path) -> list[int]:
    """Processes running this tcp binary (anywhere on the machine)."""
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.readlink(f"/proc/{d}/exe") == str(binary):
                    pids.append(int(d))
            except OSError:
                pass
    return pids


def _binary() -> Path:
    return build_kernel("tcp", extra_flags=KERNEL_FLAGS, openmp=False).path


def _start_server(prefix: list[str], bind: str, connections: int = 1, timeout: int = 3) -> tuple[subprocess.Popen, dict]:
    p = subprocess.Popen([*prefix, str(_binary()), "--mode=server", f"--bind={bind}", f"--connections={connections}",
                          "--token=1234", f"--timeout={timeout}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    info = json.loads(p.stdout.readline())
    return p, info


# --------------------------------------------------------------------------- loopback (no root)


@pytest.mark.integration
def test_loopback_1_and_2_streams_validate(ctx: RunContext) -> None:
    res, params = _run(ctx, hosts="local", streams=[1, 2], seconds=0.3, repeats=2, latency_iterations=300)
    assert params["hosts"] == "local"
    thr = _by(res, "throughput")
    assert [r.params["streams"] for r in thr] == [1, 2]
    for r in thr:
        assert r.unit == "Mbit/s" and r.higher_is_better and len(r.samples) == 2
        assert r.value > 100  # loopback: at least 100 Mbit/s on anything
        p = r.params
        assert p["server_address"] == p["client_address"] == "127.0.0.1" and p["loopback"]
        assert p["iface"] == "lo" and p["mtu"] == p["iface_mtu"] > 0 and p["path_mtu"] > 0 and p["mss"] > 0
        assert p["sndbuf"] > 0 and p["rcvbuf"] > 0 and p["block_bytes"] == 131072
        assert p["sim_cluster"] is None and p["link_rate_mbits"] is None and r.limit is None
        # throughput = bytes the server acknowledged / time
        for s, nbytes in zip(r.samples, p["bytes_acked"], strict=True):  # the phase lasts >= seconds
            assert 0.5 * nbytes * 8 / 0.3 / 1e6 < s <= nbytes * 8 / 0.3 / 1e6
    lat, rtt = _by(res, "latency"), _by(res, "rtt")
    assert len(lat) == len(rtt) == 1 and len(lat[0].samples) == 300
    assert lat[0].unit == "us" and not lat[0].higher_is_better
    assert lat[0].value == pytest.approx(rtt[0].value / 2)
    assert 0 < lat[0].value < 10_000 and lat[0].params["message_bytes"] == 1
    assert lat[0].params["p99_us"] >= lat[0].summary["median"]
    assert any("exited by itself" in n for n in ctx.notes)
    assert _kernel_pids(_binary()) == []


@pytest.mark.integration
def test_loopback_server_binds_only_its_address() -> None:
    p, info = _start_server([], "127.0.0.1", timeout=3)
    try:
        port = info["port"]
        assert info["bind"] == "127.0.0.1" and port > 0
        listening = [ln.split()[1] for ln in Path("/proc/net/tcp").read_text().splitlines()[1:]
                     if ln.split()[3] == "0A"]  # LISTEN
        assert f"0100007F:{port:04X}" in listening
        assert f"00000000:{port:04X}" not in listening
        with pytest.raises(ConnectionRefusedError):  # another local address: nobody listens there
            socket.create_connection(("127.0.0.2", port), timeout=2)
    finally:
        p.kill()
        p.wait()


@pytest.mark.integration
def test_server_refuses_the_wildcard_address() -> None:
    p = subprocess.run([str(_binary()), "--mode=server", "--bind=0.0.0.0", "--timeout=2"],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode != 0 and "every interface" in p.stdout
    p = subprocess.run([str(_binary()), "--mode=server", "--timeout=2"], capture_output=True, text=True, timeout=10)
    assert p.returncode != 0 and "--bind" in p.stdout


@pytest.mark.integration
def test_server_exits_by_itself_on_its_timeout_and_ignores_strays() -> None:
    p, info = _start_server([], "127.0.0.1", connections=1, timeout=1)
    t0 = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", info["port"]), timeout=2) as s:
            s.sendall(b"not a clusterbench client, just a stray connection\n" * 2)
        rc = p.wait(timeout=5)
        rest = p.stdout.read()
    finally:
        if p.poll() is None:
            p.kill()
    assert time.monotonic() - t0 < 3
    assert rc != 0 and "timed out" in rest


@pytest.mark.integration
def test_client_crash_leaves_no_orphans(ctx: RunContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Tcp, "test_client_args", ("--crash=1",))
    t0 = time.monotonic()
    with pytest.raises(KernelFailed) as e:
        _run(ctx, hosts="local", streams=[1], seconds=0.5, repeats=1, latency_iterations=0)
    assert "SIGKILL" in str(e.value)
    assert time.monotonic() - t0 < 10
    assert _kernel_pids(_binary()) == []
    assert ctx.results == []


# --------------------------------------------------------------------------- sim-cluster (root)


@functools.lru_cache(maxsize=1)
def _netns_unusable() -> str | None:
    if os.geteuid() != 0:
        return "the sim-cluster needs root (ip netns); run the suite as root to test tcp across nodes"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "iproute2 (ip, tc) is not installed"
    probe = f"{PREFIX}probe"
    p = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=10)
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=10)
    return None if p.returncode == 0 else f"ip netns is unusable here: {p.stderr.strip()}"


@pytest.fixture
def sim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Bring up a 2-node cbtcp- cluster with the given spec; always taken down afterwards."""
    why = _netns_unusable()
    if why:
        pytest.skip(why)
    state = tmp_path / "simstate"
    monkeypatch.setenv("CLUSTERBENCH_SIM_STATE", str(state))
    sc.down(prefix=PREFIX, state=state)

    def make(**spec) -> sc.SimCluster:
        sc.down(prefix=PREFIX, state=state)
        return sc.up(2, prefix=PREFIX, state=state, **spec)

    try:
        yield make
    finally:
        sc.down(prefix=PREFIX, state=state)
        assert sc.list_namespaces(PREFIX) == []


@pytest.mark.integration
def test_sim_mtu_1500_vs_9000(sim, ctx: RunContext) -> None:
    """Offloads off (MTU-sized frames, as on a wire): the MTU is recorded exactly and jumbo frames
    carry more TCP throughput (1.8x to 3.3x measured while writing this; > 1.3x asserted). Interleaved
    1500/9000 rounds, best of up to 3 x 3 samples each (the machine is shared and noisy): a further
    round only while the rounds so far do not show the ratio."""
    got: dict[int, float] = {}
    for i, mtu in enumerate((1500, 9000) * 3):
        if i and i % 2 == 0 and got[9000] > 1.3 * got[1500]:
            break
        c = sim(mtu=mtu, offload=False)
        res, _ = _run(ctx, hosts=f"{N1},{N2}", streams=[1], seconds=0.3, repeats=3, latency_iterations=100)
        thr = _by(res, "throughput")[0]
        p = thr.params
        assert p["server"] == N1 and p["client"] == N2
        assert p["server_address"] == c.nodes[0].address and p["client_address"] == c.nodes[1].address
        assert p["iface"] == "cb0" and p["mtu"] == mtu and p["path_mtu"] == mtu
        assert p["mss"] == mtu - 52  # IPv4 + TCP headers with timestamps
        assert p["sim_cluster"]["mtu"] == mtu and p["sim_cluster"]["rate_bps"] is None and not p["loopback"]
        assert thr.limit is None  # veth: no link speed
        lat = _by(res, "latency")[0]
        assert lat.params["path_mtu"] == mtu and 0 < lat.value < 10_000
        got[mtu] = max(got.get(mtu, 0.0), thr.value)
    # with offloads on, veth passes 64 KiB GSO segments whatever the MTU and jumbo frames bring no
    # gain; with them off every frame costs a trip through the stack, as on a real wire
    assert got[9000] > 1.3 * got[1500], got


@pytest.mark.integration
def test_sim_rate_limit_is_the_limit(sim, ctx: RunContext) -> None:
    sim(rate="100mbit")
    res, _ = _run(ctx, hosts="n1,n2".replace("n", PREFIX + "n"), streams=[1, 2], seconds=1.0, repeats=1,
                  latency_iterations=100)
    for thr in _by(res, "throughput"):
        assert 50 <= thr.value <= 110, thr.value
        assert thr.params["link_rate_mbits"] == 100 and "tbf" in thr.params["link_rate_source"]
        assert thr.params["sim_cluster"]["rate_bps"] == 100_000_000
        assert thr.limit and thr.limit["name"] == "link_rate" and thr.limit["value"] == 100
        assert thr.limit["fraction"] == pytest.approx(thr.value / 100) and 0.5 <= thr.limit["fraction"] <= 1.1


@pytest.mark.integration
def test_sim_server_listens_on_the_cluster_address_only(sim) -> None:
    c = sim()
    n1, n2 = c.nodes
    p, info = _start_server(sc.exec_prefix(n1), n1.address, connections=1, timeout=2)
    try:
        port = info["port"]
        ss = subprocess.run([*sc.exec_prefix(n1), "ss", "-Hltn"], capture_output=True, text=True, timeout=10).stdout
        listen = [ln.split()[3] for ln in ss.splitlines() if ln.strip()]
        assert f"{n1.address}:{port}" in listen
        assert not any(a.endswith(f":{port}") and a != f"{n1.address}:{port}" for a in listen), listen
        probe = "import socket,sys\ntry:\n socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)\n" \
                " print('connected')\nexcept OSError as e:\n print(type(e).__name__)\n"
        inside = subprocess.run([*sc.exec_prefix(n1), "python3", "-c", probe, "127.0.0.1", str(port)],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        assert inside == "ConnectionRefusedError"  # the node's loopback: nobody listens there
        rc = p.wait(timeout=5)  # no client came: it ends by itself on its alarm
        assert rc != 0 and "timed out" in p.stdout.read()
    finally:
        if p.poll() is None:
            p.kill()


@pytest.mark.integration
def test_sim_client_crash_leaves_nothing_in_the_namespaces(sim, ctx: RunContext,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    c = sim()
    monkeypatch.setattr(Tcp, "test_client_args", ("--crash=1",))
    with pytest.raises(KernelFailed):
        _run(ctx, hosts=f"{N1},{N2}", streams=[2], seconds=0.5, repeats=1, latency_iterations=0)
    for ns in c.namespaces():
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=10).stdout.split()
        assert pids == [], (ns, pids)
    assert _kernel_pids(_binary()) == []
