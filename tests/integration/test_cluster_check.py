"""Cluster consistency: diff() on synthetic probes, nic_settings() live, gather_probes() on the
virtual cluster and over ssh (unreachable host)."""
from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess

import pytest

from clusterbench.analysis import consistency
from clusterbench.cluster import check as cluster_check
from clusterbench.errors import EnvironmentProblem, UsageError
from clusterbench.launch import remote
from clusterbench.probe import network

IS_ROOT = os.geteuid() == 0


def _host(mtu: int = 1500, **over) -> dict:
    """A synthetic gather_probes() entry."""
    probe = {
        "probe_schema": 1,
        "cpu": {"arch": "x86_64", "model_name": "Intel(R) Xeon(R) Gold 6230", "microarchitecture": "Cascade Lake",
                "isa": ["avx2", "avx512f"], "freq_nominal_mhz": 2100.0, "freq_max_mhz": 3900.0},
        "topology": {"packages": 2, "numa_nodes": 2, "cores": 40, "pus": 80},
        "memory": {"total_bytes": 192 * 2**30},
        "environment": {"kernel": "6.1.0-18-amd64", "governor": "performance", "turbo": True, "smt_active": True,
                        "thp": "madvise", "thp_defrag": "madvise", "numa_balancing": False,
                        "preemption": "PREEMPT_DYNAMIC", "hypervisor": None, "cpu_mitigations": {"mds": "x"},
                        "mpi": [{"name": "Open MPI", "version": "4.1.4", "path": "/usr/bin/mpirun"}],
                        "blas": [{"name": "openblas", "path": "/usr/lib/libopenblas.so.0"}],
                        "compilers": [{"name": "gcc", "version": "12.2.0", "path": "/usr/bin/gcc"}],
                        "nics": [{"name": "eno1", "mtu": mtu, "speed_mbps": 25000, "driver": "ice"}]},
    }
    net = {"network_schema": 1,
           "nics": [{"name": "lo", "mtu": 65536, "driver": None},
                    {"name": "eno1", "mtu": mtu, "speed_mbps": 25000, "driver": "ice", "operstate": "up",
                     "rps": {"enabled": False, "cpus": [], "per_queue_cpus": {"rx-0": []}}, "rfs_flow_cnt": 0,
                     "offloads": {"gro": True, "tso": True}, "coalescing": {"rx_usecs": 50}}],
           "sysctls": {"net.core.rmem_max": 212992, "net.ipv4.tcp_rmem": [4096, 131072, 6291456],
                       "net.ipv4.tcp_congestion_control": "cubic"},
           "rps_sock_flow_entries": 0}
    for path, value in over.items():
        d = {"probe": probe, "network": net}
        keys = path.split("__")
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value
    return {"probe": probe, "network": net}


def _keys(diffs: list[dict]) -> set[str]:
    return {d["key"] for d in diffs}


# --------------------------------------------------------------------------- diff (pure)


def test_identical_hosts_give_no_difference() -> None:
    assert consistency.diff({"a": _host(), "b": _host(), "c": _host()}) == []
    assert consistency.diff({"a": _host()}) == []  # one host: nothing to compare


def test_mtu_1500_vs_9000_is_found() -> None:
    diffs = consistency.diff({"a": _host(1500), "b": _host(9000)})
    mtu = [d for d in diffs if d["key"] == "network.nics.eno1.mtu"]
    assert len(mtu) == 1
    assert mtu[0]["values"] == {"a": 1500, "b": 9000}
    assert "MTU" in mtu[0]["what"] and mtu[0]["why"]
    assert _keys(diffs) == {"network.nics.eno1.mtu"}
    json.dumps(diffs)  # serialisable


def test_each_listed_setting_is_compared() -> None:
    base = _host()
    cases = {
        "probe__cpu__model_name": ("AMD EPYC 7742", "cpu.model_name"),
        "probe__cpu__microarchitecture": ("Zen 2", "cpu.microarchitecture"),
        "probe__topology__cores": (32, "topology.cores"),
        "probe__environment__smt_active": (False, "environment.smt_active"),
        "probe__environment__governor": ("powersave", "environment.governor"),
        "probe__environment__turbo": (False, "environment.turbo"),
        "probe__environment__thp": ("always", "environment.thp"),
        "probe__environment__kernel": ("5.10.0-28-amd64", "environment.kernel"),
        "probe__environment__mpi": ([{"name": "MPICH", "version": "4.0"}], "environment.mpi"),
        "probe__environment__blas": ([], "environment.blas"),
        "probe__environment__compilers": ([{"name": "gcc", "version": "10.2.1"}], "environment.compilers"),
        "network__sysctls__net.ipv4.tcp_rmem": ([4096, 87380, 6291456], "network.sysctls.net.ipv4.tcp_rmem"),
        "network__sysctls__net.core.rmem_max": (4194304, "network.sysctls.net.core.rmem_max"),
        "network__rps_sock_flow_entries": (32768, "network.rps_sock_flow_entries"),
    }
    for path, (value, key) in cases.items():
        other = _host(**{path: value})
        diffs = consistency.diff({"a": base, "b": other})
        assert _keys(diffs) == {key}, (path, diffs)
    # NIC fields
    other = _host()
    nic = other["network"]["nics"][1]
    nic.update(speed_mbps=10000, driver="mlx5_core",
               rps={"enabled": True, "cpus": [0, 1], "per_queue_cpus": {"rx-0": [0, 1]}})
    keys = _keys(consistency.diff({"a": base, "b": other}))
    assert {"network.nics.eno1.speed_mbps", "network.nics.eno1.driver", "network.nics.eno1.rps"} == keys


def test_memory_within_5_percent_is_alike() -> None:
    close = _host(**{"probe__memory": {"total_bytes": int(192 * 2**30 * 0.97)}})
    far = _host(**{"probe__memory": {"total_bytes": 128 * 2**30}})
    assert consistency.diff({"a": _host(), "b": close}) == []
    assert _keys(consistency.diff({"a": _host(), "b": far})) == {"memory.total_bytes"}


def test_failed_hosts_and_bare_probes() -> None:
    a, b = _host(1500), _host(9000)
    assert consistency.diff({"a": a, "b": {"error": "cannot reach b"}}) == []
    # bare probe documents: NICs from environment.nics
    diffs = consistency.diff({"a": copy.deepcopy(a["probe"]), "b": copy.deepcopy(b["probe"])})
    assert _keys(diffs) == {"network.nics.eno1.mtu"}
    # unknown vs known counts as a difference; lo is never compared
    c = _host(**{"probe__environment__governor": None})
    c["network"]["nics"][0]["mtu"] = 16384
    assert _keys(consistency.diff({"a": a, "c": c})) == {"environment.governor"}
    # a sysctl a namespace cannot see (None) is not a difference by itself
    d = _host(**{"network__sysctls__net.core.rmem_max": None, "network__rps_sock_flow_entries": None})
    assert consistency.diff({"a": a, "d": d}) == []


# --------------------------------------------------------------------------- nic_settings


@pytest.mark.integration
def test_nic_settings_live() -> None:
    d = network.nic_settings()
    json.dumps(d)
    nics = {n["name"]: n for n in d["nics"]}
    assert "lo" in nics and isinstance(nics["lo"]["mtu"], int) and nics["lo"]["mtu"] > 0
    assert set(network.SYSCTLS) == set(d["sysctls"])
    for key, value in d["sysctls"].items():
        assert value is not None or f"network.sysctls.{key}" in d["unknown"]
    for n in d["nics"]:
        assert n["offloads"] is not None or f"network.nics.{n['name']}.offloads" in d["unknown"]
        assert n["coalescing"] is not None or f"network.nics.{n['name']}.coalescing" in d["unknown"]


def test_nic_settings_snapshot_and_missing_root(tmp_path) -> None:
    empty = network.nic_settings(str(tmp_path / "nothing"))
    assert empty["nics"] == [] and "network.nics" in empty["unknown"]
    assert all(v is None for v in empty["sysctls"].values())
    base = tmp_path / "snap" / "sys/class/net/eth9"
    (base / "queues/rx-0").mkdir(parents=True)
    (base / "mtu").write_text("9000\n")
    (base / "speed").write_text("-1\n")
    (base / "queues/rx-0/rps_cpus").write_text("00000000,00000005\n")
    (base / "queues/rx-0/rps_flow_cnt").write_text("4096\n")
    sysdir = tmp_path / "snap" / "proc/sys/net/ipv4"
    sysdir.mkdir(parents=True)
    (sysdir / "tcp_rmem").write_text("4096\t87380\t6291456\n")
    (sysdir / "tcp_congestion_control").write_text("bbr\n")
    d = network.nic_settings(str(tmp_path / "snap"))
    nic = d["nics"][0]
    assert nic["mtu"] == 9000 and nic["speed_mbps"] is None
    assert nic["rps"]["cpus"] == [0, 2] and nic["rfs_flow_cnt"] == 4096
    assert nic["offloads"] is None and "snapshot" in d["unknown"]["network.nics.eth9.offloads"]
    assert d["sysctls"]["net.ipv4.tcp_rmem"] == [4096, 87380, 6291456]
    assert d["sysctls"]["net.ipv4.tcp_congestion_control"] == "bbr"


def test_ethtool_text_parsers() -> None:
    k = ("Features for eth0:\nrx-checksumming: on\ntx-checksumming: on\n\ttx-checksum-ipv4: off [fixed]\n"
         "scatter-gather: on\ntcp-segmentation-offload: off\ngeneric-segmentation-offload: on\n"
         "generic-receive-offload: on\nlarge-receive-offload: off [fixed]\n")
    assert network.parse_ethtool_features(k) == {"rx_checksum": True, "tx_checksum": True, "scatter_gather": True,
                                                 "tso": False, "gso": True, "gro": True, "lro": False}
    c = ("Coalesce parameters for eth0:\nAdaptive RX: on  TX: off\nstats-block-usecs: 0\nrx-usecs: 3\n"
         "rx-frames: 0\nrx-usecs-irq: 0\ntx-usecs: n/a\ntx-frames: 64\n")
    assert network.parse_ethtool_coalesce(c) == {"adaptive_rx": True, "adaptive_tx": False, "rx_usecs": 3,
                                                 "rx_frames": 0, "tx_usecs": None, "tx_frames": 64}


# --------------------------------------------------------------------------- remote


@pytest.mark.integration
def test_unreachable_ssh_host_is_one_line_error(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CLUSTERBENCH_SIM_STATE", str(tmp_path / "sim"))
    host = "cb-no-such-host.invalid"
    with pytest.raises(EnvironmentProblem) as exc:
        remote.gather_probes([host], timeout=20)
    msg = str(exc.value)
    assert host in msg and "\n" not in msg
    if shutil.which("ssh") is None:
        assert "ssh is not installed" in msg
    # with keep_going the failure is recorded per host
    got = remote.gather_probes([host], timeout=20, keep_going=True)
    assert host in got[host]["error"] and "\n" not in got[host]["error"]
    # no ssh on PATH: said so
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentProblem, match="ssh is not installed"):
        remote.gather_probes([host])
    with pytest.raises(UsageError):
        remote.gather_probes(["-oProxyCommand=x"])


@pytest.mark.integration
def test_gather_probes_localhost(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CLUSTERBENCH_SIM_STATE", str(tmp_path / "sim"))
    got = remote.gather_probes(["localhost"], timeout=60)
    assert got["localhost"]["probe"]["probe_schema"] == 1
    assert any(n["name"] == "lo" for n in got["localhost"]["network"]["nics"])


@pytest.mark.integration
def test_check_on_the_virtual_cluster(sim_cluster) -> None:
    """Two sim-cluster nodes alike, then one node's tcp_rmem changed in its namespace: found."""
    from clusterbench.launch import simcluster

    c = sim_cluster(2)
    names = [n.name for n in c.nodes]
    first = cluster_check.check(names, timeout=60)
    assert first["hosts"] == names and first["errors"] == {}
    for h in names:
        nics = {n["name"]: n for n in first["probes"][h]["network"]["nics"]}
        assert nics["cb0"]["mtu"] == c.mtu  # the node's own namespace view
    assert first["differences"] == [], first["differences"]
    cmd = [*simcluster.exec_prefix(c.nodes[1], c), "sysctl", "-w", "net.ipv4.tcp_rmem=4096 65536 1048576"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    if p.returncode != 0:
        pytest.skip(f"net.ipv4.tcp_rmem is not per network namespace here: {p.stderr.strip()}")
    second = cluster_check.check(names, timeout=60)
    diffs = {d["key"]: d for d in second["differences"]}
    assert set(diffs) == {"network.sysctls.net.ipv4.tcp_rmem"}
    assert diffs["network.sysctls.net.ipv4.tcp_rmem"]["values"][names[1]] == [4096, 65536, 1048576]
    assert diffs["network.sysctls.net.ipv4.tcp_rmem"]["values"][names[0]] != [4096, 65536, 1048576]
    # short names work too, and a missing node is a one-line error naming it
    assert set(remote.gather_probes(["n1", "n2"], timeout=60)) == {"n1", "n2"}
    with pytest.raises(EnvironmentProblem, match=f"{c.prefix}n7"):
        remote.gather_probes([f"{c.prefix}n7"], timeout=20)


def _fake_ssh(tmp_path, keep_pythonpath: bool):
    """An ``ssh`` that checks its options and runs the remote command here with /bin/sh, as sshd does."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    unset = "" if keep_pythonpath else "unset PYTHONPATH; cd /\n"
    (bindir / "ssh").write_text(
        "#!/bin/sh\n"
        '[ "$1 $2 $3 $4" = "-o BatchMode=yes -o ConnectTimeout=5" ] || { echo "bad options: $*" >&2; exit 255; }\n'
        'shift 4\n'
        # the shared connection's options (remote.SHARE_OPTIONS) may follow, as -o NAME=VALUE pairs
        'while [ "$1" = "-o" ]; do shift 2; done\n'
        '[ "$#" -eq 2 ] || { echo "expected HOST COMMAND, got $#" >&2; exit 255; }\n'
        + unset + 'exec /bin/sh -c "$2"\n')
    (bindir / "ssh").chmod(0o755)
    return bindir


@pytest.mark.integration
def test_gather_probes_over_ssh_with_a_stand_in_ssh(monkeypatch, tmp_path) -> None:
    """The ssh path end to end: options, one quoted remote command, JSON back; and a host without
    clusterbench gives a one-line error saying so."""
    import sys
    monkeypatch.setenv("CLUSTERBENCH_SIM_STATE", str(tmp_path / "sim"))
    monkeypatch.setenv("CLUSTERBENCH_REMOTE_PYTHON", sys.executable)
    monkeypatch.setenv("PYTHONPATH", remote.SRC_DIR)
    bindir = _fake_ssh(tmp_path, keep_pythonpath=True)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    got = remote.gather_probes(["node-a.example", "user@node-b.example:4"], timeout=60)
    assert set(got) == {"node-a.example", "user@node-b.example"}
    assert consistency.diff(got) == []  # same machine twice
    (bindir / "ssh").unlink()
    _fake_ssh(tmp_path, keep_pythonpath=False)
    # a host whose python has no clusterbench: -S drops site-packages (where a venv may hold it)
    bare = tmp_path / "bare-python"
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    bare.chmod(0o755)
    monkeypatch.setenv("CLUSTERBENCH_REMOTE_PYTHON", str(bare))
    with pytest.raises(EnvironmentProblem, match="clusterbench is not installed on node-a.example") as exc:
        remote.gather_probes(["node-a.example"], timeout=60)
    assert "\n" not in str(exc.value)


@pytest.mark.integration
def test_a_host_that_hangs_is_cut_off(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CLUSTERBENCH_SIM_STATE", str(tmp_path / "sim"))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    pidfile = tmp_path / "pid"
    (bindir / "ssh").write_text(f"#!/bin/sh\nsleep 30 &\necho $! > {pidfile}\nwait\n")
    (bindir / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    with pytest.raises(EnvironmentProblem, match=r"slow\.example did not answer within 1 s"):
        remote.gather_probes(["slow.example"], timeout=1)
    pid = int(pidfile.read_text())
    try:  # the whole session was killed: nothing left running (a zombie awaiting its reaper is dead)
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        state = "gone"
    assert state in ("gone", "Z", "X")


# --------------------------------------------------------------------------- --keep-going report (issue 14 defect 10)

def _res(probes: dict, asked: list[str]) -> dict:
    errors = {h: d["error"] for h, d in probes.items() if "error" in d}
    return {"hosts": list(probes), "asked": asked, "answered": [h for h in probes if h not in errors],
            "differences": consistency.diff(probes), "errors": errors}


def test_keep_going_one_answered_claims_nothing() -> None:
    lines = cluster_check.format_check(_res({"n1": _host(), "n2": {"error": "n2: ssh timed out"}}, ["n1", "n2"]))
    text = "\n".join(lines)
    assert lines[0] == "1 of 2 hosts answered: n1"
    assert "did not answer: n2: n2: ssh timed out" in text
    assert "no differences" not in text and "nothing compared" in text


def test_keep_going_partial_comparison_names_its_scope() -> None:
    probes = {"n1": _host(), "n2": _host(), "n3": {"error": "n3: unreachable"}}
    lines = cluster_check.format_check(_res(probes, ["n1", "n2", "n3"]))
    assert lines[0] == "2 of 3 hosts answered: n1, n2"
    assert "no differences that change results across the 2 hosts that answered" in lines
    probes["n2"] = _host(mtu=9000)
    assert any(ln.startswith("NIC eno1 MTU") or "mtu" in ln.lower() for ln in
               cluster_check.format_check(_res(probes, ["n1", "n2", "n3"])))


@pytest.mark.integration
def test_cli_keep_going_with_one_host_down(monkeypatch, tmp_path, capsys) -> None:
    from clusterbench.cli import main

    monkeypatch.setenv("CLUSTERBENCH_SIM_STATE", str(tmp_path / "sim"))
    bad = "cb-no-such-host.invalid"
    # one host answered: the report is printed, but nothing was compared, so the exit is 3 (not 0)
    assert main(["cluster", "check", "--hosts", f"localhost,{bad}", "--keep-going", "--timeout", "30"]) == 3
    out = capsys.readouterr().out
    assert out.startswith("1 of 2 hosts answered: localhost\n")
    assert f"did not answer: {bad}" in out
    assert "no differences" not in out and "2 hosts compared" not in out
